package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/cachesim"
	"k3/internal/fixture"
	"k3/storage/config"
)

var (
	simTrace     = fixture.Path("seed-v1/expert_trace.bin")
	simPublished = fixture.Path("seed-v1/published-data/expert-cache-capacity.txt")
)

func runSim(t *testing.T, args ...string) (code int, out, errOut string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(append([]string{"sim-cache"}, args...), &o, &e)
	return code, o.String(), e.String()
}

// TestSimCacheReproducesPublished: with the published policy columns, every
// line of the report (summary, table, footer) is a line of the published
// expert-cache-capacity.txt, except the two this command adds.
func TestSimCacheReproducesPublished(t *testing.T) {
	code, out, errOut := runSim(t, simTrace, "--policies", "lru,belady,pin+lru")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	pub, err := os.ReadFile(simPublished)
	if err != nil {
		t.Fatal(err)
	}
	published := map[string]bool{}
	for _, l := range strings.Split(string(pub), "\n") {
		published[l] = true
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	rows := 0
	for _, l := range lines {
		if l == "" || strings.HasPrefix(l, "GB READ/TOK and SEC/TOK follow the LRU column") ||
			l == "BELADY and PIN+LRU use future knowledge: ceilings rather than achievable policies." {
			continue
		}
		if !published[l] {
			t.Errorf("line not in the published table:\n%q", l)
		}
		if strings.HasSuffix(l, "%") || strings.Contains(l, "% ") && strings.Contains(l, " GB ") {
			rows++
		}
	}
	if !strings.Contains(out, "CACHE        SLOTS       LRU    BELADY   PIN+LRU  GB READ/TOK     SEC/TOK\n") ||
		!strings.Contains(out, "64 GB         3647    36.24%    61.74%    48.66%        16.47       13.35\n") ||
		rows != 12 || len(lines) != 30 {
		t.Errorf("unexpected report (%d lines, %d table rows):\n%s", len(lines), rows, out)
	}
}

func TestSimCacheJSON(t *testing.T) {
	code, out, errOut := runSim(t, simTrace, "--json", "--capacities", "8,64GB", "--policies", "LRU,s3fifo, Layer+R,belady")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 JSON lines, got %d:\n%s", len(lines), out)
	}
	var row simCacheRowJSON
	if err := json.Unmarshal([]byte(lines[1]), &row); err != nil {
		t.Fatal(err)
	}
	if row.CacheGB != 64 || row.Slots != 3647 || row.Requests != 100096 || row.Tokens != 68 || row.ReadPolicy != "lru" || len(row.Policies) != 4 {
		t.Fatalf("row %+v", row)
	}
	want := map[string]int{"lru": 36272, "s3fifo": 50016, "layer+r": 61518, "belady": 61801}
	for _, p := range row.Policies {
		if p.Hits != want[p.Policy] || p.Hits+p.Misses != 100096 {
			t.Errorf("%s: %d hits, want %d", p.Policy, p.Hits, want[p.Policy])
		}
	}
	if s := strings.TrimSpace(strings.Split(out, "\n")[0]); !strings.HasPrefix(s, `{"cache_gb":8,"slots":455,"requests":100096,"tokens":68,"policies":[{"policy":"lru","hits":36272,`) {
		t.Errorf("first line %s", s)
	}
}

func TestSimCacheSlotsAndIncremental(t *testing.T) {
	code, out, errOut := runSim(t, "--slots", "1823", "--policies", "lru,layer+r", "--incremental", "--read-policy", "layer+r", simTrace)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"trace: 17664 requests, 10010 distinct experts, about 12 token(s)",
		"-             1823    30.16%    30.80%",
		"GB READ/TOK and SEC/TOK follow the LAYER+R column",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}

// TestSimCacheConfig: --config takes the model numbers from a config; the
// released one gives the built-in K3 report, and explicit flags win.
func TestSimCacheConfig(t *testing.T) {
	args := []string{simTrace, "--capacities", "8,64", "--policies", "lru,layer+r,belady"}
	code, want, errOut := runSim(t, args...)
	require.Equal(t, ExitOK, code, errOut)
	code, got, errOut := runSim(t, append(args, "--config", fixture.Path("kimi-k3/released-config.json"))...)
	require.Equal(t, ExitOK, code, errOut)
	assert.Equal(t, want, got, "the released config is the K3 default")

	tinyCfg := filepath.Join(tinyRelease, "config.json")
	c, err := config.Load(tinyCfg)
	require.NoError(t, err)
	m := cachesim.ModelFromConfig(c, cachesim.DiskMBps)
	code, got, errOut = runSim(t, simTrace, "--slots", "2000", "--policies", "lru", "--config", tinyCfg, "--experts", "896")
	require.Equal(t, ExitOK, code, errOut)
	assert.Contains(t, got, fmt.Sprintf("distinct experts touched: 10010 of %d ", m.MoELayers*896), "--experts wins over the config")
	assert.Contains(t, got, fmt.Sprintf("follow the LRU column (misses x %d bytes / %d token(s))", m.ExpertBytes, 100096/(m.TopK*m.MoELayers)))

	code, _, errOut = runSim(t, simTrace, "--config", fixture.Path("seed-v1/cfg/bad_topk.json"))
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errOut, "k3 sim-cache: config "+fixture.Path("seed-v1/cfg/bad_topk.json")+" is refused")
}

