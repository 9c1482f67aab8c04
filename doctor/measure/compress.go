package measure

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"k3/kernels"
	"k3/storage/layout"
	st "k3/storage/safetensors"
)

// WeightMatrix is one weight matrix as bf16 words in the layout a mat-vec
// reads: row r is output r's weights.
type WeightMatrix struct {
	Source     string
	Name       string
	Kind       string
	Rows, Cols int
	W          []uint16
}

// Tensor kinds of `k3 bench compress`: which part of the model a matrix is.
const (
	KindAttnQ    = "attn q"      // q_proj, q_a_proj, q_b_proj
	KindAttnKV   = "attn kv"     // k_proj, v_proj, kv_a_proj_with_mqa, kv_b_proj
	KindAttnO    = "attn o"      // o_proj
	KindAttnGate = "attn gates"  // KDA f_a/f_b/b/g and MLA g projections
	KindShared   = "shared exp"  // the MoE layers' shared experts
	KindRouter   = "router"      // the MoE gate
	KindLatent   = "latent proj" // routed_expert_down/up_proj
	KindDense    = "dense mlp"   // the dense layers' MLP
	KindEmbed    = "embedding"
	KindConv     = "conv" // a convolution kernel (TensorFlow.js models)
	KindFC       = "fc"   // a fully connected layer (TensorFlow.js models)
	KindLMHead   = "lm_head"
	KindOther    = "other"
)

// Kinds lists the tensor kinds in report order.
var Kinds = []string{KindAttnQ, KindAttnKV, KindAttnO, KindAttnGate, KindShared, KindRouter, KindLatent, KindDense, KindEmbed, KindLMHead, KindConv, KindFC, KindOther}

// TensorKind names the kind of a K3 checkpoint tensor.
func TensorKind(name string) string {
	base := name[strings.LastIndex(name, ".")+1:]
	if base == "weight" {
		n := strings.TrimSuffix(name, ".weight")
		base = n[strings.LastIndex(n, ".")+1:]
	}
	switch {
	case strings.HasSuffix(name, "embed_tokens.weight"):
		return KindEmbed
	case strings.HasPrefix(name, "lm_head.") || strings.HasSuffix(name, ".lm_head.weight"):
		return KindLMHead
	case strings.Contains(name, ".shared_experts."):
		return KindShared
	case strings.HasSuffix(name, "block_sparse_moe.gate.weight"):
		return KindRouter
	case strings.Contains(name, "routed_expert_down_proj") || strings.Contains(name, "routed_expert_up_proj"):
		return KindLatent
	case strings.Contains(name, ".mlp."):
		return KindDense
	case strings.Contains(name, ".self_attn."):
		switch base {
		case "q_proj", "q_a_proj", "q_b_proj":
			return KindAttnQ
		case "k_proj", "v_proj", "kv_a_proj_with_mqa", "kv_b_proj":
			return KindAttnKV
		case "o_proj":
			return KindAttnO
		case "g_proj", "f_a_proj", "f_b_proj", "b_proj":
			return KindAttnGate
		}
	}
	return KindOther
}

// CheckpointMatrices reads every matrix of a safetensors checkpoint that a
// trunk would store as bf16: BF16 tensors of rank 2 as they are, F32 ones
// rounded to bf16 (round to nearest even). Vectors (norms, biases) and the
// MXFP4 experts' bytes are left out.
func CheckpointMatrices(dir, source string) ([]WeightMatrix, error) {
	return checkpointMatrices(dir, source, nil)
}

