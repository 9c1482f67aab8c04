package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"unicode"

	"k3/doctor"
	"k3/doctor/measure"
	"k3/engine"
	"k3/engine/chat"
	"k3/engine/plan"
	"k3/engine/synth"
	st "k3/storage/safetensors"
	"k3/tokenizer"
	"k3/tokenizer/xtml"
)

// specPrompt is one prompt of the fixed set, asked of the model as a chat
// session asks it (default options: thinking on). A second turn's history
// is the model's own first reply. kind checks that the reply is of the
// kind the prompt asks for; a model too small to give one is reported as
// such, its acceptance measured on what it did say.
type specPrompt struct {
	name  string
	turns []string // user messages; the last is the one measured
	kind  func(reply xtml.Reply, prompt string) string
}

// specSummarised is the text the summarise prompt gives.
var specSummarised = refPrompts[2].msgs[0].Content

var specPrompts = []specPrompt{
	{"chat", []string{"Tell me a saying about love."}, answered},
	{"code", []string{refPrompts[1].msgs[0].Content}, isCode},
	{"summarise", []string{specSummarised}, summarises},
	{"second turn", []string{"Tell me a saying about love.", "Do you know a saying about time?"}, answered},
}

// answered: a chat reply needs an answer.
func answered(a xtml.Reply, _ string) string {
	if strings.TrimSpace(a.Content) == "" {
		return "no answer"
	}
	return ""
}

// isCode: the code prompt asks for a Go function.
func isCode(a xtml.Reply, _ string) string {
	if !strings.Contains(a.Content, "func ") || !strings.Contains(a.Content, "{") {
		return "the model cannot write code: its reply is not a Go function"
	}
	return ""
}

// summarises: most of a summary's longer words come from the text.
func summarises(a xtml.Reply, prompt string) string {
	words := func(s string) []string {
		return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) })
	}
	src := words(prompt)
	var n, from int
	for _, w := range words(a.Content) {
		if len(w) >= 4 {
			n++
			if slices.Contains(src, w) {
				from++
			}
		}
	}
	if n < 8 || 2*from < n {
		return fmt.Sprintf("the model cannot summarise: %d of the %d longer words of its reply are from the text", from, n)
	}
	return ""
}

// specSamplings are the two ways each prompt is decoded.
var specSamplings = []struct {
	name string
	s    engine.Sampling
}{{"greedy", engine.Sampling{}}, {"seed 7", Seeded(7)}}

// Seeded is the sampling of the seeded rows, with a seed.
func Seeded(seed uint64) engine.Sampling {
	return engine.Sampling{Temperature: 0.8, TopK: 40, TopP: 0.95, Seed: seed}
}

// ChatOptions are the options of the chat sessions whose replies the bench
// measures (tools/demo/prep generates the drafters' training replies with
// them too): thinking first, no drafting, the sampling given.
func ChatOptions(sm engine.Sampling, maxTokens int) chat.Options {
	return chat.Options{Thinking: true, MaxTokens: maxTokens, Spec: engine.SpecOff, Sampling: sm}
}

