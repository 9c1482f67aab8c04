package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"k3/storage/direct"
)

// cVariable is one of the C engine's environment variables
// (seed-engine-spec.md §4.2) and what k3 does with it: apply honours it
// (a note says so), or, where k3 has no such switch, note says what k3 does
// instead.
type cVariable struct {
	name  string
	apply func(f *modelFlags, given map[string]bool, val string) string
	note  string
}

var cVariables = []cVariable{
	{name: "K3_CACHE_POLICY", apply: func(f *modelFlags, given map[string]bool, val string) string {
		if given["cache-policy"] {
			return "--cache-policy " + *f.policy + " wins over it"
		}
		*f.policy = strings.ToLower(val)
		return "expert cache policy " + *f.policy + ", as --cache-policy " + *f.policy
	}},
	{name: "K3_NO_BATCH_PREFILL", apply: func(f *modelFlags, given map[string]bool, _ string) string {
		if given["chunk"] {
			return fmt.Sprintf("--chunk %d wins over it", *f.chunk)
		}
		*f.chunk = 1
		return "prefill feeds one position per pass, as --chunk 1"
	}},
	{name: "K3_NOHUGE", apply: func(*modelFlags, map[string]bool, string) string {
		direct.SetHugePages(false)
		return "weight and cache buffers are not advised as transparent huge pages (O_DIRECT reads into 4 KiB pages are slower)"
	}},
	{name: "K3_NOSPEC", note: "k3 has no speculative expert prefetch to turn off (a layer's experts are read once the router has chosen them); --spec off turns off k3's speculative decoding, which is another thing"},
	{name: "K3_NOPREFETCH", note: "k3 always reads the experts a layer routes to in one batch of parallel reads; it has no switch to read them one by one"},
	{name: "K3_PIN_PREFIX", note: "k3 pins the largest trunk layers first and has no prefix pinning (k3 run prints which layers are pinned)"},
	{name: "K3_NOURING", note: "k3 reads with pread (O_DIRECT where the filesystem allows), not io_uring: there is nothing to turn off"},
	{name: "K3_SQPOLL", note: "k3 reads with pread (O_DIRECT where the filesystem allows), not io_uring: there is no submission-queue polling"},
}

// applyCVariables honours the C engine's environment variables that k3 has
// a switch for and warns once about each of the others; a flag given on the
// command line wins. It runs before the flags' values are checked.
func (f *modelFlags) applyCVariables(fs *flag.FlagSet, stderr io.Writer) {
	given := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	for _, v := range cVariables {
		val, ok := os.LookupEnv(v.name)
		if !ok || val == "" {
			continue
		}
		if v.apply != nil {
			fmt.Fprintf(stderr, "note: %s=%s (the C engine's variable): %s\n", v.name, val, v.apply(f, given, val))
			continue
		}
		fmt.Fprintf(stderr, "warning: %s=%s (the C engine's variable) is ignored: %s\n", v.name, val, v.note)
	}
}

// clampThreads limits a thread count to the logical CPUs the process may
// use: more only take turns on the same CPUs (and each holds a stack and
// scratch). It returns the count and a note when it clamped.
func clampThreads(n int, from string) (int, string) {
	cpus := runtime.NumCPU()
	if n <= cpus {
		return n, ""
	}
	return cpus, fmt.Sprintf("note: %d threads (%s) is more than the %d logical CPUs this machine gives k3: using %d", n, from, cpus, cpus)
}
