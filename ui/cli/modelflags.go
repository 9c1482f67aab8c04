package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"k3/doctor"
	"k3/engine"
	"k3/engine/chat"
	"k3/engine/expertcache"
	"k3/engine/plan"
	"k3/machine"
	"k3/storage/config"
	"k3/storage/units"
	"k3/tokenizer"
)

// modelFlags are the flags every command that runs the model shares.
type modelFlags struct {
	cmd      string
	cfgPath  *string
	layers   *int
	threads  *int
	chunk    *int
	cacheGB  *float64
	trunkDir *string
	trunkGB  *float64
	ring     *int
	preset   *string
	ultra    *bool
	policy   *string
	specFlag *string
	draft    *string
	// draftStream streams the draft model whatever the memory
	draftStream *bool
	// spec is --spec, parsed by resolve
	spec engine.Spec
	// threadsFrom says where the thread count comes from (resolve)
	threadsFrom string
}

// threadEnv are the environment variables that set the thread count when
// --threads is not given, first found wins (OMP_NUM_THREADS: as the C
// engine's scripts set it).
var threadEnv = []string{"K3_THREADS", "OMP_NUM_THREADS"}

// resolveThreads applies K3_THREADS / OMP_NUM_THREADS when --threads is not
// given and records where the count comes from; it returns an error for a
// value that is not a positive integer.
func (f *modelFlags) resolveThreads() error {
	switch {
	case *f.threads > 0:
		f.threadsFrom = "--threads"
		return nil
	case *f.threads < 0:
		return fmt.Errorf("--threads %d must be 0 (one per physical core) or more", *f.threads)
	}
	for _, env := range threadEnv {
		v := strings.TrimSpace(os.Getenv(env))
		if v == "" {
			continue
		}
		first := v
		if env == "OMP_NUM_THREADS" {
			// OpenMP's list of nested levels (4,2): the outer level's count
			first, _, _ = strings.Cut(v, ",")
			first = strings.TrimSpace(first)
		}
		n, err := strconv.Atoi(first)
		if err != nil || n < 1 || !units.Digits(first) {
			return fmt.Errorf("%s=%q is not a positive thread count", env, v)
		}
		*f.threads, f.threadsFrom = n, env
		return nil
	}
	*f.threads, f.threadsFrom = machine.DefaultThreads(), "one per physical core"
	return nil
}

func addModelFlags(fs *flag.FlagSet, cmd string) *modelFlags {
	return &modelFlags{
		cmd:      cmd,
		cfgPath:  fs.String("config", "", "config file (default MODEL_DIR/config.json)"),
		layers:   fs.Int("layers", 0, "bind only the first N layers (the output is then not the model's)"),
		threads:  fs.Int("threads", 0, "worker threads (default: one per physical core)"),
		chunk:    fs.Int("chunk", 0, "prefill chunk: prompt positions read per pass (default: the longest the memory plan holds)"),
		cacheGB:  fs.Float64("cache-gb", 64, "routed-expert cache budget in GB (1 GB = 1e9 bytes)"),
		trunkDir: fs.String("trunk", "", "packed trunk directory (k3 pack): stream layers that do not fit --trunk-gb"),
		trunkGB:  fs.Float64("trunk-gb", 16, "budget for pinned trunk layers plus the streaming ring, in GB"),
		ring:     fs.Int("trunk-ring", 2, "ring slots for streamed layers (read ahead while the current layer computes)"),
		preset:   fs.String("preset", "", "memory preset: "+strings.Join(plan.Names(), ", ")+" (see k3 presets)"),
		policy:   fs.String("cache-policy", expertcache.Default, "expert cache replacement: "+orList(expertcache.Names())+" (k3 sim-cache compares them)"),
		ultra:    fs.Bool("ultra-low-memory", false, "read embedding rows and lm_head from the packed trunk as needed (needs --trunk)"),
		specFlag: fs.String("spec", "auto", "speculative decoding: auto (draft when it pays), off (or 0), or N draft tokens per pass; the output is the same"),
		draft:    fs.String("draft", "", "DSpark draft model directory (docs/DSPARK.md): speculative decoding drafts with it instead of copying from the context"),
		draftStream: fs.Bool("draft-stream", false, "stream the --draft model (read its matrices once per drafting cycle) even where it fits resident;"+
			" by default it is streamed only where it does not"),
	}
}

