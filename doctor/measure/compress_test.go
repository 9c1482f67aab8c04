package measure

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
	"k3/kernels"
	st "k3/storage/safetensors"
)

// testRows are bf16 rows of every kind the encoders must keep exactly:
// trained-like normal weights, random bit patterns (every exponent, so
// raw blocks), zeros, subnormals, infinities, NaNs, blocks whose exponents
// span exactly the 3-bit window and one more, all-equal exponents, and
// rows whose length is not a multiple of 32.
func testRows(r *rand.Rand) [][]uint16 {
	var rows [][]uint16
	for _, cols := range []int{1, 5, 31, 32, 33, 64, 95, 96, 257, 1024} {
		normal := make([]uint16, cols)
		for j := range normal {
			normal[j] = kernels.F32ToBF16(float32(r.NormFloat64() * 0.02))
		}
		bitsRow := make([]uint16, cols)
		for j := range bitsRow {
			bitsRow[j] = uint16(r.Uint32())
		}
		special := make([]uint16, cols)
		specials := []uint16{0x0000, 0x8000, 0x0001, 0x807f, 0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0, 0xffc1, 0x0080, 0x3f80}
		for j := range special {
			special[j] = specials[r.IntN(len(specials))]
		}
		window := make([]uint16, cols) // exponents e..e+6: no exception
		wider := make([]uint16, cols)  // e..e+7: one in 8 an exception
		top := make([]uint16, cols)    // exponents up to 255 (infinities, NaNs)
		same := make([]uint16, cols)
		e := uint16(100 + r.IntN(20))
		for j := range window {
			m := uint16(r.IntN(256))&0x7f | uint16(r.IntN(2))<<15
			window[j] = (e+uint16(j%7))<<7 | m
			wider[j] = (e+uint16(j%8))<<7 | m
			top[j] = (249+uint16(j%7))<<7 | m
			same[j] = e<<7 | m
		}
		rows = append(rows, normal, bitsRow, special, window, wider, top, same)
	}
	return rows
}

func TestX3RoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 1))
	for i, row := range testRows(r) {
		z := AppendX3Row([]byte{0xaa}, row) // appends after what is there
		require.Equal(t, byte(0xaa), z[0])
		got := make([]uint16, len(row))
		n, err := DecodeX3Row(z[1:], got)
		require.NoError(t, err, "row %d", i)
		assert.Equal(t, len(z)-1, n, "row %d: every byte used", i)
		require.Equal(t, row, got, "row %d (%d weights)", i, len(row))
		// never longer than raw plus one header byte per block
		assert.LessOrEqual(t, n, 2*len(row)+(len(row)+31)/32, "row %d", i)
		// truncated input is refused, not read past
		if n > 0 {
			_, err = DecodeX3Row(z[1:n], got)
			assert.Error(t, err, "row %d truncated", i)
		}
	}
}

// TestX3Sizes: the block sizes the format promises: 45 bytes for a block
// of 7 exponents, one more per exception, raw (65) from 20 exceptions on.
func TestX3Sizes(t *testing.T) {
	block := func(exc int) []uint16 {
		b := make([]uint16, 32)
		for j := range b {
			b[j] = uint16(120+j%7) << 7
			if j < exc {
				b[j] = uint16(60+j) << 7 // far from the window
			}
		}
		return b
	}
	assert.Len(t, AppendX3Row(nil, block(0)), 45)
	assert.Len(t, AppendX3Row(nil, block(3)), 48)
	assert.Len(t, AppendX3Row(nil, block(12)), 57) // 12 far exponents, 20 in the window
	assert.Len(t, AppendX3Row(nil, make([]uint16, 31)), 1+62)
	// a block of 32 distinct exponents: raw
	wide := make([]uint16, 32)
	for j := range wide {
		wide[j] = uint16(4*j) << 7
	}
	z := AppendX3Row(nil, wide)
	assert.Len(t, z, 65)
	assert.Equal(t, byte(255), z[0])
}

func TestHuffRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 2))
	rows := testRows(r)
	// one code for all the rows (a tensor), and one per row
	var hist [256]int64
	for _, row := range rows {
		for _, w := range row {
			hist[w>>7&0xff]++
		}
	}
	shared := NewHuffCode(&hist)
	for i, row := range rows {
		var own [256]int64
		for _, w := range row {
			own[w>>7&0xff]++
		}
		for _, h := range []*HuffCode{shared, NewHuffCode(&own)} {
			assert.LessOrEqual(t, int(maxLen(h)), huffMaxLen)
			z := h.AppendRow(nil, row)
			got := make([]uint16, len(row))
			require.NoError(t, h.DecodeRow(z, got), "row %d", i)
			require.Equal(t, row, got, "row %d", i)
			if len(z) > len(row) {
				assert.Error(t, h.DecodeRow(z[:len(row)], got), "row %d without its bit stream", i)
			}
		}
	}
	// an exponent the code never saw is escaped, not lost
	var one [256]int64
	one[120] = 1000
	h := NewHuffCode(&one)
	row := []uint16{120 << 7, 3 << 7, 255 << 7, 120<<7 | 0x8000}
	got := make([]uint16, len(row))
	require.NoError(t, h.DecodeRow(h.AppendRow(nil, row), got))
	assert.Equal(t, row, got)
	// the entropy coder beats 12 bits/weight on trained-like weights
	var g [256]int64
	w := make([]uint16, 32*1024)
	for j := range w {
		w[j] = kernels.F32ToBF16(float32(r.NormFloat64() * 0.02))
		g[w[j]>>7&0xff]++
	}
	assert.Less(t, len(NewHuffCode(&g).AppendRow(nil, w)), len(w)*12/8)
	var empty [256]int64
	assert.NoError(t, NewHuffCode(&empty).DecodeRow(NewHuffCode(&empty).AppendRow(nil, nil), nil))
}

func maxLen(h *HuffCode) uint8 {
	m := uint8(0)
	for _, l := range h.Len {
		m = max(m, l)
	}
	return m
}

func TestTensorKind(t *testing.T) {
	cases := map[string]string{
		"language_model.model.embed_tokens.weight":                                      KindEmbed,
		"language_model.lm_head.weight":                                                 KindLMHead,
		"lm_head.weight":                                                                KindLMHead,
		"language_model.model.layers.1.self_attn.q_proj.weight":                         KindAttnQ,
		"language_model.model.layers.3.self_attn.q_a_proj.weight":                       KindAttnQ,
		"language_model.model.layers.3.self_attn.q_b_proj.weight":                       KindAttnQ,
		"language_model.model.layers.1.self_attn.k_proj.weight":                         KindAttnKV,
		"language_model.model.layers.1.self_attn.v_proj.weight":                         KindAttnKV,
		"language_model.model.layers.3.self_attn.kv_a_proj_with_mqa.weight":             KindAttnKV,
		"language_model.model.layers.3.self_attn.kv_b_proj.weight":                      KindAttnKV,
		"language_model.model.layers.3.self_attn.o_proj.weight":                         KindAttnO,
		"language_model.model.layers.1.self_attn.g_proj.weight":                         KindAttnGate,
		"language_model.model.layers.1.self_attn.f_a_proj.weight":                       KindAttnGate,
		"language_model.model.layers.1.self_attn.b_proj.weight":                         KindAttnGate,
		"language_model.model.layers.1.block_sparse_moe.shared_experts.up_proj.weight":  KindShared,
		"language_model.model.layers.1.block_sparse_moe.gate.weight":                    KindRouter,
		"language_model.model.layers.1.block_sparse_moe.routed_expert_down_proj.weight": KindLatent,
		"language_model.model.layers.0.mlp.down_proj.weight":                            KindDense,
		"language_model.model.layers.0.mlp_res_proj.weight":                             KindOther,
		"language_model.model.layers.1.self_attn.q_conv1d.weight":                       KindOther,
	}
	for name, want := range cases {
		assert.Equal(t, want, TensorKind(name), name)
	}
}

// TestCheckpointMatrices reads the trained demo model: every bf16 matrix,
// none of the vectors or MXFP4 bytes, the kinds of the K3 graph.
func TestCheckpointMatrices(t *testing.T) {
	dir := fixture.ModelDir("demo")
	ms, err := CheckpointMatrices(dir, "demo")
	require.NoError(t, err)
	set, err := st.Open(dir)
	require.NoError(t, err)
	defer set.Close()
	want := 0
	for _, n := range set.Names() {
		if tt, _ := set.Get(n); len(tt.Shape) == 2 && tt.DType == st.BF16 {
			want++
		}
	}
	require.Len(t, ms, want)
	kinds := map[string]int{}
	for _, m := range ms {
		assert.Equal(t, "demo", m.Source)
		assert.Len(t, m.W, m.Rows*m.Cols, m.Name)
		kinds[m.Kind]++
		if m.Name == "language_model.lm_head.weight" {
			tt, _ := set.Get(m.Name)
			raw := make([]byte, tt.Size)
			require.NoError(t, set.ReadTensor(tt, raw))
			assert.Equal(t, binary.LittleEndian.Uint16(raw[2*777:]), m.W[777])
		}
	}
	for _, k := range []string{KindAttnQ, KindAttnKV, KindAttnO, KindAttnGate, KindShared, KindRouter, KindLatent, KindDense, KindEmbed, KindLMHead} {
		assert.Positive(t, kinds[k], k)
	}
}

