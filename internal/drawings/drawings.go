// Package drawings makes the pictures the demo model learnt to name: a
// filled circle, square or triangle in red, green, blue or yellow on a grey
// background, at a random size and place. The rules are those of draw() in
// tools/demo/train_vision.py (pixel centres inside the shape take its
// colour; no anti-aliasing), drawn here with Go's own random numbers, so
// every picture is one the model never saw. Only tests import it.
package drawings

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"math"
	"math/rand/v2"
)

// Colours are the base colours; each picture moves every channel by up to
// ±Jitter.
var Colours = map[string][3]int{
	"red": {220, 40, 40}, "green": {40, 170, 60}, "blue": {40, 80, 220}, "yellow": {235, 205, 40},
}

// ColourNames and Shapes are in a fixed order.
var (
	ColourNames = []string{"red", "green", "blue", "yellow"}
	Shapes      = []string{"circle", "square", "triangle"}
)

// Jitter is the largest change of a colour channel.
const Jitter = 30

// Picture is one drawing and what it shows.
type Picture struct {
	Colour, Shape string
	W, H          int
	PNG           []byte
}

// Label is what the picture shows, as the demo names it: "red circle".
func (p Picture) Label() string { return p.Colour + " " + p.Shape }

// Draw draws one picture with rng.
func Draw(rng *rand.Rand, w, h int, colour, shape string) *image.NRGBA {
	g := rng.IntN(256)
	var bg, col [3]uint8
	base := Colours[colour]
	for c := range 3 {
		bg[c] = clamp(g + rng.IntN(25) - 12)
		col[c] = clamp(base[c] + rng.IntN(2*Jitter+1) - Jitter)
	}
	r := (0.28 + 0.17*rng.Float64()) * float64(min(w, h))
	cx := r + rng.Float64()*(float64(w)-2*r)
	cy := r + rng.Float64()*(float64(h)-2*r)
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			dx, dy := float64(x)+0.5-cx, float64(y)+0.5-cy
			c := bg
			if inside(shape, dx, dy, r) {
				c = col
			}
			img.SetNRGBA(x, y, color.NRGBA{R: c[0], G: c[1], B: c[2], A: 255})
		}
	}
	return img
}

func inside(shape string, dx, dy, r float64) bool {
	switch shape {
	case "circle":
		return dx*dx+dy*dy <= r*r
	case "square":
		return math.Max(math.Abs(dx), math.Abs(dy)) <= 0.85*r
	}
	t := (dy + r) / (2 * r) // apex up, base at cy + r
	return t >= 0 && t <= 1 && math.Abs(dx) <= r*t
}

func clamp(v int) uint8 { return uint8(min(255, max(0, v))) }

// HeldOut makes n pictures from seed, colour and shape drawn at random,
// sizes alternating 56x56 and 84x84 (4 and 9 image positions).
func HeldOut(n int, seed uint64) []Picture {
	rng := rand.New(rand.NewPCG(seed, 0x6b33))
	out := make([]Picture, n)
	for i := range out {
		c, s := ColourNames[rng.IntN(len(ColourNames))], Shapes[rng.IntN(len(Shapes))]
		side := 56 + 28*(i%2)
		var b bytes.Buffer
		if err := png.Encode(&b, Draw(rng, side, side, c, s)); err != nil {
			panic(err) // an in-memory NRGBA always encodes
		}
		out[i] = Picture{Colour: c, Shape: s, W: side, H: side, PNG: b.Bytes()}
	}
	return out
}
