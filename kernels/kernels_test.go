package kernels

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"testing"
)

// contractDot spells out the dot contract independently of the kernels:
// lane = index mod 8, ascending, then the fixed tree.
func contractDot(w []float64, x []float32) float32 {
	var l [8]float64
	for i := range x {
		l[i%8] += w[i] * float64(x[i])
	}
	return float32(((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7])))
}

func randVec(r *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * scale)
	}
	return v
}

func TestDotContract(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 100, 1000, 4097} {
		x := randVec(r, n, 1)
		// wildly different magnitudes make the order matter
		w := randVec(r, n, 1)
		for i := range w {
			w[i] *= float32(math.Ldexp(1, r.IntN(60)-30))
		}
		w64 := make([]float64, n)
		for i := range w {
			w64[i] = float64(w[i])
		}
		if got, want := DotF32(w, x), contractDot(w64, x); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("n=%d DotF32 %v, contract %v", n, got, want)
		}
		b := make([]uint16, n)
		for i := range w {
			b[i] = F32ToBF16(w[i])
			w64[i] = float64(BF16ToF32(b[i]))
		}
		if got, want := DotBF16(b, x), contractDot(w64, x); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("n=%d DotBF16 %v, contract %v", n, got, want)
		}
	}
}

func TestBF16Round(t *testing.T) {
	cases := map[float32]uint16{1: 0x3f80, -2: 0xc000, 1.00390625: 0x3f80 /* tie to even */, 1.01171875: 0x3f82}
	for f, want := range cases {
		if got := F32ToBF16(f); got != want {
			t.Errorf("F32ToBF16(%v) = %#x, want %#x", f, got, want)
		}
	}
	if v := BF16ToF32(F32ToBF16(float32(math.NaN()))); !math.IsNaN(float64(v)) {
		t.Error("NaN lost")
	}
}

