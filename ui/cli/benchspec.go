package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"k3/doctor"
	"k3/doctor/measure"
	"k3/engine"
	"k3/engine/plan"
	st "k3/storage/safetensors"
	"k3/tokenizer"
)

func init() {
	benchCommands.add("spec", "speculative decoding: draft acceptance on fixed prompts, projected s/token per preset with and without it", benchSpec)
}

// specPrompt is one prompt of the fixed set with the reply a model that
// has learned language would give: the bench decodes the reply as if the
// model chose exactly these tokens, so acceptance is that of the drafter on
// text of this kind (there is no trained K3 model to ask).
type specPrompt struct {
	name  string
	msgs  []tokenizer.Message
	reply string
}

const specChatAnswer = `A sluggish starter usually needs warmth, a steady feeding schedule and the right flour. ` +
	`Keep it somewhere around 24 to 27 degrees Celsius; a cold kitchen is the most common reason a starter rises slowly. ` +
	`Feed it at the same time every day, discarding all but a tablespoon or two and refreshing it with equal weights of flour and water. ` +
	`Whole wheat or rye flour gives the yeast and bacteria more to eat than white flour, so mixing in 20 to 30 percent of it often wakes a starter up within a few days. ` +
	`Use filtered or boiled and cooled water if your tap water is heavily chlorinated. ` +
	`Once it reliably doubles within four to six hours after a feeding, it is active enough to bake with.`

var specPrompts = []specPrompt{
	{"chat", []tokenizer.Message{{Role: "user", Content: "My sourdough starter is a week old and barely rises. How do I make it more active?"}},
		specChatAnswer},
	{"code", []tokenizer.Message{{Role: "user", Content: "Write a Go function SumCSV that parses a comma-separated list of integers (spaces allowed) and returns their sum, with a table-driven test."}},
		"```go\npackage csvsum\n\nimport (\n\t\"fmt\"\n\t\"strconv\"\n\t\"strings\"\n)\n\n" +
			"// SumCSV parses a comma-separated list of integers and returns their sum.\n" +
			"func SumCSV(s string) (int, error) {\n\tif strings.TrimSpace(s) == \"\" {\n\t\treturn 0, nil\n\t}\n\tsum := 0\n" +
			"\tfor i, field := range strings.Split(s, \",\") {\n\t\tn, err := strconv.Atoi(strings.TrimSpace(field))\n\t\tif err != nil {\n" +
			"\t\t\treturn 0, fmt.Errorf(\"field %d: %w\", i+1, err)\n\t\t}\n\t\tsum += n\n\t}\n\treturn sum, nil\n}\n```\n\n" +
			"```go\npackage csvsum\n\nimport \"testing\"\n\nfunc TestSumCSV(t *testing.T) {\n\ttests := []struct {\n\t\tname    string\n\t\tinput   string\n\t\twant    int\n\t\twantErr bool\n\t}{\n" +
			"\t\t{name: \"empty\", input: \"\", want: 0},\n\t\t{name: \"single\", input: \"7\", want: 7},\n\t\t{name: \"several\", input: \"1,2,3\", want: 6},\n" +
			"\t\t{name: \"spaces\", input: \" 1, 2 ,3 \", want: 6},\n\t\t{name: \"negative\", input: \"-4,10\", want: 6},\n" +
			"\t\t{name: \"not a number\", input: \"1,x,3\", wantErr: true},\n\t\t{name: \"empty field\", input: \"1,,3\", wantErr: true},\n\t}\n" +
			"\tfor _, tt := range tests {\n\t\tt.Run(tt.name, func(t *testing.T) {\n\t\t\tgot, err := SumCSV(tt.input)\n\t\t\tif (err != nil) != tt.wantErr {\n" +
			"\t\t\t\tt.Fatalf(\"SumCSV(%q) error = %v, wantErr %v\", tt.input, err, tt.wantErr)\n\t\t\t}\n\t\t\tif got != tt.want {\n" +
			"\t\t\t\tt.Errorf(\"SumCSV(%q) = %d, want %d\", tt.input, got, tt.want)\n\t\t\t}\n\t\t})\n\t}\n}\n```\n\n" +
			"SumCSV trims each field before parsing it, so spaces around the numbers are allowed, and it reports the position of the first field that is not an integer. An empty input sums to 0."},
	{"summarise", []tokenizer.Message{{Role: "user", Content: "Summarise this text in a few sentences.\n\n" +
		"The town council met on Tuesday to discuss the future of the old river bridge, which has been closed to cars since a structural survey in March found corrosion in two of its steel supports. " +
		"Engineers presented three options. The first is a full repair of the existing bridge, which would cost an estimated 4.2 million euros and take about eighteen months, during which the bridge would stay closed to all traffic. " +
		"The second is to replace the bridge with a new concrete structure at a cost of 6.8 million euros; construction would take two years, but a temporary footbridge could be installed so that pedestrians and cyclists can still cross the river. " +
		"The third option is to close the bridge permanently to motor vehicles and convert it into a pedestrian and cycle bridge, which would require only 1.5 million euros of repairs and could be finished within nine months. " +
		"Shop owners on the east bank argued that the closure has already cut their trade by a third and asked the council to reopen the bridge to cars as soon as possible. " +
		"Residents of the narrow streets on the west bank, however, said that traffic has been calmer since March and supported the third option. " +
		"The council will hold a public consultation in June and expects to vote on the options in September."}},
		"The town council is deciding what to do with the old river bridge, which has been closed to cars since a survey in March found corrosion in two of its steel supports. " +
			"Engineers presented three options: a full repair of the existing bridge for about 4.2 million euros and eighteen months of closure, " +
			"a new concrete bridge for 6.8 million euros built over two years with a temporary footbridge for pedestrians and cyclists, " +
			"or closing the bridge permanently to motor vehicles and converting it into a pedestrian and cycle bridge for 1.5 million euros within nine months. " +
			"Shop owners on the east bank want the bridge reopened to cars as soon as possible because the closure has cut their trade by a third, while residents on the west bank support the third option because traffic has been calmer since March. " +
			"The council will hold a public consultation in June and vote on the options in September."},
	{"second turn", []tokenizer.Message{
		{Role: "user", Content: "My sourdough starter is a week old and barely rises. How do I make it more active?"},
		{Role: "assistant", Content: specChatAnswer},
		{Role: "user", Content: "Thanks! Can you turn that into a short numbered checklist I can stick on the fridge?"}},
		"1. Keep the starter warm, around 24 to 27 degrees Celsius.\n" +
			"2. Feed it at the same time every day.\n" +
			"3. At each feeding, discard all but a tablespoon or two and refresh it with equal weights of flour and water.\n" +
			"4. Mix in 20 to 30 percent whole wheat or rye flour to give the yeast and bacteria more to eat.\n" +
			"5. Use filtered or boiled and cooled water if your tap water is heavily chlorinated.\n" +
			"6. Bake with it once it reliably doubles within four to six hours after a feeding."},
}

