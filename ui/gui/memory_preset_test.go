package gui

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// N5: a preset larger than the machine keeps its sliders within their
// range (a value past the end drew the track through the label, no thumb)
// and Done says the same numbers as step 4's note, not 110/109 GB; the
// next model starts from the machine's choice, not the last one's preset.
func TestPresetStaysWithinTheMachine(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	u.S.ModelDir = t.TempDir()
	ui(u.Start)
	w := u.wizard
	ui(func() {
		w.D.ModelDir = u.S.ModelDir
		w.Go(3)
		w.Memory.Preset.SetSelected("max") // 110 + 109 GB on a 32 GB machine
	})
	waitFor(t, "plan", func() bool { return !w.Memory.busy })
	ui(func() {
		m := w.Memory
		assert.Equal(t, "max", m.Preset.Selected)
		assert.LessOrEqual(t, m.Trunk.Value, m.Trunk.Max)
		assert.LessOrEqual(t, m.Cache.Value, m.Cache.Max)
		w.Go(4)
		assert.Contains(t, w.Done.Summary.Text, "Memory: preset max, which asks for about 219 GB; this machine has 32 GB")
		assert.NotContains(t, w.Done.Summary.Text, "110.0 GB")

		// another model: step 4 starts again from the machine's choice
		w.D.ModelDir = t.TempDir()
		w.Go(3)
	})
	waitFor(t, "plan", func() bool { return !w.Memory.busy })
	ui(func() {
		require.NotEqual(t, "max", w.Memory.Preset.Selected, "the last model's preset was carried over")
		assert.NotEqual(t, "max", w.D.Preset)
	})
}
