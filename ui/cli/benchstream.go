package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"k3/doctor/measure"
)

func init() {
	benchCommands.add("stream", "trunk and expert streaming from disk vs the disk's raw O_DIRECT speed", benchStream)
}

func benchStream(args []string, stdout, stderr io.Writer) int {
	b := newBenchFlags("stream", stderr, jsonLinesUsage, "", "where the benchmark checkpoint is generated (reused)")
	fs, jsonOut, dir := b.FlagSet, b.json, b.dir
	quick := fs.Bool("quick", false, "a ~0.8 GB checkpoint (under 40 s once generated)")
	tokens := fs.Int("tokens", 3, "decode steps measured")
	setUsage(fs, stderr, "usage: k3 bench stream [--json] [--quick] [--tokens N] [--dir PATH]",
		"Generates (once) a checkpoint with real-size experts, then compares reading the packed trunk,",
		"the experts through the cache and a streamed decode with the disk's raw O_DIRECT speed.")
	if _, code := parseArgs(fs, args); code >= 0 {
		return code
	}
	logf := b.logf(stderr)
	model, tr, err := measure.PrepareStream(context.Background(), *dir, *quick, logf)
	if err != nil {
		return b.failed(stderr, err)
	}
	res, err := measure.Stream(context.Background(), model, tr, *tokens, logf)
	if err != nil {
		return b.failed(stderr, err)
	}
	if *jsonOut {
		for _, r := range res {
			b, _ := json.Marshal(r)
			fmt.Fprintln(stdout, string(b))
		}
		return ExitOK
	}
	fmt.Fprintf(stdout, "%-8s %12s %9s %8s %9s %7s\n", "KIND", "BYTES", "SECONDS", "GB/S", "RAW GB/S", "RATIO")
	cacheNote := ""
	for _, r := range res {
		fmt.Fprintf(stdout, "%-8s %12d %9.3f %8.2f %9.2f %7.2f", r.Kind, r.Bytes, r.Seconds, r.GBps, r.RawGBps, r.Ratio)
		switch r.Kind {
		case "raw":
			fmt.Fprintf(stdout, "  (%s)", r.Note)
		case "trunk":
			cacheNote = r.Note
		}
		fmt.Fprintln(stdout)
	}
	fmt.Fprintln(stdout, "RAW GB/S is the best raw read of the run; each raw line's ratio is to it.")
	if cacheNote != "" {
		fmt.Fprintf(stdout, "note: %s\n", cacheNote)
	}
	fmt.Fprintf(stdout, "note: decode: %s\n", res[len(res)-1].Note)
	return ExitOK
}
