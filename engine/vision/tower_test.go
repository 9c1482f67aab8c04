package vision

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
	"k3/kernels"
)

type expectCase struct {
	Name       string        `json:"name"`
	Seeds      []int         `json:"seeds"`
	Grids      [][3]int      `json:"grids"`
	Tokens     []int         `json:"tokens"`
	Embeddings [][][]float64 `json:"embeddings"`
}

func loadExpect(t *testing.T) []expectCase {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixture.ModelDir("tiny-vision"), "expect.json"))
	require.NoError(t, err)
	var e struct {
		TowerNormEps float64      `json:"tower_norm_eps"`
		Cases        []expectCase `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(b, &e))
	require.Equal(t, float64(NormEps), e.TowerNormEps)
	require.NotEmpty(t, e.Cases)
	return e.Cases
}

func loadTiny(t *testing.T) *Tower {
	t.Helper()
	tw, err := Load(fixture.ModelDir("tiny-vision"))
	require.NoError(t, err)
	return tw
}

// testPixels is tools/reference/vision_ref.py's test_pixels: u8 =
// (seed·131 + 7919·i + 104729·c) mod 256, x = (u8/255 − 0.5)·2 in float32,
// patchified row-major with each patch flattened (channel, row, column).
func testPixels(g Grid, patch, seed int) []float32 {
	W := g.W * patch
	out := make([]float32, 0, g.Patches()*3*patch*patch)
	for gy := 0; gy < g.H; gy++ {
		for gx := 0; gx < g.W; gx++ {
			for c := range 3 {
				for y := range patch {
					for x := range patch {
						i := (gy*patch+y)*W + gx*patch + x
						u8 := (seed*131 + 7919*i + 104729*c) % 256
						v := float32(u8) / float32(255)
						out = append(out, (v-0.5)*2)
					}
				}
			}
		}
	}
	return out
}

func embedCase(t *testing.T, tw *Tower, p *kernels.Pool, c expectCase) [][]float32 {
	t.Helper()
	var outs [][]float32
	for k, g3 := range c.Grids {
		require.Equal(t, 1, g3[0])
		g := Grid{H: g3[1], W: g3[2]}
		out, err := tw.Embed(context.Background(), p, testPixels(g, tw.Cfg.Patch, c.Seeds[k]), g)
		require.NoError(t, err)
		outs = append(outs, out)
	}
	return outs
}

// TestEmbedMatchesReference: the tower's embeddings equal the float64
// PyTorch reference (tools/reference/vision_ref.py) within float32
// accumulation error, for grids equal to, smaller and larger than the
// position table and for two images in one request.
func TestEmbedMatchesReference(t *testing.T) {
	tw := loadTiny(t)
	worst := 0.0
	for _, c := range loadExpect(t) {
		outs := embedCase(t, tw, nil, c)
		for k, want := range c.Embeddings {
			g := Grid{H: c.Grids[k][1], W: c.Grids[k][2]}
			require.Equal(t, c.Tokens[k], tw.Cfg.Tokens(g), c.Name)
			require.Len(t, outs[k], len(want)*tw.Cfg.TextHidden, c.Name)
			for r, row := range want {
				for d, w := range row {
					got := float64(outs[k][r*tw.Cfg.TextHidden+d])
					err := math.Abs(got - w)
					worst = max(worst, err/(1+math.Abs(w)))
					require.LessOrEqualf(t, err, 2e-5+2e-5*math.Abs(w), "%s image %d token %d dim %d: got %v want %v", c.Name, k, r, d, got, w)
				}
			}
		}
	}
	t.Logf("worst relative error %.2e", worst)
}

// TestEmbedBitIdentical: the embeddings are the same bits at every thread
// count and every kernel level this machine has.
func TestEmbedBitIdentical(t *testing.T) {
	tw := loadTiny(t)
	c := loadExpect(t)[2] // the largest grid
	base := embedCase(t, tw, nil, c)
	for _, l := range kernels.Levels() {
		prev := kernels.SetLevel(l)
		for _, n := range []int{1, 2, 3} {
			p := kernels.NewPool(n)
			got := embedCase(t, tw, p, c)
			p.Close()
			for k := range base {
				require.Equalf(t, bitsOf(base[k]), bitsOf(got[k]), "level %v, %d threads", l, n)
			}
		}
		kernels.SetLevel(prev)
	}
}

func bitsOf(v []float32) []uint32 {
	b := make([]uint32, len(v))
	for i, x := range v {
		b[i] = math.Float32bits(x)
	}
	return b
}

func TestEmbedRefusesBadGrids(t *testing.T) {
	tw := loadTiny(t)
	_, err := tw.Embed(context.Background(), nil, make([]float32, 3*tw.Cfg.PatchDim()), Grid{H: 1, W: 3})
	assert.ErrorContains(t, err, "does not divide")
	_, err = tw.Embed(context.Background(), nil, make([]float32, 5), Grid{H: 2, W: 2})
	assert.ErrorContains(t, err, "patch values")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = tw.Embed(ctx, nil, make([]float32, 4*tw.Cfg.PatchDim()), Grid{H: 2, W: 2})
	assert.ErrorIs(t, err, context.Canceled)
}

func TestTaps(t *testing.T) {
	// 4 -> 2: src = 0.5, 2.5: the mean of each pair.
	assert.Equal(t, []tap{{0, 1, 0.5, 0.5}, {2, 3, 0.5, 0.5}}, taps(4, 2))
	// 4 -> 8: the first output clamps to 0, the last to the last input.
	up := taps(4, 8)
	assert.Equal(t, tap{0, 1, 1, 0}, up[0])
	assert.Equal(t, tap{3, 3, 0.75, 0.25}, up[7]) // both taps on the last input: its value
	assert.Equal(t, tap{0, 1, 0.75, 0.25}, up[1])
}

// TestReleasedConfig: the released K3 vision_config parses to the published
// shape (docs/VISION.md §1), and a changed type field or a missing field
// is refused by name.
func TestReleasedConfig(t *testing.T) {
	b, err := os.ReadFile(fixture.Path("kimi-k3", "released-config.json"))
	require.NoError(t, err)
	var top struct {
		Vision map[string]json.RawMessage `json:"vision_config"`
	}
	require.NoError(t, json.Unmarshal(b, &top))
	c, err := ParseConfig(top.Vision)
	require.NoError(t, err)
	assert.Equal(t, Config{Hidden: 1024, Inter: 4096, Layers: 27, Heads: 12, QKV: 1536, HeadDim: 128, Patch: 14,
		PosH: 64, PosW: 64, MergeH: 2, MergeW: 2, TextHidden: 7168, ProjEps: 1e-5}, *c)
	assert.Equal(t, 4096, c.MergedDim())
	bad := map[string]json.RawMessage{}
	for k, v := range top.Vision {
		bad[k] = v
	}
	bad["norm_type"] = json.RawMessage(`"layernorm"`)
	delete(bad, "qkv_hidden_size")
	delete(bad, "merge_type")
	_, err = ParseConfig(bad)
	assert.ErrorContains(t, err, `norm_type is "layernorm"`)
	assert.ErrorContains(t, err, "missing qkv_hidden_size")
	assert.ErrorContains(t, err, "missing merge_type")
}

// TestCostAtK3Width: a 1024x1024 photo at the released width: 5,476
// patches, 1,369 tokens, about 9.4 TFLOP, and the tower is 0.9 GB.
func TestCostAtK3Width(t *testing.T) {
	c := Config{Hidden: 1024, Inter: 4096, Layers: 27, Heads: 12, QKV: 1536, HeadDim: 128, Patch: 14,
		PosH: 64, PosW: 64, MergeH: 2, MergeW: 2, TextHidden: 7168, ProjEps: 1e-5}
	r := NavitResize(1024, 1024, 14, 2, InPatchLimit, SideLimit)
	k := c.CostOf(r.Grid)
	assert.Equal(t, 5476, k.Patches)
	assert.Equal(t, 1369, k.Tokens)
	assert.InDelta(t, 9.45e12, k.Flops, 0.1e12)
	assert.InDelta(t, 0.92e9, float64(c.WeightBytes()), 0.02e9)
	tw := loadTiny(t)
	assert.Equal(t, tw.Bytes, tw.Cfg.WeightBytes(), "the formula counts what Bind holds")
}
