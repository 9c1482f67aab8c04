package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/doctor"
	"k3/engine"
	"k3/machine"
	"k3/tokenizer"
)

// TestCLIBaseline: a k3 CLI process holds at most doctor.CLIBaselineBytes
// before a run's plan allocates anything: the Go runtime, the binary (this
// test binary links the packages k3 does, the window toolkit too in the
// default build) and the tokenizer of Kimi K3's vocabulary size (163,584
// base ranks and 256 specials), loaded through the CLI (k3 tokenize, the
// loader k3 run and k3 chat use before they open the model). The child
// process reports its resident size and its peak (VmHWM) after the
// command; the doctor's plans of k3 run and k3 chat count the constant as
// their process base.
func TestCLIBaseline(t *testing.T) {
	if raceEnabled {
		t.Skip("memory measured in the plain run: the race detector's shadow memory multiplies the resident size")
	}
	if dir := os.Getenv("K3_BASE_CHILD"); dir != "" {
		// k3 run and k3 chat parse their flags, load the tokenizer, then
		// plan (engine.ProcessBase samples the base)
		code := runCLI([]string{"tokenize", "--tok", dir, "--text", "Kimi K3 runs on one machine."})
		tok, err := tokenizer.Load(dir)
		if err != nil || code != 0 {
			os.Exit(9)
		}
		fmt.Printf("\nrss %d peak %d\n", engine.ProcessBase(), machine.PeakRSS())
		runtime.KeepAlive(tok)
		os.Exit(0)
	}
	if machine.RSS() <= 0 {
		t.Skip("no resident size on this platform")
	}
	dir := t.TempDir()
	writeK3SizeTokenizer(t, dir)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCLIBaseline$", "-test.count=1")
	cmd.Env = append(os.Environ(), "K3_BASE_CHILD="+dir)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Run(), errb.String())
	var rss, peak int64
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "rss ") {
			_, err := fmt.Sscanf(sc.Text(), "rss %d peak %d", &rss, &peak)
			require.NoError(t, err)
		}
	}
	require.Positive(t, rss, "the child reported no resident size:\n%s", out.String())
	t.Logf("a CLI process with K3's tokenizer: %.1f MB resident, %.1f MB peak; the doctor counts %.1f MB (the app %.1f MB)",
		float64(rss)/1e6, float64(peak)/1e6, float64(doctor.CLIBaselineBytes)/1e6, float64(doctor.AppBaselineBytes)/1e6)
	assert.LessOrEqual(t, rss, int64(doctor.CLIBaselineBytes))
	assert.Less(t, int64(doctor.CLIBaselineBytes), int64(doctor.AppBaselineBytes))
}

// writeK3SizeTokenizer writes a tokenizer of Kimi K3's size to dir: the 256
// single bytes and 163,328 more distinct tokens of 2 to 13 bytes (the real
// vocabulary's are mostly that long), ranked in order, and no special names
// (the loader names the 256 specials itself).
func writeK3SizeTokenizer(t *testing.T, dir string) {
	const base = 163840 - tokenizer.NumSpecial
	var b bytes.Buffer
	seen := map[string]bool{}
	x := uint64(88172645463325252)
	for rank := 0; rank < base; rank++ {
		tok := []byte{byte(rank)}
		for rank >= 256 && (len(tok) < 2 || seen[string(tok)]) {
			tok = make([]byte, 2+rank%12)
			for i := range tok {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				tok[i] = byte(x)
			}
		}
		seen[string(tok)] = true
		fmt.Fprintf(&b, "%s %d\n", base64.StdEncoding.EncodeToString(tok), rank)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, tokenizer.ModelFile), b.Bytes(), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, tokenizer.ConfigFile), []byte(`{"added_tokens_decoder": {}}`), 0o644))
}
