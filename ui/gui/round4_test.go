package gui

import (
	"testing"

	"fyne.io/fyne/v2/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// G27: with greedy decoding on, Regenerate asks once; after a Yes the next
// Regenerates sample without the same dialog again.
func TestRegenerateAsksOnceUnderGreedy(t *testing.T) {
	fc := &fakeChat{}
	u, v := chatUI(t, fc)
	ui(func() { v.Send("Question one") })
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() {
		require.True(t, v.Opts.Greedy, "greedy is the default")
		test.Tap(v.RegenBt)
		tapDialog(t, u.Win, "Yes")
	})
	waitFor(t, "regenerate 1", func() bool { return !v.Busy })
	for i := 2; i <= 3; i++ {
		ui(func() {
			assert.Nil(t, u.Win.Canvas().Overlays().Top(), "no dialog before Regenerate %d", i)
			test.Tap(v.RegenBt)
			assert.Nil(t, u.Win.Canvas().Overlays().Top(), "Regenerate %d asks nothing", i)
		})
		waitFor(t, "regenerate", func() bool { return !v.Busy })
		ui(func() {
			assert.False(t, fc.lastOpt.Greedy, "regeneration %d samples", i)
			assert.NotZero(t, fc.lastOpt.Seed)
			assert.Equal(t, "Hello world, this is reply "+string(rune('1'+i)), v.History[len(v.History)-1].Content)
		})
	}
}