// SpecLine is one line of `k3 bench spec --json`.
type SpecLine struct {
	Kind            string  `json:"kind"`              // reply, acceptance, timing, disk, overlap, projection, ceiling, reference
	Compute         string  `json:"compute,omitempty"` // projection: "measured" or "read-bound"
	Prompt          string  `json:"prompt,omitempty"`
	Sampling        string  `json:"sampling,omitempty"`
	Preset          string  `json:"preset,omitempty"`
	Spec            string  `json:"spec,omitempty"` // off, auto or a forced length
	Tokens          int     `json:"tokens,omitempty"`
	Passes          int     `json:"passes,omitempty"`
	Drafted         int     `json:"spec_drafted,omitempty"`
	Accepted        int     `json:"spec_accepted,omitempty"`
	AcceptedPerPass float64 `json:"accepted_per_pass,omitempty"`
	PassesPerToken  float64 `json:"passes_per_token,omitempty"`
	SecondsPerToken float64 `json:"seconds_per_token,omitempty"`
	BytesPerToken   float64 `json:"bytes_per_token,omitempty"`
	BytesRatio      float64 `json:"bytes_ratio,omitempty"` // bytes per token without speculation / with
	Lengths         []int   `json:"draft_lengths,omitempty"`
	Positions       int     `json:"positions,omitempty"`
	Seconds         float64 `json:"seconds,omitempty"`
	GBps            float64 `json:"gbps,omitempty"`
	Efficiency      float64 `json:"overlap_efficiency,omitempty"`
	TooWeak         bool    `json:"too_weak,omitempty"`
	Text            string  `json:"text,omitempty"`
	Note            string  `json:"note,omitempty"`
	// for the tables only: the model's folder (reply lines), whether
	// SecondsPerToken was projected (projection and ceiling lines), and
	// the overlap measured (the overlap line)
	Model   string          `json:"-"`
	Timed   bool            `json:"-"`
	Overlap measure.Overlap `json:"-"`
}

// releasedKinds are the released model's layers by kind.
var releasedKinds = map[string]int{"kda+dense": 1, "kda+moe": 68, "mla+moe": 24}

// specCase is one prompt decoded one way: every run of it made the same
// ids (checked), by plain decoding and at each forced draft length.
type specCase struct {
	prompt, sampling string
	ids              []int // the prompt's ids
	sampler          func() engine.Sampler
	off              *engine.GenResult
	forced           []*engine.GenResult // index k-1: drafts of up to k tokens
	draftForced      []*engine.GenResult // the same with the draft model (--draft)
	weak             string
}

// SpecConfig is what `k3 bench spec` measures.
type SpecConfig struct {
	Model     string // the trained model asked ("": the demo model, written to a temporary folder)
	Draft     string // also draft with this DSpark draft model ("": none)
	Dir       string // where the real-width checkpoint of k3 bench layer is generated (reused)
	Threads   int    // 0: physical cores
	MaxDraft  int    // longest draft
	MaxTokens int    // reply cap in tokens
	Reps      int    // timed passes per length (the fastest counts)
	// AcceptanceOnly stops after the replies, the acceptance and the
	// read-bound projection (no checkpoint, no timing); Reference adds the
	// drafter over the hand-written replies
	AcceptanceOnly, Reference bool
	Emit                      func(SpecLine) // every line, in order
	Logf                      func(string, ...any)
}

// Spec asks the model the fixed prompts greedy and with a seed, without
// speculation and at every forced draft length (the same ids, checked),
// and emits: a reply line per case, acceptance lines, the read-bound
// projection and ceiling per preset and case, with Reference the
// hand-written replies, then (unless AcceptanceOnly) the disk, a streamed
// decode's overlap, the compute of verification passes timed at the real
// K3 width and the projection at those costs.
func Spec(ctx context.Context, cfg SpecConfig) error {
	b := &specBench{ctx: ctx, cfg: cfg}
	defer b.close()
	for _, phase := range []func() error{b.open, b.replies, b.acceptance, b.readBound, b.measured} {
		if err := phase(); err != nil {
			return err
		}
	}
	return nil
}

// specBench is one run of Spec: its phases are its methods.
type specBench struct {
	ctx           context.Context
	cfg           SpecConfig
	md            string // the model's folder
	tok           *tokenizer.Tokenizer
	e             *engine.Engine
	gen, genDraft genFunc // generate without and with the draft model (nil: no --draft)
	cases         []*specCase
	closers       []func() // run in reverse by close
}

// close releases what open took, the last first.
func (b *specBench) close() {
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
}

