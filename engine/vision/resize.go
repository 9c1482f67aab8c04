package vision

import "math"

// Pillow's 8-bit bicubic resampling (Image.resize(..., BICUBIC), which
// Moonshot's processor calls), reproduced step for step so the resized
// pixels are the same bytes: float64 filter coefficients per output pixel,
// normalised, turned into 22-bit fixed point, a horizontal pass into 8-bit
// pixels and then a vertical pass, each rounding with a half added and
// clamping to 0..255.

const precisionBits = 32 - 8 - 2

// bicubic is Pillow's cubic kernel with a = -0.5 (support 2).
func bicubic(x float64) float64 {
	const a = -0.5
	if x < 0 {
		x = -x
	}
	if x < 1 {
		return ((a+2)*x-(a+3))*x*x + 1
	}
	if x < 2 {
		return (((x-5)*x+8)*x - 4) * a
	}
	return 0
}

// coeffs are one axis's fixed-point weights: output o reads inputs
// bounds[o][0] .. bounds[o][0]+bounds[o][1]-1 with weights k[o*ksize:].
type coeffs struct {
	ksize  int
	bounds [][2]int
	k      []int32
}

func precompute(inSize, outSize int) coeffs {
	scale := float64(inSize) / float64(outSize)
	filterscale := max(scale, 1.0)
	support := 2.0 * filterscale
	ksize := int(math.Ceil(support))*2 + 1
	c := coeffs{ksize: ksize, bounds: make([][2]int, outSize), k: make([]int32, outSize*ksize)}
	pre := make([]float64, ksize)
	for o := 0; o < outSize; o++ {
		center := (float64(o) + 0.5) * scale
		ss := 1.0 / filterscale
		xmin := max(int(center-support+0.5), 0)
		xmax := min(int(center+support+0.5), inSize) - xmin
		ww := 0.0
		for x := 0; x < xmax; x++ {
			w := bicubic((float64(x+xmin) - center + 0.5) * ss)
			pre[x] = w
			ww += w
		}
		for x := 0; x < ksize; x++ {
			v := 0.0
			if x < xmax && ww != 0 {
				v = pre[x] / ww
			}
			if v < 0 {
				c.k[o*ksize+x] = int32(-0.5 + v*(1<<precisionBits))
			} else {
				c.k[o*ksize+x] = int32(0.5 + v*(1<<precisionBits))
			}
		}
		c.bounds[o] = [2]int{xmin, xmax}
	}
	return c
}

func clip8(v int32) uint8 {
	if v >= 1<<precisionBits<<8 {
		return 255
	}
	if v <= 0 {
		return 0
	}
	return uint8(v >> precisionBits)
}

// Raster is an 8-bit image with Chans interleaved channels per pixel.
type Raster struct {
	W, H, Chans int
	Pix         []uint8
}

// resizeBicubic resamples r to w x h as Pillow does: the horizontal pass
// first (when the width changes), then the vertical pass (when the height
// changes).
func resizeBicubic(r Raster, w, h int) Raster {
	if w != r.W {
		r = resampleH(r, w)
	}
	if h != r.H {
		r = resampleV(r, h)
	}
	return r
}

func resampleH(r Raster, w int) Raster {
	c := precompute(r.W, w)
	out := Raster{W: w, H: r.H, Chans: r.Chans, Pix: make([]uint8, w*r.H*r.Chans)}
	for y := 0; y < r.H; y++ {
		in := r.Pix[y*r.W*r.Chans:]
		for o := 0; o < w; o++ {
			xmin, n := c.bounds[o][0], c.bounds[o][1]
			k := c.k[o*c.ksize:]
			for ch := 0; ch < r.Chans; ch++ {
				ss := int32(1) << (precisionBits - 1)
				for x := 0; x < n; x++ {
					ss += int32(in[(x+xmin)*r.Chans+ch]) * k[x]
				}
				out.Pix[(y*w+o)*r.Chans+ch] = clip8(ss)
			}
		}
	}
	return out
}

func resampleV(r Raster, h int) Raster {
	c := precompute(r.H, h)
	row := r.W * r.Chans
	out := Raster{W: r.W, H: h, Chans: r.Chans, Pix: make([]uint8, h*row)}
	for o := 0; o < h; o++ {
		ymin, n := c.bounds[o][0], c.bounds[o][1]
		k := c.k[o*c.ksize:]
		for i := 0; i < row; i++ {
			ss := int32(1) << (precisionBits - 1)
			for y := 0; y < n; y++ {
				ss += int32(r.Pix[(y+ymin)*row+i]) * k[y]
			}
			out.Pix[o*row+i] = clip8(ss)
		}
	}
	return out
}
