package gui

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/synth"
	"k3/ui/cli"
)

// The app's demo and `k3 demo`'s are the same folder, byte for byte, and
// both are recognised as the demo.
func TestDemoMatchesCLI(t *testing.T) {
	app := filepath.Join(t.TempDir(), "demo-model")
	require.NoError(t, MakeDemoModel(app))
	require.True(t, synth.IsDemo(app))
	fromCLI := filepath.Join(t.TempDir(), "demo")
	require.Equal(t, cli.ExitOK, cli.Main([]string{"demo", fromCLI}))
	require.True(t, synth.IsDemo(fromCLI), "the app does not recognise k3 demo's folder")

	sums := func(dir string) map[string][32]byte {
		ents, err := os.ReadDir(dir)
		require.NoError(t, err)
		out := map[string][32]byte{}
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			require.NoError(t, err)
			out[e.Name()] = sha256.Sum256(b)
		}
		return out
	}
	want := sums(app)
	assert.Equal(t, want, sums(fromCLI))

	// a complete demo is kept as it is
	require.NoError(t, MakeDemoModel(app))
	assert.Equal(t, want, sums(app))
}

// The demo end to end on the real engine, headless: the wizard makes the
// demo model, plans its memory, and a chat turn streams with live gauges.
func TestDemoEndToEnd(t *testing.T) {
	a := test.NewTempApp(t)
	u := newTestUIOn(t, a, nil)
	u.B = RealBackends(t.TempDir())
	u.B.Machine = &fakeMachine{} // the real doctor measures disks for seconds
	ui(u.Start)
	w := u.Wizard
	ui(func() {
		w.Go(1)
		test.Tap(w.Model.DemoBt)
	})
	waitFor(t, "demo model", func() bool { return u.S.Demo && u.S.ModelDir == u.demoDir() })
	ui(func() {
		if !strings.Contains(w.Model.Status.Text, "DEMO model") || w.NextBtn.Disabled() {
			t.Fatalf("status %q", w.Model.Status.Text)
		}
		w.Go(2)
		if !strings.HasPrefix(w.Pack.Info.Text, "The trunk of this checkpoint takes") {
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
		test.Tap(w.Done.OpenBt)
	})
	v := u.Chat
	ui(func() {
		u.S.MaxTokens = 24
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
		if !strings.HasPrefix(v.Phase.Text, "done") && !strings.Contains(v.Phase.Text, "turn cap") {
			t.Errorf("phase %q", v.Phase.Text)
		}
	})
	// a second turn continues the same engine state
	ui(func() { v.Send("And again.") })
	waitFor(t, "second turn", func() bool { return !v.Busy })
	ui(func() {
		if len(v.History) != 4 || v.Notice.Text != "" {
			t.Errorf("second turn: %d messages, notice %q", len(v.History), v.Notice.Text)
		}
		u.Chat.Shutdown()
	})
	time.Sleep(10 * time.Millisecond)
}
