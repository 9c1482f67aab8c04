package engine

import (
	"math"
	"time"

	"k3/kernels"
)

// moeBlock is the Stable LatentMoE block: a router on the full width, routed
// MXFP4 experts that run in a smaller latent space (their weights come from
// the expert store, not the trunk), and shared experts on the full width.
type moeBlock struct {
	layer                int
	Router               *kernels.Mat
	RouterBias           []float32
	LatDown, LatUp       *kernels.Mat
	LatNorm              []float32 // nil without routed_expert_norm
	ShGate, ShUp, ShDown *kernels.Mat
}

func (b *binder) moe(li int, f string) *moeBlock {
	c := b.cfg
	H := c.Hidden
	L := &moeBlock{
		layer:      li,
		Router:     b.mat(f+"gate.weight", c.Experts, H),
		RouterBias: b.vec(f+"gate.e_score_correction_bias", []int{c.Experts}, 0),
		LatDown:    b.mat(f+"routed_expert_down_proj.weight", c.Latent, H),
		LatUp:      b.mat(f+"routed_expert_up_proj.weight", H, c.Latent),
	}
	if c.LatentNorm {
		L.LatNorm = b.vec(f+"routed_expert_norm.weight", []int{c.Latent}, 0)
	}
	if c.SharedExperts > 0 {
		w := c.SharedExperts * c.MoEInter
		L.ShGate = b.mat(f+"shared_experts.gate_proj.weight", w, H)
		L.ShUp = b.mat(f+"shared_experts.up_proj.weight", w, H)
		L.ShDown = b.mat(f+"shared_experts.down_proj.weight", H, w)
	}
	return L
}

// Route picks the top-k experts of one token: selection by sigmoid score plus
// the correction bias, weights from the unbiased scores, renormalised and
// scaled. Ties go to the lowest expert id; results are in selection order.
func Route(logits, bias []float32, topk int, renorm bool, scale float32, idx []int, w []float32) {
	E := len(logits)
	score := make([]float32, E)
	choice := make([]float32, E)
	for i, l := range logits {
		score[i] = kernels.Sigmoid(l)
		choice[i] = score[i] + bias[i]
	}
	for j := 0; j < topk; j++ {
		best := -1
		for i := 0; i < E; i++ {
			if !math.IsInf(float64(choice[i]), -1) && (best < 0 || choice[i] > choice[best]) {
				best = i
			}
		}
		idx[j] = best
		w[j] = score[best]
		choice[best] = float32(math.Inf(-1))
	}
	sum := 0.0
	for j := 0; j < topk; j++ {
		sum += float64(w[j])
	}
	for j := 0; j < topk; j++ {
		v := float64(w[j])
		if renorm {
			v /= sum + 1e-20
		}
		w[j] = float32(v * float64(scale))
	}
}

// forward runs the block over T positions: route, run the selected experts
// in the latent space (each distinct expert fetched once for the whole
// chunk, computed while the others are read), normalise the weighted aggregate, project up, add the shared
// experts.
func (L *moeBlock) forward(e *Engine, x []float32, T int) ([]float32, error) {
	c := e.m.Cfg
	k, lat := c.TopK, c.Latent
	logits := e.mm(L.Router, x, T)
	idx := make([]int, T*k)
	w := make([]float32, T*k)
	for t := 0; t < T; t++ {
		Route(logits[t*c.Experts:(t+1)*c.Experts], L.RouterBias, k, c.Renormalize, c.RoutedScale, idx[t*k:(t+1)*k], w[t*k:(t+1)*k])
	}
	z := e.mm(L.LatDown, x, T)
	order, users := expertUsers(idx)
	contrib := make([]float32, T*k*lat)
	// the store runs each expert as soon as it is resident, holding as
	// many at once as the cache allows (ExpertStore.Each): each writes
	// only its own rows of contrib, and the sum below goes in slot order,
	// so neither the order in which reads land nor the cache's size
	// changes anything
	g := newGather(T, lat, c.MoEInter)
	err := e.m.experts.Each(L.layer, order, func(j int, exp *Expert) {
		if e.expertSeconds == nil {
			runExpert(e, exp, users[order[j]], z, contrib, g)
			return
		}
		t0 := time.Now()
		runExpert(e, exp, users[order[j]], z, contrib, g)
		e.expertSeconds[L.layer] += time.Since(t0).Seconds()
	})
	if err != nil {
		return nil, err
	}
	agg := L.combine(contrib, w, T, k, lat, c.RMSEps)
	out := e.mm(L.LatUp, agg, T)
	if L.ShGate != nil {
		sg := e.mm(L.ShGate, x, T)
		su := e.mm(L.ShUp, x, T)
		kernels.SiTUPool(e.pool, sg, sg, su, c.SituBeta, c.SituLinearBeta)
		f32add(out, e.mm(L.ShDown, sg, T))
	}
	return out, nil
}

