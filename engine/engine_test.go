package engine

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
	"k3/kernels"
)

// openCase opens reference checkpoint name (resident) with the given prefill chunk.
func openCase(t *testing.T, name string, chunk int) *Model {
	t.Helper()
	m, err := Open(fixture.ModelDir(name), Options{Budget: Budget{CacheBytes: 1 << 62}, Chunk: chunk})
	require.NoError(t, err)
	t.Cleanup(m.Close)
	return m
}

func loadCase(t *testing.T, name string) (*Model, *fixture.Expect) {
	t.Helper()
	return openCase(t, name, 0), fixture.LoadExpect(t, name)
}

// checkLogits compares against the float64 reference: every value within
// 1e-4 of the largest reference magnitude.
func checkLogits(t *testing.T, what string, got []float32, want []float64) {
	t.Helper()
	require.Len(t, got, len(want), what)
	scale := 0.0
	for _, w := range want {
		scale = math.Max(scale, math.Abs(w))
	}
	worst := 0.0
	for i := range got {
		worst = math.Max(worst, math.Abs(float64(got[i])-want[i])/scale)
	}
	require.LessOrEqual(t, worst, 1e-4, "%s: logits differ from the reference (relative to the largest)", what)
	t.Logf("%s: max relative logit difference %.2g", what, worst)
}

// requireSameBits fails unless a and b are identical bit for bit.
func requireSameBits(t *testing.T, what string, a, b []float32) {
	t.Helper()
	require.Len(t, b, len(a), what)
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			require.Failf(t, "bits differ", "%s: value %d is %v, want %v", what, i, a[i], b[i])
		}
	}
}

// TestGates is the engine's acceptance gate against the PyTorch reference:
// greedy, incremental == recompute, teacher forcing and first-step logits.
func TestGates(t *testing.T) {
	ctx := context.Background()
	for _, name := range fixture.Models {
		t.Run(name, func(t *testing.T) {
			ex := fixture.LoadExpect(t, name)
			for _, chunk := range []int{64, 16, 1} {
				m := openCase(t, name, chunk)
				e := m.NewEngine(2)
				for pi, p := range ex.Prompts {
					res, err := e.Generate(ctx, nil, p.PromptIDs, GenOptions{MaxTokens: len(p.GreedyIDs)})
					require.NoError(t, err)
					require.Equal(t, p.GreedyIDs, res.Generated, "chunk %d prompt %d: greedy", chunk, pi)
					assert.Equal(t, StopLength, res.Stop)
					assert.Equal(t, p.FullIDs, res.FullIDs())
					checkLogits(t, name, res.FirstLogits, p.FirstLogits)
					if chunk != 16 {
						continue
					}
					rc, err := e.Generate(ctx, nil, p.PromptIDs, GenOptions{MaxTokens: len(p.GreedyIDs), Recompute: true})
					require.NoError(t, err)
					require.Equal(t, res.Generated, rc.Generated, "prompt %d: recompute", pi)
					requireSameBits(t, "recompute logits", rc.FirstLogits, res.FirstLogits)
					tf, err := e.TeacherForce(ctx, p.FullIDs)
					require.NoError(t, err)
					require.Equal(t, p.TFPred, tf, "prompt %d: teacher forcing", pi)
				}
				e.Close()
			}
		})
	}
}

// TestChunkAndThreadInvariance: prefill chunk size and thread count never
// change a bit of the logits (teacher forcing over every position).
func TestChunkAndThreadInvariance(t *testing.T) {
	ids := fixture.LoadExpect(t, "tiny-release").Prompts[1].FullIDs
	var ref []float32
	for _, chunk := range []int{1, 7, 16, 64} {
		m := openCase(t, "tiny-release", chunk)
		for _, threads := range []int{1, 2, 3} {
			e := m.NewEngine(threads)
			lg, err := e.Feed(context.Background(), m.NewState(), ids, true)
			e.Close()
			require.NoError(t, err)
			if ref == nil {
				ref = lg
				continue
			}
			requireSameBits(t, "logits", lg, ref)
		}
	}
}

// TestGenerateCancel: a cancelled context stops between steps and keeps
// the tokens made so far (they equal the uncancelled run's prefix).
func TestGenerateCancel(t *testing.T) {
	m, ex := loadCase(t, "tiny-release")
	p := ex.Prompts[0]
	e := m.NewEngine(1)
	defer e.Close()
	ctx, cancel := context.WithCancel(context.Background())
	res, err := e.Generate(ctx, nil, p.PromptIDs, GenOptions{MaxTokens: 12, OnToken: func(ev Event) bool {
		if ev.Step == 2 {
			cancel()
		}
		return false
	}})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, StopCancelled, res.Stop)
	assert.Equal(t, p.GreedyIDs[:3], res.Generated)
}

