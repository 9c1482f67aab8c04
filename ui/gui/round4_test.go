package gui

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/doctor"
	"k3/engine/chat"
	"k3/tokenizer/xtml"
	"k3/ui/bridge"
)

// G27: with greedy decoding on, Regenerate asks once; after a Yes the next
// Regenerates sample without the same dialog again.
func TestRegenerateAsksOnceUnderGreedy(t *testing.T) {
	fc := &fakeChat{}
	u, v := chatUI(t, fc)
	ui(func() { v.Send("Question one") })
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() {
		require.True(t, v.Opts.Greedy, "greedy is the default")
		test.Tap(v.RegenBt)
		tapDialog(t, u.Win, "Yes")
	})
	waitFor(t, "regenerate 1", func() bool { return !v.Busy })
	for i := 2; i <= 3; i++ {
		ui(func() {
			assert.Nil(t, u.Win.Canvas().Overlays().Top(), "no dialog before Regenerate %d", i)
			test.Tap(v.RegenBt)
			assert.Nil(t, u.Win.Canvas().Overlays().Top(), "Regenerate %d asks nothing", i)
		})
		waitFor(t, "regenerate", func() bool { return !v.Busy })
		ui(func() {
			assert.False(t, fc.lastOpt.Greedy, "regeneration %d samples", i)
			assert.NotZero(t, fc.lastOpt.Seed)
			assert.Equal(t, "Hello world, this is reply "+string(rune('1'+i)), v.History[len(v.History)-1].Content)
		})
	}
}

// Issue 27 item 2: on a slow machine a new conversation thinks at low
// effort and says why; on a fast one the default stays.
func TestSlowMachineDefaultsToLowEffort(t *testing.T) {
	for _, c := range []struct {
		spt  float64
		want string
	}{{4, "low"}, {0.2, xtml.DefaultThinkingEffort}} {
		fc := &fakeChat{}
		_, v := chatUI(t, fc)
		ui(func() {
			require.NoError(t, v.Store.Save("measured", []chat.Message{{Role: "user", Content: "Hi"},
				{Role: "assistant", Content: "Hello", Stats: &chat.ReplyStats{Tokens: 10, SecondsPerToken: c.spt}}}))
			v.reload("measured")
			require.Equal(t, "measured", v.Title)
			assert.Equal(t, xtml.DefaultThinkingEffort, v.Opts.Effort, "a conversation with replies keeps its effort")
			v.NewConversation()
			assert.Equal(t, c.want, v.Opts.Effort)
			assert.Equal(t, c.want, v.Effort.Selected)
			if c.want == "low" {
				assert.Contains(t, v.Notice.Text, "Thinking effort is set to low: this machine writes about 4.0 s per token")
			} else {
				assert.NotContains(t, v.Notice.Text, "Thinking effort")
			}
			v.Send("Question")
		})
		waitFor(t, "turn", func() bool { return !v.Busy })
		ui(func() { assert.Equal(t, c.want, fc.lastOpt.Effort) })
	}
}

