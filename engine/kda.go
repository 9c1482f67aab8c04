package engine

import (
	"math"

	"k3/kernels"
)

// kdaBlock is Kimi Delta Attention: a per-head delta-rule recurrent state
// with per-channel decay, short causal convolutions on q, k, v, and a gated
// RMSNorm on the output.
type kdaBlock struct {
	Q, K, V, FA, FB, B, G, O *kernels.Mat
	QConv, KConv, VConv      []float32 // [channels][kernel]
	ALog                     []float32 // [heads] (the checkpoint may pad)
	DtBias                   []float32 // [heads*head_dim]
	ONorm                    []float32 // [head_dim]
}

func (b *binder) kda(a string) *kdaBlock {
	c := b.cfg
	H := c.Hidden
	P := c.KDAHeads * c.KDAHeadDim
	return &kdaBlock{
		Q:      b.mat(a+"q_proj.weight", P, H),
		K:      b.mat(a+"k_proj.weight", P, H),
		V:      b.mat(a+"v_proj.weight", P, H),
		QConv:  b.vec(a+"q_conv1d.weight", []int{P, 1, c.ConvK}, 0),
		KConv:  b.vec(a+"k_conv1d.weight", []int{P, 1, c.ConvK}, 0),
		VConv:  b.vec(a+"v_conv1d.weight", []int{P, 1, c.ConvK}, 0),
		FA:     b.mat(a+"f_a_proj.weight", c.KDAHeadDim, H),
		FB:     b.mat(a+"f_b_proj.weight", P, c.KDAHeadDim),
		B:      b.mat(a+"b_proj.weight", c.KDAHeads, H),
		ALog:   b.vec(a+"A_log", nil, c.KDAHeads),
		DtBias: b.vec(a+"dt_bias", []int{P}, 0),
		ONorm:  b.vec(a+"o_norm.weight", []int{c.KDAHeadDim}, 0),
		G:      b.mat(a+"g_proj.weight", P, H),
		O:      b.mat(a+"o_proj.weight", H, P),
	}
}

// forward runs the block over T consecutive positions, advancing the layer's
// recurrent and convolution state.
func (L *kdaBlock) forward(e *Engine, st *State, li int, x []float32, T int) []float32 {
	s := st.kda[li]
	c := e.m.Cfg
	nh, d, K := c.KDAHeads, c.KDAHeadDim, c.ConvK
	P := nh * d
	q := e.mm(L.Q, x, T)
	k := e.mm(L.K, x, T)
	v := e.mm(L.V, x, T)
	f := e.mm(L.FB, e.mm(L.FA, x, T), T)
	b := e.mm(L.B, x, T)
	g := e.mm(L.G, x, T)
	var rec *kdaRecord
	if st.recording {
		rec = st.record(li, T, P, nh)
		for j, buf := range [3][]float32{q, k, v} {
			copy(rec.raw[j], buf)
		}
	}
	// causal depthwise short convolutions with SiLU, carrying the last K-1 inputs
	e.pool.Each(3, func(j int) {
		buf := [3][]float32{q, k, v}[j]
		w := [3][]float32{L.QConv, L.KConv, L.VConv}[j]
		var at func(t int)
		if c := st.catch; c != nil {
			at = func(t int) { c.convRow(li, j, t, s.conv[j]) }
		}
		shortConv(buf, s.conv[j], w, T, P, K, at)
	})
	o := make([]float32, T*P)
	lb := float64(c.GateLowerBound)
	scale := 1 / math.Sqrt(float64(d))
	e.pool.Each(nh, func(h int) {
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
			beta := kernels.Sigmoid(b[t*nh+h])
			if rec != nil {
				copy(rec.k[t*P+h*d:], kh)
				copy(rec.v[t*P+h*d:], vh)
				copy(rec.a[t*P+h*d:], alpha)
				rec.beta[t*nh+h] = beta
			}
			kdaStep(S, qh, kh, vh, alpha, float64(beta), u, delta, o[t*P+h*d:t*P+(h+1)*d])
			if c := st.catch; c != nil {
				c.kdaHead(li, h, t, S)
			}
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

// kdaDecay writes one head's per-key-channel decay for one position:
// alpha[i] = exp(lb·sigmoid(exp(A_log)·(f[i]+dt_bias[i]))), A_log per head.
func kdaDecay(alpha, f, dtBias []float32, aLog float32, lb float64) {
	aH := math.Exp(float64(aLog))
	for i := range alpha {
		z := aH * (float64(f[i]) + float64(dtBias[i]))
		alpha[i] = float32(math.Exp(lb / (1 + math.Exp(-z))))
	}
}

// shortConv applies the depthwise causal convolution with fused SiLU in
// place to T positions of `ch` channels, updating the carried history;
// at (nil: none) is called after each position's row with its index.
func shortConv(buf, hist, w []float32, T, ch, K int, at func(t int)) {
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
			convPush(hh, cur)
			row[cc] = float32(acc / (1 + math.Exp(-acc)))
		}
		if at != nil {
			at(t)
		}
	}
}

// convPush appends one input to a channel's convolution history (oldest
// first), dropping the oldest.
func convPush(hist []float32, x float32) {
	copy(hist, hist[1:])
	hist[len(hist)-1] = x
}

// kdaStep advances one head's delta-rule state by one position and reads
// it: kdaUpdate, then o = Sᵀq.
func kdaStep(S, q, k, v, alpha []float32, beta float64, u []float64, delta, o []float32) {
	kdaUpdate(S, k, v, alpha, beta, u, delta)
	stateTVec(u, S, q)
	for j := range o {
		o[j] = float32(u[j])
	}
}

// kdaUpdate advances one head's delta-rule state by one position:
// S <- S·diag(alpha) (per key row); u = Sᵀk; S += k·(beta(v-u))ᵀ.
// S is [key i][value j]; every sum runs over i ascending in float64.
// Rewinding a verification pass replays it on recorded inputs.
func kdaUpdate(S, k, v, alpha []float32, beta float64, u []float64, delta []float32) {
	d := len(k)
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
