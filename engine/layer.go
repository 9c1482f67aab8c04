package engine

import "k3/kernels"

// Layer is one decoder layer: its norms and Attention-Residual folds, an
// attention block (KDA or gated MLA) and an MLP block (dense or MoE).
type Layer struct {
	Index    int
	InNorm   []float32
	PostNorm []float32
	AttnFold []float32 // self_attention_res_norm ⊙ self_attention_res_proj
	MLPFold  []float32 // mlp_res_norm ⊙ mlp_res_proj
	Attn     attention
	MLP      mlpBlock
	// MLPFrom is where, in the run the layer was bound from, the MLP's
	// matrices begin: none of them lies below it. Once attention has run,
	// a streamed layer gives back the part of its run before the MLP
	// (trunkStream.trim) after checking this; the norms and folds are
	// copies and stay valid.
	MLPFrom int64
}

// attention is a layer's token mixer: it reads and advances the layer's
// part of the decoding state.
type attention interface {
	forward(e *Engine, s *State, li int, x []float32, T int) []float32
}

// mlpBlock is a layer's channel mixer.
type mlpBlock interface {
	forward(e *Engine, x []float32, T int) ([]float32, error)
}

// step runs the layer over T positions. P is the running sum of sub-layer
// outputs since the last block boundary and blocks the completed block
// snapshots; both come back updated (there is no plain residual add: each
// sub-layer's input is an AttnRes mixture). hIn and x are T*H scratch.
func (L *Layer) step(e *Engine, s *State, P []float32, blocks [][]float32, hIn, x []float32, T int) ([]float32, [][]float32, error) {
	c := e.m.Cfg
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
	a := L.Attn.forward(e, s, L.Index, x, T)
	e.layers.trim(L.Index)
	if P == nil {
		P = a
	} else {
		f32add(P, a)
	}
	attnResMix(hIn, P, blocks, L.MLPFold, H, T, c.RMSEps)
	for t := 0; t < T; t++ {
		kernels.RMSNorm(x[t*H:(t+1)*H], hIn[t*H:(t+1)*H], L.PostNorm, c.RMSEps)
	}
	mo, err := L.MLP.forward(e, x, T)
	if err != nil {
		return nil, nil, err
	}
	f32add(P, mo)
	return P, blocks, nil
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

func f32add(dst, a []float32) {
	a = a[:len(dst)]
	for i := range dst {
		dst[i] += a[i]
	}
}