// specTokens renders a prompt as the chat transcript and cuts it and the
// reply into the K3 pre-tokenizer's pieces, one id per distinct piece (a
// stand-in for the released 163840-token vocabulary, where nearly every
// such piece of English and code is one token). It returns the ids and
// where the reply starts.
func specTokens(p specPrompt, vocab map[string]int) ([]int, int, error) {
	segs, err := tokenizer.Render(p.msgs, nil, tokenizer.RenderOptions{NoThink: true})
	if err != nil {
		return nil, 0, err
	}
	id := func(text string) []int {
		var out []int
		for _, piece := range tokenizer.Pretokenize(text) {
			if _, ok := vocab[piece]; !ok {
				vocab[piece] = len(vocab)
			}
			out = append(out, vocab[piece])
		}
		return out
	}
	var ids []int
	for _, s := range segs {
		if s.Special { // a special token is one token
			if _, ok := vocab[s.Text]; !ok {
				vocab[s.Text] = len(vocab)
			}
			ids = append(ids, vocab[s.Text])
			continue
		}
		ids = append(ids, id(s.Text)...)
	}
	start := len(ids)
	return append(ids, id(p.reply)...), start, nil
}

// specLine is one line of `k3 bench spec --json`.
type specLine struct {
	Kind            string  `json:"kind"`              // acceptance, timing, disk, overlap, projection
	Compute         string  `json:"compute,omitempty"` // projection: "measured" or "read-bound"
	Prompt          string  `json:"prompt,omitempty"`
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
	Lengths         []int   `json:"draft_lengths,omitempty"` // passes by draft length
	Positions       int     `json:"positions,omitempty"`
	Seconds         float64 `json:"seconds,omitempty"`
	GBps            float64 `json:"gbps,omitempty"`
	Efficiency      float64 `json:"overlap_efficiency,omitempty"`
	Note            string  `json:"note,omitempty"`
}

// releasedKinds are the released model's layers by kind.
var releasedKinds = map[string]int{"kda+dense": 1, "kda+moe": 68, "mla+moe": 24}

