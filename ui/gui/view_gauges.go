package gui

import (
	"fmt"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"k3/storage/units"
	"k3/ui/bridge"
)

// gaugesView is the always-visible engine panel: memory against the budget
// and the machine, read rates, I/O share, expert-cache hits, speed, and
// plots of the last few minutes.
type gaugesView struct {
	Root fyne.CanvasObject
	// Local holds the gauges of this machine (memory, disk reads, the memory
	// plot): hidden while the model runs on a server.
	Local *fyne.Container

	Model     *widget.Label
	Demo      *widget.Label
	Mem       *widget.ProgressBar
	MemText   *widget.Label
	OverPlan  *widget.Label
	Reads     *widget.Label
	IOShare   *widget.ProgressBar
	Hits      *widget.ProgressBar
	Speed     *widget.Label
	SpeedPlot *sparkline
	MemPlot   *sparkline

	G bridge.Gauges

	memPlot *fyne.Container
	// relayout lays the panel out again after its text changed (set by
	// the chat)
	relayout func()
}

// newGaugesView builds the panel.
func newGaugesView() *gaugesView {
	v := &gaugesView{}
	v.Model = wrapLabel("No model loaded yet: it loads with the first message.")
	v.Demo = wrapLabel("")
	v.Demo.Importance = widget.DangerImportance
	v.Demo.Hide()
	v.Mem = widget.NewProgressBar()
	v.Mem.TextFormatter = func() string { return fmt.Sprintf("%.0f%% of available", v.Mem.Value*100) }
	v.MemText = wrapLabel("")
	v.OverPlan = wrapLabel("")
	v.OverPlan.Importance = widget.WarningImportance
	v.OverPlan.Hide()
	v.Reads = wrapLabel("")
	v.IOShare = widget.NewProgressBar()
	v.IOShare.TextFormatter = func() string { return fmt.Sprintf("waiting for disk %.0f%% of the time", v.IOShare.Value*100) }
	v.Hits = widget.NewProgressBar()
	v.Hits.TextFormatter = func() string {
		if !v.G.HitKnown {
			return "expert cache: no requests yet"
		}
		return fmt.Sprintf("expert cache hits %.0f%%", v.Hits.Value*100)
	}
	v.Speed = wrapLabel("")
	v.SpeedPlot = newSparkline(theme.ColorNamePrimary, func(x float64) string { return trimFloat(x) + " s" })
	v.MemPlot = newSparkline(theme.ColorNameSuccess, func(x float64) string { return units.Bytes(int64(x)) })
	title := widget.NewLabelWithStyle("Engine", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	// the line under the local gauges is theirs: hidden with them, so a
	// server's panel has one line between its model and its speed
	v.Local = container.NewVBox(widget.NewLabel("Memory"), v.Mem, v.MemText, v.OverPlan,
		widget.NewLabel("Disk reads"), v.Reads, v.IOShare, v.Hits, widget.NewSeparator())
	memPlot := container.NewVBox(wrapLabel("Memory in use (last 5 min)"), v.MemPlot)
	v.Root = container.NewVBox(title, v.Model, v.Demo, widget.NewSeparator(),
		v.Local, v.Speed,
		wrapLabel("Seconds per token (last 5 min)"), v.SpeedPlot,
		memPlot)
	v.memPlot = memPlot
	v.Set(bridge.Gauges{})
	return v
}

// SetModel shows which model runs.
func (v *gaugesView) SetModel(info bridge.ModelInfo) {
	if info.Name == "" {
		v.Model.SetText("No model loaded yet: it loads with the first message.")
	} else {
		v.Model.SetText(info.Name)
		if info.Layers > 0 { // a server does not say (G12: "0 layers")
			v.Model.SetText(fmt.Sprintf("%s, %d layers", info.Name, info.Layers))
		}
	}
	if info.Remote {
		v.Local.Hide()
		v.memPlot.Hide()
	} else {
		v.Local.Show()
		v.memPlot.Show()
	}
	if info.Demo {
		note := info.DemoNote
		if note == "" {
			note = "DEMO: random weights, the text is not meaningful"
		}
		v.Demo.SetText(note)
		v.Demo.Show()
	} else {
		v.Demo.Hide()
	}
}

// Set shows new values.
func (v *gaugesView) Set(g bridge.Gauges) {
	v.G = g
	if g.Available > 0 {
		v.Mem.SetValue(min(float64(g.RSS)/float64(g.Available), 1))
	}
	// G22: nothing measured yet reads as such, not "0.00 B"
	b := func(n int64) string {
		if n <= 0 {
			return "—"
		}
		return units.Bytes(n)
	}
	v.MemText.SetText(fmt.Sprintf("in use %s (peak %s)\nplan %s, available %s", b(g.RSS), b(g.PeakRSS), b(g.Budget), b(g.Available)))
	if g.Budget > 0 && overPlan(g.RSS, g.Budget) {
		v.OverPlan.SetText(fmt.Sprintf("In use is %s above the plan (%.0f%% more): the plan does not count everything this process holds.",
			units.Bytes(g.RSS-g.Budget), 100*float64(g.RSS-g.Budget)/float64(g.Budget)))
		v.OverPlan.Show()
	} else {
		v.OverPlan.Hide()
	}
	v.Reads.SetText(fmt.Sprintf("trunk %.0f MB/s   experts %.0f MB/s", g.TrunkMBps, g.ExpertMBps))
	v.IOShare.SetValue(g.IOShare)
	v.Hits.SetValue(g.HitRate)
	speed, ttft := "—", "—"
	switch s := g.Saved; {
	case s != nil && s.Tokens > 0 && !g.Serving:
		// the last reply (or the open conversation's, as its history
		// keeps it), with the numbers its message shows (N7)
		speed = fmt.Sprintf("%s, %d tokens (this conversation's last reply)", perToken(s.SecondsPerToken), s.Tokens)
		if s.FirstTokenSeconds > 0 {
			ttft = fmt.Sprintf("%.2f s", s.FirstTokenSeconds)
		}
	case g.Tokens > 0:
		speed = fmt.Sprintf("%s (last %s), %d tokens", perToken(g.SecPerToken), perToken(g.LastToken), g.Tokens)
		if g.TTFT > 0 {
			ttft = fmt.Sprintf("%.2f s", g.TTFT)
		}
	}
	text := "speed " + speed + "\nfirst token after " + ttft
	if g.Served > 0 && (g.Serving || g.Saved == nil) {
		// the numbers are a request's from another program (G13)
		text = fmt.Sprintf("request %d from another program\n", g.Served) + text
	}
	if g.Drafted > 0 {
		text += fmt.Sprintf("\ndrafted tokens accepted: %d of %d", g.Accepted, g.Drafted)
		if tp := g.TokensPerPass(); tp > 0 {
			text += fmt.Sprintf(", %.2f tokens per pass", tp)
		}
	}
	v.Speed.SetText(text)
	now := time.Now()
	v.SpeedPlot.SetPoints(g.Speed, now)
	v.MemPlot.SetPoints(g.Memory, now)
	if v.relayout != nil {
		v.relayout()
	}
}

// perToken is a speed people read: tokens per second for fast models,
// seconds per token for slow ones.
func perToken(sec float64) string {
	switch {
	case sec <= 0:
		return "—"
	case sec < 1:
		return fmt.Sprintf("%.1f tokens/s", 1/sec)
	}
	return fmt.Sprintf("%.1f s/token", sec)
}

// overPlanFloor is the least excess over the plan the panel warns of: on
// a tiny model the process's own few tens of MB read as alarming (issue
// 41's polish: "41 MB above the plan" on a 255 MB plan).
const overPlanFloor = 256 << 20

// overPlan reports whether rss is enough above the plan to say so: by a
// tenth of it and by overPlanFloor.
func overPlan(rss, budget int64) bool {
	d := rss - budget
	return d >= overPlanFloor && float64(d) >= 0.1*float64(budget)
}
