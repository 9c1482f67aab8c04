package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/doctor"
	"k3/engine/plan"
	"k3/internal/fixture"
)

// TestPresetsQuoteTheirPlans: `k3 presets`, the README and docs/MEMORY.md
// quote k3's own memory plan of each preset for Kimi K3, the figure
// `k3 doctor --json` predicts (predicted_peak_rss_bytes), not the C
// engine's published ones ("8.2 GB peak RSS", "~3 GB planned"), which
// `k3 presets` printed before. A plan that changes without the docs fails
// here.
func TestPresetsQuoteTheirPlans(t *testing.T) {
	code, out, errs := runK3("presets")
	require.Equal(t, ExitOK, code, errs)
	assert.NotContains(t, out, "peak RSS", "the C engine's measured figures")
	readme := readDoc(t, "README.md")
	memory := readDoc(t, "docs/MEMORY.md")
	for _, p := range plan.Presets {
		want := fmt.Sprintf("%.2f", float64(doctor.Predict(p, doctor.Speeds{}).PredictedPeakRSSBytes)/plan.GB)
		line := presetLine(out, p.Name)
		assert.Regexp(t, `^  `+p.Name+` +[0-9.]+ / [0-9.]+ +`+regexp.QuoteMeta(want)+` GB planned  `, line, "k3 presets")
		// the README quotes the floor's two ("ultra 4.21 GB, laptop 7.72 GB"):
		// every such figure is the plan's
		quoted := regexp.MustCompile(`\b`+p.Name+`\s+([0-9]+\.[0-9]+) GB`).FindAllStringSubmatch(readme, -1)
		if p.Name == "ultra" || p.Name == "laptop" {
			assert.NotEmpty(t, quoted, "the README quotes %s's plan", p.Name)
		}
		for _, q := range quoted {
			assert.Equal(t, want, q[1], "the README's %s", p.Name)
		}
		row := regexp.MustCompile(`(?m)^\| ` + p.Name + ` \| [0-9.]+ / [0-9.]+ \| ([0-9.]+) GB \|`).FindStringSubmatch(memory)
		if assert.NotNil(t, row, "docs/MEMORY.md's row for %s", p.Name) {
			assert.Equal(t, want, row[1], "docs/MEMORY.md's %s", p.Name)
		}
	}
}

// presetLine is the line of `k3 presets` for the preset name.
func presetLine(out, name string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "  "+name+" ") {
			return l
		}
	}
	return ""
}

// readDoc reads a document of the repository by its path from the root.
func readDoc(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixture.Root(), filepath.FromSlash(rel)))
	require.NoError(t, err)
	return string(b)
}
