package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// simdLevels lists the non-portable levels this CPU can run; each test forces
// every one of them through SetLevel and compares with LevelPortable.
func simdLevels(t *testing.T) []Level {
	ls := Levels()[1:]
	if len(ls) == 0 {
		t.Logf("no SIMD level on this machine (%v): comparing portable with itself", BestLevel())
	}
	return ls
}

func withLevel(l Level, f func()) {
	prev := SetLevel(l)
	defer SetLevel(prev)
	f()
}

// same is bit equality, except that any NaN equals any NaN (FMA and
// multiply-then-add may propagate different NaN payloads).
func same(a, b float32) bool {
	if a != a && b != b {
		return true
	}
	return math.Float32bits(a) == math.Float32bits(b)
}

// specialF32 draws activations/weights across the float32 range: ordinary
// values spread over 2^±12 (so the summation order shows in the result),
// exact zeros of both signs, and rarely subnormals, huge and tiny magnitudes
// and arbitrary finite bit patterns (which dominate a sum when present).
func specialF32(r *rand.Rand) float32 {
	switch k := r.IntN(20); {
	case k >= 2 && k < 8 && r.IntN(40) != 0:
		return float32(r.NormFloat64() * math.Ldexp(1, r.IntN(24)-12))
	case k == 0:
		return 0
	case k == 1:
		return float32(math.Copysign(0, -1))
	case k == 2: // subnormal
		return math.Float32frombits(uint32(r.IntN(1<<23)) | uint32(r.IntN(2))<<31)
	case k == 3: // large
		return math.Float32frombits(uint32(250+r.IntN(5))<<23 | uint32(r.IntN(1<<23)) | uint32(r.IntN(2))<<31)
	case k == 4: // tiny normal
		return math.Float32frombits(uint32(1+r.IntN(5))<<23 | uint32(r.IntN(1<<23)) | uint32(r.IntN(2))<<31)
	case k < 8: // any finite bit pattern
		return math.Float32frombits(uint32(r.IntN(255))<<23 | uint32(r.IntN(1<<23)) | uint32(r.IntN(2))<<31)
	default:
		return float32(r.NormFloat64() * math.Ldexp(1, r.IntN(24)-12))
	}
}

func specialVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = specialF32(r)
	}
	return v
}

type testMats struct{ f32, bf16, mx *Mat }

func makeMats(r *rand.Rand, rows, cols int) testMats {
	return testMatsOf(rows, cols, specialVec(r, rows*cols),
		func() byte { return byte(r.Uint32()) },
		func() byte {
			if r.IntN(2) == 0 {
				return byte(r.IntN(256)) // every E8M0 value, incl. 255
			}
			return byte(110 + r.IntN(30))
		})
}

// cancelMats builds matrices whose rows hold pairs of huge products that
// cancel (columns 2k and 2k+1 carry opposite weights and, with cancelX,
// equal activations): the float64 rounding of the huge partial sums then
// decides the float32 result, so any change of lane or order shows.
func cancelMats(r *rand.Rand, rows, cols int) testMats {
	w := make([]float32, rows*cols)
	for i := 0; i < len(w); i++ {
		w[i] = float32(r.NormFloat64())
		c := i % cols
		if c%2 == 0 && c+1 < cols && r.IntN(3) == 0 {
			w[i] = float32(r.NormFloat64() * math.Ldexp(1, 30+r.IntN(10)))
			w[i+1] = -w[i]
			i++
		}
	}
	return testMatsOf(rows, cols, w,
		func() byte {
			c := byte(r.IntN(16))
			if r.IntN(2) == 0 {
				return c | (c^8)<<4 // opposite values in one byte
			}
			return c | byte(r.IntN(16))<<4
		},
		func() byte { return byte(100 + 40*r.IntN(2) + r.IntN(4)) })
}

// testMatsOf wraps w as f32 and bf16 (truncated: subnormals stay) matrices
// and, when cols is a multiple of MXGroup, an MXFP4 one whose packed bytes
// and then scales come from packed() and scale() in order.
func testMatsOf(rows, cols int, w []float32, packed, scale func() byte) testMats {
	b := make([]uint16, len(w))
	for i := range w {
		b[i] = uint16(math.Float32bits(w[i]) >> 16)
	}
	tm := testMats{
		f32:  &Mat{DType: F32, Rows: rows, Cols: cols, F32: w},
		bf16: &Mat{DType: BF16, Rows: rows, Cols: cols, BF16: b},
	}
	if cols%MXGroup == 0 {
		p := make([]byte, rows*cols/2)
		for i := range p {
			p[i] = packed()
		}
		sc := make([]byte, rows*cols/MXGroup)
		for i := range sc {
			sc[i] = scale()
		}
		tm.mx = &Mat{DType: MXFP4, Rows: rows, Cols: cols, Packed: p, Scales: sc}
	}
	return tm
}

