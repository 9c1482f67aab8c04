package engine

import (
	"fmt"
	"math"
	"time"

	"k3/doctor/machine"
	"k3/kernels"
)

// Engine runs forward passes of a bound model.
type Engine struct {
	M    *Model
	Pool *kernels.Pool
	// Chunk is the prefill chunk: prompts are processed this many positions
	// at a time through every layer (default 64).
	Chunk int
	// Observe, when set, receives progress and statistics events.
	Observe func(Event)
	// LayerSeconds, when not nil (len >= bound layers), accumulates the wall
	// time of each layer, waiting for its weights included.
	LayerSeconds []float64

	layers layerProvider // nil: every layer resident in M.Layers
}

// layerProvider hands out layers for one forward step: resident layers, or
// layers streamed from a packed trunk into a ring of slots.
type layerProvider interface {
	acquire(li int) (*Layer, error)
	release(li int)
	trunkStats() (bytes int64, waitSeconds float64)
	close()
}

func (e *Engine) layer(li int) (*Layer, error) {
	if e.layers == nil {
		return e.M.Layers[li], nil
	}
	return e.layers.acquire(li)
}

func (e *Engine) releaseLayer(li int) {
	if e.layers != nil {
		e.layers.release(li)
	}
}

// NewEngine returns an engine over m with a pool of the given threads (0: one per physical core).
func NewEngine(m *Model, threads int) *Engine {
	if threads <= 0 {
		threads = machine.DefaultThreads()
	}
	return &Engine{M: m, Pool: kernels.NewPool(threads), Chunk: 64}
}

// Close stops the engine's workers and any streaming reader.
func (e *Engine) Close() {
	e.Pool.Close()
	if e.layers != nil {
		e.layers.close()
	}
}

// Feed runs ids through the model, advancing s. It returns the logits of the
// last position, or of every position when all is true ([len(ids)][vocab]).
// Long inputs are processed in chunks of e.Chunk positions.
func (e *Engine) Feed(s *State, ids []int, all bool) ([]float32, error) {
	V := e.M.Cfg.VocabSize
	for _, id := range ids {
		if id < 0 || id >= V {
			return nil, fmt.Errorf("token id %d is outside 0..%d", id, V-1)
		}
	}
	chunk := e.Chunk
	if chunk < 1 {
		chunk = 64
	}
	var out []float32
	for i := 0; i < len(ids); i += chunk {
		j := min(i+chunk, len(ids))
		last := j == len(ids)
		lg, err := e.forward(s, ids[i:j], all, last)
		if err != nil {
			return nil, err
		}
		if all {
			out = append(out, lg...)
		} else if last {
			out = lg
		}
		if len(ids) > 1 {
			e.emit(Event{Kind: EventPrefill, Done: j, Total: len(ids)})
		}
	}
	return out, nil
}

func f32add(dst, a []float32) {
	a = a[:len(dst)]
	for i := range dst {
		dst[i] += a[i]
	}
}

