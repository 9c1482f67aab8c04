package engine

import (
	"k3/engine/plan"
	"k3/kernels"
)

// denseMLP is the SiTU-GLU MLP of the first layers.
type denseMLP struct {
	Gate, Up, Down *kernels.Mat
}

func (b *binder) dense(p string) *denseMLP {
	c := b.cfg
	return &denseMLP{
		Gate: b.mat(p+"gate_proj.weight", c.Intermediate, c.Hidden),
		Up:   b.mat(p+"up_proj.weight", c.Intermediate, c.Hidden),
		Down: b.mat(p+"down_proj.weight", c.Hidden, c.Intermediate),
	}
}

// forward runs the MLP over T positions. The down projection's input is
// the widest of the model (the intermediate, 33,792 at K3 size), which the
// batched mat-mul widens to float64 for the positions it is given (270 KB
// a position at K3 size): it is given plan.DenseDownGroup positions at a
// time, so a prompt chunk does not widen the whole chunk's at once. Each
// position's output is the same bits whatever the positions fed with it
// (kernels/doc.go); the matrix, in RAM, is read once a group.
func (d *denseMLP) forward(e *Engine, x []float32, T int) ([]float32, error) {
	c := e.m.Cfg
	g := e.mm(d.Gate, x, T)
	u := e.mm(d.Up, x, T)
	kernels.SiTUPool(e.pool, g, g, u, c.SituBeta, c.SituLinearBeta)
	out := make([]float32, T*d.Down.Rows)
	for t0 := 0; t0 < T; t0 += plan.DenseDownGroup {
		n := min(plan.DenseDownGroup, T-t0)
		kernels.MatMul(e.pool, out[t0*d.Down.Rows:(t0+n)*d.Down.Rows], d.Down, g[t0*d.Down.Cols:(t0+n)*d.Down.Cols], n)
	}
	return out, nil
}
