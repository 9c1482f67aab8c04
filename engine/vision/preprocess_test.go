package vision

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
)

type imagesFixture struct {
	Resized []struct {
		File   string `json:"file"`
		Mode   string `json:"mode"`
		Size   [2]int `json:"size"`
		RGBHex string `json:"rgb_hex"`
	} `json:"resized"`
	Navit []struct {
		W, H   int
		NewW   int `json:"new_w"`
		NewH   int `json:"new_h"`
		PadW   int `json:"pad_w"`
		PadH   int `json:"pad_h"`
		Tokens int `json:"tokens"`
	} `json:"navit"`
}

func loadImages(t *testing.T) imagesFixture {
	t.Helper()
	b, err := os.ReadFile(fixture.Path("vision", "images.json"))
	require.NoError(t, err)
	var f imagesFixture
	require.NoError(t, json.Unmarshal(b, &f))
	require.NotEmpty(t, f.Resized)
	return f
}

// TestResizeMatchesPillow: the resized (and, for a transparent picture,
// chessboard-filled) bytes are Pillow's, byte for byte, for shrinking and
// enlarging, gray, RGB and RGBA (fixtures made with the real Pillow by
// tools/reference/make_images.py).
func TestResizeMatchesPillow(t *testing.T) {
	f := loadImages(t)
	for _, c := range f.Resized {
		data, err := os.ReadFile(fixture.Path("vision", c.File))
		require.NoError(t, err)
		pic, err := Decode(data)
		require.NoError(t, err)
		want, err := hex.DecodeString(c.RGBHex)
		require.NoError(t, err)
		got := resizedRGB(pic.Raster, c.Size[0], c.Size[1])
		require.Equalf(t, want, got.Pix, "%s (%s) to %v", c.File, c.Mode, c.Size)
	}
}

func TestNavitResizeMatchesProcessor(t *testing.T) {
	for _, n := range loadImages(t).Navit {
		r := NavitResize(n.W, n.H, 14, 2, InPatchLimit, SideLimit)
		assert.Equalf(t, [5]int{n.NewW, n.NewH, n.PadW, n.PadH, n.Tokens}, [5]int{r.NewW, r.NewH, r.PadW, r.PadH, r.Tokens}, "%dx%d", n.W, n.H)
		assert.Equal(t, r.Tokens, (r.Grid.H/2)*(r.Grid.W/2))
	}
	// the figure: a 1024x1024 photo is 1,369 positions of prompt
	assert.Equal(t, 1369, NavitResize(1024, 1024, 14, 2, InPatchLimit, SideLimit).Tokens)
}

// TestPrepareNormalisesAndPads: a picture that needs no resize is cut into
// patches with (v/255 − 0.5)/0.5 values and −1 (black) padding.
func TestPrepareNormalisesAndPads(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 30, 15))
	for y := 0; y < 15; y++ {
		for x := 0; x < 30; x++ {
			img.Set(x, y, color.RGBA{uint8(x * 8), uint8(y * 16), 200, 255})
		}
	}
	var buf bytes.Buffer
	require.NoError(t, png.Encode(&buf, img))
	pic, err := Decode(buf.Bytes())
	require.NoError(t, err)
	p := Prepare(pic, 14, 2)
	assert.Equal(t, Grid{H: 2, W: 4}, p.Resize.Grid) // 15x30 padded to 28x56
	assert.Equal(t, 2, p.Resize.Tokens)
	px := p.Patches(14)
	require.Len(t, px, 8*3*14*14)
	at := func(x, y, c int) float32 {
		patch := (y/14)*4 + x/14
		return px[patch*588+c*196+(y%14)*14+x%14]
	}
	assert.Equal(t, (float32(3*8)/255-0.5)*2, at(3, 5, 0))
	assert.Equal(t, (float32(5*16)/255-0.5)*2, at(3, 5, 1))
	assert.Equal(t, (float32(200)/255-0.5)*2, at(29, 14, 2))
	assert.Equal(t, float32(-1), at(30, 3, 0)) // right padding
	assert.Equal(t, float32(-1), at(2, 15, 2)) // bottom padding
}

func TestDecodeFormats(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 9, 7))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 13)
	}
	for i := 3; i < len(img.Pix); i += 4 {
		img.Pix[i] = 255
	}
	var p, j, g bytes.Buffer
	require.NoError(t, png.Encode(&p, img))
	require.NoError(t, jpeg.Encode(&j, img, nil))
	require.NoError(t, gif.EncodeAll(&g, &gif.GIF{
		Image: []*image.Paletted{paletted(9, 7, 1), paletted(9, 7, 2)}, Delay: []int{0, 0}}))
	for name, data := range map[string][]byte{"png": p.Bytes(), "jpeg": j.Bytes(), "gif": g.Bytes()} {
		pic, err := Decode(data)
		require.NoError(t, err, name)
		assert.Equal(t, [3]int{9, 7, 3}, [3]int{pic.W, pic.H, pic.Chans}, name)
		assert.Equal(t, name, pic.Format)
	}
	pic, err := Decode(g.Bytes())
	require.NoError(t, err)
	assert.Equal(t, []uint8{10, 20, 30}, pic.Pix[:3], "a GIF is read from its first frame")
	webp, err := os.ReadFile(fixture.Path("vision", "tiny.webp"))
	require.NoError(t, err)
	pic, err = Decode(webp)
	require.NoError(t, err)
	assert.Equal(t, "webp", pic.Format)
	assert.Positive(t, pic.W*pic.H)
}

func paletted(w, h, k int) *image.Paletted {
	pal := color.Palette{color.RGBA{10 * uint8(k), 20 * uint8(k), 30 * uint8(k), 255}, color.RGBA{0, 0, 0, 255}}
	return image.NewPaletted(image.Rect(0, 0, w, h), pal)
}

// TestDecodeRefusesBadInput: one clear error for each kind of bad picture,
// and a huge picture is refused from its header (no pixel buffer is made).
func TestDecodeRefusesBadInput(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 40, 30))
	var p bytes.Buffer
	require.NoError(t, png.Encode(&p, img))
	good := p.Bytes()
	huge := hugePNGHeader(t, 10000, 10000)
	for name, c := range map[string]struct {
		data []byte
		want string
	}{
		"empty":     {nil, "empty"},
		"unknown":   {[]byte("hello, this is not a picture at all"), "unknown image format"},
		"truncated": {good[:len(good)/2], "damaged or cut short"},
		"corrupt":   {append(append([]byte{}, good[:60]...), bytes.Repeat([]byte{0xAB}, 40)...), "PNG"},
		"huge":      {huge, "100.0 megapixels"},
		"zero-size": {hugePNGHeader(t, 0, 10), "PNG"},
	} {
		_, err := Decode(c.data)
		require.ErrorIs(t, err, ErrImage, name)
		assert.ErrorContains(t, err, c.want, name)
	}
}

// hugePNGHeader is a PNG signature and IHDR declaring w x h (no pixels).
func hugePNGHeader(t *testing.T, w, h int) []byte {
	t.Helper()
	small := image.NewGray(image.Rect(0, 0, 1, 1))
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, small))
	d := b.Bytes()
	// IHDR data starts at byte 16: width, height big-endian.
	d[16], d[17], d[18], d[19] = byte(w>>24), byte(w>>16), byte(w>>8), byte(w)
	d[20], d[21], d[22], d[23] = byte(h>>24), byte(h>>16), byte(h>>8), byte(h)
	binary.BigEndian.PutUint32(d[29:33], crc32.ChecksumIEEE(d[12:29]))
	return d
}