// forward runs one chunk of T positions through every bound layer. It
// returns logits for every position (all) or for the last one (want), else nil.
func (e *Engine) forward(s *State, ids []int, all, want bool) ([]float32, error) {
	m := e.M
	c := m.Cfg
	H := c.Hidden
	T := len(ids)
	P := make([]float32, T*H) // running sum of sub-layer outputs since the last block boundary
	for t, id := range ids {
		if err := m.embed(P[t*H:(t+1)*H], id); err != nil {
			return nil, err
		}
	}
	var blocks [][]float32
	hIn := make([]float32, T*H)
	x := make([]float32, T*H)
	for li := 0; li < m.Bound; li++ {
		tl := time.Now()
		L, err := e.layer(li)
		if err != nil {
			return nil, err
		}
		P, blocks, err = e.layerStep(L, s.kda[li], s.mla[li], s.Pos, P, blocks, hIn, x, T)
		e.releaseLayer(li)
		if err != nil {
			return nil, err
		}
		if e.LayerSeconds != nil {
			e.LayerSeconds[li] += time.Since(tl).Seconds()
		}
	}
	s.Pos += T
	s.IDs = append(s.IDs, ids...)
	if !all && !want {
		return nil, nil
	}
	t0 := 0
	if !all {
		t0 = T - 1
	}
	n := T - t0
	h := make([]float32, n*H)
	srcs := make([][]float32, 0, len(blocks)+1)
	for t := t0; t < T; t++ {
		srcs = srcs[:0]
		for _, b := range blocks {
			srcs = append(srcs, b[t*H:(t+1)*H])
		}
		srcs = append(srcs, P[t*H:(t+1)*H])
		row := h[(t-t0)*H : (t-t0+1)*H]
		kernels.AttnRes(row, srcs, m.OutFold, c.RMSEps)
		kernels.RMSNorm(row, row, m.FinalNorm, c.RMSEps)
	}
	logits := make([]float32, n*c.VocabSize)
	if err := m.head(e.Pool, logits, h, n); err != nil {
		return nil, err
	}
	return logits, nil
}

// attnResMix writes, per position, the AttnRes mixture of the blocks and cur.
func attnResMix(dst, cur []float32, blocks [][]float32, fold []float32, H, T int, eps float32) {
	srcs := make([][]float32, 0, len(blocks)+1)
	for t := 0; t < T; t++ {
		srcs = srcs[:0]
		for _, b := range blocks {
			srcs = append(srcs, b[t*H:(t+1)*H])
		}
		srcs = append(srcs, cur[t*H:(t+1)*H])
		kernels.AttnRes(dst[t*H:(t+1)*H], srcs, fold, eps)
	}
}

// layerStep runs decoder layer L over T positions. P is the running sum of
// sub-layer outputs since the last block boundary and blocks the completed
// block snapshots; both come back updated (there is no plain residual add:
// each sub-layer's input is an AttnRes mixture). hIn and x are T*H scratch.
func (e *Engine) layerStep(L *Layer, kd *kdaState, mc *mlaCache, pos int, P []float32, blocks [][]float32, hIn, x []float32, T int) ([]float32, [][]float32, error) {
	c := e.M.Cfg
	H := c.Hidden
	if len(blocks) > 0 {
		attnResMix(hIn, P, blocks, L.AttnFold, H, T, c.RMSEps)
	} else {
		copy(hIn, P)
	}
	if L.Index%c.AttnResBlock == 0 {
		blocks = append(blocks, P)
		P = nil
	}
	for t := 0; t < T; t++ {
		kernels.RMSNorm(x[t*H:(t+1)*H], hIn[t*H:(t+1)*H], L.InNorm, c.RMSEps)
	}
	var a []float32
	if L.MLA {
		a = e.mla(L, mc, pos, x, T)
	} else {
		a = e.kda(L, kd, x, T)
	}
	if P == nil {
		P = a
	} else {
		f32add(P, a)
	}
	attnResMix(hIn, P, blocks, L.MLPFold, H, T, c.RMSEps)
	for t := 0; t < T; t++ {
		kernels.RMSNorm(x[t*H:(t+1)*H], hIn[t*H:(t+1)*H], L.PostNorm, c.RMSEps)
	}
	var mo []float32
	if L.Dense {
		mo = e.dense(L, x, T)
	} else {
		var err error
		if mo, err = e.moe(L, x, T); err != nil {
			return nil, nil, err
		}
	}
	f32add(P, mo)
	return P, blocks, nil
}

// kdaDecay writes one head's per-key-channel decay for one position:
// alpha[i] = exp(lb·sigmoid(exp(A_log)·(f[i]+dt_bias[i]))), A_log per head.
func kdaDecay(alpha, f, dtBias []float32, aLog float32, lb float64) {
	aH := math.Exp(float64(aLog))
	for i := range alpha {
		z := aH * (float64(f[i]) + float64(dtBias[i]))
		alpha[i] = float32(math.Exp(lb / (1 + math.Exp(-z))))
	}
}