// open opens the model (the demo, written to a temporary folder, when
// none is named) and with --draft the same model with the draft model.
func (b *specBench) open() error {
	cfg := b.cfg
	b.md = cfg.Model
	if b.md == "" {
		tmp, err := os.MkdirTemp("", "k3-bench-spec-")
		if err != nil {
			return err
		}
		b.closers = append(b.closers, func() { os.RemoveAll(tmp) })
		if err := synth.WriteDemo(tmp, "small"); err != nil {
			return err
		}
		b.md = tmp
	}
	var err error
	if b.tok, err = tokenizer.Load(b.md); err != nil {
		return err
	}
	if b.e, err = b.engine(""); err != nil {
		return err
	}
	b.gen = b.genOn(b.e, "")
	if cfg.Draft != "" {
		de, err := b.engine(cfg.Draft)
		if err != nil {
			return err
		}
		b.genDraft = b.genOn(de, " with the draft model")
	}
	return nil
}

// engine opens the model with every expert cached, with the draft model
// in draft ("": none), and an engine on it.
func (b *specBench) engine(draft string) (*engine.Engine, error) {
	m, err := engine.Open(b.md, engine.Options{Budget: engine.Budget{CacheBytes: 1 << 40}, MaxDraft: b.cfg.MaxDraft, Draft: draft})
	if err != nil {
		return nil, err
	}
	e := m.NewEngine(b.cfg.Threads)
	b.closers = append(b.closers, m.Close, e.Close)
	return e, nil
}

// genOn generates a case on e, checking the ids against plain decoding's.
func (b *specBench) genOn(e *engine.Engine, what string) genFunc {
	return func(c *specCase, spec engine.Spec, costs func(int) float64) (*engine.GenResult, error) {
		res, err := e.Generate(b.ctx, nil, c.ids, engine.GenOptions{MaxTokens: b.cfg.MaxTokens, StopIDs: b.tok.StopIDs(), Sampler: c.sampler(), Spec: spec, Trace: &engine.GenTrace{SpecCosts: costs}})
		if err != nil {
			return nil, err
		}
		if c.off != nil && !slices.Equal(res.Generated, c.off.Generated) {
			return nil, fmt.Errorf("%s, %s, spec %s%s: the ids differ from plain decoding's", c.prompt, c.sampling, spec, what)
		}
		return res, nil
	}
}

// replies asks every prompt each way without speculation and emits the
// reply, judged as of the kind asked or too weak.
func (b *specBench) replies() error {
	tok := b.tok
	for _, p := range specPrompts {
		for _, sm := range specSamplings {
			ids, err := specPromptIDs(b.ctx, b.e, tok, p, sm.s, b.cfg.MaxTokens)
			if err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			stream := uint64(len(p.turns))
			c := &specCase{prompt: p.name, sampling: sm.name, ids: ids, sampler: func() engine.Sampler { return sm.s.Sampler(stream) }}
			if c.off, err = b.gen(c, engine.SpecOff, nil); err != nil {
				return err
			}
			a := xtml.ReadReply(tok, c.off.Generated, xtml.ReplyOptions{Thinking: true})
			switch err := a.Err(); {
			case c.off.Stop != engine.StopToken:
				c.weak = fmt.Sprintf("the reply did not end by itself within %d tokens", b.cfg.MaxTokens)
			case err != nil:
				c.weak = "the reply is not a well-formed chat turn: " + err.Error()
			default:
				c.weak = p.kind(a, p.turns[len(p.turns)-1])
			}
			text := strings.TrimSpace(a.Content)
			if err != nil {
				text = string(tok.Decode(c.off.Generated))
			}
			note := "of the kind asked"
			if c.weak != "" {
				note = "TOO WEAK: " + c.weak
			}
			b.cfg.Emit(SpecLine{Kind: "reply", Prompt: p.name, Sampling: sm.name, Positions: len(ids), Tokens: len(c.off.Generated), TooWeak: c.weak != "", Text: text, Note: note, Model: b.md})
			b.cases = append(b.cases, c)
		}
	}
	return nil
}

