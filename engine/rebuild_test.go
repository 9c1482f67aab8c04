package engine

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRebuildReadsIntoItsOwnArrays: a stale state (a cancel at the floor
// dropped its chunk in flight) is read again from its ids into its own
// layer arrays, emptied, not into a second whole state beside them (the
// floor plans the state once), and the result is bit for bit a fresh
// state's feed of the same ids.
func TestRebuildReadsIntoItsOwnArrays(t *testing.T) {
	model, tr := budgetCheckpoint(t)
	m, err := Open(model, Options{TrunkDir: tr, Chunk: 8, Budget: Budget{TrunkBytes: 1, Ring: 1, CacheBytes: 1 << 40}})
	require.NoError(t, err)
	defer m.Close()
	e := m.NewEngine(2)
	defer e.Close()
	ids := []int{5, 77, 300, 12, 999, 41, 8, 150, 151, 152, 3, 600}
	want := m.NewState()
	_, err = e.Feed(context.Background(), want, ids, false)
	require.NoError(t, err)

	s := m.NewState()
	_, err = e.Feed(context.Background(), s, ids, false)
	require.NoError(t, err)
	s.stale = true // as State.drop leaves it
	var kda *float32
	var mla *float32
	for i := range s.kda {
		if s.kda[i] != nil && kda == nil {
			kda = &s.kda[i].S[0]
		}
		if s.mla[i] != nil && mla == nil {
			mla = &s.mla[i].rows[:1][0]
		}
	}
	require.NotNil(t, kda, "a KDA layer")
	require.NotNil(t, mla, "an MLA layer")
	require.NoError(t, e.rebuild(context.Background(), s))
	requireSameState(t, "rebuilt", want, s)
	var kda2, mla2 *float32
	for i := range s.kda {
		if s.kda[i] != nil && kda2 == nil {
			kda2 = &s.kda[i].S[0]
		}
		if s.mla[i] != nil && mla2 == nil {
			mla2 = &s.mla[i].rows[:1][0]
		}
	}
	require.Same(t, kda, kda2, "the KDA state read again in place")
	require.Same(t, mla, mla2, "the MLA rows read again in place")
}
