package vision

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	_ "image/gif" // GIF: the first frame
	_ "image/jpeg"
	_ "image/png"
	"math"

	_ "golang.org/x/image/webp"
)

// The published processor settings of Kimi K3 (media_proc_cfg;
// docs/VISION.md §4).
const (
	InPatchLimit  = 65536 // patches per image at most
	SideLimit     = 512   // patches per side at most
	MaxImageBytes = 32 << 20
	// MaxPixels refuses larger images before they are decoded: the largest
	// square the one-side limit can describe (the bound Moonshot's own
	// serving code applies), 51.4 million pixels.
	MaxPixels = (SideLimit * 14) * (SideLimit * 14)
	// ChessSquare, ChessWhite and ChessGray are the background a
	// transparent image is laid on after the resize.
	ChessSquare = 8
	ChessWhite  = 255
	ChessGray   = 180
)

// ErrImage marks a picture k3 cannot take (corrupt, truncated, too large,
// zero-size, unknown format); the message says which, in plain words.
var ErrImage = errors.New("image")

func imageErr(f string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrImage, fmt.Sprintf(f, a...))
}

// Resize is the processor's geometry for one image.
type Resize struct {
	NewW, NewH int // the resized picture
	PadW, PadH int // black added on the right and at the bottom
	Grid       Grid
	Tokens     int
}

// NavitResize is the processor's resize rule: shrink (never enlarge,
// keeping the aspect) until the picture has at most inPatchLimit patches and
// at most side patches per side, then pad to a multiple of merge·patch.
func NavitResize(w, h, patch, merge, inPatchLimit, side int) Resize {
	s1 := math.Sqrt(float64(inPatchLimit) / (math.Max(1, float64(w/patch)) * math.Max(1, float64(h/patch))))
	s2 := float64(side*patch) / float64(w)
	s3 := float64(side*patch) / float64(h)
	scale := min(1.0, s1, s2, s3)
	nw := min(max(1, int(float64(w)*scale)), side*patch)
	nh := min(max(1, int(float64(h)*scale)), side*patch)
	f := merge * patch
	r := Resize{NewW: nw, NewH: nh, PadW: (f - nw%f) % f, PadH: (f - nh%f) % f}
	r.Grid = Grid{H: (nh + r.PadH) / patch, W: (nw + r.PadW) / patch}
	r.Tokens = ((nh + r.PadH) / f) * ((nw + r.PadW) / f)
	return r
}

// Picture is a decoded image: 1 (gray), 3 (RGB) or 4 (RGBA, not
// premultiplied, with some pixel not opaque) channels.
type Picture struct {
	Raster
	Format string
}