// resolve applies a preset (explicit --trunk-gb/--cache-gb win) and checks
// ranges. It returns an exit code, or -1 to go on.
func (f *modelFlags) resolve(fs *flag.FlagSet, stdout, stderr io.Writer) int {
	f.applyCVariables(fs, stderr)
	given := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	if code := f.applyPreset(given, stdout, stderr); code >= 0 {
		return code
	}
	switch {
	case *f.ring < 1 || *f.ring > 8:
		fmt.Fprintf(stderr, "k3 %s: --trunk-ring must be 1..8\n", f.cmd)
		return ExitUsage
	case given["chunk"] && (*f.chunk < 1 || *f.chunk > plan.MaxChunk):
		fmt.Fprintf(stderr, "k3 %s: --chunk %d: give 1..%d prompt positions per pass, or leave --chunk out to let the memory plan choose\n", f.cmd, *f.chunk, plan.MaxChunk)
		return ExitUsage
	case !knownPolicy(*f.policy):
		fmt.Fprintf(stderr, "k3 %s: --cache-policy %q is not %s\n", f.cmd, *f.policy, orList(expertcache.Names()))
		return ExitUsage
	case *f.ultra && *f.trunkDir == "":
		fmt.Fprintf(stderr, "k3 %s: --ultra-low-memory (and --preset ultra) stream the model tables from a packed trunk: give --trunk DIR (see k3 pack)\n", f.cmd)
		return ExitUsage
	case *f.trunkGB < 0 || *f.cacheGB < 0:
		fmt.Fprintf(stderr, "k3 %s: budgets must not be negative\n", f.cmd)
		return ExitUsage
	case !(*f.trunkGB <= maxBudgetGB) || !(*f.cacheGB <= maxBudgetGB): // NaN too
		// a budget in bytes must fit an int64 (beyond it wrapped to a negative one)
		fmt.Fprintf(stderr, "k3 %s: --trunk-gb %g / --cache-gb %g: budgets are at most %g GB\n", f.cmd, *f.trunkGB, *f.cacheGB, float64(maxBudgetGB))
		return ExitUsage
	case *f.layers < 0:
		fmt.Fprintf(stderr, "k3 %s: --layers %d must be 0 (all) or more\n", f.cmd, *f.layers)
		return ExitUsage
	}
	f.noteTrunkBudget(given, stderr)
	if err := f.resolveThreads(); err != nil {
		fmt.Fprintf(stderr, "k3 %s: %v\n", f.cmd, err)
		return ExitUsage
	}
	if n, note := clampThreads(*f.threads, f.threadsFrom); note != "" {
		fmt.Fprintln(stderr, note)
		*f.threads = n
	}
	sp, err := engine.ParseSpec(*f.specFlag)
	if err != nil {
		fmt.Fprintf(stderr, "k3 %s: --spec: %v\n", f.cmd, err)
		return ExitUsage
	}
	f.spec = sp
	if *f.ultra && sp > 0 && *f.draft == "" {
		fmt.Fprintf(stderr, "k3 %s: --spec %d: ultra plans no speculative decoding (its memory floor keeps no verification pass's record); leave --spec out or pick --preset laptop\n", f.cmd, int(sp))
		return ExitUsage
	}
	return -1
}

// applyPreset applies --preset (auto from this machine's memory): its
// budgets, except a --trunk-gb or --cache-gb given, and ultra mode. It
// returns an exit code, or -1 to go on.
func (f *modelFlags) applyPreset(given map[string]bool, stdout, stderr io.Writer) int {
	if *f.preset == "" {
		return -1
	}
	var mem *plan.Memory
	if *f.preset == "auto" {
		m, err := doctor.ReadMemory()
		if err != nil {
			fmt.Fprintf(stderr, "k3 %s: --preset auto needs the available memory: %v\n", f.cmd, err)
			return ExitUsage
		}
		mem = &m
	}
	b, err := plan.Resolve(*f.preset, mem, doctor.Need)
	switch {
	case errors.Is(err, plan.ErrUnknownPreset):
		fmt.Fprintf(stderr, "k3 %s: unknown preset %q\n%s", f.cmd, *f.preset, plan.Table(doctor.Need))
		return ExitUsage
	case err != nil:
		fmt.Fprintf(stderr, "k3 %s: --preset %v\n", f.cmd, err)
		return ExitUsage
	}
	if *f.preset == "auto" {
		fmt.Fprintf(stdout, "auto: preset %s (trunk %.2f GB, expert cache %.2f GB), the largest whose memory plan fits %s usable\n",
			b.Preset, b.TrunkGB, b.CacheGB, units.Bytes(mem.Usable()))
	}
	t, c := b.TrunkGB, b.CacheGB
	*f.ultra = *f.ultra || b.Ultra
	if !given["trunk-gb"] {
		*f.trunkGB = t
	}
	if !given["cache-gb"] {
		*f.cacheGB = c
	}
	return -1
}

