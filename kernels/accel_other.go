//go:build !amd64 && !arm64

package kernels

func simdMatMul(p *Pool, dst []float32, m *Mat, x []float32, T int) bool { return false }

func simdDotF32(w, x []float32, a *[Lanes]float64) int { return 0 }

func simdTVec(dst []float32, m *Mat, row0, col0 int, x []float32) int { return 0 }

func simdMix(dst []float32, sources [][]float32, s []float64) int { return 0 }

func readBlock(b []byte) uint64 { return readGo(b) }

func simdMatVec64(dst []float64, m *Mat, x []float32) bool { return false }

func simdWeightedRows(dst []float32, p []float64, rows []float32, stride int) int { return 0 }