// Decode reads a PNG, JPEG, GIF (first frame) or WebP picture. The size is
// checked from the header before any pixel is decoded, so memory stays
// bounded by MaxPixels.
func Decode(data []byte) (*Picture, error) {
	if len(data) == 0 {
		return nil, imageErr("the image is empty (0 bytes)")
	}
	if len(data) > MaxImageBytes {
		return nil, imageErr("the image file is %d MB; k3 takes files up to %d MB", len(data)>>20, MaxImageBytes>>20)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if errors.Is(err, image.ErrFormat) {
		return nil, imageErr("unknown image format (k3 reads PNG, JPEG, GIF and WebP)")
	}
	if err != nil {
		return nil, imageErr("cannot read the %s header: %v", formatName(format), err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return nil, imageErr("the %s image has no pixels (%dx%d)", formatName(format), cfg.Width, cfg.Height)
	}
	if int64(cfg.Width)*int64(cfg.Height) > MaxPixels {
		return nil, imageErr("the image is %dx%d = %.1f megapixels; k3 takes at most %.1f megapixels",
			cfg.Width, cfg.Height, float64(cfg.Width)*float64(cfg.Height)/1e6, float64(MaxPixels)/1e6)
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, imageErr("the %s image is damaged or cut short: %v", formatName(format), err)
	}
	return &Picture{Raster: toRaster(img), Format: format}, nil
}

func formatName(f string) string {
	if f == "" {
		return "image"
	}
	return map[string]string{"png": "PNG", "jpeg": "JPEG", "gif": "GIF", "webp": "WebP"}[f]
}

// toRaster converts a decoded image to gray, RGB or (when some pixel is
// not opaque) non-premultiplied RGBA bytes.
func toRaster(img image.Image) Raster {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	if g, ok := img.(*image.Gray); ok {
		r := Raster{W: w, H: h, Chans: 1, Pix: make([]uint8, w*h)}
		for y := 0; y < h; y++ {
			copy(r.Pix[y*w:(y+1)*w], g.Pix[y*g.Stride:y*g.Stride+w])
		}
		return r
	}
	rgba := Raster{W: w, H: h, Chans: 4, Pix: make([]uint8, 4*w*h)}
	opaque := true
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			var c color.NRGBA
			if yc, ok := img.(*image.YCbCr); ok {
				yi, ci := yc.YOffset(b.Min.X+x, b.Min.Y+y), yc.COffset(b.Min.X+x, b.Min.Y+y)
				c.R, c.G, c.B = color.YCbCrToRGB(yc.Y[yi], yc.Cb[ci], yc.Cr[ci])
				c.A = 255
			} else {
				c = color.NRGBAModel.Convert(img.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
			}
			i := 4 * (y*w + x)
			rgba.Pix[i], rgba.Pix[i+1], rgba.Pix[i+2], rgba.Pix[i+3] = c.R, c.G, c.B, c.A
			opaque = opaque && c.A == 255
		}
	}
	if !opaque {
		return rgba
	}
	rgb := Raster{W: w, H: h, Chans: 3, Pix: make([]uint8, 3*w*h)}
	for i := 0; i < w*h; i++ {
		copy(rgb.Pix[3*i:3*i+3], rgba.Pix[4*i:4*i+3])
	}
	return rgb
}

// Prepared is an image ready for the tower: resized, laid on the
// chessboard when transparent, padded with black, kept as 8-bit RGB (a
// quarter of the memory of its float patches, made when the tower runs).
type Prepared struct {
	W, H   int // the original size (what the prompt names)
	Resize Resize
	Pixels Raster // (NewW+PadW) x (NewH+PadH), 3 channels
}

// Prepare runs Moonshot's processor on a decoded picture: resize (Pillow
// bicubic), lay a transparent picture on the chessboard, pad with black.
// Patches then normalises and cuts.
func Prepare(pic *Picture, patch, merge int) *Prepared {
	rz := NavitResize(pic.W, pic.H, patch, merge, InPatchLimit, SideLimit)
	rgb := resizedRGB(pic.Raster, rz.NewW, rz.NewH)
	W, H := rz.NewW+rz.PadW, rz.NewH+rz.PadH
	px := Raster{W: W, H: H, Chans: 3, Pix: make([]uint8, 3*W*H)} // black padding
	for y := 0; y < rz.NewH; y++ {
		copy(px.Pix[3*y*W:], rgb.Pix[3*y*rz.NewW:3*(y+1)*rz.NewW])
	}
	return &Prepared{W: pic.W, H: pic.H, Resize: rz, Pixels: px}
}

// Patches normalises the pixels to (v/255 − 0.5)/0.5 in float32 and cuts
// them into patch x patch patches, row-major, each flattened (channel,
// row, column).
func (p *Prepared) Patches(patch int) []float32 {
	r := p.Pixels
	out := make([]float32, 0, r.W*r.H*3)
	for gy := 0; gy < r.H/patch; gy++ {
		for gx := 0; gx < r.W/patch; gx++ {
			for c := range 3 {
				for y := range patch {
					row := r.Pix[3*((gy*patch+y)*r.W+gx*patch):]
					for x := range patch {
						v := float32(row[3*x+c]) / float32(255)
						out = append(out, (v-0.5)*2)
					}
				}
			}
		}
	}
	return out
}

// resizedRGB resizes to w x h and returns 3-channel bytes. Gray is resized
// as one channel and repeated; RGBA is resized premultiplied (as Pillow
// resizes "RGBA") and then laid on the chessboard.
func resizedRGB(r Raster, w, h int) Raster {
	switch r.Chans {
	case 1:
		g := resizeBicubic(r, w, h)
		out := Raster{W: w, H: h, Chans: 3, Pix: make([]uint8, 3*w*h)}
		for i, v := range g.Pix {
			out.Pix[3*i], out.Pix[3*i+1], out.Pix[3*i+2] = v, v, v
		}
		return out
	case 3:
		return resizeBicubic(r, w, h)
	}
	pm := Raster{W: r.W, H: r.H, Chans: 4, Pix: make([]uint8, len(r.Pix))}
	for i := 0; i < len(r.Pix); i += 4 {
		a := uint32(r.Pix[i+3])
		for c := range 3 {
			t := uint32(r.Pix[i+c])*a + 128
			pm.Pix[i+c] = uint8(((t >> 8) + t) >> 8)
		}
		pm.Pix[i+3] = uint8(a)
	}
	s := resizeBicubic(pm, w, h)
	return chessboard(s)
}

// chessboard un-premultiplies a resized RGBa raster (as Pillow converts
// "RGBa" back to "RGBA") and lays it on the chessboard in float32 as the
// processor does: alpha·rgb + (1 − alpha)·background, truncated to 8 bits.
func chessboard(s Raster) Raster {
	out := Raster{W: s.W, H: s.H, Chans: 3, Pix: make([]uint8, 3*s.W*s.H)}
	for y := 0; y < s.H; y++ {
		for x := 0; x < s.W; x++ {
			p := s.Pix[4*(y*s.W+x):]
			a := uint32(p[3])
			bg := float32(ChessWhite)
			if (x/ChessSquare+y/ChessSquare)%2 == 1 {
				bg = ChessGray
			}
			af := float32(a) / float32(255)
			for c := range 3 {
				v := uint32(p[c])
				if a != 0 && a != 255 {
					v = min(255*v/a, 255)
				}
				f := float32(af*float32(v)) + float32((1-af)*bg)
				out.Pix[3*(y*s.W+x)+c] = uint8(f)
			}
		}
	}
	return out
}

// Size reads a picture's size from its header only (the checks of Decode
// that need no pixels): what the prompt names.
func Size(data []byte) (w, h int, err error) {
	if len(data) == 0 {
		return 0, 0, imageErr("the image is empty (0 bytes)")
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if errors.Is(err, image.ErrFormat) {
		return 0, 0, imageErr("unknown image format (k3 reads PNG, JPEG, GIF and WebP)")
	}
	if err != nil {
		return 0, 0, imageErr("cannot read the %s header: %v", formatName(format), err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return 0, 0, imageErr("the %s image has no pixels (%dx%d)", formatName(format), cfg.Width, cfg.Height)
	}
	return cfg.Width, cfg.Height, nil
}
