package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// attnCase is a cache of n rows of width w at the given stride, with
// special values, and a query of width w.
func attnCase(r *rand.Rand, n, w, stride int) (rows, x []float32) {
	rows = specialVec(r, max(n*stride, 1))
	x = specialVec(r, w)
	return rows, x
}

// TestMatVec64 compares the scores with DotF64 row by row, bit for bit, at
// every level, over row counts around the 8 (4) rows in flight and widths
// that leave every tail.
func TestMatVec64(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 7))
	for _, lvl := range append([]Level{LevelPortable}, simdLevels(t)...) {
		withLevel(lvl, func() {
			for _, n := range []int{0, 1, 3, 4, 7, 8, 9, 16, 17, 45} {
				for _, w := range []int{0, 1, 7, 8, 9, 31, 64, 65, 576} {
					rows, x := attnCase(r, n, w, w)
					m := Mat{DType: F32, Rows: n, Cols: w, F32: rows[:n*w]}
					got := make([]float64, n)
					for s := range got {
						got[s] = 7 // must be overwritten
					}
					MatVec64(got, &m, x)
					for s := range got {
						want := DotF64(x, rows[s*w:s*w+w])
						if math.Float64bits(got[s]) != math.Float64bits(want) && !(got[s] != got[s] && want != want) {
							t.Fatalf("%v n=%d w=%d row %d: %v, want %v", lvl, n, w, s, got[s], want)
						}
					}
				}
			}
		})
	}
}

// weightedRowsRef is WeightedRows written out: float64 sums from +0 over
// the rows in order, each product rounded before the add.
func weightedRowsRef(m int, p []float64, rows []float32, stride int) []float32 {
	out := make([]float32, m)
	for j := range out {
		acc := 0.0
		for s, ps := range p {
			acc += float64(ps * float64(rows[s*stride+j]))
		}
		out[j] = float32(acc)
	}
	return out
}

// TestWeightedRows compares every level with the written-out sum, bit for
// bit, over output widths that hit the 64/8 (32/4) blocks and the tail, and
// probabilities from a real softmax (plus a case of raw special weights).
func TestWeightedRows(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 3))
	for _, lvl := range append([]Level{LevelPortable}, simdLevels(t)...) {
		withLevel(lvl, func() {
			for _, n := range []int{0, 1, 2, 5, 33, 200} {
				for _, m := range []int{1, 3, 4, 7, 8, 9, 31, 32, 63, 64, 65, 100, 512} {
					stride := m + r.IntN(70)
					rows, _ := attnCase(r, n, m, stride)
					p := make([]float64, n)
					for s := range p {
						p[s] = r.NormFloat64() * 4
					}
					if n%2 == 1 {
						Softmax64(p)
					} else {
						for s := range p {
							p[s] = float64(specialF32(r))
						}
					}
					got := make([]float32, m)
					for j := range got {
						got[j] = 12345 // must be overwritten
					}
					WeightedRows(got, p, rows, stride)
					want := weightedRowsRef(m, p, rows, stride)
					for j := range got {
						if !same(got[j], want[j]) {
							t.Fatalf("%v n=%d m=%d output %d: %v, want %v", lvl, n, m, j, got[j], want[j])
						}
					}
				}
			}
		})
	}
}

// TestAttnEmpty: no rows (or an empty query) give +0, not a panic.
func TestAttnEmpty(t *testing.T) {
	for _, lvl := range append([]Level{LevelPortable}, simdLevels(t)...) {
		withLevel(lvl, func() {
			out := []float32{5, 5, 5, 5, 5, 5, 5, 5, 5}
			WeightedRows(out, nil, nil, 9)
			sc := []float64{5, 5, 5, 5, 5, 5, 5, 5, 5}
			MatVec64(sc, &Mat{DType: F32, Rows: len(sc)}, nil)
			for i := range out {
				if math.Float32bits(out[i]) != 0 || math.Float64bits(sc[i]) != 0 {
					t.Fatalf("%v: %v %v", lvl, out, sc)
				}
			}
		})
	}
}

// BenchmarkMatVec64 is one MLA head's scores over a 4096-position cache.
func BenchmarkMatVec64(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	rows, x := attnCase(r, 4096, 576, 576)
	m := Mat{DType: F32, Rows: 4096, Cols: 576, F32: rows}
	dst := make([]float64, 4096)
	b.SetBytes(int64(len(rows) * 4))
	for b.Loop() {
		MatVec64(dst, &m, x)
	}
}

// BenchmarkWeightedRows is one MLA head's value sum over a 4096-position
// cache (512 of each 576-float row).
func BenchmarkWeightedRows(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	rows, _ := attnCase(r, 4096, 576, 576)
	p := make([]float64, 4096)
	for i := range p {
		p[i] = r.Float64()
	}
	dst := make([]float32, 512)
	b.SetBytes(4096 * 512 * 4)
	for b.Loop() {
		WeightedRows(dst, p, rows, 576)
	}
}