// expertUsers is the distinct experts of idx (one per token and slot) in
// first-seen order, with the token-slot indices using each.
func expertUsers(idx []int) (order []int, users map[int][]int) {
	users = map[int][]int{}
	for ts, ex := range idx {
		if _, ok := users[ex]; !ok {
			order = append(order, ex)
		}
		users[ex] = append(users[ex], ts)
	}
	return order, users
}

// gather is the scratch the routed experts of one MoE pass run in, one
// after another (ExpertStore.Each calls them in turn): an expert takes at
// most one row per position (a token picks an expert once), so T rows of
// its latent input, its gate and up intermediates and its output serve
// every expert of the pass, instead of buffers of their own for each of
// the top-k picks of every position. The values are the same: each
// mat-mul writes every element of its rows from the same inputs.
type gather struct{ xin, gate, up, y []float32 }

func newGather(T, lat, inter int) *gather {
	return &gather{xin: make([]float32, T*lat), gate: make([]float32, T*inter), up: make([]float32, T*inter), y: make([]float32, T*lat)}
}

// runExpert runs the routed expert exp on the latent rows z of the tokens
// whose token-slot indices are u, in the scratch g, writing each slot's
// output to its own row of contrib.
func runExpert(e *Engine, exp *Expert, u []int, z, contrib []float32, g *gather) {
	c := e.m.Cfg
	k, lat, inter := c.TopK, c.Latent, c.MoEInter
	n := len(u)
	if n*lat > len(g.xin) {
		*g = *newGather(n, lat, inter) // a token picking an expert twice: not from Route
	}
	xin, gate, up, y := g.xin[:n*lat], g.gate[:n*inter], g.up[:n*inter], g.y[:n*lat]
	for i, ts := range u {
		t := ts / k
		copy(xin[i*lat:(i+1)*lat], z[t*lat:(t+1)*lat])
	}
	kernels.MatMul(e.pool, gate, &exp.W1, xin, n)
	kernels.MatMul(e.pool, up, &exp.W3, xin, n)
	kernels.SiTUPool(e.pool, gate, gate, up, c.SituBeta, c.SituLinearBeta)
	kernels.MatMul(e.pool, y, &exp.W2, gate, n)
	for i, ts := range u {
		copy(contrib[ts*lat:(ts+1)*lat], y[i*lat:(i+1)*lat])
	}
}

// combine sums each token's k expert outputs, weighted by w, in float64
// and in slot order (so the order the experts ran in changes nothing),
// then applies the latent norm when the block has one.
func (L *moeBlock) combine(contrib, w []float32, T, k, lat int, eps float32) []float32 {
	agg := make([]float32, T*lat)
	acc := make([]float64, lat)
	for t := 0; t < T; t++ {
		clear(acc)
		for j := 0; j < k; j++ {
			wj := float64(w[t*k+j])
			for i, v := range contrib[(t*k+j)*lat : (t*k+j+1)*lat] {
				acc[i] += wj * float64(v)
			}
		}
		row := agg[t*lat : (t+1)*lat]
		for i := range row {
			row[i] = float32(acc[i])
		}
		if L.LatNorm != nil {
			kernels.RMSNorm(row, row, L.LatNorm, eps)
		}
	}
	return agg
}
