package engine

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"strings"

	"k3/kernels"
	"k3/storage/config"
	st "k3/storage/safetensors"
)

// Draft is a DSpark draft model (docs/DSPARK.md) attached to a target
// model: it drafts a block of tokens at once from the target's hidden
// states at its tap layers. Its embedding and lm_head are the target's
// (not loaded twice). Open attaches one with Options.Draft; the target's
// forward passes then hand it the tapped hidden states of every position
// they compute, which it projects into its own cache in the State.
type Draft struct {
	Cfg *config.Draft
	Dir string
	// Bytes is what its weights take in memory, resident. Streamed
	// (docs/DSPARK.md §6.1) it keeps StreamBytes (the norms, the kv_a
	// projections and the buffer the other matrices are read into) and
	// reads ReadBytes of them per drafting cycle.
	Bytes, StreamBytes, ReadBytes int64

	stream    *draftStream // nil: resident
	streamBad []string     // streamed matrices found not finite at load

	set      *st.Set
	ctxProj  *kernels.Mat // [hidden, taps*hidden]
	ctxNorm  []float32
	layers   []*draftLayer
	norm     []float32
	markov1  *kernels.Mat // [vocab, rank] (nil without a Markov head)
	markov2  *kernels.Mat
	tapsOf   [][]int // per target layer: the tap numbers it gives
	rope     *yarn
	softmaxK float64 // the attention's score scale
	// Fingerprint identifies the draft model by content (config values,
	// file sizes and header hashes, sampled weights): state files keep its
	// context rows only for the same draft model.
	Fingerprint uint64
}

// draftLayer is one draft decoder layer: MLA with rotary embedding (its
// kv_b absorbed as the target's is) and a dense SwiGLU MLP.
type draftLayer struct {
	InNorm, PostNorm []float32
	QA, QB, KVA, KVB *kernels.Mat
	QANorm, KVANorm  []float32
	O                *kernels.Mat
	Gate, Up, Down   *kernels.Mat
}

// ErrDraftMismatch wraps the refusals of a draft model made for another
// target (its sizes, vocabulary or tap layers).
var ErrDraftMismatch = errors.New("the draft model does not fit this model")

// draftState is a sequence's draft-model context: per draft layer, per
// target position, the normalised latent of the projected context row
// followed by its rotated rope dims.
type draftState struct {
	n     int // target positions held (0..n-1); -1: lost (see extend)
	rows  [][]float32
	width int
}

func (d *draftState) clone() *draftState {
	if d == nil {
		return nil
	}
	c := &draftState{n: d.n, width: d.width, rows: make([][]float32, len(d.rows))}
	for i, r := range d.rows {
		c.rows[i] = append([]float32(nil), r...)
	}
	return c
}

func (d *draftState) bytes() int64 {
	if d == nil {
		return 0
	}
	var n int64
	for _, r := range d.rows {
		n += int64(cap(r)) * 4
	}
	return n
}

// truncate drops the context rows of the positions from keep on.
func (d *draftState) truncate(keep int) {
	if d == nil || d.n <= keep {
		return
	}
	for i := range d.rows {
		d.rows[i] = d.rows[i][:keep*d.width]
	}
	d.n = keep
}

// prepareDraft reads the draft model in dir for the target (its first
// bound layers of config tc): its config (refused with every problem
// named), checked against the target (ErrDraftMismatch), and its shard
// index, whose sizes the memory plan counts. bind then reads the weights.
func prepareDraft(dir string, tc *config.Config, bound int) (*Draft, error) {
	cfgPath := filepath.Join(dir, "config.json")
	if _, err := os.Stat(cfgPath); err != nil {
		return nil, fmt.Errorf("draft model %s has no config.json: %w", dir, err)
	}
	c, err := config.LoadDraft(cfgPath)
	if err != nil {
		return nil, err
	}
	if err := checkDraftFits(c, tc, bound); err != nil {
		return nil, err
	}
	set, err := st.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("draft model %s: %w", dir, err)
	}
	d := &Draft{Cfg: c, Dir: dir, set: set}
	for _, n := range set.Names() {
		if !draftIgnored[n] {
			t, _ := set.Get(n)
			d.Bytes += t.Size
		}
	}
	read, buffer, small := streamSizes(set)
	d.ReadBytes, d.StreamBytes = read, small+draftBufferBytes(buffer)
	d.tapsOf = make([][]int, bound)
	for j, l := range c.TargetLayers {
		d.tapsOf[l] = append(d.tapsOf[l], j)
	}
	d.rope = newYarn(c)
	d.softmaxK = d.rope.scoreScale(c.QKNope + c.QKRope)
	weights, err := set.SampleDigest(set.Names())
	if err != nil {
		set.Close()
		return nil, fmt.Errorf("draft model %s: %w", dir, err)
	}
	h := fnv.New64a()
	cfg := *c
	cfg.Path = ""
	fmt.Fprintf(h, "%+v|", cfg)
	for _, f := range set.Files() {
		fmt.Fprintf(h, "%s:%d:%x|", filepath.Base(f.Path), f.Size, f.HeaderSHA256)
	}
	fmt.Fprintf(h, "weights:%x|", weights)
	d.Fingerprint = h.Sum64()
	return d, nil
}

