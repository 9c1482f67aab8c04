package gui

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"k3/ui/bridge"
)

// G9: a preset larger than the machine stays that preset (not "custom")
// and says what it needs against what the machine has.
func TestPresetLargerThanTheMachine(t *testing.T) {
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
		assert.Equal(t, "max", w.Memory.Preset.Selected, "the preset turned into custom")
		assert.Equal(t, "max", w.D.Preset)
		assert.Contains(t, w.Memory.PresetNote.Text, presetNotes["max"])
		assert.Contains(t, w.Memory.PresetNote.Text, "This preset needs about 219 GB for the shared weights and the expert cache alone; this machine has 32 GB.")
	})
}

// Defect 10: both sliders at 0 GB plan 0 GB (not the auto plan), and a
// slider moved by hand makes the preset "custom".
func TestMemorySlidersAtZeroPlanZero(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	u.S.ModelDir = t.TempDir()
	ui(u.Start)
	w := u.wizard
	ui(func() {
		w.D.ModelDir = u.S.ModelDir
		w.Go(3)
		w.Memory.Preset.SetSelected("laptop")
	})
	waitFor(t, "plan", func() bool { return !w.Memory.busy && w.Memory.Plan != nil })
	ui(func() {
		w.Memory.Trunk.SetValue(0)
		w.Memory.Cache.SetValue(0)
	})
	waitFor(t, "replan", func() bool { return !w.Memory.busy && w.Memory.Plan != nil && w.Memory.Plan.CacheBytes == 0 })
	ui(func() {
		assert.Equal(t, bridge.CustomPreset, w.Memory.Preset.Selected)
		assert.Equal(t, int64(0), w.Memory.Plan.PinnedBytes)
		assert.Equal(t, int64(2e9), w.Memory.Plan.Total)
		assert.Equal(t, presetNotes[bridge.CustomPreset], w.Memory.PresetNote.Text)
	})
}
