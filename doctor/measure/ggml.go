package measure

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"

	"k3/kernels"
)

// Peer measures another engine's matrix multiply at a shape, to set k3's
// kernels against in the same run.
type Peer interface {
	// Name says what the peer is (shown in the report).
	Name() string
	// Threads is the number of threads the peer computes on.
	Threads() int
	// MatMul measures T tokens times a matrix of the shape and returns
	// GFLOP/s (2*rows*cols*T per call).
	MatMul(ctx context.Context, sh Shape, T int) (float64, error)
}

// GGML is ggml's (llama.cpp's) CPU backend, measured with its
// test-backend-ops program in perf mode: each measurement writes a test
// file with one MUL_MAT of the shape (ggml's tensors: src0 the weights,
// cols x rows; src1 the float32 activations, cols x T) and runs
// `test-backend-ops perf -o MUL_MAT -b CPU --test-file FILE`, which times
// the operation for at least a second on ggml's own random weights in its
// plain CPU buffer (no repacking), with as many threads as the machine has
// CPUs. Its arithmetic is not k3's: bf16 and MXFP4 are multiplied in
// float32 against bf16 or 8-bit activations.
type GGML struct {
	Binary string // the test-backend-ops executable
	op     int    // ggml's number for MUL_MAT in this build (its enum order changes between versions)
	dir    string
}

// ggmlType is ggml's number for a weight type (the GGUF type ids, which
// ggml keeps stable), the bytes of a block and the elements in it.
func ggmlType(d kernels.DType) (id, blockBytes, blockElems int, err error) {
	switch d {
	case kernels.F32:
		return 0, 4, 1, nil
	case kernels.BF16:
		return 30, 2, 1, nil
	case kernels.MXFP4:
		return 39, 17, 32, nil
	}
	return 0, 0, 0, fmt.Errorf("measure: ggml has no %v weights", d)
}

// NewGGML checks that binary runs as test-backend-ops and finds the number
// of MUL_MAT in it: a test file of one small MUL_MAT per operation number
// 0..63, each named by its number, run with the MUL_MAT filter, prints only
// the one that is a MUL_MAT.
func NewGGML(ctx context.Context, binary string) (*GGML, error) {
	if _, err := os.Stat(binary); err != nil {
		return nil, fmt.Errorf("measure: peer: %w", err)
	}
	dir, err := os.MkdirTemp("", "k3-peer-")
	if err != nil {
		return nil, err
	}
	g := &GGML{Binary: binary, dir: dir}
	var lines []string
	for op := 0; op < 64; op++ {
		lines = append(lines, ggmlLine(op, kernels.BF16, 64, 256, 1, fmt.Sprintf("k3-probe-op%d", op)))
	}
	out, err := g.run(ctx, strings.Join(lines, ""))
	if err != nil {
		g.Close()
		return nil, err
	}
	g.op, err = ParseGGMLProbe(out)
	if err != nil {
		g.Close()
		return nil, fmt.Errorf("measure: peer %s: %w", binary, err)
	}
	return g, nil
}

// Close removes the peer's test files.
func (g *GGML) Close() error { return os.RemoveAll(g.dir) }

// Name is "ggml test-backend-ops".
func (g *GGML) Name() string { return "ggml test-backend-ops" }

// Threads is the number of CPUs: test-backend-ops gives its CPU backend
// std::thread::hardware_concurrency() threads and has no option for it.
func (g *GGML) Threads() int { return runtime.NumCPU() }

// MatMul runs one perf measurement of the shape at T tokens.
func (g *GGML) MatMul(ctx context.Context, sh Shape, T int) (float64, error) {
	name := fmt.Sprintf("k3-%v-%dx%d-t%d", sh.DType, sh.Rows, sh.Cols, T)
	out, err := g.run(ctx, ggmlLine(g.op, sh.DType, sh.Rows, sh.Cols, T, name))
	if err != nil {
		return 0, err
	}
	res, err := ParseGGMLPerf(out)
	if err != nil {
		return 0, err
	}
	for _, r := range res {
		if r.Name == name {
			if !r.Supported {
				return 0, fmt.Errorf("measure: peer: %s is not supported by its CPU backend", name)
			}
			return 2 * float64(sh.Rows) * float64(sh.Cols) * float64(T) / r.MicrosPerRun / 1e3, nil
		}
	}
	return 0, fmt.Errorf("measure: peer: no result for %s in its output", name)
}

