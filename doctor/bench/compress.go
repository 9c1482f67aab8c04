package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k3/assets/demo"
	"k3/doctor/measure"
	"k3/kernels"
	"k3/machine"
)

// CompressLine is one --json line of `k3 bench compress`: Line says which
// of the embedded parts is set.
type CompressLine struct {
	Line string `json:"line"` // ratio, decode, kernel
	*measure.CompressRow
	*measure.DecodeSpeed
	*measure.KernelSpeeds
	// decode lines: the "all" ratio of the trained sources, and the fastest
	// disk whose compressed stream Threads cores decode as fast as it is read
	Ratio     float64 `json:"format_ratio,omitempty"`
	Threads   int     `json:"decode_threads,omitempty"`
	KeepsUpGB float64 `json:"keeps_up_with_disk_gbps,omitempty"`
}

// Kernel matrix of `k3 bench compress`: trained weights tiled to a trunk
// projection's shape (larger than the caches).
const compressKernelRows, compressKernelCols = 4096, 7168

// CompressRatios reads the trained demo model and each source (a
// safetensors checkpoint directory, a TensorFlow.js model.json, or a
// directory of TensorFlow.js models) and returns their matrices and the
// ratio rows per source and tensor kind.
func CompressRatios(sources []string) ([]measure.WeightMatrix, []measure.CompressRow, error) {
	tmp, err := os.MkdirTemp("", "k3-compress-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(tmp)
	if err := demo.Write(tmp); err != nil {
		return nil, nil, err
	}
	ms, err := measure.CheckpointMatrices(tmp, "demo")
	if err != nil {
		return nil, nil, err
	}
	for _, a := range sources {
		more, err := compressSources(a)
		if err != nil {
			return nil, nil, err
		}
		ms = append(ms, more...)
	}
	return ms, measure.CompressStats(ms), nil
}

// CompressSpeeds measures each format's decode speed on one core over ms
// (rounds interleaved rounds; the "decode" lines, with the disk speed
// threads cores keep up with: 0 is machine.DefaultThreads) and a mat-vec
// of BF16C against bf16 on threads (the "kernel" line).
func CompressSpeeds(ms []measure.WeightMatrix, rounds, threads int) ([]CompressLine, CompressLine, error) {
	// one ratio per format over every matrix (the last row of one source:
	// "all", or its only kind): what the decode speeds pair with
	all := measure.CompressStats(relabel(ms, "trained"))
	all = all[len(all)-1:]
	ratio := map[string]float64{"bf16": 1}
	for _, f := range all[0].Formats {
		ratio[f.Format] = f.Ratio
	}
	speeds, err := measure.DecodeSpeeds(ms, rounds)
	if err != nil {
		return nil, CompressLine{}, err
	}
	th := machine.DefaultThreads()
	if threads > 0 {
		th = threads
	}
	var lines []CompressLine
	for i := range speeds {
		s := &speeds[i]
		lines = append(lines, CompressLine{Line: "decode", DecodeSpeed: s, Ratio: ratio[s.Format], Threads: th, KeepsUpGB: s.GBps * float64(th) / ratio[s.Format]})
	}
	pool := kernels.NewPool(th)
	defer pool.Close()
	m := tileMatrix(ms, compressKernelRows, compressKernelCols)
	ks := measure.BF16CKernel(pool, m, rounds, 300*time.Millisecond)
	return lines, CompressLine{Line: "kernel", KernelSpeeds: &ks}, nil
}

// compressSources reads the matrices of one argument of k3 bench compress:
// a safetensors checkpoint directory, a TensorFlow.js model.json, or a
// directory of TensorFlow.js models (every *.json with float32 weights).
func compressSources(arg string) ([]measure.WeightMatrix, error) {
	fi, err := os.Stat(arg)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return measure.TFJSMatrices(arg, strings.TrimSuffix(filepath.Base(arg), ".json"))
	}
	if st, _ := filepath.Glob(filepath.Join(arg, "*.safetensors")); len(st) > 0 {
		return measure.CheckpointMatrices(arg, filepath.Base(arg))
	}
	js, _ := filepath.Glob(filepath.Join(arg, "*.json"))
	sort.Strings(js)
	var out []measure.WeightMatrix
	for _, j := range js {
		ms, err := measure.TFJSMatrices(j, strings.TrimSuffix(filepath.Base(j), ".json"))
		if err != nil {
			return nil, err
		}
		out = append(out, ms...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no safetensors checkpoint and no TensorFlow.js model with float32 weights", arg)
	}
	return out, nil
}

// relabel gives every matrix the same source (aliasing the weights).
func relabel(ms []measure.WeightMatrix, source string) []measure.WeightMatrix {
	out := make([]measure.WeightMatrix, len(ms))
	for i, m := range ms {
		m.Source = source
		out[i] = m
	}
	return out
}

// tileMatrix fills a rows x cols bf16 matrix with the matrices' weights,
// one after another and again from the start until it is full.
func tileMatrix(ms []measure.WeightMatrix, rows, cols int) *kernels.Mat {
	m := &kernels.Mat{DType: kernels.BF16, Rows: rows, Cols: cols, BF16: make([]uint16, rows*cols)}
	for n := 0; n < len(m.BF16); {
		for i := range ms {
			n += copy(m.BF16[n:], ms[i].W)
		}
	}
	return m
}