// acceptance generates every case at every forced draft length (with the
// draft model too) and emits the acceptance at lengths 1, 2, 4 and the
// longest.
func (b *specBench) acceptance() error {
	maxDraft := b.cfg.MaxDraft
	for _, c := range b.cases {
		for k := 1; k <= maxDraft; k++ {
			r, err := b.gen(c, engine.Spec(k), nil)
			if err != nil {
				return err
			}
			c.forced = append(c.forced, r)
			var d *engine.GenResult
			if b.genDraft != nil {
				if d, err = b.genDraft(c, engine.Spec(k), nil); err != nil {
					return err
				}
				c.draftForced = append(c.draftForced, d)
			}
			if k != 1 && k != 2 && k != 4 && k != maxDraft {
				continue
			}
			for _, row := range []struct {
				label string
				r     *engine.GenResult
			}{{fmt.Sprint(k), r}, {fmt.Sprintf("draft %d", k), d}} {
				if row.r == nil {
					continue
				}
				sim := row.r.SpecSim(maxDraft, unitCosts)
				b.cfg.Emit(SpecLine{Kind: "acceptance", Prompt: c.prompt, Sampling: c.sampling, Spec: row.label, Tokens: sim.Tokens, Passes: sim.Passes, Drafted: sim.Drafted, Accepted: sim.Accepted,
					AcceptedPerPass: sim.AcceptedPerPass(), PassesPerToken: row.r.PassesPerToken(), TooWeak: c.weak != ""})
			}
		}
	}
	return nil
}

// readBound emits the read-bound projection: a pass costs its bytes; the
// disk speed scales every choice alike, so the bytes do not depend on it.
// With Reference, the hand-written replies too.
func (b *specBench) readBound() error {
	cfg := b.cfg
	nominal := make([]float64, cfg.MaxDraft+2)
	if err := projectAll(b.cases, "read-bound", 1, nominal, 0, cfg.MaxDraft, !cfg.AcceptanceOnly, b.gen, b.genDraft, cfg.Emit); err != nil {
		return err
	}
	if cfg.Reference {
		specReference(cfg.MaxDraft, cfg.Emit)
	}
	return nil
}

// measured (unless AcceptanceOnly) measures the disk, a streamed decode's
// overlap and the verification passes at the real K3 width, and emits the
// projection at those costs.
func (b *specBench) measured() error {
	cfg, ctx, emit, logf := b.cfg, b.ctx, b.cfg.Emit, b.cfg.Logf
	if cfg.AcceptanceOnly {
		return nil
	}
	model, tr, err := measure.PrepareLayer(ctx, cfg.Dir, measure.LayerSpec(), logf)
	if err != nil {
		return err
	}
	disk, err := specDisk(ctx, model, emit)
	if err != nil {
		return err
	}
	logf("streamed decode (every layer from the packed trunk through a 3.7 GB ring, experts from disk): overlap of reads and compute")
	ov, err := specOverlap(ctx, model, tr, cfg.Threads)
	if err != nil {
		return fmt.Errorf("overlap: %w", err)
	}
	emit(SpecLine{Kind: "overlap", Seconds: ov.SecondsPerToken(), Efficiency: ov.Efficiency, GBps: float64(ov.BytesRead) / ov.ReadSeconds / 1e9,
		Note: fmt.Sprintf("read %.2f s, compute %.2f s, wall %.2f s over %d tokens", ov.ReadSeconds, ov.ComputeSeconds, ov.WallSeconds, ov.Tokens), Overlap: ov})

	logf("timing verification passes of 1..%d positions at the real K3 width (resident, every expert cached)", cfg.MaxDraft+1)
	timings, err := measure.MeasurePasses(ctx, model, cfg.Threads, cfg.MaxDraft+1, 64, cfg.Reps, logf)
	if err != nil {
		return err
	}
	compute := measure.ComputeAt(timings, releasedKinds, doctor.K3.ExpertsPerToken/16, 16)
	for T := 1; T < len(compute); T++ {
		emit(SpecLine{Kind: "timing", Positions: T, Seconds: compute[T]})
	}
	return projectAll(b.cases, "measured", disk, compute, ov.Efficiency, cfg.MaxDraft, true, b.gen, b.genDraft, emit)
}