// noteTrunkBudget says that a trunk budget given without --trunk is not
// used: only a packed trunk streams, so every layer is bound from the
// checkpoint (on Kimi K3 the plan then holds the whole trunk, and a laptop
// budget is refused for more than it asked).
func (f *modelFlags) noteTrunkBudget(given map[string]bool, stderr io.Writer) {
	if *f.trunkDir != "" {
		return
	}
	from := ""
	switch {
	case given["trunk-gb"]:
		from = fmt.Sprintf("--trunk-gb %g", *f.trunkGB)
	case given["trunk-ring"]:
		from = fmt.Sprintf("--trunk-ring %d", *f.ring)
	case *f.preset != "":
		from = fmt.Sprintf("--preset %s's trunk budget (%.2f GB)", *f.preset, *f.trunkGB)
	default:
		return
	}
	fmt.Fprintf(stderr, "note: %s is for streaming layers from a packed trunk: without --trunk DIR (see k3 pack) every layer is bound from the checkpoint and held in memory\n", from)
}

// maxBudgetGB bounds --trunk-gb and --cache-gb: 9e9 GB is 9e18 bytes, just
// inside an int64.
const maxBudgetGB = 9e9

// options are the engine options the flags give, for a run that needs
// `positions` of context (and the logits of every position with allLogits).
func (f *modelFlags) options(positions int, allLogits bool) engine.Options {
	o := engine.Options{Config: *f.cfgPath, Layers: *f.layers, TrunkDir: *f.trunkDir,
		Budget:      engine.Budget{TrunkBytes: int64(*f.trunkGB * 1e9), Ring: *f.ring, CacheBytes: int64(*f.cacheGB * 1e9), Ultra: *f.ultra},
		CachePolicy: *f.policy, Chunk: *f.chunk, Positions: positions, AllLogits: allLogits}
	if f.spec != engine.SpecOff {
		o.Draft, o.DraftStream = *f.draft, *f.draftStream
	}
	switch {
	case f.spec == engine.SpecOff:
		o.MaxDraft = -1 // no rollback record to plan for
	case int(f.spec) > engine.DefaultMaxDraft:
		o.MaxDraft = int(f.spec)
	}
	return o
}