// TestGenerateStops: a stop id ends generation (kept in the output), and
// OnToken can end it too.
func TestGenerateStops(t *testing.T) {
	m, ex := loadCase(t, "tiny-release")
	p := ex.Prompts[0]
	e := m.NewEngine(1)
	defer e.Close()
	res, err := e.Generate(context.Background(), nil, p.PromptIDs, GenOptions{MaxTokens: 12, StopIDs: []int{p.GreedyIDs[4]}})
	require.NoError(t, err)
	assert.Equal(t, StopToken, res.Stop)
	assert.Equal(t, p.GreedyIDs[:slices.Index(p.GreedyIDs, p.GreedyIDs[4])+1], res.Generated)
	res, err = e.Generate(context.Background(), nil, p.PromptIDs, GenOptions{MaxTokens: 12, OnToken: func(ev Event) bool { return ev.Step == 1 }})
	require.NoError(t, err)
	assert.Equal(t, StopCaller, res.Stop)
	assert.Equal(t, p.GreedyIDs[:2], res.Generated)
	assert.Equal(t, "stop_id", StopToken.String())
}

// stateBytes is the state as SaveState writes it.
func stateBytes(t *testing.T, m *Model, s *State) []byte {
	t.Helper()
	// the target's state: without the draft model's context rows, so that
	// runs with and without a draft model attached compare
	d := s.draft
	s.draft = nil
	defer func() { s.draft = d }()
	path := filepath.Join(t.TempDir(), "state")
	require.NoError(t, m.SaveState(path, s))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// TestCancelInsidePrefill: cancelling while a prompt is read stops before the
// next layer; the state keeps exactly the chunks that completed (the chunk
// in flight is rolled back), equals the state of feeding those positions
// alone byte for byte, and generation resumed from it gives the reference.
func TestCancelInsidePrefill(t *testing.T) {
	const chunk = 8
	name := "tiny-release"
	p := fixture.LoadExpect(t, name).Prompts[1]
	require.Greater(t, len(p.PromptIDs), 2*chunk, "the prompt must span more than two chunks")
	dir := fixture.ModelDir(name)
	m := openCase(t, name, chunk)
	for _, at := range []struct {
		what  string
		chunk int // cancel during this prefill chunk (0-based)
		layer int // ... when this layer asks for its experts (-1: at the chunk's end)
	}{{"between chunks", 0, -1}, {"mid chunk, early layer", 1, 2}, {"mid chunk, late layer", 2, m.Cfg.Layers - 2}} {
		t.Run(at.what, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := 0
			m, err := Open(dir, Options{Budget: Budget{CacheBytes: 1 << 62}, Chunk: chunk, Trace: func(layer, expert int) {
				if done == at.chunk && layer == at.layer {
					cancel()
				}
			}})
			require.NoError(t, err)
			defer m.Close()
			require.False(t, at.layer >= 0 && m.Cfg.IsDense(at.layer), "layer %d must be an MoE layer", at.layer)
			e := m.NewEngine(2)
			defer e.Close()
			var events []Event
			res, err := e.Generate(ctx, nil, p.PromptIDs, GenOptions{MaxTokens: 4, OnEvent: func(ev Event) {
				events = append(events, ev)
				if ev.Kind == EventPrefill {
					done++
					if at.layer < 0 && done == at.chunk+1 {
						cancel()
					}
				}
			}})
			require.ErrorIs(t, err, context.Canceled)
			assert.Equal(t, StopCancelled, res.Stop)
			assert.Empty(t, res.Generated)
			kept := chunk * (at.chunk + 1)
			if at.layer >= 0 {
				kept = chunk * at.chunk
			}
			require.Equal(t, kept, res.State.Pos, "positions kept")
			require.Equal(t, p.PromptIDs[:kept], res.State.IDs)
			require.Len(t, events, kept/chunk)
			for i, ev := range events {
				assert.Equal(t, EventPrefill, ev.Kind)
				assert.Equal(t, (i+1)*chunk, ev.Done)
				assert.Equal(t, len(p.PromptIDs), ev.Total)
			}
			// the kept state is the state of those positions fed alone
			fresh := m.NewState()
			_, err = e.Feed(context.Background(), fresh, p.PromptIDs[:kept], false)
			require.NoError(t, err)
			require.Equal(t, stateBytes(t, m, fresh), stateBytes(t, m, res.State))
			// and generation continues from it as if never interrupted
			rest, err := e.Generate(context.Background(), res.State, p.PromptIDs[kept:], GenOptions{MaxTokens: len(p.GreedyIDs)})
			require.NoError(t, err)
			require.Equal(t, p.GreedyIDs, rest.Generated)
		})
	}
}

// TestPortableEqualsSIMD: the whole engine gives byte-identical logits with
// the portable kernels forced and with the best SIMD path of this machine.
func TestPortableEqualsSIMD(t *testing.T) {
	if kernels.BestLevel() == kernels.LevelPortable {
		t.Skip("no SIMD path on this machine")
	}
	for _, name := range fixture.Models {
		m := openCase(t, name, 16)
		ids := fixture.LoadExpect(t, name).Prompts[1].FullIDs
		run := func(l kernels.Level) []float32 {
			prev := kernels.SetLevel(l)
			defer kernels.SetLevel(prev)
			e := m.NewEngine(2)
			defer e.Close()
			lg, err := e.Feed(context.Background(), m.NewState(), ids, true)
			require.NoError(t, err)
			return lg
		}
		requireSameBits(t, name+" portable vs "+kernels.BestLevel().String(), run(kernels.LevelPortable), run(kernels.BestLevel()))
	}
}
