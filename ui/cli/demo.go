package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k3/assets/demo"
	"k3/engine/synth"
)

func init() {
	register("demo", "write the demo checkpoint (a tiny trained K3; or random weights at other sizes) with its tokenizer", cmdDemo)
}

func cmdDemo(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("demo", stderr)
	size := fs.String("size", "small", "small (~3 MB, trained: it answers), random (~2 MB, random weights), medium (~40 MB) or large (~600 MB, for measuring)")
	setUsage(fs, stderr, "usage: k3 demo DIR [--size small|random|medium|large]")
	pos, code := parseN(fs, args, 1, stderr, "k3 demo: give exactly one DIR to write the demo checkpoint into")
	if code >= 0 {
		return code
	}
	if !slices.Contains(synth.DemoSizes, *size) {
		fmt.Fprintf(stderr, "k3 demo: --size %q is not small, random, medium or large\n", *size)
		return ExitUsage
	}
	dir := pos[0]
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
			fmt.Fprintf(stderr, "k3 demo: %s exists and is not empty; choose an empty or new directory\n", dir)
			return ExitUsage
		}
	}
	t0 := time.Now()
	if err := synth.WriteDemo(dir, *size); err != nil {
		fmt.Fprintf(stderr, "k3 demo: %v\n", err)
		return ExitRuntime
	}
	fmt.Fprintf(stdout, "wrote a %s demo checkpoint to %s in %.1f s\n", *size, dir, time.Since(t0).Seconds())
	if synth.IsTrainedDemo(dir) {
		fmt.Fprintln(stdout, "DEMO: a tiny Kimi K3 (2.1 million parameters) trained on fortune-cookie sayings and drawings; it knows sayings and coloured shapes and little else.")
		fmt.Fprintf(stdout, "with its draft model in %s: k3 chat %s --draft %s\n", filepath.Join(dir, demo.DraftDir), dir, filepath.Join(dir, demo.DraftDir))
	} else {
		fmt.Fprintln(stdout, "DEMO: random weights with the Kimi K3 tensor graph; its text is not meaningful.")
	}
	fmt.Fprintf(stdout, "try: k3 chat %s --gen 32\n", dir)
	return ExitOK
}
