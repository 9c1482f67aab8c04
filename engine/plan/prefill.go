package plan

import (
	"fmt"

	"k3/storage/config"
	"k3/storage/units"
)

// MinChunk is the shortest prefill chunk a plan chosen by memory accepts:
// a plan that cannot read 64 prompt positions per pass is refused (a
// shorter forced --chunk is still run as asked).
const MinChunk = 64

// matMulPanelBytes are the float64 accumulators one worker of the batched
// mat-mul keeps per position: 48 rows x 8 lanes x 8 bytes.
const matMulPanelBytes = 48 * 8 * 8

// MaxChunk bounds a forced prefill chunk: longer than any context a
// model of this family is run with.
const MaxChunk = 1 << 20

// NoChunkCap is the longest chunk chosen when neither the memory nor the
// context is known.
const NoChunkCap = MinChunk

// PrefillCost is what reading a prompt takes per chunk: PerPos bytes for
// every position of a chunk (the activations and the MoE gather buffers
// of one layer's pass over it) and Fixed bytes whatever its length (the
// attention's per-worker score rows).
type PrefillCost struct {
	PerPos int64
	Fixed  int64
}

// Bytes is the memory of a chunk of n positions.
func (c PrefillCost) Bytes(n int) int64 {
	if n <= 0 {
		return 0
	}
	return c.Fixed + int64(n)*c.PerPos
}

// PrefillFor is the prefill memory of a forward over the first `layers`
// layers of a model with config c, at a context of positions, with
// workers threads computing attention rows at once.
//
// Per position of a chunk the forward holds, across layers, the running
// sum, the sub-layer input and its norm, the attention and MLP outputs
// and the AttnRes block stack (H floats each); within a layer, the
// largest of the blocks' buffers: KDA's q, k, v, decay, gate and output
// (7 KDA widths), MLA's query, latent and per-head values, the dense MLP's
// three intermediates, or the MoE block's router logits, routing, latent
// input and the gather buffers of its routed experts (each of a
// position's top-k picks is copied into its expert's input, expanded to
// the gate and up widths and copied out: 2 latent + 2 intermediate widths
// each, and a latent width of contributions), plus the shared experts. A
// layer's buffers become garbage when the next one starts, so two layers'
// worth are counted. MLA attention computes one query row (one position
// and head) at a time per worker over the whole context: its score row is
// float64, workers x positions x 8 bytes, whatever the chunk.
func PrefillFor(c *config.Config, layers, positions, workers int) PrefillCost {
	H := int64(c.Hidden)
	P := int64(c.KDAHeads * c.KDAHeadDim)
	blocks := int64((layers + max(c.AttnResBlock, 1) - 1) / max(c.AttnResBlock, 1))
	resident := H * (blocks + 5)
	var peak int64
	for i := 0; i < layers; i++ {
		var attn, mlp int64
		if c.IsMLA(i) {
			nh := int64(c.Heads)
			attn = int64(c.QLoraRank) + nh*int64(c.QKNope+c.QKRope) + int64(c.KVLoraRank+c.QKRope) + 2*nh*int64(c.VHead) + H
		} else {
			attn = 7*P + int64(c.KDAHeads) + H
		}
		if c.IsDense(i) {
			mlp = 3*int64(c.Intermediate) + H
		} else {
			k, lat, mi := int64(c.TopK), int64(c.Latent), int64(c.MoEInter)
			mlp = int64(c.Experts) + 3*k + 2*lat + k*lat + k*(2*lat+2*mi) + 2*H + 2*int64(c.SharedExperts)*mi
		}
		peak = max(peak, attn, mlp)
	}
	w := int64(c.KVLoraRank + c.QKRope)
	// the batched mat-mul's scratch: its input widened to float64 (the
	// widest input: the dense MLP's down projection or a block's output
	// projection) and, per worker, float64 accumulators for a panel of
	// rows x 8 lanes per position (kernels/batch_amd64.go: 48 rows)
	widest := int64(max(c.Intermediate, c.KDAHeads*c.KDAHeadDim, c.Heads*c.VHead, c.SharedExperts*c.MoEInter, c.Hidden, c.Latent))
	mm := 8*(widest+8) + int64(max(workers, 1))*matMulPanelBytes
	return PrefillCost{PerPos: 4*(resident+2*peak) + mm,
		Fixed: int64(max(workers, 1)) * (8*int64(max(positions, 1)) + 4*(w+int64(c.KVLoraRank)))}
}

// FitChunk is the longest prefill chunk, at most most positions (at least
// MinChunk), whose plan fits in limit bytes, in whole multiples of
// MinChunk unless it is most itself. Without a limit (<= 0) it is most.
// It fails when not even MinChunk positions fit (or most of them, when
// most is shorter), saying how much a chunk takes.
func FitChunk(in Inputs, limit int64, most int) (int, error) {
	most = max(most, 1)
	if limit <= 0 {
		return most, nil
	}
	low := min(most, MinChunk)
	at := func(n int) int64 {
		in.Chunk = n
		return Make(in).Total
	}
	if at(low) > limit {
		return 0, fmt.Errorf("the memory plan cannot read even %d prompt positions per pass: it needs %s with them (%s for the prompt's activations) but only %s may be planned",
			low, units.Bytes(at(low)), units.Bytes(in.Prefill.Bytes(low)), units.Bytes(limit))
	}
	if at(most) <= limit {
		return most, nil
	}
	// the total grows by PerPos a position: the longest fitting chunk,
	// rounded down to whole MinChunks (never below low)
	n := low
	if per := in.Prefill.PerPos; per > 0 {
		n = low + int((limit-at(low))/per)
	}
	n = max(low, min(n/MinChunk*MinChunk, most))
	for n > low && at(n) > limit {
		n -= MinChunk
	}
	return max(n, low), nil
}

// prefillLine renders the plan's prefill part.
func (p *Plan) prefillLine() string {
	if p.Chunk <= 0 {
		return ""
	}
	why := ""
	if p.ChunkWhy != "" {
		why = ", " + p.ChunkWhy
	}
	return fmt.Sprintf("  prompt reading %10s  (%d positions per pass%s)\n", units.Bytes(p.Prefill), p.Chunk, why)
}

// How a plan's chunk was chosen (Inputs.ChunkWhy).
const (
	ChunkForced  = "forced (--chunk)"
	ChunkMemory  = "the longest the memory holds"
	ChunkContext = "the whole context"
)
