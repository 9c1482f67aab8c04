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
// and the AttnRes block stack (H floats each); within a sub-layer, the
// largest of the blocks' buffers: KDA's q, k, v, decay, gate and output
// (7 KDA widths), MLA's query, latent and per-head values, the dense MLP's
// three intermediates, or the MoE block's router logits, routing, latent
// input, each pick's latent output (k latent widths, summed in slot order
// once all experts have run) and the scratch its routed experts run in one
// after another (2 latent + 2 intermediate widths: an expert takes at most
// one row per position), plus the shared experts. A layer's buffers
// become garbage when the next one starts, so two layers' worth are
// counted. MLA attention computes one query row (one position and
// head) at a time per worker over the whole context: its score row is
// float64, workers x positions x 8 bytes, whatever the chunk.
func PrefillFor(c *config.Config, layers, positions, workers int) PrefillCost {
	H := int64(c.Hidden)
	blocks := int64((layers + max(c.AttnResBlock, 1) - 1) / max(c.AttnResBlock, 1))
	resident := H * (blocks + 5)
	var peak int64
	for i := 0; i < layers; i++ {
		peak = max(peak, attnFloats(c, i), mlpFloats(c, i))
	}
	held := 2 * peak
	w := int64(c.KVLoraRank + c.QKRope)
	// the batched mat-mul's scratch: its input widened to float64 (the
	// widest input: a block's output projection, the shared experts' down
	// projection) and, per worker, float64 accumulators for a panel of
	// rows x 8 lanes per position (kernels/batch_amd64.go: 48 rows); the
	// dense MLP's down projection (the widest input of all) widens
	// DenseDownGroup positions at a time, whatever the chunk
	widest := int64(max(c.KDAHeads*c.KDAHeadDim, c.Heads*c.VHead, c.SharedExperts*c.MoEInter, c.Hidden, c.Latent))
	mm := 8*(widest+8) + int64(max(workers, 1))*matMulPanelBytes
	var dense int64
	if c.FirstKDense > 0 && layers > 0 {
		dense = 8 * int64(c.Intermediate+8) * DenseDownGroup
	}
	return PrefillCost{PerPos: 4*(resident+held) + mm,
		Fixed: int64(max(workers, 1))*(8*int64(max(positions, 1))+4*(w+int64(c.KVLoraRank))) + dense}
}

// DenseDownGroup is how many positions the dense MLP's down projection
// takes at a time (engine: denseMLP.forward): its input, the intermediate,
// is the model's widest, and the batched mat-mul widens it to float64
// (270 KB a position at K3 size, 17 MB for a 64-position chunk at once).
// By 8 it is 2.2 MB, and the 0.48 GB matrix (in RAM: the ring or the
// pinned trunk) is read eight times per 64-position chunk instead of once;
// no disk read changes.
const DenseDownGroup = 8

// attnFloats are the floats per position layer i's attention block holds
// while it runs (PrefillFor).
func attnFloats(c *config.Config, i int) int64 {
	H := int64(c.Hidden)
	if c.IsMLA(i) {
		nh := int64(c.Heads)
		return int64(c.QLoraRank) + nh*int64(c.QKNope+c.QKRope) + int64(c.KVLoraRank+c.QKRope) + 2*nh*int64(c.VHead) + H
	}
	return 7*int64(c.KDAHeads*c.KDAHeadDim) + int64(c.KDAHeads) + H
}

// mlpFloats are the floats per position layer i's MLP block holds while it
// runs (PrefillFor).
func mlpFloats(c *config.Config, i int) int64 {
	H := int64(c.Hidden)
	if c.IsDense(i) {
		return 3*int64(c.Intermediate) + H
	}
	k, lat, mi := int64(c.TopK), int64(c.Latent), int64(c.MoEInter)
	return int64(c.Experts) + 3*k + 2*lat + k*lat + (2*lat + 2*mi) + 2*H + 2*int64(c.SharedExperts)*mi
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