// checkpointMatrices is CheckpointMatrices of the tensors keep accepts
// (nil: all).
func checkpointMatrices(dir, source string, keep func(name string) bool) ([]WeightMatrix, error) {
	set, err := st.Open(dir)
	if err != nil {
		return nil, err
	}
	defer set.Close()
	names := set.Names()
	sort.Strings(names)
	var out []WeightMatrix
	for _, name := range names {
		t, _ := set.Get(name)
		if len(t.Shape) != 2 || t.Shape[1] < 2 || (t.DType != st.BF16 && t.DType != st.F32) || (keep != nil && !keep(name)) {
			continue
		}
		rows, cols := int(t.Shape[0]), int(t.Shape[1])
		raw := make([]byte, t.Size)
		if err := set.ReadTensor(t, raw); err != nil {
			return nil, err
		}
		w := make([]uint16, rows*cols)
		if t.DType == st.BF16 {
			for i := range w {
				w[i] = binary.LittleEndian.Uint16(raw[2*i:])
			}
		} else {
			for i := range w {
				w[i] = st.Float32ToBF16(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
			}
		}
		out = append(out, WeightMatrix{Source: source, Name: name, Kind: TensorKind(name), Rows: rows, Cols: cols, W: w})
	}
	return out, nil
}

// TFJSMatrices reads the float32 weights of a TensorFlow.js model (its
// model.json and the weight files it lists) that are stored unquantized and
// have rank 2 or more, rounded to bf16. A TensorFlow.js kernel keeps the
// output channel last ([in, out], [h, w, in, out]), so each becomes a
// matrix of one row per output channel, as PyTorch lays a Linear or Conv
// weight out. Their kind is KindFC (rank 2) or KindConv.
func TFJSMatrices(modelJSON, source string) ([]WeightMatrix, error) {
	b, err := os.ReadFile(modelJSON)
	if err != nil {
		return nil, err
	}
	var m struct {
		WeightsManifest []struct {
			Paths   []string     `json:"paths"`
			Weights []tfjsWeight `json:"weights"`
		} `json:"weightsManifest"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", modelJSON, err)
	}
	var out []WeightMatrix
	for _, g := range m.WeightsManifest {
		var data []byte
		for _, p := range g.Paths {
			d, err := os.ReadFile(filepath.Join(filepath.Dir(modelJSON), p))
			if err != nil {
				return nil, err
			}
			data = append(data, d...)
		}
		off := 0
		for _, w := range g.Weights {
			n := 1
			for _, d := range w.Shape {
				n *= d
			}
			size, err := w.size()
			if err != nil {
				return nil, fmt.Errorf("%s: weight %s: %w", modelJSON, w.Name, err)
			}
			if off+n*size > len(data) {
				return nil, fmt.Errorf("%s: weight %s runs past the end of its %d weight bytes", modelJSON, w.Name, len(data))
			}
			if wm, ok := w.matrix(data[off:], n, source); ok {
				out = append(out, wm)
			}
			off += n * size
		}
	}
	return out, nil
}

// tfjsWeight is one entry of a TensorFlow.js weights manifest.
type tfjsWeight struct {
	Name         string `json:"name"`
	Shape        []int  `json:"shape"`
	DType        string `json:"dtype"`
	Quantization *struct {
		DType string `json:"dtype"`
	} `json:"quantization"`
}

// size is the bytes per element the weight is stored with.
func (w *tfjsWeight) size() (int, error) {
	if w.Quantization != nil {
		switch quant := w.Quantization.DType; quant {
		case "uint8":
			return 1, nil
		case "uint16", "float16":
			return 2, nil
		default:
			return 0, fmt.Errorf("quantization %q not known", quant)
		}
	}
	switch w.DType {
	case "float32", "int32":
		return 4, nil
	case "bool":
		return 1, nil
	default:
		return 0, fmt.Errorf("dtype %q not known", w.DType)
	}
}

// matrix is the weight's n float32 values in data as a bf16 matrix of
// (last dimension) rows, transposed from TF.js's column-major layout; ok is
// false for a weight that is not an unquantized float32 matrix of at least
// two columns.
func (w *tfjsWeight) matrix(data []byte, n int, source string) (WeightMatrix, bool) {
	if w.DType != "float32" || w.Quantization != nil || len(w.Shape) < 2 || n <= 0 {
		return WeightMatrix{}, false
	}
	rows := w.Shape[len(w.Shape)-1]
	cols := n / rows
	if cols < 2 {
		return WeightMatrix{}, false
	}
	kind := KindConv
	if len(w.Shape) == 2 {
		kind = KindFC
	}
	wm := WeightMatrix{Source: source, Name: w.Name, Kind: kind, Rows: rows, Cols: cols, W: make([]uint16, n)}
	for i := 0; i < cols; i++ {
		for r := 0; r < rows; r++ {
			f := math.Float32frombits(binary.LittleEndian.Uint32(data[4*(i*rows+r):]))
			wm.W[r*cols+i] = st.Float32ToBF16(f)
		}
	}
	return wm, true
}

// FormatSize is one encoding's size of a set of matrices.
type FormatSize struct {
	Format string  `json:"format"`
	Bytes  int64   `json:"bytes"`
	Ratio  float64 `json:"ratio"` // bf16 bytes / Bytes
}

// CompressRow is one line of `k3 bench compress`: the matrices of one kind
// from one source.
type CompressRow struct {
	Source    string `json:"source"`
	Kind      string `json:"kind"`
	Tensors   int    `json:"tensors"`
	Weights   int64  `json:"weights"`
	BF16Bytes int64  `json:"bf16_bytes"`
	// BF16CBytes is kernels.BF16C's serialised size (row offsets included)
	// and Ratio BF16Bytes over it; BlockRatio leaves the 8-byte row offsets
	// out (they are 0.06% of a 7168-wide row, a few % of a 128-wide one).
	BF16CBytes int64   `json:"bf16c_bytes"`
	Ratio      float64 `json:"ratio"`
	BlockRatio float64 `json:"block_ratio"`
	// RawFraction is the fraction of full 32-weight blocks BF16C stores raw
	// (their exponents span more than 16 values); short last blocks are
	// always raw and not counted.
	RawFraction float64 `json:"raw_fraction"`
	// ExponentEntropy is the exponent bytes' order-0 entropy in bits per
	// weight; EntropyRatio = 16 / (8 + entropy) is what an ideal coder of
	// the exponents alone would approach.
	ExponentEntropy float64      `json:"exponent_entropy"`
	EntropyRatio    float64      `json:"entropy_ratio"`
	Formats         []FormatSize `json:"formats"` // bf16c, then the alternatives
}

// Compression formats of CompressRow.Formats.
const (
	FormatBF16C = "bf16c" // kernels.BF16C: base + 4-bit offsets per block, raw fallback
	FormatX3    = "x3"    // base + 3-bit offsets per block with exceptions (AppendX3Row)
	FormatHuff  = "huff"  // byte planes, a per-tensor Huffman code of the exponents (HuffCode)
)

// matrixStats is what CompressStats adds up over matrices.
type matrixStats struct {
	tensors      int
	weights      int64
	bf16c, block int64
	full, raw    int64
	hist         [256]int64
	x3, huff     int64
}

func (s *matrixStats) add(m *WeightMatrix) {
	s.tensors++
	s.weights += int64(len(m.W))
	km := kernels.Mat{DType: kernels.BF16, Rows: m.Rows, Cols: m.Cols, BF16: m.W}
	c := kernels.CompressBF16(&km)
	s.bf16c += c.Bytes()
	s.block += int64(len(c.Z))
	full := m.Cols / 32
	s.full += int64(full * m.Rows)
	var hist [256]int64
	for _, w := range m.W {
		hist[w>>7&0xff]++
	}
	for e, n := range hist {
		s.hist[e] += n
	}
	h := NewHuffCode(&hist)
	var buf []byte
	for r := 0; r < m.Rows; r++ {
		z := c.Z[c.ZOff[r]-c.ZOff[0] : c.ZOff[r+1]-c.ZOff[0]]
		for b := 0; b < full; b++ {
			if z[b] == kernels.BF16CRaw {
				s.raw++
			}
		}
		row := m.W[r*m.Cols : (r+1)*m.Cols]
		buf = AppendX3Row(buf[:0], row)
		s.x3 += int64(len(buf)) + 8 // a row offset, as BF16C's
		buf = h.AppendRow(buf[:0], row)
		s.huff += int64(len(buf)) + 8
	}
	s.x3 += 8
	s.huff += int64(h.TableBytes()) + 8
}

func (s *matrixStats) row(source, kind string) CompressRow {
	raw := 2 * s.weights
	r := CompressRow{Source: source, Kind: kind, Tensors: s.tensors, Weights: s.weights, BF16Bytes: raw, BF16CBytes: s.bf16c}
	r.Ratio = float64(raw) / float64(s.bf16c)
	r.BlockRatio = float64(raw) / float64(s.block)
	if s.full > 0 {
		r.RawFraction = float64(s.raw) / float64(s.full)
	}
	r.ExponentEntropy = entropy(s.hist[:])
	r.EntropyRatio = 16 / (8 + r.ExponentEntropy)
	for _, f := range []struct {
		name  string
		bytes int64
	}{{FormatBF16C, s.bf16c}, {FormatX3, s.x3}, {FormatHuff, s.huff}} {
		r.Formats = append(r.Formats, FormatSize{Format: f.name, Bytes: f.bytes, Ratio: float64(raw) / float64(f.bytes)})
	}
	return r
}

// entropy is the order-0 entropy of a histogram in bits per count.
func entropy(hist []int64) float64 {
	var total int64
	for _, n := range hist {
		total += n
	}
	h := 0.0
	for _, n := range hist {
		if n > 0 {
			p := float64(n) / float64(total)
			h -= p * math.Log2(p)
		}
	}
	return h
}

// CompressStats measures every format on the matrices: one row per source
// and kind (in Kinds order, kinds without matrices left out), then an "all"
// row for each source of more than one kind. Sources keep their first-seen
// order.
func CompressStats(ms []WeightMatrix) []CompressRow {
	var sources []string
	byKey := map[[2]string]*matrixStats{}
	for i := range ms {
		m := &ms[i]
		if !slices.Contains(sources, m.Source) {
			sources = append(sources, m.Source)
		}
		for _, k := range []string{m.Kind, "all"} {
			s := byKey[[2]string{m.Source, k}]
			if s == nil {
				s = &matrixStats{}
				byKey[[2]string{m.Source, k}] = s
			}
			s.add(m)
		}
	}
	var out []CompressRow
	for _, src := range sources {
		kinds := 0
		for _, k := range Kinds {
			if s := byKey[[2]string{src, k}]; s != nil {
				out = append(out, s.row(src, k))
				kinds++
			}
		}
		if kinds > 1 {
			out = append(out, byKey[[2]string{src, "all"}].row(src, "all"))
		}
	}
	return out
}

// DecodeSpeed is how fast one format decodes on one core: logical bf16
// bytes written per second, the median of Runs interleaved rounds.
type DecodeSpeed struct {
	Format string    `json:"format"`
	GBps   float64   `json:"gbps"` // median
	Runs   []float64 `json:"runs"` // every round, in order
}

// DecodeSpeeds times decoding every matrix of ms into bf16 words with each
// format's Go decoder on one core: FormatBF16C with kernels'
// DecodeRowBF16 (the portable path), x3 and huff with theirs, and "bf16"
// a plain copy of the words as the reference. The formats take turns,
// rounds times, and each reports the median (the machine is shared).
func DecodeSpeeds(ms []WeightMatrix, rounds int) ([]DecodeSpeed, error) {
	encs, logical, maxCols := encodeAll(ms)
	decoders := decodersOf(ms, encs, make([]uint16, maxCols))
	out := make([]DecodeSpeed, len(decoders))
	for k := range decoders {
		out[k].Format = decoders[k].name
	}
	for range max(rounds, 1) {
		for k, d := range decoders {
			t0 := time.Now()
			if err := d.run(); err != nil {
				return nil, err
			}
			out[k].Runs = append(out[k].Runs, float64(logical)/time.Since(t0).Seconds()/1e9)
		}
	}
	for k := range out {
		out[k].GBps = median(out[k].Runs)
	}
	return out, nil
}

// encoded is one matrix in each compressed form DecodeSpeeds times.
type encoded struct {
	c    kernels.Mat
	x3   [][]byte
	h    *HuffCode
	huff [][]byte
}

// encodeAll encodes every matrix of ms in each form; logical is their bf16
// bytes and maxCols the widest row.
func encodeAll(ms []WeightMatrix) (encs []encoded, logical int64, maxCols int) {
	encs = make([]encoded, len(ms))
	for i := range ms {
		m := &ms[i]
		km := kernels.Mat{DType: kernels.BF16, Rows: m.Rows, Cols: m.Cols, BF16: m.W}
		e := encoded{c: kernels.CompressBF16(&km)}
		var hist [256]int64
		for _, w := range m.W {
			hist[w>>7&0xff]++
		}
		e.h = NewHuffCode(&hist)
		for r := 0; r < m.Rows; r++ {
			row := m.W[r*m.Cols : (r+1)*m.Cols]
			e.x3 = append(e.x3, AppendX3Row(nil, row))
			e.huff = append(e.huff, e.h.AppendRow(nil, row))
		}
		encs[i] = e
		logical += 2 * int64(len(m.W))
		maxCols = max(maxCols, m.Cols)
	}
	return encs, logical, maxCols
}

// rowDecoder decodes every row of every matrix in one format.
type rowDecoder struct {
	name string
	run  func() error
}

// decodersOf is one rowDecoder per format (plain bf16 copied as the
// baseline), each decoding into dst.
func decodersOf(ms []WeightMatrix, encs []encoded, dst []uint16) []rowDecoder {
	return []rowDecoder{
		{"bf16", func() error {
			for i := range ms {
				m := &ms[i]
				for r := 0; r < m.Rows; r++ {
					copy(dst, m.W[r*m.Cols:(r+1)*m.Cols])
				}
			}
			return nil
		}},
		{FormatBF16C, func() error {
			for i := range ms {
				for r := 0; r < ms[i].Rows; r++ {
					encs[i].c.DecodeRowBF16(r, dst)
				}
			}
			return nil
		}},
		{FormatX3, func() error {
			for i := range ms {
				for r, z := range encs[i].x3 {
					if _, err := DecodeX3Row(z, dst[:ms[i].Cols]); err != nil {
						return fmt.Errorf("%s row %d: %w", ms[i].Name, r, err)
					}
				}
			}
			return nil
		}},
		{FormatHuff, func() error {
			for i := range ms {
				for r, z := range encs[i].huff {
					if err := encs[i].h.DecodeRow(z, dst[:ms[i].Cols]); err != nil {
						return fmt.Errorf("%s row %d: %w", ms[i].Name, r, err)
					}
				}
			}
			return nil
		}},
	}
}

// median of xs (not modified); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// KernelSpeeds is a mat-vec of one bf16 matrix and of its BF16C form
// timed in the same run: logical (bf16) weight bytes per second, each the
// median of interleaved rounds.
type KernelSpeeds struct {
	Level     string    `json:"level"` // kernels.CurrentLevel: BF16C runs whatever path that level has for it
	Rows      int       `json:"rows"`
	Cols      int       `json:"cols"`
	Threads   int       `json:"threads"`
	BF16GBps  float64   `json:"bf16_gbps"`
	BF16CGBps float64   `json:"bf16c_gbps"`
	BF16Runs  []float64 `json:"bf16_runs"`
	BF16CRuns []float64 `json:"bf16c_runs"`
	// Slowdown is BF16C's time over bf16's for the same weights (the median
	// of the per-round ratios): what compression multiplies a mat-vec by.
	Slowdown float64 `json:"slowdown"`
}

// BF16CKernel times kernels.MatVec on m (bf16) and on its BF16C form, in
// turns, rounds times, each call at least minTime. The matrix should be
// larger than the caches (a streamed or resident trunk matrix is).
func BF16CKernel(p *kernels.Pool, m *kernels.Mat, rounds int, minTime time.Duration) KernelSpeeds {
	c := kernels.CompressBF16(m)
	x := testInput(m.Cols)
	dst := make([]float32, m.Rows)
	ks := KernelSpeeds{Level: kernels.CurrentLevel().String(), Rows: m.Rows, Cols: m.Cols, Threads: p.Threads()}
	logical := float64(m.Bytes())
	var ratios []float64
	for range max(rounds, 1) {
		p.Hold()
		tb := timeCalls(func(int) { kernels.MatVec(p, dst, m, x) }, minTime)
		tc := timeCalls(func(int) { kernels.MatVec(p, dst, &c, x) }, minTime)
		p.Release()
		ks.BF16Runs = append(ks.BF16Runs, logical/tb/1e9)
		ks.BF16CRuns = append(ks.BF16CRuns, logical/tc/1e9)
		ratios = append(ratios, tc/tb)
	}
	ks.BF16GBps, ks.BF16CGBps, ks.Slowdown = median(ks.BF16Runs), median(ks.BF16CRuns), median(ratios)
	return ks
}

// LayerCompression is one layer's trunk bytes as stored and as BF16C
// would store them.
type LayerCompression struct {
	Bytes      int64 // every trunk tensor of the layer (routed experts excluded), as in the checkpoint
	Compressed int64 // the same with its bf16 matrices in BF16C
}

// ProjectTrunk is every layer's trunk of the checkpoint in dir with its
// bf16 matrices compressed at blockRatio[kind] (BF16C's ratio without row
// offsets, measured on other weights; fallback for a kind not in the map)
// plus the 8-byte row offsets. Only tensor sizes are read. Vectors, f32
// tensors and kv_b_proj (which the MLA attention reads transposed, so it
// stays bf16) keep their size.
func ProjectTrunk(dir string, blockRatio map[string]float64, fallback float64) ([]LayerCompression, error) {
	set, err := st.Open(dir)
	if err != nil {
		return nil, err
	}
	defer set.Close()
	var out []LayerCompression
	for _, name := range set.Names() {
		t, _ := set.Get(name)
		li, _, ok := layout.LayerOf(name)
		if !ok || layout.IsRoutedExpert(name) {
			continue
		}
		for len(out) <= li {
			out = append(out, LayerCompression{})
		}
		out[li].Bytes += t.Size
		if t.DType != st.BF16 || len(t.Shape) != 2 || strings.HasSuffix(name, "kv_b_proj.weight") {
			out[li].Compressed += t.Size
			continue
		}
		r, ok := blockRatio[TensorKind(name)]
		if !ok {
			r = fallback
		}
		out[li].Compressed += int64(math.Ceil(float64(t.Size)/r)) + 8*(t.Shape[0]+1)
	}
	return out, nil
}
