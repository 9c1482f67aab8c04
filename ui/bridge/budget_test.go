package bridge

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"k3/doctor"
	"k3/engine/plan"
)

// The app resolves presets as the CLI and the doctor do (plan.Resolve):
// the ultra preset runs ultra mode, auto is the doctor's choice.
func TestSettingsBudgetPresets(t *testing.T) {
	b := Settings{Preset: "ultra", TrunkDir: "/t"}.Budget(nil)
	assert.True(t, b.Ultra, "ultra preset without ultra mode")
	ultra, _ := plan.Lookup("ultra")
	assert.Equal(t, int64(2.5e9), b.TrunkBytes)
	assert.Equal(t, int64(0.16e9), b.CacheBytes, "ultra's expert cache: the reads in flight (plan.MinExpertSlots)")
	assert.Equal(t, int64(ultra.CacheGB*plan.GB), b.CacheBytes)

	// budgets set by hand (the custom preset) are used as they are, zero
	// included, and are not ultra
	b = Settings{Preset: CustomPreset, TrunkDir: "/t", TrunkGB: 3, CacheGB: 0.5}.Budget(nil)
	assert.False(t, b.Ultra)
	assert.Equal(t, int64(3e9), b.TrunkBytes)
	assert.Equal(t, int64(0.5e9), b.CacheBytes)
	assert.Zero(t, Settings{Preset: CustomPreset}.Budget(nil).TrunkBytes)

	// ultra streams the model tables from the packed trunk: none, no ultra
	assert.False(t, Settings{Preset: "ultra"}.Budget(nil).Ultra)
	assert.False(t, Settings{Preset: "laptop", TrunkDir: "/t"}.Budget(nil).Ultra)

	for _, gb := range []float64{5.5, 12, 40, 150, 300} {
		mem := &plan.Memory{TotalBytes: int64(2 * gb * 1e9), AvailableBytes: int64(gb * 1e9)}
		want, ok := doctor.Choose(*mem, doctor.Speeds{TrunkDiskGBps: 1, ExpertDiskGBps: 1, BF16GBps: 1, MXFP4GBps: 1})
		assert.True(t, ok)
		p, _ := plan.Lookup(want.Name)
		b := Settings{Preset: "auto", TrunkDir: "/t"}.Budget(mem)
		assert.Equal(t, int64(p.TrunkGB*plan.GB), b.TrunkBytes, "%v GB: auto is not the doctor's %s", gb, p.Name)
		assert.Equal(t, int64(p.CacheGB*plan.GB), b.CacheBytes, "%v GB", gb)
		assert.Equal(t, p.Ultra, b.Ultra, "%v GB", gb)
	}
	// auto without the memory: laptop, as before
	assert.Equal(t, int64(3e9), Settings{Preset: "auto", TrunkDir: "/t"}.Budget(nil).TrunkBytes)
}

// TestContextPositionsOneNumber: the app opens a model planned for the
// context the doctor plans (plan.ContextPositions), so the plan "auto"
// fits into memory is the plan the app opens; a reply cap longer than it
// plans its own length, and the app's server takes what was planned.
func TestContextPositionsOneNumber(t *testing.T) {
	s := DefaultSettings()
	assert.Equal(t, doctor.PlanPositions, s.Positions())
	assert.Equal(t, plan.ContextPositions, ContextPositions)
	mem := &plan.Memory{TotalBytes: 64e9, AvailableBytes: 40e9}
	o := s.OpenOptions(mem)
	assert.Equal(t, doctor.PlanPositions, o.Positions)
	b := PresetBudget(s.Preset, mem)
	assert.Equal(t, doctor.Need(b), plan.Make(doctor.K3.Inputs(b, o.Positions)).Total, "the app's context is the doctor's plan of %s", b.Preset)
	s.MaxTokens = 6000
	assert.Equal(t, 6000, s.Positions())
	assert.Equal(t, plan.DefaultPicture, o.Picture, "the app plans room for a picture")
}
