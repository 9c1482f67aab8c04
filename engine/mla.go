package engine

import (
	"math"
	"sync"

	"k3/kernels"
)

// mlaBlock is gated multi-head latent attention without positional
// rotation, with kv_b absorbed: the cache keeps the normalised latent and
// the raw rope dims per position, queries are mapped into the latent space
// and the attention-weighted latent is mapped out through the value half of
// kv_b.
type mlaBlock struct {
	QA, QB, KVA, KVB *kernels.Mat
	QANorm, KVANorm  []float32
	G, O             *kernels.Mat // output gate (nil without one) and output projection
}

func (b *binder) mla(a string) *mlaBlock {
	c := b.cfg
	H, nh := c.Hidden, c.Heads
	L := &mlaBlock{
		QA:      b.mat(a+"q_a_proj.weight", c.QLoraRank, H),
		QANorm:  b.vec(a+"q_a_layernorm.weight", []int{c.QLoraRank}, 0),
		QB:      b.mat(a+"q_b_proj.weight", nh*(c.QKNope+c.QKRope), c.QLoraRank),
		KVA:     b.mat(a+"kv_a_proj_with_mqa.weight", c.KVLoraRank+c.QKRope, H),
		KVANorm: b.vec(a+"kv_a_layernorm.weight", []int{c.KVLoraRank}, 0),
		KVB:     b.matByColumns(a+"kv_b_proj.weight", nh*(c.QKNope+c.VHead), c.KVLoraRank), // MatTVec
		O:       b.mat(a+"o_proj.weight", H, nh*c.VHead),
	}
	if c.OutputGate {
		L.G = b.mat(a+"g_proj.weight", nh*c.VHead, H)
	}
	return L
}

// forward runs the block over T positions starting at st.Pos, appending
// their latents to the layer's cache.
func (L *mlaBlock) forward(e *Engine, st *State, li int, x []float32, T int) []float32 {
	cache, pos := st.mla[li], st.Pos
	c := e.m.Cfg
	nh, nope, rope, vd, r := c.Heads, c.QKNope, c.QKRope, c.VHead, c.KVLoraRank
	qa := e.mm(L.QA, x, T)
	for t := 0; t < T; t++ {
		kernels.RMSNorm(qa[t*c.QLoraRank:(t+1)*c.QLoraRank], qa[t*c.QLoraRank:(t+1)*c.QLoraRank], L.QANorm, c.RMSEps)
	}
	q := e.mm(L.QB, qa, T)
	ckv := e.mm(L.KVA, x, T)
	w := r + rope
	cache.grow(T, e.m.kvPositions())
	for t := 0; t < T; t++ {
		row := ckv[t*w : (t+1)*w]
		kernels.RMSNorm(row[:r], row[:r], L.KVANorm, c.RMSEps)
		cache.rows = append(cache.rows, row...)
	}
	var g []float32
	if L.G != nil {
		g = e.mm(L.G, x, T)
	}
	o := make([]float32, T*nh*vd)
	scale := 1 / math.Sqrt(float64(nope+rope))
	qh := nope + rope
	e.pool.Each(T*nh, func(th int) {
		t, h := th/nh, th%nh
		n := pos + t + 1 // causal: positions 0..pos+t
		qv := q[t*nh*qh+h*qh : t*nh*qh+(h+1)*qh]
		sc := getAttnRow(n, w)
		defer attnRows.Put(sc)
		qabs, p, lat := sc.q[:w], sc.p, sc.q[w:w+r]
		kernels.MatTVec(qabs[:r], L.KVB, h*(nope+vd), 0, qv[:nope])
		copy(qabs[r:], qv[nope:])
		scores := kernels.Mat{DType: kernels.F32, Rows: n, Cols: w, F32: cache.rows[:n*w]}
		kernels.MatVec64(p, &scores, qabs)
		for s := range p {
			p[s] *= scale
		}
		kernels.Softmax64(p)
		// lat = Σ_s p[s]·latent_s
		kernels.WeightedRows(lat, p, cache.rows, w)
		oh := o[t*nh*vd+h*vd : t*nh*vd+(h+1)*vd]
		vb := L.KVB.RowRange(h*(nope+vd)+nope, (h+1)*(nope+vd)) // this head's value rows
		kernels.MatVec(nil, oh, &vb, lat)
		if g != nil {
			gh := g[t*nh*vd+h*vd : t*nh*vd+(h+1)*vd]
			for d := range oh {
				oh[d] = float32(float64(oh[d]) * float64(kernels.Sigmoid(gh[d])))
			}
		}
	})
	return e.mm(L.O, o, T)
}

// attnRow is one query row's scratch: the absorbed query and the weighted
// latent (q, w + r floats), and the float64 score row over the context (p).
// A chunk computes its rows one per worker at a time and reuses these, so
// its attention holds workers x context scores, not chunk x context x
// heads (the plan's PrefillCost.Fixed).
type attnRow struct {
	q []float32
	p []float64
}

var attnRows sync.Pool

// getAttnRow is a row's scratch for n positions of cache rows w wide (the
// latent r < w): q holds w + r floats.
func getAttnRow(n, w int) *attnRow {
	sc, _ := attnRows.Get().(*attnRow)
	if sc == nil {
		sc = &attnRow{}
	}
	if cap(sc.q) < 2*w {
		sc.q = make([]float32, 2*w)
	}
	sc.q = sc.q[:2*w]
	if cap(sc.p) < n {
		sc.p = make([]float64, n, n+n/4)
	}
	sc.p = sc.p[:n]
	return sc
}
