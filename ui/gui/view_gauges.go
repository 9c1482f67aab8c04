package gui

import (
	"fmt"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"k3/storage/units"
)

// GaugesView is the always-visible engine panel: memory against the budget
// and the machine, read rates, I/O share, expert-cache hits, speed, and
// plots of the last few minutes.
type GaugesView struct {
	Root fyne.CanvasObject

	Model     *widget.Label
	Demo      *widget.Label
	Mem       *widget.ProgressBar
	MemText   *widget.Label
	Reads     *widget.Label
	IOShare   *widget.ProgressBar
	Hits      *widget.ProgressBar
	Speed     *widget.Label
	SpeedPlot *Sparkline
	MemPlot   *Sparkline

	G Gauges
}

// NewGaugesView builds the panel.
func NewGaugesView() *GaugesView {
	v := &GaugesView{}
	v.Model = wrapLabel("No model loaded yet.")
	v.Demo = wrapLabel("")
	v.Demo.Importance = widget.DangerImportance
	v.Demo.Hide()
	v.Mem = widget.NewProgressBar()
	v.Mem.TextFormatter = func() string { return fmt.Sprintf("%.0f%% of available", v.Mem.Value*100) }
	v.MemText = wrapLabel("")
	v.Reads = widget.NewLabel("")
	v.IOShare = widget.NewProgressBar()
	v.IOShare.TextFormatter = func() string { return fmt.Sprintf("waiting for disk %.0f%% of the time", v.IOShare.Value*100) }
	v.Hits = widget.NewProgressBar()
	v.Hits.TextFormatter = func() string {
		if !v.G.HitKnown {
			return "expert cache: no requests yet"
		}
		return fmt.Sprintf("expert cache hits %.0f%%", v.Hits.Value*100)
	}
	v.Speed = widget.NewLabel("")
	v.SpeedPlot = NewSparkline(theme.ColorNamePrimary)
	v.MemPlot = NewSparkline(theme.ColorNameSuccess)
	title := widget.NewLabelWithStyle("Engine", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	v.Root = container.NewVBox(title, v.Model, v.Demo, widget.NewSeparator(),
		widget.NewLabel("Memory"), v.Mem, v.MemText,
		widget.NewLabel("Disk reads"), v.Reads, v.IOShare, v.Hits,
		widget.NewSeparator(), v.Speed,
		widget.NewLabel("Seconds per token (last 5 min)"), v.SpeedPlot,
		widget.NewLabel("Memory in use (last 5 min)"), v.MemPlot)
	v.Set(Gauges{})
	return v
}

// SetModel shows which model runs.
func (v *GaugesView) SetModel(info ModelInfo) {
	v.Model.SetText(fmt.Sprintf("%s, %d layers", info.Name, info.Layers))
	if info.Demo {
		v.Demo.SetText("DEMO: random weights, the text is not meaningful")
		v.Demo.Show()
	} else {
		v.Demo.Hide()
	}
}

// Set shows new values.
func (v *GaugesView) Set(g Gauges) {
	v.G = g
	if g.Available > 0 {
		v.Mem.SetValue(min(float64(g.RSS)/float64(g.Available), 1))
	}
	v.MemText.SetText(fmt.Sprintf("in use %s (peak %s)\nplan %s, available %s", units.Bytes(g.RSS), units.Bytes(g.PeakRSS), units.Bytes(g.Budget), units.Bytes(g.Available)))
	v.Reads.SetText(fmt.Sprintf("trunk %.0f MB/s   experts %.0f MB/s", g.TrunkMBps, g.ExpertMBps))
	v.IOShare.SetValue(g.IOShare)
	v.Hits.SetValue(g.HitRate)
	speed := "—"
	if g.Tokens > 0 {
		speed = fmt.Sprintf("%.2f s/token (last %.2f), %d tokens", g.SecPerToken, g.LastToken, g.Tokens)
	}
	ttft := "—"
	if g.TTFT > 0 {
		ttft = fmt.Sprintf("%.2f s", g.TTFT)
	}
	v.Speed.SetText("speed " + speed + "\nfirst token after " + ttft)
	now := time.Now()
	v.SpeedPlot.SetPoints(g.Speed, now)
	v.MemPlot.SetPoints(g.Memory, now)
}
