package gui

import (
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2/test"

	"k3/ui/bridge"
)

// The demo end to end on the real engine, headless: the wizard makes the
// demo model, plans its memory, and a chat turn streams with live gauges.
func TestDemoEndToEnd(t *testing.T) {
	a := test.NewTempApp(t)
	u := newTestUIOn(t, a, nil)
	u.B = bridge.RealBackends(t.TempDir())
	u.B.Machine = &fakeMachine{} // the real doctor measures disks for seconds
	ui(u.Start)
	w := u.wizard
	ui(func() {
		w.Go(1)
		test.Tap(w.Model.DemoBt)
	})
	waitFor(t, "demo model", func() bool { return w.D.Demo && w.D.ModelDir == u.demoDir() })
	ui(func() {
		if !strings.Contains(w.Model.Status.Text, "DEMO model: a tiny Kimi K3 (2.1 million parameters) trained on fortune-cookie sayings and drawings") || w.NextBtn.Disabled() {
			t.Fatalf("status %q", w.Model.Status.Text)
		}
		w.Go(2)
		if !strings.HasPrefix(w.Pack.Info.Text, "The shared weights of this checkpoint take") {
			t.Errorf("pack info %q", w.Pack.Info.Text)
		}
		w.Go(3)
		w.Memory.Preset.SetSelected("laptop")
	})
	waitFor(t, "plan", func() bool { return w.Memory.Plan != nil && !w.Memory.busy })
	ui(func() {
		if w.Memory.PlanErr != nil || !strings.Contains(w.Memory.PlanText.Text, "memory plan:") {
			t.Fatalf("demo plan: %v\n%s", w.Memory.PlanErr, w.Memory.PlanText.Text)
		}
		w.Go(4)
		if !strings.Contains(w.Done.Summary.Text, "(DEMO model: trained on sayings and coloured shapes, it knows little else)") || strings.Contains(w.Done.Summary.Text, "not meaningful") {
			t.Errorf("the Done step misnames the trained demo: %q", w.Done.Summary.Text)
		}
		test.Tap(w.Done.OpenBt)
	})
	v := u.Chat
	ui(func() {
		v.Opts.MaxTokens = 24
		v.Send("Hello, demo!")
	})
	waitFor(t, "demo turn", func() bool { return !v.Busy })
	ui(func() {
		if v.Notice.Text != "" {
			t.Fatalf("notice %q", v.Notice.Text)
		}
		last := v.History[len(v.History)-1]
		// random weights: the reply may stay in the thinking channel
		if last.Role != "assistant" || last.Content+last.ReasoningContent == "" {
			t.Errorf("demo reply: %+v", last)
		}
		g := v.Gauges.G
		if g.Tokens < 2 || g.TTFT <= 0 || g.SecPerToken <= 0 || g.RSS <= 0 || g.Budget <= 0 {
			t.Errorf("gauges %+v", g)
		}
		if !strings.Contains(v.Gauges.Demo.Text, "DEMO") || v.Gauges.Demo.Hidden {
			t.Error("the demo must be labelled in the gauges")
		}
		if v.Phase.Text != "" {
			t.Errorf("phase %q", v.Phase.Text)
		}
	})
	// a second turn continues the same engine state
	ui(func() { v.Send("And again.") })
	var closed <-chan struct{}
	waitFor(t, "second turn", func() bool { return !v.Busy })
	ui(func() {
		if len(v.History) != 4 || v.Notice.Text != "" {
			t.Errorf("second turn: %d messages, notice %q", len(v.History), v.Notice.Text)
		}
		closed = u.Chat.Shutdown()
	})
	select { // the engine is closed once the turn has ended
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("the chat engine was not closed after Shutdown")
	}
}
