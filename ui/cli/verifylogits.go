package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"sort"

	"k3/storage/regfile"
)

// GoldenFile is the published logits file of a golden directory (the seed's
// testdata/seed-v1/golden/ref_logits.json; tools/reference/make_golden.py
// writes the test models').
const GoldenFile = "ref_logits.json"

// goldenBudget is the seed's tolerance for a logits comparison: the largest
// |difference| relative to the largest |reference logit|
// (testdata/seed-v1/golden/logit_comparison.log: "budget 5.1e-04"), with the
// argmax equal.
const goldenBudget = 5.1e-4

// golden is a ref_logits.json: the float32 logits (as bits) at the last
// position of one forward over prompt_ids.
type golden struct {
	PromptIDs  []int    `json:"prompt_ids"`
	Argmax     int      `json:"argmax"`
	Vocab      int      `json:"vocab"`
	LogitsBits []uint32 `json:"logits_bits"`
	// Layers is the number of layers run (absent: the whole model).
	Layers int `json:"layers,omitempty"`
	logits []float32
}

func readGolden(dir string) (*golden, error) {
	path := filepath.Join(dir, GoldenFile)
	b, err := regfile.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	switch {
	case len(g.PromptIDs) == 0:
		return nil, fmt.Errorf("%s: no prompt_ids", path)
	case g.Vocab <= 0 || len(g.LogitsBits) != g.Vocab:
		return nil, fmt.Errorf("%s: %d logits for a vocabulary of %d", path, len(g.LogitsBits), g.Vocab)
	case g.Argmax < 0 || g.Argmax >= g.Vocab:
		return nil, fmt.Errorf("%s: argmax %d outside the vocabulary", path, g.Argmax)
	}
	g.logits = make([]float32, g.Vocab)
	for i, b := range g.LogitsBits {
		g.logits[i] = math.Float32frombits(b)
		if f := float64(g.logits[i]); math.IsNaN(f) || math.IsInf(f, 0) {
			// it would otherwise read as the model's mismatch
			return nil, fmt.Errorf("%s: logit %d is %v: a bad golden, not a comparison (write it again: tools/reference/make_golden.py)", path, i, f)
		}
	}
	if a := argmaxF32(g.logits); a != g.Argmax {
		return nil, fmt.Errorf("%s: its argmax says %d but its logits' largest is at %d: a bad golden (write it again: tools/reference/make_golden.py)", path, g.Argmax, a)
	}
	return &g, nil
}

// logitCompare is one position's comparison with the golden.
type logitCompare struct {
	MaxDiff   float64 // max |got - want|
	At        int     // the id where it is
	MaxRef    float64 // max |want|
	Rel       float64 // MaxDiff / MaxRef
	ArgGot    int
	ArgWant   int
	TopShared int // of the golden's top 10, how many are in ours
}

func (c logitCompare) ok() bool { return c.Rel <= goldenBudget && c.ArgGot == c.ArgWant }

func compareLogits(got, want []float32) logitCompare {
	c := logitCompare{ArgGot: argmaxF32(got), ArgWant: argmaxF32(want)}
	for i := range want {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if d > c.MaxDiff || math.IsNaN(d) {
			c.MaxDiff, c.At = d, i
		}
		c.MaxRef = math.Max(c.MaxRef, math.Abs(float64(want[i])))
	}
	c.Rel = c.MaxDiff / math.Max(c.MaxRef, 1e-30)
	tg, tw := topK(got, 10), topK(want, 10)
	for _, i := range tw {
		if slices.Contains(tg, i) {
			c.TopShared++
		}
	}
	return c
}

func argmaxF32(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

func topK(v []float32, k int) []int {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return v[idx[a]] > v[idx[b]] })
	return idx[:min(k, len(idx))]
}

// verifyLogits is `k3 verify MODEL --logits`: it runs the checkpoint on the
// golden's ids and compares the last position's logits with the golden.
// Exit 0 match, 1 mismatch or a failed run, 2 a golden that does not fit
// the command (other ids, another layer count, another vocabulary).
func verifyLogits(dir, goldenDir, idsFlag string, mf *modelFlags, stdout, stderr io.Writer) int {
	g, err := readGolden(goldenDir)
	if err != nil {
		fmt.Fprintf(stderr, "k3 verify: golden: %v\n", err)
		return ExitUsage
	}
	ids := g.PromptIDs
	if idsFlag != "" {
		if ids, err = parseIDs(idsFlag); err != nil {
			fmt.Fprintln(stderr, "k3 verify:", err)
			return ExitUsage
		}
		if !slices.Equal(ids, g.PromptIDs) {
			fmt.Fprintf(stderr, "k3 verify: the golden in %s holds the logits for ids %s, not %s\n", goldenDir, fixtureIDs(g.PromptIDs), fixtureIDs(ids))
			return ExitUsage
		}
	}
	m, code := mf.open(dir, mf.options(len(ids), false), stdout, stderr)
	if code >= 0 {
		return code
	}
	defer m.Close()
	want := g.Layers
	if want == 0 {
		want = m.Cfg.Layers
	}
	switch {
	case m.Bound != want:
		fmt.Fprintf(stderr, "k3 verify: the golden in %s is for %d layers, this run binds %d: give a golden made for --layers %d (tools/reference/make_golden.py)\n", goldenDir, want, m.Bound, m.Bound)
		return ExitUsage
	case g.Vocab != m.Cfg.VocabSize:
		fmt.Fprintf(stderr, "k3 verify: the golden has %d logits, the model's vocabulary is %d\n", g.Vocab, m.Cfg.VocabSize)
		return ExitUsage
	}
	for _, id := range ids {
		if id >= m.Cfg.VocabSize {
			fmt.Fprintf(stderr, "k3 verify: token id %d is outside the vocabulary 0..%d\n", id, m.Cfg.VocabSize-1)
			return ExitUsage
		}
	}
	e := m.NewEngine(*mf.threads)
	defer e.Close()
	got, err := e.Feed(context.Background(), m.NewState(), ids, false)
	if err != nil {
		return exitFor(stderr, "verify", err)
	}
	c := compareLogits(got, g.logits)
	fmt.Fprintf(stdout, "logits of %s over ids %s (%d layers) against %s\n", dir, fixtureIDs(ids), m.Bound, filepath.Join(goldenDir, GoldenFile))
	fmt.Fprintf(stdout, "position %d (after id %d): worst |diff| %.3e at id %d, relative to max|ref| %.3e (budget %.1e); argmax %d, golden %d; top-10 overlap %d/10\n",
		len(ids)-1, ids[len(ids)-1], c.MaxDiff, c.At, c.Rel, goldenBudget, c.ArgGot, c.ArgWant, c.TopShared)
	if !c.ok() {
		fmt.Fprintln(stdout, "MISMATCH: the logits differ from the published ones beyond the tolerance")
		return ExitRuntime
	}
	fmt.Fprintln(stdout, "MATCH: the logits agree with the published ones within the tolerance, and the argmax is the same")
	return ExitOK
}

// fixtureIDs is "3,4,5".
func fixtureIDs(ids []int) string {
	b := make([]byte, 0, 4*len(ids))
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, "%d", id)
	}
	return string(b)
}
