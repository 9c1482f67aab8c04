package engine

import (
	"math"

	"k3/kernels"
)

// The draft model's arithmetic (docs/DSPARK.md §3-4), on the engine's
// kernels so it follows the floating-point contract of kernels/doc.go:
// the same drafted tokens at every SIMD level and thread count.

// extend appends the context rows of the T positions the target just
// computed (ending at s.Pos) from their tapped hidden states: c =
// RMSNorm(context_proj · taps; context_norm), then per draft layer the
// normalised latent of kv_a_proj · c and its rope dims rotated to the
// position. A state whose rows do not reach the positions before these
// (made before the draft was attached, or read from a file) has lost its
// draft context: the draft model then proposes nothing for it.
func (d *Draft) extend(e *Engine, s *State, taps [][]float32, T int) {
	c := d.Cfg
	pos0 := s.Pos - T
	ds := s.draft
	if ds == nil {
		ds = &draftState{width: c.KVLoraRank + c.QKRope, rows: make([][]float32, c.Layers)}
		s.draft = ds
	}
	if ds.n != pos0 {
		ds.n, ds.rows = -1, make([][]float32, c.Layers)
		return
	}
	H, Et, nT := c.Hidden, c.TargetHidden, len(taps)
	u := make([]float32, T*nT*Et)
	for t := 0; t < T; t++ {
		for j, h := range taps {
			copy(u[(t*nT+j)*Et:(t*nT+j+1)*Et], h[t*Et:(t+1)*Et])
		}
	}
	defer d.stream.lock()()
	proj, err := d.stream.use(d.ctxProj)
	if err != nil { // no context rows: the draft model proposes nothing for s
		ds.n, ds.rows = -1, make([][]float32, c.Layers)
		return
	}
	ctx := e.mm(proj, u, T)
	for t := 0; t < T; t++ {
		kernels.RMSNorm(ctx[t*H:(t+1)*H], ctx[t*H:(t+1)*H], d.ctxNorm, c.RMSEps)
	}
	for l, L := range d.layers {
		ds.rows[l] = append(plannedRows(ds.rows[l], T, ds.width, e.m.kvPositions()), d.latentRows(e, L, ctx, pos0, T)...)
	}
	ds.n += T
}

// latentRows are kv_a_proj · x for T rows at positions pos0.., with the
// latent normalised and the rope dims rotated.
func (d *Draft) latentRows(e *Engine, L *draftLayer, x []float32, pos0, T int) []float32 {
	c := d.Cfg
	r, w := c.KVLoraRank, c.KVLoraRank+c.QKRope
	kv := e.mm(L.KVA, x, T)
	for t := 0; t < T; t++ {
		row := kv[t*w : (t+1)*w]
		kernels.RMSNorm(row[:r], row[:r], L.KVANorm, c.RMSEps)
		d.rope.rotate(row[r:], pos0+t)
	}
	return kv
}

// drafter is the generation's drafter when a draft model is attached,
// drafting with smp, the generation's sampler (nil: greedy); nil without
// one (the context drafter drafts).
func (e *Engine) drafter(smp Sampler) *modelDrafter {
	if d := e.m.draft; d != nil {
		return &modelDrafter{e: e, d: d, sampler: smp}
	}
	return nil
}

// modelDrafter drafts with the draft model attached to the engine's model,
// in place of the context drafter (suggestDraft): suggest's ids are the
// tokens of s followed by the token just chosen (s may hold more
// positions: a verification pass not yet rewound).
// sampler is the generation's (nil: greedy): with it a draft stops where
// the target foreseeably samples another token (Draft.block).
type modelDrafter struct {
	e       *Engine
	d       *Draft
	sampler Sampler
}

// suggest drafts up to k tokens after ids: one block pass over [anchor,
// mask ...] (k rows) with the context rows of the n = len(ids)-1
// positions before the anchor, then the Markov head's greedy choice
// position by position (Draft.block). Without the context rows of those
// positions it proposes nothing.
func (m modelDrafter) suggest(s *State, ids []int, k int) ([]int, int) {
	n := len(ids) - 1
	ds := s.draft
	if k < 1 || n < 0 || ds == nil || ds.n < n {
		return nil, 0
	}
	d, e := m.d, m.e
	defer d.stream.lock()()
	draft, err := d.block(e, ds, ids[n], n, k, m.sampler)
	if err != nil || len(draft) == 0 {
		return nil, 0
	}
	return draft, 1
}

// block runs the block pass of B rows at positions n.. (anchor first) and
// returns up to B drafted tokens, each the argmax of its row's logits
// plus the Markov head's bias from the token before. Row k predicts the
// token at position n+1+k, which the target picks with smp at that same
// position (Generate: pick(sampler, len(ids)+k, ...)), from the position's
// one uniform number, known in advance. With smp (seeded sampling) the
// draft stops before the first row where smp, given the draft's logits,
// would not pick the argmax: the number falls outside the drafter's share
// of its top token there, so the target is likely to sample another
// token, and drafting it and the rows after it would mostly widen the pass
// for nothing (docs/DSPARK.md §4.3). The drafts only shorten: the output
// is plain decoding's either way.
func (d *Draft) block(e *Engine, ds *draftState, anchor, n, B int, smp Sampler) ([]int, error) {
	c := d.Cfg
	H, V := c.Hidden, c.VocabSize
	tables := e.m.tables
	h := make([]float32, B*H)
	for t := 0; t < B; t++ {
		id := c.MaskToken
		if t == 0 {
			id = anchor
		}
		if err := tables.embed(h[t*H:(t+1)*H], id); err != nil {
			return nil, err
		}
	}
	x := make([]float32, B*H)
	for l, L := range d.layers {
		for t := 0; t < B; t++ {
			kernels.RMSNorm(x[t*H:(t+1)*H], h[t*H:(t+1)*H], L.InNorm, c.RMSEps)
		}
		a, err := d.attention(e, L, ds.rows[l][:n*ds.width], x, n, B)
		if err != nil {
			return nil, err
		}
		f32add(h, a)
		for t := 0; t < B; t++ {
			kernels.RMSNorm(x[t*H:(t+1)*H], h[t*H:(t+1)*H], L.PostNorm, c.RMSEps)
		}
		y, err := d.mlp(e, L, x, B)
		if err != nil {
			return nil, err
		}
		f32add(h, y)
	}
	for t := 0; t < B; t++ {
		kernels.RMSNorm(x[t*H:(t+1)*H], h[t*H:(t+1)*H], d.norm, c.RMSEps)
	}
	U := make([]float32, B*V)
	if err := tables.head(e.pool, U, x, B); err != nil {
		return nil, err
	}
	return d.pick(e, U, anchor, n, B, smp)
}

