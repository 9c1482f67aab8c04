package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k3/engine/cachesim"
	"k3/engine/expertcache"
	"k3/engine/plan"
	"k3/storage/config"
)

func init() {
	register("sim-cache", "replay an expert trace (--dump-cache-trace) under cache policies at many sizes", runSimCache)
}

const simCacheUsage = `usage: k3 sim-cache TRACE [--capacities 8,16,...] [--slots N,...] [--policies lru,s3fifo,...]
                     [--read-policy lru] [--config PATH] [--incremental] [--json]`

// defaultCapacitiesGB are the published table's sizes.
var defaultCapacitiesGB = []float64{8, 16, 32, 64, 128, 192, 256, 384, 512, 768, 1024, 1450}

// runSimCache: k3 sim-cache TRACE [flags]. Prints the capacity table of
// testdata/seed-v1/published-data/expert-cache-capacity.txt for the chosen policies, or one JSON
// object per capacity with --json.
func runSimCache(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("sim-cache", stderr)
	caps := fs.String("capacities", "", "cache sizes in GB (1e9 bytes), comma separated (default: the published 8..1450)")
	slots := fs.String("slots", "", "cache sizes in slots (experts), comma separated, instead of --capacities")
	pols := fs.String("policies", strings.Join(cachesim.Policies, ","), "policies, one column each (any case; the engine's are "+strings.Join(expertcache.Names(), ", ")+")")
	readPol := fs.String("read-policy", expertcache.NameLRU, "policy the GB READ/TOK and SEC/TOK columns follow")
	incremental := fs.Bool("incremental", false, "replay the incremental-decode trace derived from a full-recompute trace")
	asJSON := fs.Bool("json", false, "one JSON object per line per capacity")
	cfgPath := fs.String("config", "", "config.json to take the model numbers from (default: Kimi K3 as released); --expert-bytes, --top-k, --moe-layers and --experts override it")
	m := cachesim.K3
	fs.Int64Var(&m.ExpertBytes, "expert-bytes", m.ExpertBytes, "bytes read per miss")
	fs.Float64Var(&m.DiskMBps, "disk-mbs", m.DiskMBps, "read rate in MB/s for SEC/TOK")
	fs.IntVar(&m.TopK, "top-k", m.TopK, "experts per token per MoE layer")
	fs.IntVar(&m.MoELayers, "moe-layers", m.MoELayers, "MoE layers")
	fs.IntVar(&m.Experts, "experts", m.Experts, "routed experts per layer")
	fs.Usage = func() {} // -h: the usage goes to stdout below, once
	pos, err := parseMixed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printHelp(fs, stdout, simCacheUsage)
		return ExitOK
	}
	bad := func(msg string) int {
		fmt.Fprintf(stderr, "k3 sim-cache: %s\n%s\n", msg, simCacheUsage)
		return ExitUsage
	}
	if err != nil { // parseMixed said what is wrong, in one line
		fmt.Fprintln(stderr, simCacheUsage)
		return ExitUsage
	}
	if len(pos) != 1 {
		return bad("want exactly one trace file")
	}
	if code := simModel(fs, *cfgPath, pos[0], &m, stderr); code >= 0 {
		return code
	}
	if m.ExpertBytes < 1 || m.DiskMBps <= 0 || m.TopK < 1 || m.MoELayers < 1 || m.Experts < 1 {
		return bad("--expert-bytes, --disk-mbs, --top-k, --moe-layers and --experts must be positive")
	}
	policies, rp, err := simPolicies(*pols, *readPol)
	if err != nil {
		return bad(err.Error())
	}
	sizes, err := simSizes(*caps, *slots, m, stderr)
	if err != nil {
		return bad(err.Error())
	}

	reqs, err := cachesim.ReadTrace(pos[0])
	if err != nil {
		fmt.Fprintf(stderr, "k3 sim-cache: %v\n", err)
		return ExitUsage
	}
	if *incremental {
		if reqs, err = cachesim.IncrementalFromRecompute(reqs, m.TopK); err != nil {
			fmt.Fprintf(stderr, "k3 sim-cache: --incremental: %s: %v\n", pos[0], err)
			return ExitUsage
		}
	}
	tr := cachesim.NewTrace(reqs)
	slotList := make([]int, len(sizes))
	for i, s := range sizes {
		slotList[i] = s.slots
	}
	rows, err := cachesim.Table(tr, m, policies, slotList, rp)
	if err != nil {
		fmt.Fprintf(stderr, "k3 sim-cache: %v\n", err)
		return ExitRuntime
	}
	for i := range rows {
		rows[i].CacheGB = sizes[i].gb
	}
	if *asJSON {
		return simCacheJSON(stdout, stderr, m, rows)
	}
	simCacheText(stdout, cachesim.Summarize(reqs, m, 6), m, policies, rows)
	return ExitOK
}