func (g *GGML) run(ctx context.Context, tests string) ([]byte, error) {
	f := filepath.Join(g.dir, "tests.txt")
	if err := os.WriteFile(f, []byte(tests), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, g.Binary, "perf", "-o", "MUL_MAT", "-b", "CPU", "--test-file", f)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 300 {
			msg = msg[len(msg)-300:]
		}
		return nil, fmt.Errorf("measure: peer %s: %w: %s", g.Binary, err, msg)
	}
	return out, nil
}

// ggmlLine is one test of a test-backend-ops test file: the operation number,
// the output type (float32) and shape (rows x T), no operation parameters,
// and the two sources with their shapes and byte strides (ggml's order:
// innermost first), then the name.
func ggmlLine(op int, d kernels.DType, rows, cols, T int, name string) string {
	id, bb, be, err := ggmlType(d)
	if err != nil {
		panic(err)
	}
	rowBytes := cols / be * bb
	return fmt.Sprintf("%d 0 %d %d 1 1 0 2 %d %d %d 1 1 %d %d %d %d 0 %d %d 1 1 4 %d %d %d %s\n",
		op, rows, T,
		id, cols, rows, bb, rowBytes, rowBytes*rows, rowBytes*rows,
		cols, T, 4*cols, 4*cols*T, 4*cols*T,
		name)
}

// GGMLPerf is one result line of test-backend-ops perf.
type GGMLPerf struct {
	Name         string  // the test's name= parameter ("" if none)
	Params       string  // everything between the parentheses
	Supported    bool    // false: "not supported"
	Runs         int     // runs timed
	MicrosPerRun float64 // microseconds per run
}

var (
	ggmlResult = regexp.MustCompile(`^\s*MUL_MAT\((.*)\):\s+(\d+) runs - +([0-9.]+) us/run`)
	ggmlNotSup = regexp.MustCompile(`^\s*MUL_MAT\((.*)\):\s+not supported`)
	ggmlName   = regexp.MustCompile(`(?:^|,)name=([^,]*)`)
)

// ParseGGMLPerf reads the MUL_MAT result lines of test-backend-ops perf's
// console output (other lines, and the colour escapes, are ignored).
func ParseGGMLPerf(out []byte) ([]GGMLPerf, error) {
	var res []GGMLPerf
	for _, line := range strings.Split(string(out), "\n") {
		var r GGMLPerf
		if m := ggmlResult.FindStringSubmatch(line); m != nil {
			runs, err := strconv.Atoi(m[2])
			if err != nil {
				return nil, fmt.Errorf("measure: peer output %q: %w", line, err)
			}
			us, err := strconv.ParseFloat(m[3], 64)
			if err != nil || us <= 0 {
				return nil, fmt.Errorf("measure: peer output %q: bad time", line)
			}
			r = GGMLPerf{Params: m[1], Supported: true, Runs: runs, MicrosPerRun: us}
		} else if m := ggmlNotSup.FindStringSubmatch(line); m != nil {
			r = GGMLPerf{Params: m[1]}
		} else {
			continue
		}
		if m := ggmlName.FindStringSubmatch(r.Params); m != nil {
			r.Name = m[1]
		}
		res = append(res, r)
	}
	return res, nil
}

// ParseGGMLProbe finds the operation number of the probe NewGGML runs: the
// one result, named k3-probe-opN.
func ParseGGMLProbe(out []byte) (int, error) {
	res, err := ParseGGMLPerf(out)
	if err != nil {
		return 0, err
	}
	op := -1
	for _, r := range res {
		n, ok := strings.CutPrefix(r.Name, "k3-probe-op")
		if !ok {
			continue
		}
		v, err := strconv.Atoi(n)
		if err != nil || op >= 0 {
			return 0, fmt.Errorf("MUL_MAT probe: unexpected result %q", r.Params)
		}
		op = v
	}
	if op < 0 {
		return 0, fmt.Errorf("MUL_MAT probe: no MUL_MAT among operations 0..63 (is it test-backend-ops?)")
	}
	return op, nil
}
