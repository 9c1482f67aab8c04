package engine

import (
	"math"

	"k3/kernels"
)

// batchSource is an expert source that can pin several experts at once and
// read their misses together (the ExpertStore).
type batchSource interface {
	Acquire(layer int, experts []int) ([]*Expert, error)
	Release(layer int, experts []int)
	MaxPinned() int
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

// moe is the Stable LatentMoE block over T positions: route on the full
// width, run the selected MXFP4 experts in the latent space (each distinct
// expert fetched once for the whole chunk), normalise the weighted
// aggregate, project up, and add the shared experts.
func (e *Engine) moe(L *Layer, x []float32, T int) ([]float32, error) {
	c := e.M.Cfg
	k, lat := c.TopK, c.Latent
	logits := e.mm(L.Router, x, T)
	idx := make([]int, T*k)
	w := make([]float32, T*k)
	for t := 0; t < T; t++ {
		Route(logits[t*c.Experts:(t+1)*c.Experts], L.RouterBias, k, c.Renormalize, c.RoutedScale, idx[t*k:(t+1)*k], w[t*k:(t+1)*k])
	}
	z := e.mm(L.LatDown, x, T)
	// distinct experts in first-seen order, with the (token, slot) pairs using them
	var order []int
	users := map[int][]int{}
	for ts, ex := range idx {
		if _, ok := users[ex]; !ok {
			order = append(order, ex)
		}
		users[ex] = append(users[ex], ts)
	}
	contrib := make([]float32, T*k*lat)
	run := func(ex int, exp *Expert) {
		u := users[ex]
		n := len(u)
		xin := make([]float32, n*lat)
		for i, ts := range u {
			t := ts / k
			copy(xin[i*lat:(i+1)*lat], z[t*lat:(t+1)*lat])
		}
		g := e.mm(&exp.W1, xin, n)
		up := e.mm(&exp.W3, xin, n)
		kernels.SiTUPool(e.Pool, g, g, up, c.SituBeta, c.SituLinearBeta)
		y := e.mm(&exp.W2, g, n)
		for i, ts := range u {
			copy(contrib[ts*lat:(ts+1)*lat], y[i*lat:(i+1)*lat])
		}
	}
	if bs, ok := e.M.Experts.(batchSource); ok {
		// pin as many distinct experts at once as the cache allows
		group := max(1, bs.MaxPinned())
		for i := 0; i < len(order); i += group {
			part := order[i:min(i+group, len(order))]
			exps, err := bs.Acquire(L.Index, part)
			if err != nil {
				return nil, err
			}
			for j, ex := range part {
				run(ex, exps[j])
			}
			bs.Release(L.Index, part)
		}
	} else {
		for _, ex := range order {
			exp, err := e.M.Experts.Get(L.Index, ex)
			if err != nil {
				return nil, err
			}
			run(ex, exp)
		}
	}
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
			kernels.RMSNorm(row, row, L.LatNorm, c.RMSEps)
		}
	}
	out := e.mm(L.LatUp, agg, T)
	if L.ShGate != nil {
		sg := e.mm(L.ShGate, x, T)
		su := e.mm(L.ShUp, x, T)
		kernels.SiTUPool(e.Pool, sg, sg, su, c.SituBeta, c.SituLinearBeta)
		f32add(out, e.mm(L.ShDown, sg, T))
	}
	return out, nil
}
