package gui

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/doctor"
	"k3/engine/plan"
)

// TestPresetNotesQuoteTheAppsPlan: the memory step's note for each preset
// says about how much memory the app's plan of Kimi K3 takes at it (the
// doctor's plan with the app's process base), within 10%. The ultra note
// said "about 3 GB", the C engine's figure, where the app planned 3.93 GB
// (3.64 GB now).
func TestPresetNotesQuoteTheAppsPlan(t *testing.T) {
	gb := regexp.MustCompile(`[Aa]bout (\d+(?:\.\d+)?) GB`)
	for _, p := range plan.Presets {
		note, ok := presetNotes[p.Name]
		require.True(t, ok, "a note for %s", p.Name)
		m := gb.FindStringSubmatch(note)
		require.NotNil(t, m, "%s: %q names no size", p.Name, note)
		said, err := strconv.ParseFloat(m[1], 64)
		require.NoError(t, err)
		planned := float64(doctor.AppBytes(doctor.Need(p.Budget()))) / 1e9
		assert.InEpsilon(t, planned, said, 0.10, "%s: the note says about %v GB, the app plans %.2f GB", p.Name, said, planned)
	}
}
