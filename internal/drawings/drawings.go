// Package drawings makes the pictures the demo model learnt to name: a
// filled circle, square or triangle in red, green, blue or yellow on a plain
// background (grey, near white, near black, or another colour far from the
// four), at a random size and place. The rules are those of draw() in
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

// Backgrounds are the kinds of plain background, in a fixed order: a grey
// (every channel within ±12 of one level), near white (240-255), near black
// (0-16), or any colour at least BackgroundMinDist (RGB distance) from
// every base colour, so which region is the shape stays clear.
var Backgrounds = []string{"grey", "white", "black", "colour"}

// BackgroundMinDist is the least RGB distance of a "colour" background from
// each of the four base colours.
const BackgroundMinDist = 110

// Picture is one drawing and what it shows.
type Picture struct {
	Colour, Shape string
	Background    string // one of Backgrounds, or "plain" (Plain)
	W, H          int
	PNG           []byte
}

// Label is what the picture shows, as the demo names it: "red circle".
func (p Picture) Label() string { return p.Colour + " " + p.Shape }

// Background draws a background colour of one of the Backgrounds' kinds.
func Background(rng *rand.Rand, kind string) [3]uint8 {
	var bg [3]uint8
	switch kind {
	case "grey":
		g := rng.IntN(256)
		for c := range 3 {
			bg[c] = clamp(g + rng.IntN(25) - 12)
		}
	case "white", "black":
		for c := range 3 {
			bg[c] = uint8(rng.IntN(17))
			if kind == "white" {
				bg[c] = 255 - bg[c]
			}
		}
	default:
		for {
			for c := range 3 {
				bg[c] = uint8(rng.IntN(256))
			}
			if farFromColours(bg) {
				break
			}
		}
	}
	return bg
}

// farFromColours reports whether bg is at least BackgroundMinDist from
// every base colour.
func farFromColours(bg [3]uint8) bool {
	for _, base := range Colours {
		d := 0.0
		for c := range 3 {
			d += math.Pow(float64(int(bg[c])-base[c]), 2)
		}
		if math.Sqrt(d) < BackgroundMinDist {
			return false
		}
	}
	return true
}

// Draw draws one picture with rng on a background of the given kind.
func Draw(rng *rand.Rand, w, h int, colour, shape, background string) *image.NRGBA {
	bg := Background(rng, background)
	var col [3]uint8
	base := Colours[colour]
	for c := range 3 {
		col[c] = clamp(base[c] + rng.IntN(2*Jitter+1) - Jitter)
	}
	r := (0.28 + 0.17*rng.Float64()) * float64(min(w, h))
	cx := r + rng.Float64()*(float64(w)-2*r)
	cy := r + rng.Float64()*(float64(h)-2*r)
	return paint(w, h, shape, bg, col, cx, cy, r)
}

// Plain is one picture with no randomness: the base colour's shape at
// half-size 0.38 of the shorter side, centred, on the background bg.
func Plain(w, h int, colour, shape string, bg [3]uint8) Picture {
	base := Colours[colour]
	col := [3]uint8{uint8(base[0]), uint8(base[1]), uint8(base[2])}
	r := 0.38 * float64(min(w, h))
	img := paint(w, h, shape, bg, col, float64(w)/2, float64(h)/2, r)
	return Picture{Colour: colour, Shape: shape, Background: "plain", W: w, H: h, PNG: encode(img)}
}

func paint(w, h int, shape string, bg, col [3]uint8, cx, cy, r float64) *image.NRGBA {
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

// HeldOutSizes are the held-out pictures' sizes in turn: multiples of 28
// as the processor takes them, and sizes it pads with black (100x64 to
// 112x84: 12 image positions; 150x120 to 168x140: 30).
var HeldOutSizes = [][2]int{{56, 56}, {84, 84}, {100, 64}, {64, 100}, {150, 120}}

// HeldOut makes n pictures from seed, colour and shape drawn at random,
// the size taking HeldOutSizes in turn and the background kind changing
// every four pictures (Backgrounds, in order). The first is 56x56 on grey.
func HeldOut(n int, seed uint64) []Picture {
	rng := rand.New(rand.NewPCG(seed, 0x6b33))
	out := make([]Picture, n)
	for i := range out {
		c, s := ColourNames[rng.IntN(len(ColourNames))], Shapes[rng.IntN(len(Shapes))]
		w, h := HeldOutSizes[i%len(HeldOutSizes)][0], HeldOutSizes[i%len(HeldOutSizes)][1]
		bg := Backgrounds[i/4%len(Backgrounds)]
		out[i] = Picture{Colour: c, Shape: s, Background: bg, W: w, H: h, PNG: encode(Draw(rng, w, h, c, s, bg))}
	}
	return out
}

func encode(img *image.NRGBA) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err) // an in-memory NRGBA always encodes
	}
	return b.Bytes()
}
