package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
)

func init() {
	benchCommands.add("spec", "speculative decoding: draft acceptance of a trained model on fixed prompts, projected bytes and s/token per preset with and without it", benchSpec)
}

// specPrompt is one prompt of the fixed set, asked of the model as a chat
// session asks it (default options: thinking on). A second turn's history
// is the model's own first reply. kind checks that the reply is of the
// kind the prompt asks for; a model too small to give one is reported as
// such, its acceptance measured on what it did say.
type specPrompt struct {
	name  string
	turns []string // user messages; the last is the one measured
	kind  func(reply tokenizer.Reply, prompt string) string
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
func answered(a tokenizer.Reply, _ string) string {
	if strings.TrimSpace(a.Content) == "" {
		return "no answer"
	}
	return ""
}

// isCode: the code prompt asks for a Go function.
func isCode(a tokenizer.Reply, _ string) string {
	if !strings.Contains(a.Content, "func ") || !strings.Contains(a.Content, "{") {
		return "the model cannot write code: its reply is not a Go function"
	}
	return ""
}

// summarises: most of a summary's longer words come from the text.
func summarises(a tokenizer.Reply, prompt string) string {
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
}{{"greedy", engine.Sampling{}}, {"seed 7", engine.Sampling{Temperature: 0.8, TopK: 40, TopP: 0.95, Seed: 7}}}

// specLine is one line of `k3 bench spec --json`.
type specLine struct {
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

func benchSpec(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("k3 bench spec", stderr)
	jsonOut := fs.Bool("json", false, "one JSON object per line")
	cache, _ := os.UserCacheDir()
	dir := fs.String("dir", filepath.Join(cache, "k3", "bench"), "where the real-width checkpoint of k3 bench layer is generated (reused; ~10 GB + trunk)")
	modelDir := fs.String("model", "", "the trained model whose replies are measured (default: the demo model, written to a temporary folder)")
	threads := fs.Int("threads", 0, "threads (0: physical cores)")
	maxDraft := fs.Int("max-draft", engine.DefaultMaxDraft, "longest draft")
	maxTokens := fs.Int("max-tokens", 512, "reply cap in tokens")
	reps := fs.Int("reps", 2, "timed passes per length (the fastest counts)")
	acceptOnly := fs.Bool("acceptance-only", false, "only the replies, the acceptance and the read-bound projection of bytes (no checkpoint, no timing)")
	reference := fs.Bool("reference", false, "also run the drafter over hand-written replies (code, a summary; no model)")
	draftDir := fs.String("draft", "", "also draft with this DSpark draft model of the model (docs/DSPARK.md): rows \"draft auto\" and \"draft N\"")
	setUsage(fs, stderr, "usage: k3 bench spec [--json] [--model DIR] [--draft DIR] [--threads N] [--max-draft N] [--dir PATH] [--acceptance-only] [--reference]",
		"Asks a trained model (the demo model unless --model) a fixed set of prompts (chat, code,",
		"summarise-this-text, a second chat turn) greedy and with a seed, generating with the engine's",
		"drafter and verifier without speculation and at every draft length up to --max-draft (the ids",
		"are checked to be the same), and reports drafted/accepted tokens, accepted per pass and passes",
		"per token. A reply not of the kind asked (the demo model knows sayings, not code) is marked;",
		"the task model in a clone's testdata/models/task also writes code and summaries.",
		"Then it projects the full model's bytes read and s/token per generated token at the laptop,",
		"desktop and server presets without speculation, with the automatic draft length (the engine's",
		"controller deciding at the preset's pass costs while the model generates) and the best fixed",
		"one: read-bound (bytes only: load-independent), and with the compute of verification passes of",
		"1..max-draft+1 positions timed at the real K3 width (the k3 bench layer checkpoint), the disk,",
		"and a streamed decode's overlap of reads and compute.")
	if _, code := parseArgs(fs, args); code >= 0 {
		return code
	}
	if *maxDraft < 1 || *maxDraft > 32 || *reps < 1 || *maxTokens < 2 {
		fmt.Fprintln(stderr, "k3 bench spec: --max-draft must be 1..32, --reps at least 1 and --max-tokens at least 2")
		return ExitUsage
	}
	enc := json.NewEncoder(stdout)
	emit := func(l specLine, text string) {
		if *jsonOut {
			enc.Encode(l)
		} else {
			fmt.Fprintln(stdout, text)
		}
	}
	title := func(s string) {
		if !*jsonOut {
			fmt.Fprintln(stdout, s)
		}
	}
	logf := func(f string, a ...any) { fmt.Fprintf(stderr, f+"\n", a...) }
	fail := func(what string, err error) int {
		fmt.Fprintf(stderr, "k3 bench spec: %s%v\n", what, err)
		return ExitRuntime
	}
	ctx := context.Background()

	md := *modelDir
	if md == "" {
		tmp, err := os.MkdirTemp("", "k3-bench-spec-")
		if err != nil {
			return fail("", err)
		}
		defer os.RemoveAll(tmp)
		if err := synth.WriteDemo(tmp, "small"); err != nil {
			return fail("", err)
		}
		md = tmp
	}
	tok, err := tokenizer.Load(md)
	if err != nil {
		return fail("", err)
	}
	m, err := engine.Open(md, engine.Options{Budget: engine.Budget{CacheBytes: 1 << 40}, MaxDraft: *maxDraft})
	if err != nil {
		return fail("", err)
	}
	defer m.Close()
	e := m.NewEngine(*threads)
	defer e.Close()
	genOn := func(e *engine.Engine, what string) func(c *specCase, spec engine.Spec, costs func(int) float64) (*engine.GenResult, error) {
		return func(c *specCase, spec engine.Spec, costs func(int) float64) (*engine.GenResult, error) {
			res, err := e.Generate(ctx, nil, c.ids, engine.GenOptions{MaxTokens: *maxTokens, StopIDs: tok.StopIDs(), Sampler: c.sampler(), Spec: spec, SpecCosts: costs})
			if err != nil {
				return nil, err
			}
			if c.off != nil && !slices.Equal(res.Generated, c.off.Generated) {
				return nil, fmt.Errorf("%s, %s, spec %s%s: the ids differ from plain decoding's", c.prompt, c.sampling, spec, what)
			}
			return res, nil
		}
	}
	gen := genOn(e, "")
	var genDraft func(c *specCase, spec engine.Spec, costs func(int) float64) (*engine.GenResult, error)
	if *draftDir != "" {
		dm, err := engine.Open(md, engine.Options{Budget: engine.Budget{CacheBytes: 1 << 40}, MaxDraft: *maxDraft, Draft: *draftDir})
		if err != nil {
			return fail("", err)
		}
		defer dm.Close()
		de := dm.NewEngine(*threads)
		defer de.Close()
		genDraft = genOn(de, " with the draft model")
	}

	title(fmt.Sprintf("replies of %s (each prompt as a chat session sends it; plain decoding)", filepath.Base(md)))
	var cases []*specCase
	for _, p := range specPrompts {
		for _, sm := range specSamplings {
			ids, err := specPromptIDs(ctx, e, tok, p, sm.s, *maxTokens)
			if err != nil {
				return fail(p.name+": ", err)
			}
			stream := uint64(len(p.turns))
			c := &specCase{prompt: p.name, sampling: sm.name, ids: ids, sampler: func() engine.Sampler { return sm.s.Sampler(stream) }}
			if c.off, err = gen(c, engine.SpecOff, nil); err != nil {
				return fail("", err)
			}
			a := tok.ReadReply(c.off.Generated, tokenizer.ReplyOptions{Thinking: true})
			switch err := a.Err(); {
			case c.off.Stop != engine.StopToken:
				c.weak = fmt.Sprintf("the reply did not end by itself within %d tokens", *maxTokens)
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
			emit(specLine{Kind: "reply", Prompt: p.name, Sampling: sm.name, Positions: len(ids), Tokens: len(c.off.Generated), TooWeak: c.weak != "", Text: text, Note: note},
				fmt.Sprintf("%-12s %-7s prompt %4d, reply %4d tokens: %q\n%21s %s", p.name, sm.name, len(ids), len(c.off.Generated), clip(text, 90), "", note))
			cases = append(cases, c)
		}
	}

	title("\ndraft acceptance, generating with the drafter and verifier at forced draft lengths (the same ids as plain decoding)")
	title(fmt.Sprintf("%-12s %-7s %6s %7s %9s %9s %11s %11s", "prompt", "", "reply", "draft", "drafted", "accepted", "acc./pass", "pass/token"))
	for _, c := range cases {
		for k := 1; k <= *maxDraft; k++ {
			r, err := gen(c, engine.Spec(k), nil)
			if err != nil {
				return fail("", err)
			}
			c.forced = append(c.forced, r)
			var d *engine.GenResult
			if genDraft != nil {
				if d, err = genDraft(c, engine.Spec(k), nil); err != nil {
					return fail("", err)
				}
				c.draftForced = append(c.draftForced, d)
			}
			if k != 1 && k != 2 && k != 4 && k != *maxDraft {
				continue
			}
			for _, row := range []struct {
				label string
				r     *engine.GenResult
			}{{fmt.Sprint(k), r}, {fmt.Sprintf("draft %d", k), d}} {
				if row.r == nil {
					continue
				}
				sim := engine.SpecSimOf(row.r, *maxDraft, unitCosts)
				ppt := row.r.PassesPerToken()
				emit(specLine{Kind: "acceptance", Prompt: c.prompt, Sampling: c.sampling, Spec: row.label, Tokens: sim.Tokens, Passes: sim.Passes, Drafted: sim.Drafted, Accepted: sim.Accepted,
					AcceptedPerPass: sim.AcceptedPerPass(), PassesPerToken: ppt, TooWeak: c.weak != ""},
					fmt.Sprintf("%-12s %-7s %6d %7s %9d %9d %11.2f %11.2f%s", c.prompt, c.sampling, sim.Tokens, row.label, sim.Drafted, sim.Accepted, sim.AcceptedPerPass(), ppt, weakMark(c.weak)))
			}
		}
	}

	// read-bound: a pass costs its bytes; the disk speed scales every
	// choice alike, so the bytes do not depend on it
	nominal := make([]float64, *maxDraft+2)
	title("\nprojected full model per generated token, read-bound (compute hidden under the reads): GB read per token")
	if err := projectAll(cases, "read-bound", 1, nominal, 0, *maxDraft, !*acceptOnly, gen, genDraft, emit, title); err != nil {
		return fail("", err)
	}
	if *reference {
		benchSpecReference(*maxDraft, emit, title)
	}
	if *acceptOnly {
		return ExitOK
	}

	model, tr, err := measure.PrepareLayer(ctx, *dir, measure.LayerSpec(), logf)
	if err != nil {
		return fail("", err)
	}
	set0, err := st.Open(model)
	if err != nil {
		return fail("", err)
	}
	var files []string
	for _, f := range set0.Files() {
		files = append(files, f.Path)
	}
	set0.Close()
	// the disk's limit: the best of the raw reads k3 bench stream compares with
	runs, err := measure.LimitRuns(ctx, files, 2<<30, "")
	if err != nil {
		return fail("disk: ", err)
	}
	best := runs[0]
	for _, r := range runs {
		if r.GBps > best.GBps {
			best = r
		}
	}
	disk := best.GBps
	emit(specLine{Kind: "disk", GBps: disk, Note: "O_DIRECT, " + best.String()}, fmt.Sprintf("\ndisk: %.2f GB/s (O_DIRECT, %s)", disk, best.String()))

	logf("streamed decode (every layer from the packed trunk through a 3.7 GB ring, experts from disk): overlap of reads and compute")
	ov, err := measureSpecOverlap(ctx, model, tr, *threads)
	if err != nil {
		return fail("overlap: ", err)
	}
	emit(specLine{Kind: "overlap", Seconds: ov.SecondsPerToken(), Efficiency: ov.Efficiency, GBps: float64(ov.BytesRead) / ov.ReadSeconds / 1e9,
		Note: fmt.Sprintf("read %.2f s, compute %.2f s, wall %.2f s over %d tokens", ov.ReadSeconds, ov.ComputeSeconds, ov.WallSeconds, ov.Tokens)},
		fmt.Sprintf("streamed decode of the 3-layer checkpoint: %.2f s/token, max(read %.2f, compute %.2f) = %.2f s/token: overlap efficiency %.2f",
			ov.SecondsPerToken(), ov.ReadSeconds/float64(ov.Tokens), ov.ComputeSeconds/float64(ov.Tokens), ov.BoundSecondsPerToken(), ov.Efficiency))

	logf("timing verification passes of 1..%d positions at the real K3 width (resident, every expert cached)", *maxDraft+1)
	timings, err := engine.MeasurePasses(ctx, model, *threads, *maxDraft+1, 64, *reps, logf)
	if err != nil {
		return fail("", err)
	}
	compute := engine.ComputeAt(timings, releasedKinds, doctor.K3.ExpertsPerToken/16, 16)
	title("\ncompute of one pass of the full model (projected from the measured layers; no expert shared between positions)")
	for T := 1; T < len(compute); T++ {
		emit(specLine{Kind: "timing", Positions: T, Seconds: compute[T]}, fmt.Sprintf("  %d position(s): %.2f s (%.2f s per position)", T, compute[T], compute[T]/float64(T)))
	}
	title("\nprojected full model per generated token, compute as measured here: s = max(read, compute) / overlap efficiency")
	if err := projectAll(cases, "measured", disk, compute, ov.Efficiency, *maxDraft, true, gen, genDraft, emit, title); err != nil {
		return fail("", err)
	}
	return ExitOK
}

// specRow is one row of a projection: its line kind, its spec column and
// the simulated passes.
type specRow struct {
	kind, spec string
	r          engine.SpecSim
}

// unitCosts count positions: a pass of T positions reads T bytes.
var unitCosts = engine.PassCosts{DiskBps: 1, Compute: []float64{0, 0}, ExpertBytes: 1}

func weakMark(weak string) string {
	if weak != "" {
		return "  (too weak)"
	}
	return ""
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// specPromptIDs renders a prompt as a chat session sends it; a second
// turn's history is the model's own reply to the first, decoded the same
// way.
func specPromptIDs(ctx context.Context, e *engine.Engine, tok *tokenizer.Tokenizer, p specPrompt, sm engine.Sampling, maxTokens int) ([]int, error) {
	s := chat.NewSession(e, tok)
	opt := chat.Options{Thinking: true, MaxTokens: maxTokens, Spec: engine.SpecOff, Sampling: sm}
	for _, u := range p.turns[:len(p.turns)-1] {
		if _, err := s.Turn(ctx, u, opt, nil); err != nil {
			return nil, err
		}
	}
	return s.Prompt(p.turns[len(p.turns)-1], opt)
}

// projectAll prints, per preset and case, the projected full model per
// generated token without speculation, with the controller deciding at the
// preset's costs while the model generates, and with the best fixed
// length, and the same with the draft model when genDraft is not nil;
// disk 1 and compute 0 give bytes only.
func projectAll(cases []*specCase, computeModel string, disk float64, compute []float64, overlap float64, maxDraft int, seconds bool,
	gen, genDraft func(*specCase, engine.Spec, func(int) float64) (*engine.GenResult, error), emit func(specLine, string), title func(string)) error {
	title(fmt.Sprintf("%-8s %-12s %-7s %-10s %9s %9s %7s %9s %11s  %s", "preset", "prompt", "", "spec", "s/token", "GB/token", "vs off", "acc/pass", "pass/token", "passes by draft length 0.."))
	for _, name := range []string{"laptop", "desktop", "server"} {
		pr, _ := plan.Lookup(name)
		pred := doctor.Predict(pr, doctor.Speeds{TrunkDiskGBps: disk, ExpertDiskGBps: disk, BF16GBps: 1, MXFP4GBps: 1})
		costs := engine.PassCosts{TrunkBytes: float64(pred.StreamedTrunkBytesPerToken), ExpertBytes: (1 - pred.ExpertHitRate) * float64(doctor.K3.ExpertBytesPerToken()),
			DiskBps: disk * 1e9, Compute: compute, Overlap: overlap}
		for _, c := range cases {
			auto, err := gen(c, engine.SpecAuto, costs.Seconds)
			if err != nil {
				return err
			}
			off := engine.SpecSimOf(c.off, maxDraft, costs)
			rows := []specRow{{"projection", "off", off}, {"projection", "auto", engine.SpecSimOf(auto, maxDraft, costs)}}
			bestK, best := 0, off
			for k, f := range c.forced {
				if r := engine.SpecSimOf(f, maxDraft, costs); r.Seconds < best.Seconds {
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
				rows = append(rows, specRow{"projection", "draft auto", engine.SpecSimOf(da, maxDraft, costs)})
				bestK, best = 0, off
				for k, f := range c.draftForced {
					if r := engine.SpecSimOf(f, maxDraft, costs); r.Seconds < best.Seconds {
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
				ppt := float64(r.Passes+1) / float64(max(r.Tokens, 1))
				spt, sText := r.SecondsPerToken(), fmt.Sprintf("%9.2f", r.SecondsPerToken())
				if !seconds {
					spt, sText = 0, fmt.Sprintf("%9s", "-")
				}
				ratio := off.BytesPerToken() / r.BytesPerToken()
				emit(specLine{Kind: row.kind, Compute: computeModel, Preset: name, Prompt: c.prompt, Sampling: c.sampling, Spec: row.spec, Tokens: r.Tokens, Passes: r.Passes,
					Drafted: r.Drafted, Accepted: r.Accepted, AcceptedPerPass: r.AcceptedPerPass(), PassesPerToken: ppt, SecondsPerToken: spt, BytesPerToken: r.BytesPerToken(),
					BytesRatio: ratio, Lengths: r.Lengths, TooWeak: c.weak != ""},
					fmt.Sprintf("%-8s %-12s %-7s %-10s %s %9.2f %6.2fx %9.2f %11.2f  %s%s", name, c.prompt, c.sampling, row.spec, sText, r.BytesPerToken()/1e9, ratio,
						r.AcceptedPerPass(), ppt, strings.Trim(fmt.Sprint(r.Lengths), "[]"), weakMark(c.weak)))
			}
		}
	}
	return nil
}

// benchSpecReference runs the drafter and controller over the hand-written
// replies, read-bound at the laptop preset.
func benchSpecReference(maxDraft int, emit func(specLine, string), title func(string)) {
	title("\nhand-written replies, no model (the drafter on code and a summary, which the demo model cannot write): laptop, read-bound")
	title(fmt.Sprintf("%-12s %6s %-7s %9s %9s %10s %7s  %s", "prompt", "reply", "spec", "drafted", "accepted", "GB/token", "vs off", "passes by draft length 0.."))
	pr, _ := plan.Lookup("laptop")
	pred := doctor.Predict(pr, doctor.Speeds{TrunkDiskGBps: 1, ExpertDiskGBps: 1, BF16GBps: 1, MXFP4GBps: 1})
	costs := engine.PassCosts{TrunkBytes: float64(pred.StreamedTrunkBytesPerToken), ExpertBytes: (1 - pred.ExpertHitRate) * float64(doctor.K3.ExpertBytesPerToken()),
		DiskBps: 1e9, Compute: make([]float64, maxDraft+2)}
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
			r, name := row.r, row.spec
			ratio := off.BytesPerToken() / r.BytesPerToken()
			emit(specLine{Kind: "reference", Compute: "read-bound", Preset: "laptop", Prompt: p.name, Spec: name, Tokens: r.Tokens, Passes: r.Passes, Drafted: r.Drafted,
				Accepted: r.Accepted, AcceptedPerPass: r.AcceptedPerPass(), BytesPerToken: r.BytesPerToken(), BytesRatio: ratio, Lengths: r.Lengths, Note: "hand-written reply, no model"},
				fmt.Sprintf("%-12s %6d %-7s %9d %9d %10.2f %6.2fx  %s", p.name, r.Tokens, name, r.Drafted, r.Accepted, r.BytesPerToken()/1e9, ratio, strings.Trim(fmt.Sprint(r.Lengths), "[]")))
		}
	}
	title("(ceiling: each pass drafts what the drafter proposes, cut where it first fails, as a controller that knew the reply would)")
}

// measureSpecOverlap decodes a few tokens of the real-width checkpoint
// streamed: every layer from the packed trunk through a 3.7 GB ring (two of
// its three layers in flight, whichever two, never all three), experts from
// disk (a cache of the minimum size).
func measureSpecOverlap(ctx context.Context, model, tr string, threads int) (engine.Overlap, error) {
	m, err := engine.Open(model, engine.Options{TrunkDir: tr, Budget: engine.Budget{TrunkBytes: 3.7e9, Ring: 2, CacheBytes: 1}, Chunk: 16, Positions: 64})
	if err != nil {
		return engine.Overlap{}, err
	}
	defer m.Close()
	e := m.NewEngine(threads)
	defer e.Close()
	return engine.MeasureOverlap(ctx, e, []int{1, 2, 3, 4, 5, 6, 7, 8}, 4)
}