// open checks the plan against the available memory, opens the model and
// prints its summary and plan. It returns an exit code, or -1 with the model.
func (f *modelFlags) open(dir string, o engine.Options, stdout, stderr io.Writer) (*engine.Model, int) {
	avail := ""
	if mem, err := doctor.ReadMemory(); err == nil {
		o.Memory = &mem
		avail = ", available memory " + units.Bytes(mem.Usable())
	}
	m, err := engine.Open(dir, o)
	if err != nil {
		var ce *config.Error
		var pe *engine.PlanError
		switch {
		case errors.As(err, &ce) || errors.Is(err, os.ErrNotExist) || errors.Is(err, engine.ErrOptions) || errors.Is(err, engine.ErrDraftMismatch):
			fmt.Fprintf(stderr, "k3 %s: %v\n", f.cmd, err)
			return nil, ExitUsage
		case errors.As(err, &pe):
			fmt.Fprintf(stderr, "k3 %s: refused before loading anything: %v", f.cmd, err)
			return nil, ExitRuntime
		}
		fmt.Fprintf(stderr, "k3 %s: %v\n", f.cmd, err)
		return nil, ExitRuntime
	}
	fmt.Fprintln(stdout, m.Cfg.Summary())
	if m.Bound < m.Cfg.Layers {
		fmt.Fprintf(stdout, "NOTE: binding only the first %d of %d layers: the output is NOT the model's\n", m.Bound, m.Cfg.Layers)
	}
	fmt.Fprint(stdout, m.Plan.String())
	if d := m.DraftModel(); d != nil {
		where := "resident"
		if m.Plan.DraftStreamed {
			where = fmt.Sprintf("streamed: %s kept, %s read per drafting cycle", units.Bytes(d.StreamBytes), units.Bytes(d.ReadBytes))
		}
		fmt.Fprintf(stdout, "draft model: %s (%d layers over target layers %v, %s; %s)\n", d.Dir, d.Cfg.Layers, d.Cfg.TargetLayers, units.Bytes(d.Bytes), where)
	}
	preset := "no preset"
	if *f.preset != "" {
		preset = "preset " + *f.preset
	}
	fmt.Fprintf(stdout, "budgets: %s: trunk %.2f GB, expert cache %.2f GB%s\n", preset, *f.trunkGB, *f.cacheGB, avail)
	if f.threadsFrom != "" {
		fmt.Fprintf(stdout, "threads: %d (%s)\n", *f.threads, f.threadsFrom)
	}
	f.printCacheAndTrunk(m, stdout)
	return m, -1
}

// printCacheAndTrunk prints the expert cache's slots, their size and share
// of the routed experts, and the policy; and with a packed trunk, the
// trunk hit rate: the share of layers every pass finds pinned in RAM (the
// others are read again each pass, so it is the same on every pass).
func (f *modelFlags) printCacheAndTrunk(m *engine.Model, stdout io.Writer) {
	p := m.Plan
	if p.CacheSlots > 0 {
		pool := m.Cfg.Experts * max(0, m.Bound-m.Cfg.FirstKDense)
		policy := *f.policy
		if policy == "" {
			policy = expertcache.Default
		}
		fmt.Fprintf(stdout, "expert cache: %d slots x %s = %s (%.2f%% of the %d routed experts in the bound layers, policy %s)\n",
			p.CacheSlots, units.Bytes(p.CacheBytes/int64(p.CacheSlots)), units.Bytes(p.CacheBytes), 100*float64(p.CacheSlots)/float64(max(pool, 1)), pool, policy)
	}
	if *f.trunkDir == "" || len(p.Pinned) == 0 {
		return
	}
	pinned := 0
	for _, x := range p.Pinned {
		if x {
			pinned++
		}
	}
	fmt.Fprintf(stdout, "trunk hit rate: %.1f%% (%d of %d layers pinned, read once; the other %d are read from %s on every pass)\n",
		100*float64(pinned)/float64(len(p.Pinned)), pinned, len(p.Pinned), len(p.Pinned)-pinned, *f.trunkDir)
}

// openChat opens the model for a command that holds conversations (k3 chat,
// k3 serve): the plan reserves positions plus the state copies a chat
// session keeps, the tokenizer must fit the model's vocabulary, and an
// engine is made on the model. close releases both; a code >= 0 is the
// exit code to stop with (the reason is printed).
func (f *modelFlags) openChat(dir string, positions int, tok *tokenizer.Tokenizer, stdout, stderr io.Writer) (e *engine.Engine, o engine.Options, close func(), code int) {
	o = f.options(positions, false)
	o.StateCopies = chat.StateCopies(o)
	o.Picture = plan.DefaultPicture // a conversation may be given a picture
	m, code := f.open(dir, o, stdout, stderr)
	if code >= 0 {
		return nil, o, nil, code
	}
	if m.Cfg.VocabSize < tok.VocabSize() {
		m.Close()
		fmt.Fprintf(stderr, "k3 %s: the tokenizer has %d ids but the model only %d\n", f.cmd, tok.VocabSize(), m.Cfg.VocabSize)
		return nil, o, nil, ExitUsage
	}
	e = m.NewEngine(*f.threads)
	return e, o, func() { e.Close(); m.Close() }, -1
}

// knownPolicy reports whether the expert cache registry has the policy.
func knownPolicy(name string) bool {
	_, ok := expertcache.Lookup(name)
	return ok
}

// orList renders names as "a, b, c or d".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
