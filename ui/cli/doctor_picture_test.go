package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/doctor"
	"k3/engine/plan"
)

// TestDoctorShowsAPicturesCost: k3 doctor says what a 1024x1024 picture
// costs at every preset (its positions, the tower streamed at the floor
// and resident above it, the plan with it, the time), and --json carries
// the same numbers, doctor.PredictPicture's.
func TestDoctorShowsAPicturesCost(t *testing.T) {
	fakeDoctor(t, 16e9, 12e9)
	code, out, errs := storeRun("doctor", "--dir", t.TempDir())
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, out, "a 1024x1024 picture is 1369 prompt positions; the vision tower looks at it first (9.4 TFLOP at 30% of this machine's FMA peak):")
	lines := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 2 && f[0] == "at" {
			lines[f[1]] = l
		}
	}
	require.Len(t, lines, len(plan.Presets))
	assert.Contains(t, lines["laptop"], "tower streamed (0.14 GB held while it looks)")
	assert.Contains(t, lines["desktop"], "tower resident (0.90 GB)")
	assert.Contains(t, lines["desktop"], "does not fit")

	code, js, _ := storeRun("doctor", "--json", "--dir", t.TempDir())
	require.Equal(t, ExitOK, code)
	var rep doctor.Report
	require.NoError(t, json.Unmarshal([]byte(js), &rep))
	require.Len(t, rep.Picture, len(plan.Presets))
	for _, p := range rep.Picture {
		assert.Equal(t, 1369, p.Positions, p.Name)
		assert.Positive(t, p.TowerSeconds, p.Name)
	}
	lap := rep.Picture[1]
	require.Equal(t, "laptop", lap.Name)
	assert.True(t, lap.TowerStreamed)
	assert.True(t, lap.Fits, "laptop with a picture fits 12 GB")
	assert.Contains(t, lines["laptop"], " fits ")
	assert.Greater(t, lap.PeakRSSBytes, rep.AllPresets[1].PredictedPeakRSSBytes, "a picture adds to the text plan")
	assert.Contains(t, js, `"tower_streamed":true`)
}