func embedRow(dst []float32, m *kernels.Mat, id int) {
	c := m.Cols
	if m.DType == kernels.BF16 {
		for i, b := range m.BF16[id*c : (id+1)*c] {
			dst[i] = kernels.BF16ToF32(b)
		}
		return
	}
	copy(dst, m.F32[id*c:(id+1)*c])
}

func (e *Engine) mm(m *kernels.Mat, x []float32, T int) []float32 {
	out := make([]float32, T*m.Rows)
	kernels.MatMul(e.Pool, out, m, x, T)
	return out
}

// dense is the SiTU-GLU MLP of the first layers.
func (e *Engine) dense(L *Layer, x []float32, T int) []float32 {
	c := e.M.Cfg
	g := e.mm(L.Gate, x, T)
	u := e.mm(L.Up, x, T)
	kernels.SiTUPool(e.Pool, g, g, u, c.SituBeta, c.SituLinearBeta)
	return e.mm(L.Down, g, T)
}

// kda is the Kimi Delta Attention layer over T consecutive positions.
func (e *Engine) kda(L *Layer, s *kdaState, x []float32, T int) []float32 {
	c := e.M.Cfg
	nh, d, K := c.KDAHeads, c.KDAHeadDim, c.ConvK
	P := nh * d
	q := e.mm(L.Q, x, T)
	k := e.mm(L.K, x, T)
	v := e.mm(L.V, x, T)
	f := e.mm(L.FB, e.mm(L.FA, x, T), T)
	b := e.mm(L.B, x, T)
	g := e.mm(L.G, x, T)
	// causal depthwise short convolutions with SiLU, carrying the last K-1 inputs
	e.Pool.Each(3, func(j int) {
		buf := [3][]float32{q, k, v}[j]
		w := [3][]float32{L.QConv, L.KConv, L.VConv}[j]
		shortConv(buf, s.conv[j], w, T, P, K)
	})
	o := make([]float32, T*P)
	lb := float64(c.GateLowerBound)
	scale := 1 / math.Sqrt(float64(d))
	e.Pool.Each(nh, func(h int) {
		S := s.S[h*d*d : (h+1)*d*d]
		alpha := make([]float32, d)
		u := make([]float64, d)
		delta := make([]float32, d)
		for t := 0; t < T; t++ {
			qh := q[t*P+h*d : t*P+(h+1)*d]
			kh := k[t*P+h*d : t*P+(h+1)*d]
			vh := v[t*P+h*d : t*P+(h+1)*d]
			kernels.L2Norm(qh, 1e-6)
			kernels.L2Norm(kh, 1e-6)
			for i := range qh {
				qh[i] = float32(float64(qh[i]) * scale)
			}
			kdaDecay(alpha, f[t*P+h*d:t*P+(h+1)*d], L.DtBias[h*d:(h+1)*d], L.ALog[h], lb)
			beta := float64(kernels.Sigmoid(b[t*nh+h]))
			kdaStep(S, qh, kh, vh, alpha, beta, u, delta, o[t*P+h*d:t*P+(h+1)*d])
			// gated RMSNorm: norm over the head, weight, then the sigmoid gate
			oh := o[t*P+h*d : t*P+(h+1)*d]
			kernels.RMSNorm(oh, oh, L.ONorm, c.RMSEps)
			gh := g[t*P+h*d : t*P+(h+1)*d]
			for i := range oh {
				oh[i] = float32(float64(oh[i]) * float64(kernels.Sigmoid(gh[i])))
			}
		}
	})
	return e.mm(L.O, o, T)
}

// shortConv applies the depthwise causal convolution with fused SiLU in
// place to T positions of `ch` channels, updating the carried history.
func shortConv(buf, hist, w []float32, T, ch, K int) {
	for t := 0; t < T; t++ {
		row := buf[t*ch : (t+1)*ch]
		for cc := 0; cc < ch; cc++ {
			hh := hist[cc*(K-1) : (cc+1)*(K-1)]
			ww := w[cc*K : (cc+1)*K]
			cur := row[cc]
			acc := 0.0
			for j := 0; j < K-1; j++ {
				acc += float64(ww[j]) * float64(hh[j])
			}
			acc += float64(ww[K-1]) * float64(cur)
			copy(hh, hh[1:])
			hh[K-2] = cur
			row[cc] = float32(acc / (1 + math.Exp(-acc)))
		}
	}
}