// Issue 27 item 3: the picker in the chat header shows the draft model
// beside the model folder (a "draft" folder with its config.json).
func TestModelPickerShowsTheDraft(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	u.S.ModelDir = filepath.Join(t.TempDir(), "kimi-k3")
	require.NoError(t, os.MkdirAll(filepath.Join(u.S.ModelDir, "draft"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(u.S.ModelDir, "draft", "config.json"), []byte("{}"), 0o644))
	u.SaveSettings()
	u.N.WizardDone.Set(true)
	ui(u.Start)
	require.NotNil(t, u.Chat)
	ui(func() {
		assert.Equal(t, []string{"kimi-k3 with draft model — on this machine · loads with the first message"}, u.Chat.Picker.Select.Options)
		assert.Equal(t, "kimi-k3 with draft model — on this machine · loads with the first message", pickerShows(u.Chat.Picker))
	})
}

// Issue 27 item 3: with a draft model the gauges show what it gains.
func TestGaugesShowTokensPerPass(t *testing.T) {
	g := newGaugesView()
	g.Set(bridge.Gauges{Tokens: 11, SecPerToken: 0.1, LastToken: 0.1, TTFT: 0.01, Drafted: 8, Accepted: 6})
	assert.Contains(t, g.Speed.Text, "drafted tokens accepted: 6 of 8, 2.50 tokens per pass")
}

// G15: more layers than the model has, or 0, are refused in the same words
// under the field, in the status and in the footer, without a command-line
// flag; a count within the model is taken.
func TestModelStepLayersBeyondTheModel(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	dir := filepath.Join(t.TempDir(), "small")
	require.NoError(t, writeSmallModel(dir))
	ui(u.Start)
	w := u.wizard
	ui(func() {
		w.Go(1)
		w.Model.Dir.SetText(dir)
	})
	waitFor(t, "folder check", func() bool { return w.Model.Check != nil })
	var total int
	ui(func() { total = w.Model.Check.Layers })
	require.Greater(t, total, 2)
	ui(func() { w.Model.Layers.SetText("99") })
	waitFor(t, "folder check", func() bool { return w.Model.Check != nil && w.Model.checkJob == nil })
	ui(func() {
		want := fmt.Sprintf("this model has %d layers: type a number from 1 to %d, or leave the field empty for all of them", total, total)
		assert.Equal(t, want, w.Model.LayerMsg.Text)
		assert.Equal(t, want, w.Model.Status.Text)
		assert.Equal(t, want, w.why.Text)
		assert.True(t, w.NextBtn.Disabled())
		for _, s := range []string{w.Model.LayerMsg.Text, w.Model.Status.Text, w.why.Text} {
			assert.NotContains(t, s, "--layers")
			assert.NotContains(t, s, "Only the first")
		}
		w.Model.Layers.SetText("0")
		assert.Equal(t, "layers to use must be a whole number from 1 up, or empty for all of them", w.Model.LayerMsg.Text)
		assert.True(t, w.NextBtn.Disabled(), "0 is not silently all")
		w.Model.Layers.SetText("2")
		assert.Contains(t, w.Model.LayerMsg.Text, "Only the first 2 layers will be used")
	})
	waitFor(t, "folder check", func() bool { return w.Model.Check != nil && w.Model.checkJob == nil })
	ui(func() { assert.False(t, w.NextBtn.Disabled(), w.why.Text) })
}

// G23: a Markdown table's rows are as tall as their own cells, and a
// right-aligned column is drawn right-aligned.
func TestTableRowsAndAlignment(t *testing.T) {
	tbl := tableObject("| name | n |\n|:--|--:|\n| a | 1 |\n| " + strings.Repeat("a long cell that wraps ", 12) + "| 22 |\n| b | 3 |")
	w := test.NewWindow(tbl)
	defer w.Close()
	w.Resize(fyne.NewSize(400, 600))
	rows := tbl.(*fyne.Container).Objects[1].(*fyne.Container).Objects
	require.Len(t, rows, 4)
	short, long := rows[1].Size().Height, rows[2].Size().Height
	assert.Greater(t, long, 2*short, "the long row wraps")
	assert.InDelta(t, short, rows[3].Size().Height, 0.5, "a short row after it stays short")
	cell := func(r, c int) *widget.RichText { return rows[r].(*fyne.Container).Objects[c].(*widget.RichText) }
	for r := range 4 {
		ts := cell(r, 1).Segments[0].(*widget.TextSegment)
		assert.Equal(t, fyne.TextAlignTrailing, ts.Style.Alignment, "row %d", r)
		assert.Equal(t, fyne.TextAlignLeading, cell(r, 0).Segments[0].(*widget.TextSegment).Style.Alignment)
	}
	assert.Equal(t, "22", cell(2, 1).String())
}

// countingMachine counts the measurements asked for.
type countingMachine struct {
	fakeMachine
	n int
}

func (c *countingMachine) Measure(ctx context.Context, dirs []string, quick bool, progress func(float64, string)) (*doctor.Report, error) {
	c.n++
	return c.fakeMachine.Measure(ctx, dirs, quick, progress)
}

// G20: the setup wizard opened again shows the earlier measurement of this
// machine instead of measuring it again.
func TestWizardAgainKeepsTheMeasurement(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	m := &countingMachine{}
	u.B.Machine = m
	ui(u.Start)
	waitFor(t, "measurement", func() bool { return u.wizard.Machine.Report != nil })
	ui(func() {
		first := u.wizard.Machine.Report
		u.ShowWizard()
		w := u.wizard
		assert.Same(t, first, w.Machine.Report)
		assert.Nil(t, w.Machine.job, "no measurement runs")
		assert.Equal(t, "Measured earlier (in 12 s). Measure thoroughly measures again.", w.Machine.Status.Text)
		assert.Equal(t, 1.0, w.Machine.Progress.Value)
		ok, why := w.Machine.Ready()
		assert.True(t, ok, why)
	})
	ui(func() { assert.Equal(t, 1, m.n) })
}

// G20: the wizard's step names can be clicked: any earlier step, and the
// next one when Next would go there.
func TestWizardBreadcrumbClicks(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	ui(u.Start)
	w := u.wizard
	waitFor(t, "measurement", func() bool { return w.Machine.Report != nil })
	ui(func() {
		require.Len(t, w.CrumbBts, 5)
		assert.Equal(t, "2 The model", w.CrumbBts[1].Text)
		assert.False(t, w.CrumbBts[1].Disabled(), "Next would go to step 2")
		assert.True(t, w.CrumbBts[2].Disabled(), "step 3 only after step 2")
		test.Tap(w.CrumbBts[1])
		assert.Equal(t, 1, w.Cur)
		assert.False(t, w.CrumbBts[0].Disabled())
		assert.True(t, w.CrumbBts[2].Disabled(), "no model chosen yet")
		test.Tap(w.CrumbBts[2]) // disabled: nothing happens
		assert.Equal(t, 1, w.Cur)
		test.Tap(w.CrumbBts[0])
		assert.Equal(t, 0, w.Cur)
	})
}
