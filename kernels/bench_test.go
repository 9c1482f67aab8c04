package kernels

import (
	"fmt"
	"testing"
)

// Go benchmarks of each kernel on one matrix (it may sit in L3: the DRAM
// figures come from `k3 bench kernels`, which cycles >1 GiB of copies).
func benchMatMul(b *testing.B, dt DType, rows, cols, T, threads int) {
	m := benchMat(dt, rows, cols)
	x := make([]float32, T*cols)
	for i := range x {
		x[i] = float32(i%13-6) * 0.25
	}
	dst := make([]float32, T*rows)
	p := NewPool(threads)
	defer p.Close()
	b.SetBytes(m.Bytes())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		MatMul(p, dst, m, x, T)
	}
	b.ReportMetric(2*float64(rows)*float64(cols)*float64(T)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// benchMat is a rows x cols matrix of plausible weights: small normal
// values, MXFP4 with arbitrary codes and E8M0 scales 118..125.
func benchMat(dt DType, rows, cols int) *Mat {
	m := &Mat{DType: dt, Rows: rows, Cols: cols}
	n := rows * cols
	switch dt {
	case F32:
		m.F32 = make([]float32, n)
		for i := range m.F32 {
			m.F32[i] = float32(i%29-14) / 64
		}
	case BF16:
		m.BF16 = make([]uint16, n)
		for i := range m.BF16 {
			m.BF16[i] = F32ToBF16(float32(i%29-14) / 64)
		}
	default:
		m.Packed, m.Scales = make([]byte, n/2), make([]byte, n/MXGroup)
		for i := range m.Packed {
			m.Packed[i] = byte(i*37 + i>>7)
		}
		for i := range m.Scales {
			m.Scales[i] = 118 + byte(i&7)
		}
	}
	return m
}

func BenchmarkMatMul(b *testing.B) {
	for _, lv := range Levels() {
		for _, c := range []struct {
			dt         DType
			rows, cols int
		}{{BF16, 1024, 7168}, {F32, 512, 7168}, {MXFP4, 1024, 3584}} {
			for _, T := range []int{1, 8, 32} {
				b.Run(fmt.Sprintf("%v/%v/%dx%d/T%d", lv, c.dt, c.rows, c.cols, T), func(b *testing.B) {
					prev := SetLevel(lv)
					defer SetLevel(prev)
					benchMatMul(b, c.dt, c.rows, c.cols, T, 1)
				})
			}
		}
	}
}

func BenchmarkDotF32(b *testing.B) {
	w := make([]float32, 7168)
	x := make([]float32, 7168)
	for i := range w {
		w[i], x[i] = float32(i%7), float32(i%5)
	}
	for _, lv := range []Level{LevelPortable, BestLevel()} {
		b.Run(lv.String(), func(b *testing.B) {
			prev := SetLevel(lv)
			defer SetLevel(prev)
			b.SetBytes(8 * 7168)
			for i := 0; i < b.N; i++ {
				DotF64(w, x)
			}
		})
	}
}

func BenchmarkMatTVec(b *testing.B) {
	w := make([]uint16, 512*1024)
	for i := range w {
		w[i] = F32ToBF16(float32(i%9) * 0.1)
	}
	m := &Mat{DType: BF16, Rows: 512, Cols: 1024, BF16: w}
	x := make([]float32, 512)
	dst := make([]float32, 1024)
	for _, lv := range []Level{LevelPortable, BestLevel()} {
		b.Run(lv.String(), func(b *testing.B) {
			prev := SetLevel(lv)
			defer SetLevel(prev)
			b.SetBytes(m.Bytes())
			for i := 0; i < b.N; i++ {
				MatTVec(dst, m, 0, 0, x)
			}
		})
	}
}

func BenchmarkAttnRes(b *testing.B) {
	srcs := make([][]float32, 8)
	for j := range srcs {
		srcs[j] = make([]float32, 7168)
		for i := range srcs[j] {
			srcs[j][i] = float32((i+j)%11) * 0.1
		}
	}
	fold := make([]float32, 7168)
	dst := make([]float32, 7168)
	for _, lv := range []Level{LevelPortable, BestLevel()} {
		b.Run(lv.String(), func(b *testing.B) {
			prev := SetLevel(lv)
			defer SetLevel(prev)
			for i := 0; i < b.N; i++ {
				AttnRes(dst, srcs, fold, 1e-6)
			}
		})
	}
}

// BenchmarkSiTU is one routed expert's activation (3072 values).
func BenchmarkSiTU(b *testing.B) {
	g, u, d := make([]float32, 3072), make([]float32, 3072), make([]float32, 3072)
	for i := range g {
		g[i], u[i] = float32(i%97-48)*0.1, float32(i%89-44)*0.1
	}
	for b.Loop() {
		SiTU(d, g, u, 4, 8)
	}
}

// BenchmarkSiTUPool is BenchmarkSiTU on a pool of the physical cores.
func BenchmarkSiTUPool(b *testing.B) {
	g, u, d := make([]float32, 3072), make([]float32, 3072), make([]float32, 3072)
	for i := range g {
		g[i], u[i] = float32(i%97-48)*0.1, float32(i%89-44)*0.1
	}
	p := NewPool(0)
	defer p.Close()
	for b.Loop() {
		SiTUPool(p, d, g, u, 4, 8)
	}
}
