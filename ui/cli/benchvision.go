package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"k3/doctor/bench"
	"k3/machine"
)

func init() {
	benchCommands.add("vision", "the vision tower at K3 width: seconds and prompt positions per picture size", benchVision)
}

func benchVision(args []string, stdout, stderr io.Writer) int {
	b := newBenchFlags("vision", stderr, "one JSON object per line instead of a table", threadsUsage, "")
	fs, jsonOut, threads := b.FlagSet, b.json, b.threads
	sizes := fs.String("sizes", "224x224,448x448", "picture sizes WxH, comma-separated")
	setUsage(fs, stderr,
		"usage: k3 bench vision [--json] [--threads N] [--sizes WxH,...]",
		"Runs Kimi K3's vision tower and projector at the released shapes (27 layers,",
		"1024 wide, random bf16 weights) on pictures of each size, resized as Moonshot's",
		"processor does, and prints the prompt positions each takes, the seconds, the",
		"GFLOP/s and their fraction of this machine's float64 FMA peak on the same threads.",
	)
	pos, code := parseArgs(fs, args)
	if code >= 0 {
		return code
	}
	wh, err := parseSizes(*sizes)
	if len(pos) > 0 || *threads < 0 || err != nil {
		if err != nil {
			fmt.Fprintf(stderr, "k3 bench vision: %v\n", err)
		}
		fs.Usage()
		return ExitUsage
	}
	th := *threads
	if th == 0 {
		th = machine.PhysicalCores()
	}
	rows, err := bench.Vision(context.Background(), wh, th)
	if err != nil {
		return b.failed(stderr, err)
	}
	enc := json.NewEncoder(stdout)
	if !*jsonOut {
		fmt.Fprintf(stdout, "k3 bench vision: released shapes, %d threads\n", th)
		fmt.Fprintf(stdout, "%-11s %8s %8s %9s %9s %9s %6s %9s\n", "picture", "patches", "tokens", "seconds", "GFLOP/s", "peak", "ratio", "work MB")
	}
	for _, r := range rows {
		if *jsonOut {
			enc.Encode(r)
			continue
		}
		fmt.Fprintf(stdout, "%-11s %8d %8d %9.2f %9.1f %9.1f %6.3f %9.0f\n", fmt.Sprintf("%dx%d", r.Width, r.Height),
			r.Patches, r.Tokens, r.Seconds, r.GFlops, r.Roofline, r.Fraction, float64(r.WorkBytes)/1e6)
	}
	return ExitOK
}

// parseSizes reads "WxH,WxH".
func parseSizes(s string) ([][2]int, error) {
	var out [][2]int
	for _, f := range strings.Split(s, ",") {
		w, h, ok := strings.Cut(strings.TrimSpace(f), "x")
		W, err1 := strconv.Atoi(w)
		H, err2 := strconv.Atoi(h)
		if !ok || err1 != nil || err2 != nil || W <= 0 || H <= 0 || W > 1<<16 || H > 1<<16 {
			return nil, fmt.Errorf("--sizes: %q is not WIDTHxHEIGHT", f)
		}
		out = append(out, [2]int{W, H})
	}
	return out, nil
}