func benchSpec(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("k3 bench spec", stderr)
	jsonOut := fs.Bool("json", false, "one JSON object per line")
	cache, _ := os.UserCacheDir()
	dir := fs.String("dir", filepath.Join(cache, "k3", "bench"), "where the real-width checkpoint of k3 bench layer is generated (reused; ~10 GB + trunk)")
	threads := fs.Int("threads", 0, "threads (0: physical cores)")
	maxDraft := fs.Int("max-draft", engine.DefaultMaxDraft, "longest draft")
	reps := fs.Int("reps", 2, "timed passes per length (the fastest counts)")
	acceptOnly := fs.Bool("acceptance-only", false, "only the acceptance table (no checkpoint, no timing)")
	setUsage(fs, stderr, "usage: k3 bench spec [--json] [--threads N] [--max-draft N] [--dir PATH] [--acceptance-only]",
		"Decodes a fixed set of replies (chat, code, summarise-this-text, a second chat turn) with the",
		"engine's drafter as if a model had chosen them, and reports the draft acceptance per pass.",
		"Then times verification passes of 1..max-draft+1 positions at the real K3 width (the",
		"k3 bench layer checkpoint), the disk and a streamed decode's overlap of reads and compute,",
		"and projects the full model's s/token and bytes read per token at the laptop, desktop and",
		"server presets without speculation, with the automatic draft length and the best fixed one.")
	if _, code := parseArgs(fs, args); code >= 0 {
		return code
	}
	if *maxDraft < 1 || *maxDraft > 32 || *reps < 1 {
		fmt.Fprintln(stderr, "k3 bench spec: --max-draft must be 1..32 and --reps at least 1")
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
	logf := func(f string, a ...any) { fmt.Fprintf(stderr, f+"\n", a...) }

	var set []specCase
	vocab := map[string]int{}
	for _, p := range specPrompts {
		ids, start, err := specTokens(p, vocab)
		if err != nil {
			fmt.Fprintf(stderr, "k3 bench spec: %v\n", err)
			return ExitRuntime
		}
		set = append(set, specCase{p.name, ids, start})
	}
	// acceptance does not depend on costs: forced lengths
	if !*jsonOut {
		fmt.Fprintln(stdout, "draft acceptance (tokens are K3 pre-tokenizer pieces; each reply decoded as if the model chose it)")
		fmt.Fprintf(stdout, "%-12s %6s %6s %5s %9s %9s %11s %11s\n", "prompt", "prompt", "reply", "draft", "drafted", "accepted", "acc./pass", "pass/token")
	}
	flat := engine.PassCosts{DiskBps: 1, Compute: []float64{0, 1}, TrunkBytes: 1}
	for _, s := range set {
		for _, k := range []int{1, 2, 4, *maxDraft} {
			r := engine.SimulateSpec(s.ids, s.start, engine.Spec(k), *maxDraft, flat)
			ppt := float64(r.Passes+1) / float64(r.Tokens)
			emit(specLine{Kind: "acceptance", Prompt: s.name, Spec: fmt.Sprint(k), Tokens: r.Tokens, Passes: r.Passes, Drafted: r.Drafted, Accepted: r.Accepted,
				AcceptedPerPass: r.AcceptedPerPass(), PassesPerToken: ppt, Positions: s.start},
				fmt.Sprintf("%-12s %6d %6d %5d %9d %9d %11.2f %11.2f", s.name, s.start, r.Tokens, k, r.Drafted, r.Accepted, r.AcceptedPerPass(), ppt))
		}
	}
	if *acceptOnly {
		return ExitOK
	}

	ctx := context.Background()
	model, tr, err := measure.PrepareLayer(ctx, *dir, measure.LayerSpec(), logf)
	if err != nil {
		fmt.Fprintf(stderr, "k3 bench spec: %v\n", err)
		return ExitRuntime
	}
	set0, err := st.Open(model)
	if err != nil {
		fmt.Fprintf(stderr, "k3 bench spec: %v\n", err)
		return ExitRuntime
	}
	var files []string
	for _, f := range set0.Files() {
		files = append(files, f.Path)
	}
	set0.Close()
	// the disk's limit: the best of the raw reads k3 bench stream compares with
	runs, err := measure.LimitRuns(ctx, files, 2<<30, "")
	if err != nil {
		fmt.Fprintf(stderr, "k3 bench spec: disk: %v\n", err)
		return ExitRuntime
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
		fmt.Fprintf(stderr, "k3 bench spec: overlap: %v\n", err)
		return ExitRuntime
	}
	emit(specLine{Kind: "overlap", Seconds: ov.SecondsPerToken(), Efficiency: ov.Efficiency, GBps: float64(ov.BytesRead) / ov.ReadSeconds / 1e9,
		Note: fmt.Sprintf("read %.2f s, compute %.2f s, wall %.2f s over %d tokens", ov.ReadSeconds, ov.ComputeSeconds, ov.WallSeconds, ov.Tokens)},
		fmt.Sprintf("streamed decode of the 3-layer checkpoint: %.2f s/token, max(read %.2f, compute %.2f) = %.2f s/token: overlap efficiency %.2f",
			ov.SecondsPerToken(), ov.ReadSeconds/float64(ov.Tokens), ov.ComputeSeconds/float64(ov.Tokens), ov.BoundSecondsPerToken(), ov.Efficiency))

	logf("timing verification passes of 1..%d positions at the real K3 width (resident, every expert cached)", *maxDraft+1)
	timings, err := engine.MeasurePasses(ctx, model, *threads, *maxDraft+1, 64, *reps, logf)
	if err != nil {
		fmt.Fprintf(stderr, "k3 bench spec: %v\n", err)
		return ExitRuntime
	}
	compute := engine.ComputeAt(timings, releasedKinds, doctor.K3.ExpertsPerToken/16, 16)
	if !*jsonOut {
		fmt.Fprintln(stdout, "\ncompute of one pass of the full model (projected from the measured layers; no expert shared between positions)")
	}
	for T := 1; T < len(compute); T++ {
		emit(specLine{Kind: "timing", Positions: T, Seconds: compute[T]}, fmt.Sprintf("  %d position(s): %.2f s (%.2f s per position)", T, compute[T], compute[T]/float64(T)))
	}

	// the same projections for a machine whose compute hides under its
	// reads even for the longest pass (compute 0): what the bytes alone
	// decide
	readBound := make([]float64, len(compute))
	for _, model := range []struct {
		name    string
		compute []float64
		title   string
	}{{"measured", compute, "compute as measured here"}, {"read-bound", readBound, "read-bound: compute hidden under the reads"}} {
		if !*jsonOut {
			fmt.Fprintf(stdout, "\nprojected full model per generated token, %s: s = max(read, compute) / overlap efficiency\n", model.title)
			fmt.Fprintf(stdout, "%-8s %-12s %-6s %9s %10s %9s %11s  %s\n", "preset", "prompt", "spec", "s/token", "GB/token", "acc/pass", "pass/token", "passes by draft length 0..")
		}
		for _, name := range []string{"laptop", "desktop", "server"} {
			projectSpec(name, model.name, disk, model.compute, ov.Efficiency, set, *maxDraft, emit)
		}
	}
	return ExitOK
}

// specCase is one tokenized prompt: the reply starts at start.
type specCase struct {
	name  string
	ids   []int
	start int
}

// projectSpec prints one preset's projections for every prompt: without
// speculation, with the automatic draft length and with the fastest fixed
// one.
func projectSpec(name, computeModel string, disk float64, compute []float64, overlap float64, set []specCase, maxDraft int, emit func(specLine, string)) {
	pr, _ := plan.Lookup(name)
	pred := doctor.Predict(pr, doctor.Speeds{TrunkDiskGBps: disk, ExpertDiskGBps: disk, BF16GBps: 1, MXFP4GBps: 1})
	costs := engine.PassCosts{TrunkBytes: float64(pred.StreamedTrunkBytesPerToken), ExpertBytes: (1 - pred.ExpertHitRate) * float64(doctor.K3.ExpertBytesPerToken()),
		DiskBps: disk * 1e9, Compute: compute, Overlap: overlap}
	for _, s := range set {
		off := engine.SimulateSpec(s.ids, s.start, engine.SpecOff, maxDraft, costs)
		rows := []struct {
			spec string
			r    engine.SpecSim
		}{{"off", off}, {"auto", engine.SimulateSpec(s.ids, s.start, engine.SpecAuto, maxDraft, costs)}}
		best := struct {
			spec string
			r    engine.SpecSim
		}{"", off}
		for k := 1; k <= maxDraft; k++ {
			if r := engine.SimulateSpec(s.ids, s.start, engine.Spec(k), maxDraft, costs); r.Seconds < best.r.Seconds {
				best.spec, best.r = fmt.Sprint(k), r
			}
		}
		if best.spec != "" {
			rows = append(rows, best)
		}
		for _, row := range rows {
			r := row.r
			ppt := float64(r.Passes+1) / float64(r.Tokens)
			emit(specLine{Kind: "projection", Compute: computeModel, Preset: name, Prompt: s.name, Spec: row.spec, Tokens: r.Tokens, Passes: r.Passes, Drafted: r.Drafted, Accepted: r.Accepted,
				AcceptedPerPass: r.AcceptedPerPass(), PassesPerToken: ppt, SecondsPerToken: r.SecondsPerToken(), BytesPerToken: r.BytesPerToken(), Lengths: r.Lengths},
				fmt.Sprintf("%-8s %-12s %-6s %9.2f %10.2f %9.2f %11.2f  %s", name, s.name, row.spec, r.SecondsPerToken(), r.BytesPerToken()/1e9,
					r.AcceptedPerPass(), ppt, strings.Trim(fmt.Sprint(r.Lengths), "[]")))
		}
	}
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
