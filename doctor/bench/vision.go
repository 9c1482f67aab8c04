package bench

import (
	"context"
	"time"

	"k3/doctor/measure"
	"k3/engine/vision"
	"k3/kernels"
)

// VisionRow is one picture size through the vision tower at the released
// width (random weights, the released shapes): `k3 bench vision`.
type VisionRow struct {
	Width     int     `json:"width"`
	Height    int     `json:"height"`
	Patches   int     `json:"patches"`
	Tokens    int     `json:"tokens"` // prompt positions the picture takes
	Seconds   float64 `json:"seconds"`
	GFlops    float64 `json:"gflops"`     // achieved, counting the tower's matrix and attention work
	Roofline  float64 `json:"roofline"`   // the float64 FMA peak of the same threads, GFLOP/s
	Fraction  float64 `json:"fraction"`   // GFlops / Roofline
	WorkBytes int64   `json:"work_bytes"` // the tower's working memory for this picture
}

// Vision times the released tower on pictures of the given sizes (each
// resized as the processor would) with threads threads (0: physical
// cores, as the engine).
func Vision(ctx context.Context, sizes [][2]int, threads int) ([]VisionRow, error) {
	c := vision.Released()
	t := vision.Random(c, 1)
	p := kernels.NewPool(threads)
	defer p.Close()
	roof := measure.FMARoofline(p.Threads(), 300*time.Millisecond)
	var rows []VisionRow
	for _, s := range sizes {
		rz := vision.NavitResize(s[0], s[1], c.Patch, c.MergeH, vision.InPatchLimit, vision.SideLimit)
		px := make([]float32, rz.Grid.Patches()*c.PatchDim())
		for i := range px {
			px[i] = float32(i%255)/127 - 1
		}
		t0 := time.Now()
		if _, err := t.Embed(ctx, p, px, rz.Grid); err != nil {
			return rows, err
		}
		sec := time.Since(t0).Seconds()
		k := c.CostOf(rz.Grid)
		r := VisionRow{Width: s[0], Height: s[1], Patches: k.Patches, Tokens: k.Tokens, Seconds: sec,
			GFlops: k.Flops / sec / 1e9, Roofline: roof, WorkBytes: k.WorkBytes}
		if roof > 0 {
			r.Fraction = r.GFlops / roof
		}
		rows = append(rows, r)
	}
	return rows, nil
}