// TestTFJSMatrices writes a small TensorFlow.js model: float32 kernels are
// read transposed to one row per output channel and rounded to bf16;
// quantized, integer and rank-1 weights are skipped but their bytes
// counted; the group's data spans two files.
func TestTFJSMatrices(t *testing.T) {
	dir := t.TempDir()
	f32 := func(v ...float32) []byte {
		b := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
		return b
	}
	var data []byte
	data = append(data, f32(1, 2, 3, 4, 5, 6)...) // dense [3, 2]: in 3, out 2
	data = append(data, 7, 8, 9, 10)              // uint8-quantized [2, 2]
	data = append(data, f32(0.5, 0.25)...)        // bias [2]
	data = append(data, 1, 0, 0, 0, 2, 0, 0, 0)   // int32 [2]
	conv := make([]float32, 2*2*3*4)              // conv [2, 2, 3, 4]
	for i := range conv {
		conv[i] = float32(i) + 0.001
	}
	data = append(data, f32(conv...)...)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "w1.bin"), data[:10], 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "w2.bin"), data[10:], 0o644))
	manifest := map[string]any{"weightsManifest": []any{map[string]any{
		"paths": []string{"w1.bin", "w2.bin"},
		"weights": []any{
			map[string]any{"name": "dense/kernel", "shape": []int{3, 2}, "dtype": "float32"},
			map[string]any{"name": "q/kernel", "shape": []int{2, 2}, "dtype": "float32", "quantization": map[string]any{"dtype": "uint8", "min": 0, "scale": 1}},
			map[string]any{"name": "dense/bias", "shape": []int{2}, "dtype": "float32"},
			map[string]any{"name": "shape", "shape": []int{2}, "dtype": "int32"},
			map[string]any{"name": "conv/kernel", "shape": []int{2, 2, 3, 4}, "dtype": "float32"},
		},
	}}}
	b, _ := json.Marshal(manifest)
	path := filepath.Join(dir, "model.json")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	ms, err := TFJSMatrices(path, "tiny")
	require.NoError(t, err)
	require.Len(t, ms, 2)
	bf := kernels.F32ToBF16
	assert.Equal(t, WeightMatrix{Source: "tiny", Name: "dense/kernel", Kind: KindFC, Rows: 2, Cols: 3,
		W: []uint16{bf(1), bf(3), bf(5), bf(2), bf(4), bf(6)}}, ms[0])
	c := ms[1]
	assert.Equal(t, "conv/kernel", c.Name)
	assert.Equal(t, KindConv, c.Kind)
	require.Equal(t, 4, c.Rows)
	require.Equal(t, 12, c.Cols)
	for r := 0; r < 4; r++ {
		for i := 0; i < 12; i++ {
			assert.Equal(t, bf(conv[i*4+r]), c.W[r*12+i])
		}
	}
	// a manifest whose weights run past the data is refused
	require.NoError(t, os.WriteFile(filepath.Join(dir, "w2.bin"), data[10:20], 0o644))
	_, err = TFJSMatrices(path, "tiny")
	assert.ErrorContains(t, err, "runs past the end")
}

