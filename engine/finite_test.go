package engine

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
	st "k3/storage/safetensors"
)

// poisoned copies tiny-release and writes the BF16 value bits over element
// 0 of the named tensor.
func poisoned(t *testing.T, tensor string, bits uint16) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "m")
	require.NoError(t, os.CopyFS(dir, os.DirFS(fixture.ModelDir("tiny-release"))))
	set, err := st.Open(dir)
	require.NoError(t, err)
	tn, ok := set.Get(tensor)
	require.True(t, ok, tensor)
	require.Equal(t, st.BF16, tn.DType)
	path, off := tn.Path, tn.Offset
	set.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{byte(bits), byte(bits >> 8)}, off)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	return dir
}

// Audit D7 (rows 1.7, 1.8): NaN or Inf weights fail the run, naming where
// the first non-finite value appeared, instead of giving token 0 forever.
func TestNonFiniteWeightsFailNamingTheLayer(t *testing.T) {
	ids := fixture.LoadExpect(t, "tiny-release").Prompts[0].PromptIDs
	for _, c := range []struct {
		tensor string
		bits   uint16
		layer  int
		where  string
	}{
		{"language_model.model.layers.1.input_layernorm.weight", 0x7FC0, 1, "the output of layer 1 (model.layers.1.*)"},
		{"language_model.model.layers.1.self_attn.o_proj.weight", 0x7F80, 1, "the output of layer 1"},
		{"language_model.model.layers.3.post_attention_layernorm.weight", 0xFF80, 3, "the output of layer 3"},
		{"language_model.model.embed_tokens.weight", 0x7FC0, -1, "the embedding of token id 0"},
		{"language_model.lm_head.weight", 0x7FC0, -1, "the output head"},
	} {
		dir := poisoned(t, c.tensor, c.bits)
		m, err := Open(dir, Options{Budget: Budget{CacheBytes: 1 << 62}})
		require.NoError(t, err)
		e := m.NewEngine(2)
		prompt := ids
		if c.layer == -1 && c.where != "the output head" {
			prompt = append([]int{0}, ids...) // token 0's embedding row holds the NaN
		}
		res, err := e.Generate(context.Background(), nil, prompt, GenOptions{MaxTokens: 4})
		var nf *NonFiniteError
		require.True(t, errors.As(err, &nf), "%s: %v", c.tensor, err)
		assert.Equal(t, c.layer, nf.Layer, c.tensor)
		assert.Contains(t, err.Error(), c.where, c.tensor)
		assert.Empty(t, res.Generated, "no token sampled from NaN logits")
		e.Close()
		m.Close()
	}
}

func TestAllFinite(t *testing.T) {
	x := make([]float32, 37)
	for i := range x {
		x[i] = float32(i) - 18.5
	}
	x[5] = math.MaxFloat32
	assert.True(t, allFinite(x))
	assert.Equal(t, -1, firstNonFinite(x))
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		for _, at := range []int{0, 3, 35, 36} {
			y := append([]float32(nil), x...)
			y[at] = bad
			assert.False(t, allFinite(y), "%v at %d", bad, at)
			assert.Equal(t, at, firstNonFinite(y))
		}
	}
}

func BenchmarkAllFinite(b *testing.B) {
	x := make([]float32, 7168*64)
	b.SetBytes(int64(4 * len(x)))
	for b.Loop() {
		if !allFinite(x) {
			b.Fatal()
		}
	}
}