// simModel takes the model numbers from --config. Without it the table
// assumes Kimi K3's, and a trace of another model (its expert_hist.json,
// which k3 run --dump-cache-trace writes beside it, says so) gets a
// warning naming --config: a demo trace was sized as K3's ("holding the
// whole pool needs 1446.46 GB").
func simModel(fs *flag.FlagSet, cfgPath, trace string, m *cachesim.Model, stderr io.Writer) int {
	if cfgPath != "" {
		if err := simModelFromConfig(fs, cfgPath, m); err != nil {
			fmt.Fprintf(stderr, "k3 sim-cache: %v\n", err)
			return ExitUsage
		}
		return -1
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(trace), "expert_hist.json"))
	var h struct {
		Layers  int `json:"n_layers"`
		Experts int `json:"n_experts"`
	}
	if err != nil || json.Unmarshal(b, &h) != nil || h.Experts == 0 || flagGiven(fs, "experts") {
		return -1
	}
	if h.Experts != m.Experts || h.Layers < m.MoELayers {
		fmt.Fprintf(stderr, "warning: %s is the trace of a model of %d layers with %d routed experts each (expert_hist.json beside it), not Kimi K3 (%d MoE layers of %d): "+
			"the sizes below are Kimi K3's; --config MODEL_DIR/config.json takes that model's\n", trace, h.Layers, h.Experts, m.MoELayers, m.Experts)
	}
	return -1
}

// simModelFromConfig takes the model numbers from the config at path,
// except those given as flags.
func simModelFromConfig(fs *flag.FlagSet, path string, m *cachesim.Model) error {
	c, err := config.Load(path)
	if err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	fromCfg := cachesim.ModelFromConfig(c, m.DiskMBps)
	if !given["expert-bytes"] {
		m.ExpertBytes = fromCfg.ExpertBytes
	}
	if !given["top-k"] {
		m.TopK = fromCfg.TopK
	}
	if !given["moe-layers"] {
		m.MoELayers = fromCfg.MoELayers
	}
	if !given["experts"] {
		m.Experts = fromCfg.Experts
	}
	return nil
}

// simPolicies reads --policies (one column each) and --read-policy.
func simPolicies(list, read string) ([]string, string, error) {
	var policies []string
	for _, p := range strings.Split(list, ",") {
		n, err := cachesim.LookupPolicy(strings.TrimSpace(p))
		if err != nil {
			return nil, "", err
		}
		policies = append(policies, n)
	}
	rp, err := cachesim.LookupPolicy(strings.TrimSpace(read))
	if err != nil {
		return nil, "", fmt.Errorf("--read-policy: %v", err)
	}
	return policies, rp, nil
}

// simSize is one cache size of the table.
type simSize struct {
	gb    float64 // 0: given in slots
	slots int
}

// simSizes reads --slots or --capacities (default: the published
// capacities); a capacity too small for one layer's top-k is skipped with
// a line on stderr.
func simSizes(caps, slots string, m cachesim.Model, stderr io.Writer) ([]simSize, error) {
	var sizes []simSize
	switch {
	case caps != "" && slots != "":
		return nil, errors.New("give --capacities or --slots, not both")
	case slots != "":
		for _, f := range strings.Split(slots, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return nil, fmt.Errorf("--slots: %q is not a positive integer", f)
			}
			sizes = append(sizes, simSize{0, n})
		}
		return sizes, nil
	}
	gbs := defaultCapacitiesGB
	if caps != "" {
		gbs = nil
		for _, f := range strings.Split(caps, ",") {
			f = strings.TrimSuffix(strings.TrimSpace(f), "GB")
			g, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || !(g > 0) {
				return nil, fmt.Errorf("--capacities: %q is not a positive number of GB", f)
			}
			gbs = append(gbs, g)
		}
	}
	for _, g := range gbs {
		n := cachesim.SlotsForGB(g, m.ExpertBytes)
		if least := plan.MinExpertSlots(m.TopK); n < least { // the engine raises a smaller cache to its minimum
			fmt.Fprintf(stderr, "k3 sim-cache: skipping %s GB: %d slots < the engine's minimum of %d\n", fmtGB(g), n, least)
			continue
		}
		sizes = append(sizes, simSize{g, n})
	}
	return sizes, nil
}

func fmtGB(g float64) string { return strconv.FormatFloat(g, 'f', -1, 64) }