// kdaStep advances one head's delta-rule state by one position:
// S <- S·diag(alpha) (per key row); u = Sᵀk; S += k·(beta(v-u))ᵀ; o = Sᵀq.
// S is [key i][value j]; every sum runs over i ascending in float64.
func kdaStep(S, q, k, v, alpha []float32, beta float64, u []float64, delta, o []float32) {
	d := len(q)
	for i := 0; i < d; i++ {
		row := S[i*d : (i+1)*d]
		a := alpha[i]
		for j := range row {
			row[j] *= a
		}
	}
	stateTVec(u, S, k)
	for j := range delta {
		delta[j] = float32(beta * (float64(v[j]) - u[j]))
	}
	for i := 0; i < d; i++ {
		ki := float64(k[i])
		row := S[i*d : (i+1)*d]
		for j := range row {
			row[j] = float32(float64(row[j]) + ki*float64(delta[j]))
		}
	}
	stateTVec(u, S, q)
	for j := range o {
		o[j] = float32(u[j])
	}
}

// stateTVec sets u = Sᵀx for a d x d state S (d = len(x)), each sum over the
// key rows i ascending in float64.
func stateTVec(u []float64, S, x []float32) {
	d := len(x)
	clear(u)
	for i, xv := range x {
		xi := float64(xv)
		row := S[i*d : (i+1)*d]
		for j, sv := range row {
			u[j] += xi * float64(sv)
		}
	}
}

// mla is gated multi-head latent attention without positional rotation,
// with kv_b absorbed: the cache keeps the normalised latent and raw rope
// dims per position, queries are mapped into the latent space and the
// attention-weighted latent is mapped out through the value half of kv_b.
func (e *Engine) mla(L *Layer, cache *mlaCache, pos int, x []float32, T int) []float32 {
	c := e.M.Cfg
	nh, nope, rope, vd, r := c.Heads, c.QKNope, c.QKRope, c.VHead, c.KVLoraRank
	qa := e.mm(L.QA, x, T)
	for t := 0; t < T; t++ {
		kernels.RMSNorm(qa[t*c.QLoraRank:(t+1)*c.QLoraRank], qa[t*c.QLoraRank:(t+1)*c.QLoraRank], L.QANorm, c.RMSEps)
	}
	q := e.mm(L.QB, qa, T)
	ckv := e.mm(L.KVA, x, T)
	w := r + rope
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
	e.Pool.Each(T*nh, func(th int) {
		t, h := th/nh, th%nh
		n := pos + t + 1 // causal: positions 0..pos+t
		qv := q[t*nh*qh+h*qh : t*nh*qh+(h+1)*qh]
		qabs := make([]float32, w)
		kernels.MatTVec(qabs[:r], L.KVB, h*(nope+vd), 0, qv[:nope])
		copy(qabs[r:], qv[nope:])
		p := make([]float64, n)
		scores := kernels.Mat{DType: kernels.F32, Rows: n, Cols: w, F32: cache.rows[:n*w]}
		kernels.MatVec64(p, &scores, qabs)
		for s := range p {
			p[s] *= scale
		}
		kernels.Softmax64(p)
		lat := make([]float32, r) // Σ_s p[s]·latent_s
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

// NewEngineFor returns an engine over m that streams layers when m was opened
// with a packed trunk.
func NewEngineFor(m *Model, threads int) (*Engine, error) {
	e := NewEngine(m, threads)
	if m.stream != nil {
		lp, err := m.stream(e)
		if err != nil {
			e.Close()
			return nil, err
		}
		e.layers = lp
	}
	return e, nil
}