// specDisk measures the disk's limit over the checkpoint in model, the
// best of the raw reads k3 bench stream compares with, and emits it.
func specDisk(ctx context.Context, model string, emit func(SpecLine)) (float64, error) {
	set0, err := st.Open(model)
	if err != nil {
		return 0, err
	}
	var files []string
	for _, f := range set0.Files() {
		files = append(files, f.Path)
	}
	set0.Close()
	runs, err := measure.LimitRuns(ctx, files, 2<<30, "")
	if err != nil {
		return 0, fmt.Errorf("disk: %w", err)
	}
	best := runs[0]
	for _, r := range runs {
		if r.GBps > best.GBps {
			best = r
		}
	}
	emit(SpecLine{Kind: "disk", GBps: best.GBps, Note: "O_DIRECT, " + best.String()})
	return best.GBps, nil
}

// genFunc generates a case with a speculation mode, the draft controller
// choosing lengths at costs (nil: the engine's own).
type genFunc func(c *specCase, spec engine.Spec, costs func(int) float64) (*engine.GenResult, error)

// specRow is one row of a projection: its line kind, its spec column and
// the simulated passes.
type specRow struct {
	kind, spec string
	r          engine.SpecSim
}

// unitCosts count positions: a pass of T positions reads T bytes.
var unitCosts = engine.PassCosts{DiskBps: 1, Compute: []float64{0, 0}, ExpertBytes: 1}

// specPromptIDs renders a prompt as a chat session sends it; a second
// turn's history is the model's own reply to the first, decoded the same
// way.
func specPromptIDs(ctx context.Context, e *engine.Engine, tok *tokenizer.Tokenizer, p specPrompt, sm engine.Sampling, maxTokens int) ([]int, error) {
	s := chat.NewSession(e, tok)
	opt := ChatOptions(sm, maxTokens)
	for _, u := range p.turns[:len(p.turns)-1] {
		if _, err := s.Turn(ctx, u, opt, nil); err != nil {
			return nil, err
		}
	}
	return s.Prompt(p.turns[len(p.turns)-1], opt)
}

// projectAll emits, per preset and case, the projected full model per
// generated token without speculation, with the controller deciding at the
// preset's costs while the model generates, and with the best fixed
// length, and the same with the draft model when genDraft is not nil;
// disk 1 and compute 0 give bytes only.
func projectAll(cases []*specCase, computeModel string, disk float64, compute []float64, overlap float64, maxDraft int, seconds bool,
	gen, genDraft genFunc, emit func(SpecLine)) error {
	for _, name := range []string{"laptop", "desktop", "server"} {
		costs := presetCosts(name, disk, compute, overlap)
		for _, c := range cases {
			auto, err := gen(c, engine.SpecAuto, costs.Seconds)
			if err != nil {
				return err
			}
			off := c.off.SpecSim(maxDraft, costs)
			rows := []specRow{{"projection", "off", off}, {"projection", "auto", auto.SpecSim(maxDraft, costs)}}
			bestK, best := 0, off
			for k, f := range c.forced {
				if r := f.SpecSim(maxDraft, costs); r.Seconds < best.Seconds {
					bestK, best = k+1, r
				}
			}
			if bestK > 0 {
				rows = append(rows, specRow{"projection", fmt.Sprint(bestK), best})
			}
			if genDraft != nil {
				da, err := genDraft(c, engine.SpecAuto, costs.Seconds)
				if err != nil {
					return err
				}
				rows = append(rows, specRow{"projection", "draft auto", da.SpecSim(maxDraft, costs)})
				bestK, best = 0, off
				for k, f := range c.draftForced {
					if r := f.SpecSim(maxDraft, costs); r.Seconds < best.Seconds {
						bestK, best = k+1, r
					}
				}
				if bestK > 0 {
					rows = append(rows, specRow{"projection", fmt.Sprintf("draft %d", bestK), best})
				}
			}
			if computeModel == "read-bound" {
				all := append(slices.Clone(c.ids), c.off.Generated...)
				rows = append(rows, specRow{"ceiling", "ceiling", engine.SpecCeiling(all, len(c.ids), maxDraft, costs)})
			}
			for _, row := range rows {
				r := row.r
				spt := r.SecondsPerToken()
				if !seconds {
					spt = 0
				}
				emit(SpecLine{Kind: row.kind, Compute: computeModel, Preset: name, Prompt: c.prompt, Sampling: c.sampling, Spec: row.spec, Tokens: r.Tokens, Passes: r.Passes,
					Drafted: r.Drafted, Accepted: r.Accepted, AcceptedPerPass: r.AcceptedPerPass(), PassesPerToken: float64(r.Passes+1) / float64(max(r.Tokens, 1)),
					SecondsPerToken: spt, BytesPerToken: r.BytesPerToken(), BytesRatio: off.BytesPerToken() / r.BytesPerToken(), Lengths: r.Lengths, TooWeak: c.weak != "", Timed: seconds})
			}
		}
	}
	return nil
}