// TestMXFP4Released checks the nibble order and the E8M0 scale against real
// checkpoint bytes (layer 1, expert 0, w1, 64 rows x 3584).
func TestMXFP4Released(t *testing.T) {
	raw, err := os.ReadFile("../testdata/seed-v1/mxfp4.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Rows   int       `json:"rows"`
		Width  int       `json:"logical_width"`
		Lut    []float64 `json:"e2m1_lut"`
		Packed struct {
			Data []int `json:"data"`
		} `json:"packed"`
		Scales struct {
			Data []int `json:"data"`
		} `json:"scales"`
		Expected struct {
			Data []float64 `json:"data"`
		} `json:"expected"`
		Swapped struct {
			First64 []float64 `json:"first64"`
		} `json:"expected_swapped_nibbles"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	for i, v := range f.Lut {
		if math.Float64bits(E2M1[i]) != math.Float64bits(v) {
			t.Fatalf("E2M1[%d] = %v, fixture %v", i, E2M1[i], v)
		}
	}
	packed := make([]byte, len(f.Packed.Data))
	for i, v := range f.Packed.Data {
		packed[i] = byte(v)
	}
	scales := make([]byte, len(f.Scales.Data))
	for i, v := range f.Scales.Data {
		scales[i] = byte(v)
	}
	w := f.Width
	if f.Rows != 64 || w != 3584 || len(f.Expected.Data) != 64*3584 {
		t.Fatalf("fixture shape %d x %d, %d values", f.Rows, w, len(f.Expected.Data))
	}
	m := &Mat{DType: MXFP4, Rows: f.Rows, Cols: w, Packed: packed, Scales: scales}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	deq := make([]float32, f.Rows*w)
	for r := 0; r < f.Rows; r++ {
		for i := 0; i < w; i++ {
			v := MXFP4Value(packed[r*w/2:], scales[r*w/32:], i)
			if v != f.Expected.Data[r*w+i] {
				t.Fatalf("row %d elem %d: %v, released value %v", r, i, v, f.Expected.Data[r*w+i])
			}
			deq[r*w+i] = float32(v)
		}
	}
	// the wrong nibble order must not pass
	swapped := 0
	for i := 0; i < 64; i++ {
		j := i ^ 1
		if MXFP4Value(packed, scales, j) == f.Swapped.First64[i] {
			swapped++
		}
	}
	if swapped != 64 {
		t.Fatalf("swapped fixture inconsistent: %d/64", swapped)
	}
	differ := 0
	for i := 0; i < 64; i++ {
		if f.Swapped.First64[i] != f.Expected.Data[i] {
			differ++
		}
	}
	if differ < 32 {
		t.Fatalf("swapped nibble order agrees on %d of 64 values", 64-differ)
	}
	// the MXFP4 kernel equals the f32 kernel on the dequantised values, bit for bit
	r := rand.New(rand.NewPCG(3, 4))
	x := randVec(r, w, 1)
	fm := &Mat{DType: F32, Rows: f.Rows, Cols: w, F32: deq}
	a := make([]float32, f.Rows)
	b := make([]float32, f.Rows)
	MatVec(nil, a, m, x)
	MatVec(nil, b, fm, x)
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("row %d: mxfp4 %v, dequantised f32 %v", i, a[i], b[i])
		}
	}
}

func TestMXFP4NaNScale(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	cols := 96
	packed := make([]byte, cols/2)
	for i := range packed {
		packed[i] = byte(r.IntN(256))
	}
	scales := []byte{126, 255, 128}
	x := randVec(r, cols, 1)
	got := DotMXFP4(packed, scales, x)
	w := make([]float64, cols)
	for i := range w {
		if i/32 != 1 {
			w[i] = MXFP4Value(packed, scales, i)
		}
	}
	if want := contractDot(w, x); got != want {
		t.Fatalf("NaN-scale group not zero: %v vs %v", got, want)
	}
	if CountNaNScales(scales) != 1 {
		t.Fatal("CountNaNScales")
	}
}

func TestMatMulThreads(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	rows, cols, T := 301, 160, 5
	w := randVec(r, rows*cols, 0.1)
	b := make([]uint16, len(w))
	for i := range w {
		b[i] = F32ToBF16(w[i])
	}
	packed := make([]byte, rows*cols/2)
	for i := range packed {
		packed[i] = byte(r.IntN(256))
	}
	scales := make([]byte, rows*cols/32)
	for i := range scales {
		scales[i] = byte(120 + r.IntN(10))
	}
	mats := []*Mat{
		{DType: F32, Rows: rows, Cols: cols, F32: w},
		{DType: BF16, Rows: rows, Cols: cols, BF16: b},
		{DType: MXFP4, Rows: rows, Cols: cols, Packed: packed, Scales: scales},
	}
	x := randVec(r, T*cols, 1)
	for _, m := range mats {
		want := make([]float32, T*rows)
		for tt := 0; tt < T; tt++ {
			for i := 0; i < rows; i++ {
				want[tt*rows+i] = m.RowDot(i, x[tt*cols:(tt+1)*cols])
			}
		}
		for th := 1; th <= 4; th++ {
			p := NewPool(th)
			got := make([]float32, T*rows)
			MatMul(p, got, m, x, T)
			p.Close()
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%v threads=%d: out %d = %v, want %v", m.DType, th, i, got[i], want[i])
				}
			}
		}
	}
}

func TestMatTVec(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	rows, cols := 20, 12
	w := randVec(r, rows*cols, 1)
	m := &Mat{DType: F32, Rows: rows, Cols: cols, F32: w}
	x := randVec(r, 5, 1)
	dst := make([]float32, 4)
	MatTVec(dst, m, 3, 2, x)
	for j := range dst {
		acc := 0.0
		for i := range x {
			acc += float64(w[(3+i)*cols+2+j]) * float64(x[i])
		}
		if dst[j] != float32(acc) {
			t.Fatalf("j=%d %v vs %v", j, dst[j], acc)
		}
	}
}

// TestCountNaNScales counts 255 bytes at every length up to 300 (the
// vectorised count has block and tail paths) and over all byte values.
func TestCountNaNScales(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	buf := make([]byte, 300)
	for i := range buf {
		buf[i] = byte(rng.IntN(256))
		if rng.IntN(4) == 0 {
			buf[i] = 255
		}
	}
	for n := 0; n <= len(buf); n++ {
		want := 0
		for _, b := range buf[:n] {
			if b == 255 {
				want++
			}
		}
		if got := CountNaNScales(buf[:n]); got != want {
			t.Fatalf("length %d: %d, want %d", n, got, want)
		}
	}
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	if got := CountNaNScales(all); got != 1 {
		t.Fatalf("all byte values: %d", got)
	}
}

// BenchmarkCountNaNScales scans the scales of one K3 expert (3 x 3072 x
// 3584 / 32 bytes).
func BenchmarkCountNaNScales(b *testing.B) {
	s := make([]byte, 3*3072*3584/32)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		CountNaNScales(s)
	}
}

// TestSiTUPool: the pooled activation equals the serial one bit for bit at
// 1-3 threads and lengths around the 384-element chunks, in place too.
func TestSiTUPool(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, threads := range []int{1, 2, 3} {
		p := NewPool(threads)
		for _, n := range []int{0, 1, 383, 384, 385, 3072, 5000} {
			g, u := make([]float32, n), make([]float32, n)
			for i := range g {
				g[i], u[i] = float32(r.NormFloat64()*6), float32(r.NormFloat64()*6)
			}
			want := make([]float32, n)
			SiTU(want, g, u, 3.5, 7)
			SiTUPool(p, g, g, u, 3.5, 7) // in place, as the engine calls it
			for i := range want {
				if math.Float32bits(g[i]) != math.Float32bits(want[i]) {
					t.Fatalf("threads %d n %d element %d: %v, want %v", threads, n, i, g[i], want[i])
				}
			}
		}
		p.Close()
	}
}