// draftIgnored are tensors a draft file may hold that are not loaded: the
// target's embedding copied, and the training-only confidence head.
var draftIgnored = map[string]bool{"embed_tokens.weight": true, "confidence_head.proj.weight": true, "confidence_head.proj.bias": true}

// CacheBytesPerPos is the draft's context rows per target position.
func (d *Draft) CacheBytesPerPos() int64 {
	return int64(d.Cfg.Layers*(d.Cfg.KVLoraRank+d.Cfg.QKRope)) * 4
}

// checkDraftFits refuses a draft config made for another target.
func checkDraftFits(c *config.Draft, tc *config.Config, bound int) error {
	var bad []string
	if c.TargetHidden != tc.Hidden {
		bad = append(bad, fmt.Sprintf("its target_hidden_size is %d, the model's hidden size %d", c.TargetHidden, tc.Hidden))
	}
	if c.Hidden != tc.Hidden {
		bad = append(bad, fmt.Sprintf("its hidden_size is %d but it shares the model's embedding and lm_head of width %d", c.Hidden, tc.Hidden))
	}
	if c.VocabSize != tc.VocabSize {
		bad = append(bad, fmt.Sprintf("its vocab_size is %d, the model's %d", c.VocabSize, tc.VocabSize))
	}
	if c.TargetNumLayers > 0 && c.TargetNumLayers != tc.Layers {
		bad = append(bad, fmt.Sprintf("it was made for a model of %d layers, this one has %d", c.TargetNumLayers, tc.Layers))
	}
	for i, l := range c.TargetLayers {
		if l >= bound {
			bad = append(bad, fmt.Sprintf("target_layer_ids[%d] = %d is beyond the model's %d layers (0..%d)", i, l, bound, bound-1))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%w: draft model %s: %s", ErrDraftMismatch, c.Path, strings.Join(bad, "; "))
}

// bind reads the draft's weights and checks each for NaN and Inf;
// streamed, its streamed matrices are read through the stream's buffer
// (reads timed by io), checked, and read again at each use.
func (d *Draft) bind(streamed bool, io *ioTracker) error {
	c := d.Cfg
	H, nh := c.Hidden, c.Heads
	b := d.binder(streamed, io)
	defer d.stream.resetBytes() // the check at load is not a drafting cycle's read
	d.ctxProj = d.mat(b, "context_proj.weight", H, len(c.TargetLayers)*c.TargetHidden, false)
	d.ctxNorm = b.vec("context_norm.weight", []int{H}, 0)
	d.norm = b.vec("final_norm.weight", []int{H}, 0)
	d.markov1 = d.mat(b, "markov_head.markov_w1.weight", c.VocabSize, c.MarkovRank, false)
	d.markov2 = d.mat(b, "markov_head.markov_w2.weight", c.VocabSize, c.MarkovRank, false)
	for i := 0; i < c.Layers; i++ {
		p := fmt.Sprintf("layers.%d.", i)
		a := p + "self_attn."
		L := &draftLayer{
			InNorm:   b.vec(p+"input_layernorm.weight", []int{H}, 0),
			PostNorm: b.vec(p+"post_attention_layernorm.weight", []int{H}, 0),
			QA:       d.mat(b, a+"q_a_proj.weight", c.QLoraRank, H, false),
			QANorm:   b.vec(a+"q_a_layernorm.weight", []int{c.QLoraRank}, 0),
			QB:       d.mat(b, a+"q_b_proj.weight", nh*(c.QKNope+c.QKRope), c.QLoraRank, false),
			KVA:      d.mat(b, a+"kv_a_proj_with_mqa.weight", c.KVLoraRank+c.QKRope, H, false),
			KVANorm:  b.vec(a+"kv_a_layernorm.weight", []int{c.KVLoraRank}, 0),
			KVB:      d.mat(b, a+"kv_b_proj.weight", nh*(c.QKNope+c.VHead), c.KVLoraRank, true),
			O:        d.mat(b, a+"o_proj.weight", H, nh*c.VHead, false),
			Gate:     d.mat(b, p+"mlp.gate_proj.weight", c.Intermediate, H, false),
			Up:       d.mat(b, p+"mlp.up_proj.weight", c.Intermediate, H, false),
			Down:     d.mat(b, p+"mlp.down_proj.weight", H, c.Intermediate, false),
		}
		d.layers = append(d.layers, L)
	}
	d.refuseUnknown(b)
	if err := b.err(); err != nil {
		return fmt.Errorf("draft model %s: %w", d.Dir, err)
	}
	bad := d.streamBad
	check := func(name string, x []float32) {
		if !allFinite(x) {
			bad = append(bad, name)
		}
	}
	checkMat := func(name string, m *kernels.Mat) {
		if m != nil && !matFinite(m) {
			bad = append(bad, name)
		}
	}
	checkMat("context_proj.weight", d.ctxProj)
	check("context_norm.weight", d.ctxNorm)
	check("norm.weight", d.norm)
	checkMat("markov_head.markov_w1.weight", d.markov1)
	checkMat("markov_head.markov_w2.weight", d.markov2)
	for i, L := range d.layers {
		p := fmt.Sprintf("layers.%d.", i)
		for _, v := range []struct {
			n string
			x []float32
		}{{"input_layernorm", L.InNorm}, {"post_attention_layernorm", L.PostNorm}, {"self_attn.q_a_layernorm", L.QANorm}, {"self_attn.kv_a_layernorm", L.KVANorm}} {
			check(p+v.n+".weight", v.x)
		}
		for _, v := range []struct {
			n string
			m *kernels.Mat
		}{{"self_attn.q_a_proj", L.QA}, {"self_attn.q_b_proj", L.QB}, {"self_attn.kv_a_proj_with_mqa", L.KVA}, {"self_attn.kv_b_proj", L.KVB},
			{"self_attn.o_proj", L.O}, {"mlp.gate_proj", L.Gate}, {"mlp.up_proj", L.Up}, {"mlp.down_proj", L.Down}} {
			checkMat(p+v.n+".weight", v.m)
		}
	}
	if len(bad) > 0 {
		return &NonFiniteError{Layer: -1, Where: fmt.Sprintf("the draft model %s (tensors %v)", d.Dir, bad)}
	}
	return nil
}

// refuseUnknown fails b for every tensor of the draft's files that is no
// part of a DSpark draft model of its layers.
func (d *Draft) refuseUnknown(b *binder) {
	c := d.Cfg
	known := map[string]bool{"context_proj.weight": true, "context_norm.weight": true, "final_norm.weight": true,
		"markov_head.markov_w1.weight": true, "markov_head.markov_w2.weight": true}
	for i := 0; i < c.Layers; i++ {
		for _, n := range draftLayerTensors {
			known[fmt.Sprintf("layers.%d.%s.weight", i, n)] = true
		}
	}
	for _, n := range d.set.Names() {
		if !known[n] && !draftIgnored[n] {
			b.fail("unexpected tensor %s (not part of a DSpark draft model with %d layers)", n, c.Layers)
		}
	}
}

// binder is the draft's binder: from its files, resident or (streamed)
// with its streamed matrices read through the stream's buffer.
func (d *Draft) binder(streamed bool, io *ioTracker) *binder {
	b := &binder{src: setSource{d.set}, matLo: -1}
	if streamed {
		d.stream = newDraftStream(d.set, io)
		b.src = streamSource{setSource{d.set}, d.stream}
	}
	return b
}

// draftLayerTensors are the tensors of a draft layer (layers.N.NAME.weight).
var draftLayerTensors = []string{"input_layernorm", "post_attention_layernorm", "self_attn.q_a_proj", "self_attn.q_a_layernorm",
	"self_attn.q_b_proj", "self_attn.kv_a_proj_with_mqa", "self_attn.kv_a_layernorm", "self_attn.kv_b_proj", "self_attn.o_proj",
	"mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}

// matFinite reports whether a bound f32 or bf16 matrix holds no NaN or Inf.
func matFinite(m *kernels.Mat) bool {
	switch m.DType {
	case kernels.BF16:
		for _, w := range m.BF16 {
			if w&0x7f80 == 0x7f80 {
				return false
			}
		}
		return true
	case kernels.F32:
		return allFinite(m.F32)
	}
	return true
}

// Close releases the draft model's shard files.
func (d *Draft) Close() {
	if d == nil {
		return
	}
	d.stream.close()
	d.stream = nil
	if d.set != nil {
		d.set.Close()
		d.set = nil
	}
}

// tap keeps, after target layer li, its output for every tap of it:
// hidden[j] holds tap j's [T][hidden] rows. With Attention Residuals the
// output a layer hands on is P, the running sum of the sub-layer outputs
// since the last block boundary (docs/DSPARK.md §2).
func (d *Draft) tap(hidden [][]float32, li int, P []float32) {
	for _, j := range d.tapsOf[li] {
		hidden[j] = append([]float32(nil), P...)
	}
}

// DraftModel returns the attached draft model (nil: none).
func (m *Model) DraftModel() *Draft { return m.draft }

// yarn is the draft's rotary embedding: the frequency of each pair of
// rope dims and the amplitude of cos and sin (DeepSeek YaRN, or plain
// rotary embedding).
type yarn struct {
	invFreq []float64
	amp     float64
	m       float64 // the attention scale's YaRN factor (1: none)
}

// yarnMscale is DeepSeek's yarn_get_mscale.
func yarnMscale(factor, v float64) float64 {
	if factor <= 1 {
		return 1
	}
	return 0.1*v*math.Log(factor) + 1
}

func newYarn(c *config.Draft) *yarn {
	typ, base, factor, orig, fast, slow, ms, msAll, d := c.RopeType, c.RopeTheta, c.RopeFactor, c.RopeOrigMax, c.RopeBetaFast, c.RopeBetaSlow, c.RopeMscale, c.RopeMscaleAll, c.QKRope
	y := &yarn{invFreq: make([]float64, d/2), amp: 1, m: 1}
	low, high := 0.0, 0.0
	if typ == "yarn" {
		corr := func(r float64) float64 {
			return float64(d) * math.Log(orig/(2*math.Pi*r)) / (2 * math.Log(base))
		}
		low = max(math.Floor(corr(fast)), 0)
		high = min(math.Ceil(corr(slow)), float64(d-1))
		if low == high {
			high += 0.001
		}
		y.amp = yarnMscale(factor, ms) / yarnMscale(factor, msAll)
		y.m = yarnMscale(factor, msAll)
	}
	for i := range y.invFreq {
		f := math.Pow(base, float64(2*i)/float64(d))
		extra := 1 / f
		if typ != "yarn" {
			y.invFreq[i] = extra
			continue
		}
		inter := 1 / (factor * f)
		ramp := min(max((float64(i)-low)/(high-low), 0), 1)
		mask := 1 - ramp
		y.invFreq[i] = inter*(1-mask) + extra*mask
	}
	return y
}

// scoreScale is the attention's score scale for query-key width qk.
func (y *yarn) scoreScale(qk int) float64 { return y.m * y.m / math.Sqrt(float64(qk)) }

// rotate applies the rotary embedding of position pos to x in place:
// interleaved pairs (x[2i], x[2i+1]), each product rounded before the sum.
func (y *yarn) rotate(x []float32, pos int) {
	for i, f := range y.invFreq {
		th := float64(pos) * f
		c, s := y.amp*math.Cos(th), y.amp*math.Sin(th)
		a, b := float64(x[2*i]), float64(x[2*i+1])
		x[2*i] = float32(float64(a*c) - float64(b*s))
		x[2*i+1] = float32(float64(b*c) + float64(a*s))
	}
}