func TestSimCacheErrors(t *testing.T) {
	dir := t.TempDir()
	odd := filepath.Join(dir, "odd.bin")
	os.WriteFile(odd, []byte{1, 0, 0, 0, 2, 0, 0, 0, 3}, 0o644)
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{nil, ExitUsage, "want exactly one trace file"},
		{[]string{odd}, ExitUsage, odd + ": offset 9: length 9 is not a multiple of 8"},
		{[]string{filepath.Join(dir, "none.bin")}, ExitUsage, "no such file"},
		{[]string{simTrace, "--policies", "fifo"}, ExitUsage, `unknown cache policy "fifo"`},
		{[]string{simTrace, "--policies", "S3-FIFO"}, ExitUsage, `unknown cache policy "S3-FIFO" (known: lru, s3fifo, s3fifo-ws, lfu, layer, layer+r, belady, pin+lru)`},
		{[]string{simTrace, "--read-policy", "opt"}, ExitUsage, `--read-policy: unknown cache policy "opt"`},
		{[]string{simTrace, "--slots", "10", "--capacities", "8"}, ExitUsage, "not both"},
		{[]string{simTrace, "--capacities", "x"}, ExitUsage, "not a positive number"},
		{[]string{simTrace, "--slots", "0"}, ExitUsage, "not a positive integer"},
		{[]string{odd, "--incremental"}, ExitUsage, "offset 9"},
	} {
		code, _, errOut := runSim(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errOut, c.code, c.msg)
		}
	}
	// a bad flag or value: said once (it was said twice), then the usage
	for _, args := range [][]string{{"--bogus"}, {simTrace, "--top-k", "x"}} {
		code, _, errOut := runSim(t, args...)
		assert.Equal(t, ExitUsage, code, args)
		assert.Equal(t, 1, strings.Count(errOut, "k3 sim-cache: "), errOut)
		assert.Contains(t, errOut, "usage: k3 sim-cache", args)
	}
	// --help: the usage and each flag once, on stdout (the flag list
	// was printed twice, once on each stream)
	code, out, errOut := runSim(t, "--help")
	assert.Equal(t, ExitOK, code)
	assert.Contains(t, out, "usage: k3 sim-cache")
	assert.Equal(t, 1, strings.Count(out, "-capacities string"), out)
	assert.Empty(t, errOut)
}

// TestSimCacheOtherModelWarned: a trace of another model than Kimi K3 (its
// expert_hist.json says so) is sized as K3 only with a warning naming
// --config; with --config, or for the seed's K3 trace, none.
func TestSimCacheOtherModelWarned(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := runK3("run", tinyRelease, "--ids", "491,109,188", "--gen", "2", "--dump-cache-trace", dir, "--out=")
	require.Equal(t, ExitOK, code, out+errs)
	trace := filepath.Join(dir, "expert_trace.bin")
	code, _, errOut := runSim(t, trace, "--slots", "4")
	require.Equal(t, ExitOK, code, errOut)
	assert.Equal(t, "warning: "+trace+" is the trace of a model of 8 layers with 8 routed experts each (expert_hist.json beside it), not Kimi K3 (92 MoE layers of 896): "+
		"the sizes below are Kimi K3's; --config MODEL_DIR/config.json takes that model's\n", errOut)
	code, got, errOut := runSim(t, trace, "--slots", "4", "--config", filepath.Join(tinyRelease, "config.json"))
	require.Equal(t, ExitOK, code, errOut)
	assert.Empty(t, errOut)
	assert.Contains(t, got, " of 48 ", "6 MoE layers of 8 experts")
	code, _, errOut = runSim(t, simTrace, "--slots", "1823", "--policies", "lru")
	require.Equal(t, ExitOK, code, errOut)
	assert.Empty(t, errOut)
}