// cancelX gives each pair of columns (2k, 2k+1) the same activation.
func cancelX(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := 0; i < n; i += 2 {
		x[i] = float32(r.NormFloat64())
		if i+1 < n {
			x[i+1] = x[i]
		}
	}
	return x
}

// all is the matrices to test: f32, bf16, its BF16C form (whose products
// must equal bf16's: TestBF16CMatchesBF16) and MXFP4 when there is one.
func (tm testMats) all() []*Mat {
	c := CompressBF16(tm.bf16)
	ms := []*Mat{tm.f32, tm.bf16, &c}
	if tm.mx != nil {
		ms = append(ms, tm.mx)
	}
	return ms
}

func matMulAt(l Level, p *Pool, m *Mat, x []float32, T int) []float32 {
	out := make([]float32, T*m.Rows)
	for i := range out {
		out[i] = float32(math.NaN()) // every output must be written
	}
	withLevel(l, func() { MatMul(p, out, m, x, T) })
	return out
}

func compare(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if !same(got[i], want[i]) {
			t.Fatalf("%s: out[%d] = %v (%#x), portable %v (%#x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// TestSIMDMatMulExact compares every SIMD level with the portable path over
// shapes that hit every tail (rows and columns not multiples of 4, 8 or 32,
// partial panels and token groups) and thread counts 1..4.
func TestSIMDMatMulExact(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	pools := []*Pool{nil, NewPool(1), NewPool(2), NewPool(3), NewPool(4)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	shapes := [][2]int{{1, 1}, {3, 7}, {8, 8}, {9, 15}, {5, 32}, {13, 33}, {17, 64}, {50, 96}, {7, 100}, {49, 160}, {97, 257}, {61, 544}, {23, 1000}, {101, 1056}}
	tokens := []int{1, 2, 3, 4, 5, 8, 13}
	for si, sh := range shapes {
		tm := makeMats(r, sh[0], sh[1])
		cancel := si%2 == 1
		if cancel {
			tm = cancelMats(r, sh[0], sh[1])
		}
		for _, T := range tokens {
			x := specialVec(r, T*sh[1])
			if cancel {
				// pairs must not straddle tokens: build each token separately
				x = x[:0]
				for tt := 0; tt < T; tt++ {
					x = append(x, cancelX(r, sh[1])...)
				}
			}
			for _, m := range tm.all() {
				want := matMulAt(LevelPortable, nil, m, x, T)
				for _, l := range simdLevels(t) {
					for pi, p := range pools {
						if pi > 1 && (T > 5 || sh[0] < 40) && pi != 4 {
							continue // keep the run short: threads 2-3 on the larger shapes
						}
						got := matMulAt(l, p, m, x, T)
						compare(t, fmt.Sprintf("%v %v %dx%d T=%d threads=%d", l, m.DType, m.Rows, m.Cols, T, p.Threads()), got, want)
					}
				}
			}
		}
	}
}

// TestSIMDMatVecLarge runs shapes large enough for many row chunks and
// column blocks, with every E8M0 scale value present.
func TestSIMDMatVecLarge(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	p := NewPool(4)
	defer p.Close()
	for _, cancel := range []bool{false, true} {
		tm := makeMats(r, 300, 1536)
		if cancel {
			tm = cancelMats(r, 300, 1536)
		}
		for i := range tm.mx.Scales {
			if !cancel || i%2 == 0 {
				tm.mx.Scales[i] = byte(i) // 0..255 in turn
			}
		}
		for _, T := range []int{1, 6, 33} {
			x := specialVec(r, T*1536)
			if cancel {
				x = cancelX(r, T*1536)
			}
			for _, m := range tm.all() {
				want := matMulAt(LevelPortable, nil, m, x, T)
				for _, l := range simdLevels(t) {
					compare(t, fmt.Sprintf("%v %v T=%d cancel=%v", l, m.DType, T, cancel), matMulAt(l, p, m, x, T), want)
				}
			}
		}
	}
}

// TestSIMDNonFinite covers Inf/NaN weights (the bf16 integer decode falls
// back) and activations (the MXFP4 kernels fall back).
func TestSIMDNonFinite(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	rows, cols := 40, 96
	tm := makeMats(r, rows, cols)
	for _, i := range []int{5, 200, 1000, 2000} {
		tm.f32.F32[i] = float32(math.Inf(1 - 2*(i&1)))
		tm.bf16.BF16[i] = 0x7f80 | uint16(i&1)<<15
	}
	tm.bf16.BF16[3000] = 0x7fc1 // NaN
	tm.f32.F32[3000] = float32(math.NaN())
	for _, T := range []int{1, 2, 3, 4, 5, 8, 13} {
		x := specialVec(r, T*cols)
		xs := [][]float32{x, append([]float32(nil), x...)}
		xs[1][7] = float32(math.Inf(1))
		xs[1][len(x)-1] = float32(math.NaN())
		for _, xx := range xs {
			for _, m := range tm.all() {
				want := matMulAt(LevelPortable, nil, m, xx, T)
				for _, l := range simdLevels(t) {
					compare(t, fmt.Sprintf("%v %v T=%d", l, m.DType, T), matMulAt(l, nil, m, xx, T), want)
				}
			}
		}
	}
}

func TestSIMDDotNormsMix(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	for _, n := range []int{0, 1, 7, 8, 31, 32, 33, 63, 64, 65, 100, 1000, 7168, 7175} {
		w := specialVec(r, n)
		x := specialVec(r, n)
		if n%2 == 1 {
			w = cancelMats(r, 1, n).f32.F32
			x = cancelX(r, n)
		}
		var want32 float32
		var want64 float64
		withLevel(LevelPortable, func() { want32, want64 = DotF32(w, x), DotF64(w, x) })
		for _, l := range simdLevels(t) {
			withLevel(l, func() {
				if got := DotF32(w, x); !same(got, want32) {
					t.Fatalf("%v DotF32 n=%d: %v, portable %v", l, n, got, want32)
				}
				if got := DotF64(w, x); math.Float64bits(got) != math.Float64bits(want64) && !(got != got && want64 != want64) {
					t.Fatalf("%v DotF64 n=%d: %v, portable %v", l, n, got, want64)
				}
			})
		}
		if n == 0 {
			continue
		}
		// RMSNorm and L2Norm on ordinary activations
		a := randVec(r, n, 3)
		g := randVec(r, n, 1)
		wantR := make([]float32, n)
		wantL := append([]float32(nil), a...)
		withLevel(LevelPortable, func() { RMSNorm(wantR, a, g, 1e-6); L2Norm(wantL, 1e-6) })
		for _, l := range simdLevels(t) {
			gotR := make([]float32, n)
			gotL := append([]float32(nil), a...)
			withLevel(l, func() { RMSNorm(gotR, a, g, 1e-6); L2Norm(gotL, 1e-6) })
			compare(t, fmt.Sprintf("%v RMSNorm n=%d", l, n), gotR, wantR)
			compare(t, fmt.Sprintf("%v L2Norm n=%d", l, n), gotL, wantL)
		}
		// AttnRes over 1..12 sources
		for _, ns := range []int{1, 3, 12} {
			srcs := make([][]float32, ns)
			for j := range srcs {
				srcs[j] = randVec(r, n, math.Ldexp(1, r.IntN(10)-5))
			}
			fold := randVec(r, n, 1)
			want := make([]float32, n)
			withLevel(LevelPortable, func() { AttnRes(want, srcs, fold, 1e-6) })
			for _, l := range simdLevels(t) {
				got := make([]float32, n)
				withLevel(l, func() { AttnRes(got, srcs, fold, 1e-6) })
				compare(t, fmt.Sprintf("%v AttnRes n=%d sources=%d", l, n, ns), got, want)
			}
		}
	}
}

func TestSIMDMatTVec(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	rows, cols := 70, 300
	tm := makeMats(r, rows, cols)
	for _, m := range []*Mat{tm.f32, tm.bf16} {
		for _, c := range [][4]int{{0, 0, 64, 70}, {3, 5, 129, 50}, {10, 1, 31, 1}, {0, 0, 300, 70}, {1, 2, 200, 0}, {60, 99, 193, 10}} {
			row0, col0, nd, nx := c[0], c[1], c[2], c[3]
			x := specialVec(r, nx)
			want := make([]float32, nd)
			withLevel(LevelPortable, func() { MatTVec(want, m, row0, col0, x) })
			// the portable result is the sequential definition
			for j := range want {
				acc := 0.0
				for i := range x {
					acc += m.weight64(row0+i, col0+j) * float64(x[i])
				}
				if !same(want[j], float32(acc)) {
					t.Fatalf("portable MatTVec col %d: %v vs %v", j, want[j], acc)
				}
			}
			for _, l := range simdLevels(t) {
				got := make([]float32, nd)
				withLevel(l, func() { MatTVec(got, m, row0, col0, x) })
				compare(t, fmt.Sprintf("%v %v MatTVec %v", l, m.DType, c), got, want)
			}
		}
	}
}

func TestLevelSwitch(t *testing.T) {
	prev := SetLevel(LevelPortable)
	if CurrentLevel() != LevelPortable {
		t.Fatal("SetLevel(portable) ignored")
	}
	SetLevel(Level(99))
	if CurrentLevel() != BestLevel() {
		t.Fatalf("SetLevel clamps to %v, got %v", BestLevel(), CurrentLevel())
	}
	SetLevel(prev)
}

// TestSIMDMXFP4AllScales gives every row one E8M0 scale (all 256 values, so
// the scaled tables are exercised at both ends of the exponent range, and 255
// must contribute nothing), every code in every lane and nibble position, and
// activations from the extremes of float32 (largest finite, smallest
// subnormal) mixed with ordinary values; mat-vec and mat-mat must match the
// portable path bit for bit at each level.
func TestSIMDMXFP4AllScales(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	rows, cols := 256+5, 13*MXGroup // 4-group blocks plus a 1-group tail
	packed := make([]byte, rows*cols/2)
	scales := make([]byte, rows*cols/MXGroup)
	for row := 0; row < rows; row++ {
		for g := 0; g < cols/MXGroup; g++ {
			scales[row*cols/MXGroup+g] = byte(row + g%2) // neighbours differ
		}
		for i := 0; i < cols/2; i++ {
			lo := byte(i+row) & 15
			hi := byte(i*7+row*3) & 15
			if r.IntN(4) == 0 {
				lo, hi = byte(r.IntN(16)), byte(r.IntN(16))
			}
			packed[row*cols/2+i] = lo | hi<<4
		}
	}
	m := &Mat{DType: MXFP4, Rows: rows, Cols: cols, Packed: packed, Scales: scales}
	extremes := []float32{math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, 1, -0.75, 0}
	p := NewPool(2)
	defer p.Close()
	for _, T := range []int{1, 3} {
		for trial := 0; trial < 3; trial++ {
			x := make([]float32, T*cols)
			for i := range x {
				switch {
				case trial == 0:
					x[i] = extremes[(i/3)%len(extremes)]
				case trial == 1 && i%5 == 0:
					x[i] = extremes[r.IntN(len(extremes))]
				default:
					x[i] = specialF32(r)
				}
			}
			want := matMulAt(LevelPortable, nil, m, x, T)
			for _, l := range simdLevels(t) {
				for _, pp := range []*Pool{nil, p} {
					compare(t, fmt.Sprintf("%v T=%d trial %d", l, T, trial), matMulAt(l, pp, m, x, T), want)
				}
			}
		}
	}
}

// TestSIMDLongRuns covers bf16 and MXFP4 mat-vec rows handed out in the
// long runs used when a matrix has many rows per thread (rows/(4*threads)
// above the 64 KiB chunk): results must still equal the portable path.
func TestSIMDLongRuns(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	tm := makeMats(r, 800, 1536)
	for _, m := range []*Mat{tm.bf16, tm.mx} {
		if base, c := int(65536/(m.Bytes()/800)), rowChunk(m, 2); c/8*8 <= base/8*8 {
			t.Fatalf("%v: shape no longer exercises the long runs (chunk %d, 64 KiB %d)", m.DType, c, base)
		}
		for _, n := range []int{2, 3} {
			p := NewPool(n)
			x := specialVec(r, 1536)
			want := matMulAt(LevelPortable, nil, m, x, 1)
			for _, l := range simdLevels(t) {
				compare(t, fmt.Sprintf("%v %v threads=%d", l, m.DType, n), matMulAt(l, p, m, x, 1), want)
			}
			p.Close()
		}
	}
}

// TestRowRange: a mat-vec over a range of rows is those rows' contract dots,
// bit for bit, for every dtype and level; out-of-range rows panic.
func TestRowRange(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 5))
	tm := makeMats(r, 37, 96)
	x := make([]float32, 96)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for _, lvl := range []Level{LevelPortable, CurrentLevel()} {
		prev := SetLevel(lvl)
		for _, m := range []*Mat{tm.f32, tm.bf16, tm.mx} {
			for _, rr := range [][2]int{{0, 37}, {5, 18}, {29, 37}, {12, 12}} {
				v := m.RowRange(rr[0], rr[1])
				if v.Rows != rr[1]-rr[0] || v.Check() != nil {
					t.Fatalf("%v rows %v: %+v %v", m.DType, rr, v.Rows, v.Check())
				}
				got := make([]float32, v.Rows)
				MatVec(nil, got, &v, x)
				for i := range got {
					if want := m.RowDot(rr[0]+i, x); math.Float32bits(got[i]) != math.Float32bits(want) && !(got[i] != got[i] && want != want) {
						t.Fatalf("%v %v rows %v row %d: %v, want %v", lvl, m.DType, rr, i, got[i], want)
					}
				}
			}
		}
		SetLevel(prev)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("rows 30..38 of a 37-row matrix did not panic")
		}
	}()
	tm.bf16.RowRange(30, 38)
}

// TestSIMDSmallBatch covers the blocking of the small-batch paths: rows
// around the 12-row groups and 48-row panels (short last groups), columns
// around the 256-column blocks and the 8-column tail, every T from 1 to 9
// (each token grouping: 4s and a remainder of 3, 2, 1, and 5 as 3+2) and
// larger ones, MXFP4 groups with the NaN scale and every scale value, and 1
// to 3 threads.
func TestSIMDSmallBatch(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	pools := []*Pool{nil, NewPool(2), NewPool(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	shapes := [][2]int{{1, 32}, {11, 40}, {12, 256}, {13, 264}, {24, 15}, {25, 288}, {47, 520}, {48, 96}, {49, 544}, {61, 800}, {97, 1000}}
	tokens := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17, 33}
	for si, sh := range shapes {
		tm := makeMats(r, sh[0], sh[1])
		if si%3 == 2 {
			tm = cancelMats(r, sh[0], sh[1])
		}
		if tm.mx != nil {
			for g := range tm.mx.Scales {
				if g%7 == 3 {
					tm.mx.Scales[g] = 255 // NaN scale: zero products
				}
			}
		}
		for ti, T := range tokens {
			x := specialVec(r, T*sh[1])
			if si%3 == 2 {
				x = x[:0]
				for tt := 0; tt < T; tt++ {
					x = append(x, cancelX(r, sh[1])...)
				}
			}
			for _, m := range []*Mat{tm.f32, tm.bf16, tm.mx} {
				if m == nil {
					continue
				}
				want := matMulAt(LevelPortable, nil, m, x, T)
				for _, l := range simdLevels(t) {
					p := pools[(si+ti)%len(pools)]
					compare(t, fmt.Sprintf("%v %v %dx%d T=%d threads=%d", l, m.DType, m.Rows, m.Cols, T, p.Threads()), matMulAt(l, p, m, x, T), want)
				}
			}
		}
	}
}

// TestSIMDSmallBatchSpecials puts Inf and NaN bf16 weights in every kind of
// group (full and short, fused T <= 8 and buffered), subnormal weights and
// activations, and Inf/NaN activations (bf16: through the kernels; MXFP4:
// the portable fallback).
func TestSIMDSmallBatchSpecials(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	rows, cols := 29, 296 // bf16: a column tail; MXFP4: 288 columns
	tm := makeMats(r, rows, cols)
	mx := makeMats(r, rows, 288).mx
	for i := range tm.bf16.BF16 {
		switch r.IntN(40) {
		case 0:
			tm.bf16.BF16[i] = 0x7f80 | uint16(r.IntN(2))<<15 // +-Inf
		case 1:
			tm.bf16.BF16[i] = 0x7fc0 | uint16(r.IntN(64)) // NaN
		case 2:
			tm.bf16.BF16[i] = uint16(1+r.IntN(127)) | uint16(r.IntN(2))<<15 // subnormal
		}
	}
	// keep some rows (and a whole 12-row group) finite
	for i := 0; i < 12*cols; i++ {
		tm.bf16.BF16[i] &^= 0x0080 // exponent 255 -> 254: finite
	}
	for _, T := range []int{1, 2, 3, 4, 5, 8, 9} {
		x := specialVec(r, T*cols)
		xs := [][]float32{x, append([]float32(nil), x...)}
		xs[1][3] = float32(math.Inf(-1))
		xs[1][len(x)-5] = float32(math.NaN())
		for i := range xs[1] {
			if i%11 == 0 {
				xs[1][i] = math.Float32frombits(uint32(1 + r.IntN(1<<23))) // subnormal
			}
		}
		for k, xx := range xs {
			for _, m := range []*Mat{tm.bf16, mx} {
				xm := xx[:T*m.Cols]
				want := matMulAt(LevelPortable, nil, m, xm, T)
				for _, l := range simdLevels(t) {
					compare(t, fmt.Sprintf("%v %v T=%d x%d", l, m.DType, T, k), matMulAt(l, nil, m, xm, T), want)
				}
			}
		}
	}
}
