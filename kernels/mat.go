package kernels

import "fmt"

// DType names a weight storage type.
type DType uint8

// Weight storage types.
const (
	F32 DType = iota
	BF16
	MXFP4
	BF16C // lossless compressed bf16 (bf16c.go)
)

func (d DType) String() string {
	switch d {
	case F32:
		return "f32"
	case BF16:
		return "bf16"
	case MXFP4:
		return "mxfp4"
	case BF16C:
		return "bf16c"
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Mat is a row-major weight matrix [Rows][Cols] in one of the storage types.
// Exactly one of F32, BF16, Packed+Scales or Z+ZOff is set.
type Mat struct {
	DType      DType
	Rows, Cols int
	F32        []float32
	BF16       []uint16
	Packed     []byte   // MXFP4: Rows x Cols/2, low nibble = even element
	Scales     []byte   // MXFP4: Rows x Cols/32, E8M0
	Z          []byte   // BF16C: the rows (bf16c.go)
	ZOff       []uint64 // BF16C: Rows+1 row offsets into Z, relative to ZOff[0]
}

// Bytes is the storage size of the matrix.
func (m *Mat) Bytes() int64 {
	switch m.DType {
	case F32:
		return int64(m.Rows) * int64(m.Cols) * 4
	case BF16:
		return int64(m.Rows) * int64(m.Cols) * 2
	case BF16C:
		return BF16CSize(m.Rows, int64(len(m.Z)))
	default:
		return int64(m.Rows) * int64(m.Cols/2+m.Cols/MXGroup)
	}
}

// Check verifies the backing slices match the shape.
func (m *Mat) Check() error {
	n := m.Rows * m.Cols
	switch m.DType {
	case F32:
		if len(m.F32) != n {
			return fmt.Errorf("f32 matrix %dx%d has %d values", m.Rows, m.Cols, len(m.F32))
		}
	case BF16:
		if len(m.BF16) != n {
			return fmt.Errorf("bf16 matrix %dx%d has %d values", m.Rows, m.Cols, len(m.BF16))
		}
	case MXFP4:
		if m.Cols%MXGroup != 0 {
			return fmt.Errorf("mxfp4 matrix width %d is not a multiple of %d", m.Cols, MXGroup)
		}
		if len(m.Packed) != m.Rows*m.Cols/2 || len(m.Scales) != m.Rows*m.Cols/MXGroup {
			return fmt.Errorf("mxfp4 matrix %dx%d has %d packed and %d scale bytes", m.Rows, m.Cols, len(m.Packed), len(m.Scales))
		}
	case BF16C:
		return m.checkBF16C()
	default:
		return fmt.Errorf("unknown dtype %v", m.DType)
	}
	return nil
}

// RowDot is the contract dot product of row r with x (len(x) == Cols).
func (m *Mat) RowDot(r int, x []float32) float32 {
	c := m.Cols
	switch m.DType {
	case F32:
		return DotF32(m.F32[r*c:(r+1)*c], x)
	case BF16:
		return DotBF16(m.BF16[r*c:(r+1)*c], x)
	case BF16C:
		return DotBF16C(m.bf16cRow(r), x[:c])
	default:
		return DotMXFP4(m.Packed[r*c/2:(r+1)*c/2], m.Scales[r*c/MXGroup:(r+1)*c/MXGroup], x)
	}
}

// RowRange is rows [r0, r1) of m as a matrix sharing m's storage.
func (m *Mat) RowRange(r0, r1 int) Mat {
	if r0 < 0 || r1 < r0 || r1 > m.Rows {
		panic(fmt.Sprintf("kernels: rows %d..%d of a %d-row matrix", r0, r1, m.Rows))
	}
	v := Mat{DType: m.DType, Rows: r1 - r0, Cols: m.Cols}
	c := m.Cols
	switch m.DType {
	case F32:
		v.F32 = m.F32[r0*c : r1*c : r1*c]
	case BF16:
		v.BF16 = m.BF16[r0*c : r1*c : r1*c]
	case BF16C:
		v.Z = m.Z[m.ZOff[r0]-m.ZOff[0] : m.ZOff[r1]-m.ZOff[0] : m.ZOff[r1]-m.ZOff[0]]
		v.ZOff = m.ZOff[r0 : r1+1 : r1+1]
	default:
		v.Packed = m.Packed[r0*c/2 : r1*c/2 : r1*c/2]
		v.Scales = m.Scales[r0*c/MXGroup : r1*c/MXGroup : r1*c/MXGroup]
	}
	return v
}

// weight64 is element i of row r as an exact float64 (f32 and bf16 only).
func (m *Mat) weight64(r, i int) float64 {
	if m.DType == BF16 {
		return float64(BF16ToF32(m.BF16[r*m.Cols+i]))
	}
	return float64(m.F32[r*m.Cols+i])
}

// rowsBlock computes dst[t*ldd + r] for rows r in [r0,r1) and tokens t < T,
// with token t's activations at x[t*Cols:]. It is the unit of parallel work.
func (m *Mat) rowsBlock(dst []float32, ldd int, x []float32, T, r0, r1 int) {
	c := m.Cols
	for r := r0; r < r1; r++ {
		for t := 0; t < T; t++ {
			dst[t*ldd+r] = m.RowDot(r, x[t*c:(t+1)*c])
		}
	}
}

// MatVec computes dst[r] = row r · x for every row, in parallel on p (nil: serial).
func MatVec(p *Pool, dst []float32, m *Mat, x []float32) {
	MatMul(p, dst, m, x, 1)
}

// MatMul computes T tokens at once: dst[t*Rows + r] = row r · x[t*Cols:(t+1)*Cols].
// Each weight row is read once for all T tokens.
func MatMul(p *Pool, dst []float32, m *Mat, x []float32, T int) {
	if len(x) < T*m.Cols || len(dst) < T*m.Rows {
		panic(fmt.Sprintf("kernels: MatMul %dx%d with T=%d: x has %d, dst %d", m.Rows, m.Cols, T, len(x), len(dst)))
	}
	if simdMatMul(p, dst, m, x, T) {
		return
	}
	p.Rows(m.Rows, rowChunk(m, p.Threads()), func(r0, r1 int) {
		m.rowsBlock(dst, m.Rows, x, T, r0, r1)
	})
}

// rowChunk picks the rows a worker takes at a time: about 64 KiB of
// weights, and for bf16 and MXFP4 runs of about 1 MiB while that still
// leaves at least 4 runs per thread. The row kernels prefetch each 8-row
// block during the one before, so the first block of a run starts cold, and
// two threads taking short turns interleave their streams in memory; long
// runs let each thread stream its own rows (measurements:
// docs/BENCHMARKS.md).
func rowChunk(m *Mat, threads int) int {
	b := m.Bytes() / int64(max(m.Rows, 1))
	if b <= 0 {
		b = 1
	}
	n := max(1, min(int(65536/b), 256))
	if m.DType == MXFP4 || m.DType == BF16 || m.DType == BF16C {
		n = max(n, min(int((1<<20)/b), m.Rows/(4*max(threads, 1))))
	}
	return n
}

// MatTVec computes the transposed product over a block of rows:
// dst[j] = Σ_{i<n} x[i]·W[row0+i][col0+j] for j < len(dst), accumulated in
// float64 sequentially over i (one accumulator per output). W must be f32 or bf16.
func MatTVec(dst []float32, m *Mat, row0, col0 int, x []float32) {
	if m.DType != F32 && m.DType != BF16 {
		panic(fmt.Sprintf("kernels: MatTVec of a %v matrix", m.DType))
	}
	j0 := simdTVec(dst, m, row0, col0, x) // leading columns done by SIMD
	rest := dst[j0:]
	acc := make([]float64, len(rest))
	for i, xi := range x {
		xv := float64(xi)
		base := (row0+i)*m.Cols + col0 + j0
		if m.DType == BF16 {
			w := m.BF16[base : base+len(rest)]
			for j, wj := range w {
				acc[j] += float64(BF16ToF32(wj)) * xv
			}
		} else {
			w := m.F32[base : base+len(rest)]
			for j, wj := range w {
				acc[j] += float64(wj) * xv
			}
		}
	}
	for j := range rest {
		rest[j] = float32(acc[j])
	}
}
