package gui

import (
	"regexp"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/widget"
)

// planTable shows the memory plan (plan.Plan's text) as rows of what, how
// much and a note that wraps, so it fits the window's width: as one
// monospace block its longest lines scrolled sideways at 1024x640 (G14).
type planTable struct {
	Root *fyne.Container
	// Text is the plan as plan.Plan.String writes it
	Text string
}

func newPlanTable() *planTable {
	return &planTable{Root: container.New(layout.NewFormLayout())}
}

// planRow is one line of the plan: "  what     1.00 GB  (note)".
var planRow = regexp.MustCompile(`^\s+(\S.*?)\s{2,}(\S+ \S+)(?:\s+\((.*)\))?\s*$`)

// SetText shows the plan written in text ("" shows nothing).
func (t *planTable) SetText(text string) {
	t.Text = text
	var objs []fyne.CanvasObject
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, " ")
		if strings.TrimSpace(line) == "" || line == "memory plan:" {
			continue
		}
		name, amount, note := "", "", strings.TrimSpace(line)
		if m := planRow.FindStringSubmatch(line); m != nil {
			name, amount, note = m[1], m[2], m[3]
		} else if rest, ok := strings.CutPrefix(note, "note: "); ok {
			name, note = "note", rest
		}
		what := widget.NewLabel(name)
		if name == "total" {
			what.TextStyle.Bold = true
		}
		how := widget.NewLabel(amount)
		how.TextStyle = fyne.TextStyle{Monospace: true} // (no bold monospace: not every theme has one)
		why := wrapLabel(note)
		why.Importance = widget.LowImportance
		objs = append(objs, what, container.NewBorder(nil, nil, how, nil, why))
	}
	t.Root.Objects = objs
	t.Root.Refresh()
}
