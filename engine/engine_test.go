package engine

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k3/kernels"
)

type expectFile struct {
	Case    string `json:"case"`
	Prompts []struct {
		PromptIDs   []int     `json:"prompt_ids"`
		GreedyIDs   []int     `json:"greedy_ids"`
		FullIDs     []int     `json:"full_ids"`
		TFPred      []int     `json:"tf_pred"`
		FirstLogits []float64 `json:"first_logits"`
	} `json:"prompts"`
}

var modelCases = []string{"tiny-release", "tiny-flat-f32"}

func loadCase(t *testing.T, name string) (*Model, *expectFile) {
	t.Helper()
	dir := filepath.Join("..", "testdata", "models", name)
	m, set, err := Open(dir, "", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Store.Close(); set.Close() })
	raw, err := os.ReadFile(filepath.Join(dir, "expect.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ex expectFile
	if err := json.Unmarshal(raw, &ex); err != nil {
		t.Fatal(err)
	}
	if len(ex.Prompts) < 2 {
		t.Fatalf("%s: expect.json has %d prompts", name, len(ex.Prompts))
	}
	return m, &ex
}

// checkLogits compares against the float64 reference: every value within
// 1e-4 of the largest reference magnitude.
func checkLogits(t *testing.T, what string, got []float32, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d logits, reference %d", what, len(got), len(want))
	}
	scale := 0.0
	for _, w := range want {
		scale = math.Max(scale, math.Abs(w))
	}
	worst := 0.0
	for i := range got {
		worst = math.Max(worst, math.Abs(float64(got[i])-want[i])/scale)
	}
	if worst > 1e-4 {
		t.Fatalf("%s: logits differ from the reference by %.3g relative (limit 1e-4)", what, worst)
	}
	t.Logf("%s: max relative logit difference %.2g", what, worst)
}

// TestGates is the engine's acceptance gate against the PyTorch reference:
// greedy, incremental == recompute, teacher forcing and first-step logits.
func TestGates(t *testing.T) {
	for _, name := range modelCases {
		t.Run(name, func(t *testing.T) {
			m, ex := loadCase(t, name)
			for _, chunk := range []int{64, 16, 1} {
				e := NewEngine(m, 2)
				e.Chunk = chunk
				for pi, p := range ex.Prompts {
					res, err := e.Generate(context.Background(), nil, p.PromptIDs, GenOptions{Gen: len(p.GreedyIDs)})
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(res.Generated, p.GreedyIDs) {
						t.Fatalf("chunk %d prompt %d: greedy %v, reference %v", chunk, pi, res.Generated, p.GreedyIDs)
					}
					checkLogits(t, name, res.FirstLogits, p.FirstLogits)
					if chunk != 16 {
						continue
					}
					rc, err := e.Generate(context.Background(), nil, p.PromptIDs, GenOptions{Gen: len(p.GreedyIDs), Recompute: true})
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(rc.Generated, res.Generated) {
						t.Fatalf("prompt %d: recompute %v, incremental %v", pi, rc.Generated, res.Generated)
					}
					for i := range rc.FirstLogits {
						if math.Float32bits(rc.FirstLogits[i]) != math.Float32bits(res.FirstLogits[i]) {
							t.Fatalf("prompt %d: recompute logits differ at %d", pi, i)
						}
					}
					tf, err := e.TeacherForce(p.FullIDs)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(tf, p.TFPred) {
						t.Fatalf("prompt %d: teacher forcing %v, reference %v", pi, tf, p.TFPred)
					}
				}
				e.Close()
			}
		})
	}
}

// TestChunkAndThreadInvariance: prefill chunk size and thread count never
// change a bit of the logits (teacher forcing over every position).
func TestChunkAndThreadInvariance(t *testing.T) {
	m, ex := loadCase(t, "tiny-release")
	ids := ex.Prompts[1].FullIDs
	var ref []float32
	for _, threads := range []int{1, 2, 3} {
		for _, chunk := range []int{1, 7, 16, 64} {
			e := NewEngine(m, threads)
			e.Chunk = chunk
			lg, err := e.Feed(m.NewState(), ids, true)
			e.Close()
			if err != nil {
				t.Fatal(err)
			}
			if ref == nil {
				ref = lg
				continue
			}
			for i := range lg {
				if math.Float32bits(lg[i]) != math.Float32bits(ref[i]) {
					t.Fatalf("threads %d chunk %d: logit %d differs", threads, chunk, i)
				}
			}
		}
	}
}

// TestGenerateCancel: a cancelled context stops between steps and keeps
// the tokens made so far (they equal the uncancelled run's prefix).
func TestGenerateCancel(t *testing.T) {
	m, ex := loadCase(t, "tiny-release")
	p := ex.Prompts[0]
	e := NewEngine(m, 1)
	defer e.Close()
	ctx, cancel := context.WithCancel(context.Background())
	res, err := e.Generate(ctx, nil, p.PromptIDs, GenOptions{Gen: 12, OnStep: func(step, id int, s float64) {
		if step == 2 {
			cancel()
		}
	}})
	if err != ErrCancelled || res.StopReason != StopCancelled {
		t.Fatalf("err %v reason %q", err, res.StopReason)
	}
	if !slices.Equal(res.Generated, p.GreedyIDs[:3]) {
		t.Fatalf("partial %v, want %v", res.Generated, p.GreedyIDs[:3])
	}
}

// TestPortableEqualsSIMD: the whole engine gives byte-identical logits with
// the portable kernels forced and with the best SIMD path of this machine.
func TestPortableEqualsSIMD(t *testing.T) {
	if kernels.BestLevel() == kernels.LevelPortable {
		t.Skip("no SIMD path on this machine")
	}
	for _, name := range modelCases {
		m, ex := loadCase(t, name)
		ids := ex.Prompts[1].FullIDs
		run := func(l kernels.Level) []float32 {
			prev := kernels.SetLevel(l)
			defer kernels.SetLevel(prev)
			e := NewEngine(m, 2)
			defer e.Close()
			e.Chunk = 16
			lg, err := e.Feed(m.NewState(), ids, true)
			if err != nil {
				t.Fatal(err)
			}
			return lg
		}
		a, b := run(kernels.LevelPortable), run(kernels.BestLevel())
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				t.Fatalf("%s logit %d: portable %v, level %v %v", name, i, a[i], kernels.BestLevel(), b[i])
			}
		}
	}
}
