package engine

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
)

// TestSnapshotDuringGenerate reads the engine's counters from another
// goroutine while a generation with drafts runs, as the app's gauges do
// every 250 ms. Under the race detector (make race) it fails if a counter
// is a plain field; without it, it checks that the counters a reader sees
// never go backwards and end at the generation's totals.
func TestSnapshotDuringGenerate(t *testing.T) {
	m := openCase(t, "tiny-release", 0)
	p := fixture.LoadExpect(t, "tiny-release")
	e := m.NewEngine(2)
	defer e.Close()

	done := make(chan struct{})
	var wg sync.WaitGroup
	var seen []Stats
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			seen = append(seen, e.Snapshot())
			select {
			case <-done:
				return
			default:
			}
		}
	}()
	res, err := e.Generate(context.Background(), nil, p.Prompts[0].PromptIDs, GenOptions{MaxTokens: 12, Spec: 3, Trace: &GenTrace{Propose: func(ids []int, k int) []int {
		return ids[len(ids)-min(k, len(ids)):]
	}}})
	close(done)
	wg.Wait()
	require.NoError(t, err)
	require.NotEmpty(t, seen)
	for i := 1; i < len(seen); i++ {
		assert.GreaterOrEqual(t, seen[i].Positions, seen[i-1].Positions, "positions went backwards at read %d", i)
		assert.GreaterOrEqual(t, seen[i].ForwardPasses, seen[i-1].ForwardPasses, "passes went backwards at read %d", i)
		assert.GreaterOrEqual(t, seen[i].SpecDrafted, seen[i-1].SpecDrafted, "drafted went backwards at read %d", i)
	}
	end := e.Snapshot()
	assert.Equal(t, res.Stats.ForwardPasses, end.ForwardPasses)
	assert.Equal(t, res.Stats.SpecDrafted, end.SpecDrafted)
	assert.Positive(t, end.SpecDrafted, "the run drafted")
}

// TestCompleteOnCancel: with Complete, a generation cancelled after it
// chose a token leaves the state holding that token too, byte for byte the
// state of an uncancelled run of as many tokens.
func TestCompleteOnCancel(t *testing.T) {
	m := openCase(t, "tiny-release", 0)
	prompt := fixture.LoadExpect(t, "tiny-release").Prompts[0].PromptIDs
	e := m.NewEngine(1)
	defer e.Close()
	const n = 3
	want, err := e.Generate(context.Background(), nil, prompt, GenOptions{MaxTokens: n, Complete: true, Spec: SpecOff})
	require.NoError(t, err)
	require.Len(t, want.Generated, n)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got, err := e.Generate(ctx, nil, prompt, GenOptions{MaxTokens: 10, Complete: true, Spec: SpecOff, OnEvent: func(ev Event) {
		if ev.Kind == EventToken && ev.Step == n-1 {
			cancel()
		}
	}})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, StopCancelled, got.Stop)
	require.Equal(t, want.Generated, got.Generated)
	assert.Equal(t, len(prompt)+n, got.State.Pos, "the last chosen token was fed")
	assert.Equal(t, stateBytes(t, m, want.State), stateBytes(t, m, got.State))
}