// presetCosts are the released model's pass costs at a preset, from the
// doctor's cost model at a disk of disk GB/s: the streamed trunk read per
// pass, the experts it misses per position, compute[T] and the overlap.
func presetCosts(preset string, disk float64, compute []float64, overlap float64) engine.PassCosts {
	pr, _ := plan.Lookup(preset)
	pred := doctor.Predict(pr, doctor.Speeds{TrunkDiskGBps: disk, ExpertDiskGBps: disk, BF16GBps: 1, MXFP4GBps: 1})
	return engine.PassCosts{TrunkBytes: float64(pred.StreamedTrunkBytesPerToken), ExpertBytes: (1 - pred.ExpertHitRate) * float64(doctor.K3.ExpertBytesPerToken()),
		DiskBps: disk * 1e9, Compute: compute, Overlap: overlap}
}

// specReference runs the drafter and controller over the hand-written
// replies, read-bound at the laptop preset.
func specReference(maxDraft int, emit func(SpecLine)) {
	costs := presetCosts("laptop", 1, make([]float64, maxDraft+2), 0)
	vocab := map[string]int{}
	for _, p := range refPrompts {
		ids, start, err := refTokens(p, vocab)
		if err != nil {
			panic(err) // fixed texts
		}
		off := engine.SimulateSpec(ids, start, engine.SpecOff, maxDraft, costs)
		rows := []specRow{{spec: "off", r: off}}
		for _, spec := range []engine.Spec{engine.SpecAuto, engine.Spec(maxDraft)} {
			rows = append(rows, specRow{spec: spec.String(), r: engine.SimulateSpec(ids, start, spec, maxDraft, costs)})
		}
		rows = append(rows, specRow{spec: "ceiling", r: engine.SpecCeiling(ids, start, maxDraft, costs)})
		for _, row := range rows {
			r := row.r
			emit(SpecLine{Kind: "reference", Compute: "read-bound", Preset: "laptop", Prompt: p.name, Spec: row.spec, Tokens: r.Tokens, Passes: r.Passes, Drafted: r.Drafted,
				Accepted: r.Accepted, AcceptedPerPass: r.AcceptedPerPass(), BytesPerToken: r.BytesPerToken(), BytesRatio: off.BytesPerToken() / r.BytesPerToken(), Lengths: r.Lengths, Note: "hand-written reply, no model"})
		}
	}
}

// specOverlap decodes a few tokens of the real-width checkpoint
// streamed: every layer from the packed trunk through a 3.7 GB ring (two of
// its three layers in flight, whichever two, never all three), experts from
// disk (a cache of the minimum size).
func specOverlap(ctx context.Context, model, tr string, threads int) (measure.Overlap, error) {
	m, err := engine.Open(model, engine.Options{TrunkDir: tr, Budget: engine.Budget{TrunkBytes: 3.7e9, Ring: 2, CacheBytes: 1}, Chunk: 16, Positions: 64})
	if err != nil {
		return measure.Overlap{}, err
	}
	defer m.Close()
	e := m.NewEngine(threads)
	defer e.Close()
	return measure.MeasureOverlap(ctx, e, []int{1, 2, 3, 4, 5, 6, 7, 8}, 4)
}