// pick chooses the block's tokens from its base logits U (B rows): each
// the argmax of its row plus the Markov head's bias from the token before
// (the anchor for the first), cut short where smp foreseeably samples
// another token (block).
func (d *Draft) pick(e *Engine, U []float32, anchor, n, B int, smp Sampler) ([]int, error) {
	c := d.Cfg
	V := c.VocabSize
	w2, err := d.stream.use(d.markov2)
	if err != nil {
		return nil, err
	}
	out := make([]int, B)
	w1 := make([]float32, c.MarkovRank)
	bias := make([]float32, V)
	prev := anchor
	for k := 0; k < B; k++ {
		if err := d.stream.row(w1, d.markov1, prev); err != nil {
			return nil, err
		}
		kernels.MatVec(e.pool, bias, w2, w1)
		row := U[k*V : (k+1)*V]
		for i, b := range bias {
			row[i] += b
		}
		prev = kernels.Argmax(row)
		if smp != nil && smp.Pick(n+1+k, row) != prev {
			return out[:k], nil
		}
		out[k] = prev
	}
	return out, nil
}

// mlp is a draft layer's SwiGLU MLP (SiLU) over the B rows of x.
func (d *Draft) mlp(e *Engine, L *draftLayer, x []float32, B int) ([]float32, error) {
	var g, u []float32
	for _, p := range []struct {
		m   *kernels.Mat
		out *[]float32
	}{{L.Gate, &g}, {L.Up, &u}} {
		w, err := d.stream.use(p.m)
		if err != nil {
			return nil, err
		}
		*p.out = e.mm(w, x, B)
	}
	for i, gv := range g {
		a := float32(float64(gv) * sigmoid(float64(gv)))
		g[i] = float32(a * u[i])
	}
	w, err := d.stream.use(L.Down)
	if err != nil {
		return nil, err
	}
	return e.mm(w, g, B), nil
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// attention is the draft layer's MLA over the context rows ctx (n
// positions) and the block's own B rows, non-causal inside the block:
// every block row attends to every context row and every block row. kv_b
// is absorbed as in the target's MLA.
// A streamed draft model reads each matrix as it comes (draftStream.use).
func (d *Draft) attention(e *Engine, L *draftLayer, ctx, x []float32, n, B int) ([]float32, error) {
	c := d.Cfg
	nh, nope, rope, vd, r := c.Heads, c.QKNope, c.QKRope, c.VHead, c.KVLoraRank
	w, qh := r+rope, nope+rope
	QA, err := d.stream.use(L.QA)
	if err != nil {
		return nil, err
	}
	qa := e.mm(QA, x, B)
	for t := 0; t < B; t++ {
		kernels.RMSNorm(qa[t*c.QLoraRank:(t+1)*c.QLoraRank], qa[t*c.QLoraRank:(t+1)*c.QLoraRank], L.QANorm, c.RMSEps)
	}
	QB, err := d.stream.use(L.QB)
	if err != nil {
		return nil, err
	}
	q := e.mm(QB, qa, B)
	for t := 0; t < B; t++ {
		for h := 0; h < nh; h++ {
			o := t*nh*qh + h*qh + nope
			d.rope.rotate(q[o:o+rope], n+t)
		}
	}
	rows := make([]float32, 0, len(ctx)+B*w)
	rows = append(rows, ctx...)
	rows = append(rows, d.latentRows(e, L, x, n, B)...)
	S := n + B
	keys := kernels.Mat{DType: kernels.F32, Rows: S, Cols: w, F32: rows}
	o := make([]float32, B*nh*vd)
	scale := d.softmaxK
	KVB, err := d.stream.use(L.KVB)
	if err != nil {
		return nil, err
	}
	e.pool.Each(B*nh, func(th int) {
		t, h := th/nh, th%nh
		qv := q[t*nh*qh+h*qh : t*nh*qh+(h+1)*qh]
		qabs := make([]float32, w)
		kernels.MatTVec(qabs[:r], KVB, h*(nope+vd), 0, qv[:nope])
		copy(qabs[r:], qv[nope:])
		p := make([]float64, S)
		kernels.MatVec64(p, &keys, qabs)
		for s := range p {
			p[s] *= scale
		}
		kernels.Softmax64(p)
		lat := make([]float32, r)
		kernels.WeightedRows(lat, p, rows, w)
		oh := o[t*nh*vd+h*vd : t*nh*vd+(h+1)*vd]
		vb := KVB.RowRange(h*(nope+vd)+nope, (h+1)*(nope+vd))
		kernels.MatVec(nil, oh, &vb, lat)
	})
	O, err := d.stream.use(L.O)
	if err != nil {
		return nil, err
	}
	return e.mm(O, o, B), nil
}
