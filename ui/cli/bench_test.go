package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestBenchUsage: every bench names its usage on --help (exit 0) and on a
// bad flag (exit 2), without measuring anything.
func TestBenchUsage(t *testing.T) {
	for _, what := range []string{"kernels", "layer", "stream"} {
		var out, errb bytes.Buffer
		if code := run([]string{"bench", what, "--help"}, &out, &errb); code != ExitOK {
			t.Fatalf("bench %s --help: exit %d", what, code)
		}
		if want := "usage: k3 bench " + what + " ["; !strings.HasPrefix(errb.String(), want) {
			t.Fatalf("bench %s --help printed %q", what, errb.String())
		}
		out.Reset()
		errb.Reset()
		if code := run([]string{"bench", what, "--bogus"}, &out, &errb); code != ExitUsage {
			t.Fatalf("bench %s --bogus: exit %d", what, code)
		}
		if !strings.Contains(errb.String(), "usage: k3 bench "+what) || out.Len() != 0 {
			t.Fatalf("bench %s --bogus: stdout %q stderr %q", what, out.String(), errb.String())
		}
	}
}
