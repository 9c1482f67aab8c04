package engine

import "k3/kernels"

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

func (d *denseMLP) forward(e *Engine, x []float32, T int) ([]float32, error) {
	c := e.m.Cfg
	g := e.mm(d.Gate, x, T)
	u := e.mm(d.Up, x, T)
	kernels.SiTUPool(e.pool, g, g, u, c.SituBeta, c.SituLinearBeta)
	return e.mm(d.Down, g, T), nil
}