// simCacheText prints the report in the layout of the C tool's table, policy
// names upper-case as that table has them.
func simCacheText(w io.Writer, s cachesim.Summary, m cachesim.Model, policies []string, rows []cachesim.Row) {
	fmt.Fprintf(w, "trace: %d requests, %d distinct experts, about %d token(s)\n", s.Requests, s.Distinct, s.Tokens)
	fmt.Fprintf(w, "distinct experts touched: %d of %d (%.2f%% of the pool)\n", s.Distinct, s.Pool, pctOf(s.Distinct, s.Pool))
	fmt.Fprintf(w, "if nothing were cached: %.2f GB per token\n\n", float64(m.TokenRequests())*float64(m.ExpertBytes)/1e9)
	hot := make([]string, len(s.Hottest))
	for i, h := range s.Hottest {
		hot[i] = fmt.Sprintf("L%d/e%d x%d", h.Layer, h.Expert, h.Count)
	}
	fmt.Fprintf(w, "hottest experts: %s\n", strings.Join(hot, ", "))
	fmt.Fprintf(w, "total reuse: %d of %d requests are repeats (%.1f%%)\n\n", s.Repeats, s.Requests, pctOf(s.Repeats, s.Requests))

	widths := make([]int, len(policies))
	rule := 46
	fmt.Fprintf(w, "%-9s %8s", "CACHE", "SLOTS")
	for i, p := range policies {
		widths[i] = max(9, len(p))
		rule += widths[i] + 1
		fmt.Fprintf(w, " %*s", widths[i], strings.ToUpper(p))
	}
	fmt.Fprintf(w, " %12s %11s\n", "GB READ/TOK", "SEC/TOK")
	fmt.Fprintln(w, strings.Repeat("-", rule))
	for _, r := range rows {
		name := fmtGB(r.CacheGB) + " GB"
		if r.CacheGB == 0 {
			name = "-"
		}
		fmt.Fprintf(w, "%-9s %8d", name, r.Slots)
		for i, st := range r.Stats {
			fmt.Fprintf(w, " %*.2f%%", widths[i]-1, 100*st.HitRate())
		}
		fmt.Fprintf(w, " %12.2f %11.2f\n", r.GBPerToken, r.SecPerTok)
	}
	fmt.Fprintln(w, strings.Repeat("-", rule))
	read := expertcache.NameLRU
	if len(rows) > 0 {
		read = rows[0].ReadPolicy
	}
	read = strings.ToUpper(read)
	fmt.Fprintf(w, "SEC/TOK is expert I/O only, at the measured %.0f MB/s random-cold rate.\n", m.DiskMBps)
	fmt.Fprintf(w, "GB READ/TOK and SEC/TOK follow the %s column (misses x %d bytes / %d token(s)).\n", read, m.ExpertBytes, s.Tokens)
	var offline []string
	for _, p := range policies {
		if cachesim.Offline(p) {
			offline = append(offline, strings.ToUpper(p))
		}
	}
	switch len(offline) {
	case 0:
	case 1:
		fmt.Fprintf(w, "%s uses future knowledge: a ceiling rather than an achievable policy.\n", offline[0])
	default:
		fmt.Fprintf(w, "%s use future knowledge: ceilings rather than achievable policies.\n", strings.Join(offline, " and "))
	}
	fmt.Fprintf(w, "compulsory misses: %d (every expert must be read at least once), a ceiling of\n", s.Distinct)
	fmt.Fprintf(w, "%.2f%% hit rate for ANY policy at ANY size on this trace.\n\n", pctOf(s.Repeats, s.Requests))
	fmt.Fprintf(w, "holding every expert this trace touched needs %.2f GB.\n", float64(s.Distinct)*float64(m.ExpertBytes)/1e9)
	fmt.Fprintf(w, "holding the whole pool needs %.2f GB.\n", float64(s.Pool)*float64(m.ExpertBytes)/1e9)
}

func pctOf(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

type simCachePolicyJSON struct {
	Policy    string  `json:"policy"`
	Hits      int     `json:"hits"`
	Misses    int     `json:"misses"`
	Evictions int     `json:"evictions"`
	HitRate   float64 `json:"hit_rate"`
	GBPerTok  float64 `json:"gb_read_per_token"`
}

type simCacheRowJSON struct {
	CacheGB    float64              `json:"cache_gb,omitempty"`
	Slots      int                  `json:"slots"`
	Requests   int                  `json:"requests"`
	Tokens     int                  `json:"tokens"`
	Policies   []simCachePolicyJSON `json:"policies"`
	ReadPolicy string               `json:"read_policy"`
	GBPerTok   float64              `json:"gb_read_per_token"`
	SecPerTok  float64              `json:"sec_per_token"`
}

func simCacheJSON(stdout, stderr io.Writer, m cachesim.Model, rows []cachesim.Row) int {
	enc := json.NewEncoder(stdout)
	for _, r := range rows {
		o := simCacheRowJSON{CacheGB: r.CacheGB, Slots: r.Slots, ReadPolicy: r.ReadPolicy, GBPerTok: r.GBPerToken, SecPerTok: r.SecPerTok}
		for _, st := range r.Stats {
			o.Requests = st.Requests
			o.Policies = append(o.Policies, simCachePolicyJSON{st.Policy, st.Hits, st.Misses, st.Evictions, st.HitRate(),
				m.GBPerToken(st.Misses, st.Requests)})
		}
		o.Tokens = m.Tokens(o.Requests)
		if err := enc.Encode(o); err != nil {
			fmt.Fprintf(stderr, "k3 sim-cache: %v\n", err)
			return ExitOutput
		}
	}
	return ExitOK
}
