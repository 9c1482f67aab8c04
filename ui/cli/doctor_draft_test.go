package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/doctor"
	"k3/engine/plan"
)

// TestDoctorShowsTheDrafter: at 12 GB available the laptop plan fits and
// the released drafter beside it only streamed, ultra's resident, desktop's
// not at all; every preset gets a line with its s/token without and with
// the drafter, as doctor.PredictDraft says.
func TestDoctorShowsTheDrafter(t *testing.T) {
	fakeDoctor(t, 16e9, 12e9)
	code, out, errs := storeRun("doctor", "--dir", t.TempDir())
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, out, "with the released DSpark drafter (k3 download DEST --draft; projected from its published 4.73 tokens per pass at 7 drafts on code):")
	lines := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(l, "    ") {
			if _, ok := plan.Lookup(f[0]); ok {
				lines[f[0]] = l
			}
		}
	}
	require.Len(t, lines, len(plan.Presets))
	assert.Contains(t, lines["laptop"], " fits streamed ")
	assert.Contains(t, lines["ultra"], " fits ")
	assert.NotContains(t, lines["ultra"], "streamed")
	assert.Contains(t, lines["desktop"], "does not fit")

	// the JSON carries the same per-preset projection
	code, js, _ := storeRun("doctor", "--json", "--dir", t.TempDir())
	require.Equal(t, ExitOK, code)
	for _, want := range []string{`"drafter":[`, `"name":"laptop","fits":true,"streamed":true`, `"name":"ultra","fits":true,"streamed":false`} {
		assert.Contains(t, js, want)
	}
	// the laptop line's numbers are PredictDraft's
	d := doctorDraftFor(t, js, "laptop")
	assert.Contains(t, lines["laptop"], fmt.Sprintf("%.1f s/token without, %.1f s/token with it (%d draft", d.PlainSecondsPerToken, d.SecondsPerToken, d.DraftLength))
	assert.Greater(t, d.DraftLength, 0)
	assert.Contains(t, out, fmt.Sprintf("streamed, it reads 4.14 GB per drafting cycle: %.1f GB read per token with it, %.1f without", d.BytesPerToken/1e9, d.PlainBytesPerToken/1e9))
}

func doctorDraftFor(t *testing.T, js, name string) doctor.DraftPrediction {
	var rep doctor.Report
	require.NoError(t, json.Unmarshal([]byte(js), &rep))
	for _, d := range rep.Drafter {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("no drafter line for %s", name)
	return doctor.DraftPrediction{}
}