// TestCompressStats: the sizes are the encoders' own, the ratios follow
// from them, the raw fraction and entropy are what the weights give.
func TestCompressStats(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 3))
	mk := func(name, kind string, rows, cols int, gen func() uint16) WeightMatrix {
		w := make([]uint16, rows*cols)
		for i := range w {
			w[i] = gen()
		}
		return WeightMatrix{Source: "s", Name: name, Kind: kind, Rows: rows, Cols: cols, W: w}
	}
	normal := mk("a", KindAttnQ, 8, 96, func() uint16 { return kernels.F32ToBF16(float32(r.NormFloat64() * 0.02)) })
	random := mk("b", KindOther, 4, 64, func() uint16 { return uint16(r.Uint32()) })
	same := mk("c", KindOther, 2, 64, func() uint16 { return 0x3f80 | uint16(r.IntN(128)) })
	rows := CompressStats([]WeightMatrix{normal, random, same})
	require.Len(t, rows, 3)
	assert.Equal(t, []string{KindAttnQ, KindOther, "all"}, []string{rows[0].Kind, rows[1].Kind, rows[2].Kind})

	q := rows[0]
	km := kernels.Mat{DType: kernels.BF16, Rows: 8, Cols: 96, BF16: normal.W}
	c := kernels.CompressBF16(&km)
	assert.Equal(t, c.Bytes(), q.BF16CBytes)
	assert.Equal(t, int64(2*8*96), q.BF16Bytes)
	assert.Equal(t, float64(q.BF16Bytes)/float64(q.BF16CBytes), q.Ratio)
	assert.Equal(t, float64(q.BF16Bytes)/float64(len(c.Z)), q.BlockRatio)
	var x3 int64 = 8
	for i := 0; i < 8; i++ {
		x3 += int64(len(AppendX3Row(nil, normal.W[i*96:(i+1)*96]))) + 8
	}
	require.Len(t, q.Formats, 3)
	assert.Equal(t, FormatSize{FormatBF16C, q.BF16CBytes, q.Ratio}, q.Formats[0])
	assert.Equal(t, FormatX3, q.Formats[1].Format)
	assert.Equal(t, x3, q.Formats[1].Bytes)
	assert.Equal(t, float64(q.BF16Bytes)/float64(x3), q.Formats[1].Ratio)
	assert.Equal(t, FormatHuff, q.Formats[2].Format)
	assert.Greater(t, q.ExponentEntropy, 1.5)
	assert.Less(t, q.ExponentEntropy, 4.0)
	assert.InDelta(t, 16/(8+q.ExponentEntropy), q.EntropyRatio, 1e-12)

	o := rows[1]
	// random bits: nearly every block raw; the same exponent: none, entropy 0
	assert.Equal(t, 2, o.Tensors)
	assert.InDelta(t, 8.0/12, o.RawFraction, 2.0/12)
	all := rows[2]
	assert.Equal(t, 3, all.Tensors)
	assert.Equal(t, q.BF16CBytes+o.BF16CBytes, all.BF16CBytes)
	assert.Equal(t, q.Formats[1].Bytes+o.Formats[1].Bytes, all.Formats[1].Bytes)

	s := CompressStats([]WeightMatrix{same})
	require.Len(t, s, 1, "one kind: no all row")
	assert.Zero(t, s[0].RawFraction)
	assert.Zero(t, s[0].ExponentEntropy)
	assert.InDelta(t, 64.0/49, s[0].BlockRatio, 1e-12)

	// the decoders the speeds time round-trip the same matrices
	d, err := DecodeSpeeds([]WeightMatrix{normal, random, same}, 2)
	require.NoError(t, err)
	require.Len(t, d, 4)
	for i, f := range []string{"bf16", FormatBF16C, FormatX3, FormatHuff} {
		assert.Equal(t, f, d[i].Format)
		assert.Len(t, d[i].Runs, 2)
		assert.Equal(t, median(d[i].Runs), d[i].GBps)
	}
}

func TestMedian(t *testing.T) {
	assert.Equal(t, 0.0, median(nil))
	assert.Equal(t, 2.0, median([]float64{3, 1, 2}))
	assert.Equal(t, 2.5, median([]float64{4, 1, 2, 3}))
}

// TestBF16CKernel: both kernels run on the same weights; the result is
// one median per format and their per-round time ratio.
func TestBF16CKernel(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 4))
	m := &kernels.Mat{DType: kernels.BF16, Rows: 64, Cols: 256, BF16: make([]uint16, 64*256)}
	for i := range m.BF16 {
		m.BF16[i] = kernels.F32ToBF16(float32(r.NormFloat64() * 0.02))
	}
	p := kernels.NewPool(1)
	defer p.Close()
	ks := BF16CKernel(p, m, 3, 0)
	assert.Equal(t, kernels.CurrentLevel().String(), ks.Level)
	assert.Equal(t, 64, ks.Rows)
	assert.Equal(t, 1, ks.Threads)
	assert.Len(t, ks.BF16Runs, 3)
	assert.Len(t, ks.BF16CRuns, 3)
	assert.Equal(t, median(ks.BF16Runs), ks.BF16GBps)
	assert.Equal(t, median(ks.BF16CRuns), ks.BF16CGBps)
	assert.Positive(t, ks.Slowdown)
}
