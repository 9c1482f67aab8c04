package gui

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fyne.io/fyne/v2/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/doctor"
	"k3/ui/bridge"
)

func TestWizardFlowOnFakes(t *testing.T) {
	u, a := newTestUI(t, &fakeChat{})
	ui(u.Start)
	var w *wizard
	ui(func() { w = u.wizard })
	if w == nil {
		t.Fatal("a first start must open the wizard")
	}

	// 1 This machine: measured in the background, described in plain words.
	waitFor(t, "machine report", func() bool { return w.Machine.Report != nil })
	ui(func() {
		md := describeReport(w.Machine.Report)
		for _, want := range []string{"64.00 GB in all, 58.00 GB free", "16 cores (32 threads)", "**Disk of /fast**",
			"5.20 GB/s (8 at a time)", "500.00 GB free", "*desktop* preset", "**25.3 s per token**", "31.90 GB"} {
			if !strings.Contains(md, want) {
				t.Errorf("machine description lacks %q:\n%s", want, md)
			}
		}
		if w.Machine.Progress.Value != 1 {
			t.Errorf("progress %v after the measurement, want 1", w.Machine.Progress.Value)
		}
		test.Tap(w.NextBtn)
	})

	// 2 The model: no folder -> Next refused; download into a folder.
	dir := filepath.Join(t.TempDir(), "Kimi-K3")
	ui(func() {
		if w.Cur != 1 || !w.NextBtn.Disabled() {
			t.Fatalf("step %d, next disabled %v; want step 1 with Next disabled", w.Cur, w.NextBtn.Disabled())
		}
		w.Model.Dir.SetText(dir)
	})
	waitFor(t, "folder check", func() bool { return w.Model.Check != nil })
	ui(func() {
		if !strings.Contains(w.Model.Status.Text, "No checkpoint here yet") {
			t.Errorf("status %q", w.Model.Status.Text)
		}
		w.Model.Layers.SetText("4")
		if !strings.Contains(w.Model.LayerMsg.Text, "first 4 layers") || !strings.Contains(w.Model.LayerMsg.Text, "NOT the model's") {
			t.Errorf("partial-set warning %q", w.Model.LayerMsg.Text)
		}
		w.Model.Token.SetText("hf_secret")
		test.Tap(w.Model.DownloadBt)
	})
	waitFor(t, "download and folder check", func() bool { return !w.Model.Downloading && w.Model.Check != nil })
	ui(func() {
		if w.Model.DlStatus.Text != "Downloaded and verified." || w.Model.DlBar.Value != 1 {
			t.Errorf("download status %q bar %v", w.Model.DlStatus.Text, w.Model.DlBar.Value)
		}
		if pending, _, _ := u.N.pending(); w.D.ModelDir != dir || w.D.Layers != 4 || pending != "" {
			t.Errorf("setup after download: dir %q layers %d pending %q", w.D.ModelDir, w.D.Layers, pending)
		}
		if u.S.ModelDir != "" || bridge.LoadSettings(a.Preferences()).ModelDir != "" {
			t.Errorf("the model in use changes on Done only, not in step 2")
		}
		a.Preferences().(interface{ ReadValues(func(map[string]any)) }).ReadValues(func(m map[string]any) {
			for k, v := range m {
				if s, ok := v.(string); ok && strings.Contains(s, "hf_secret") {
					t.Errorf("the token must never be stored (found in %s)", k)
				}
			}
		})
		test.Tap(w.Model.VerifyBt)
	})
	waitFor(t, "verify", func() bool { return w.Model.Verified != nil })
	ui(func() {
		if got := w.Model.VfList.Length(); got != 2 {
			t.Errorf("per-file results: %d rows", got)
		}
		if got := describeFile(w.Model.Verified.Files[1]); got != "✗ model-00002-of-00002.safetensors — missing" {
			t.Errorf("file row %q", got)
		}
		if want := "1 of 2 required files are right; 1 missing."; !strings.HasPrefix(w.Model.VfStatus.Text, want) {
			t.Errorf("verify summary %q", w.Model.VfStatus.Text)
		}
		if !strings.Contains(w.why.Text, "missing or wrong") || w.NextBtn.Disabled() {
			t.Errorf("an incomplete set may go on with a warning: %q", w.why.Text)
		}
		test.Tap(w.NextBtn)
	})

	// 3 Pack: the fastest disk with room is suggested (not /full, too small).
	ui(func() {
		if w.Cur != 2 {
			t.Fatalf("step %d", w.Cur)
		}
		if w.Pack.Dir.Text != bridge.DefaultTrunkDir("/fast", dir) {
			t.Errorf("suggested trunk dir %q", w.Pack.Dir.Text)
		}
		if !strings.Contains(w.Pack.Info.Text, "109.00 GB") || !strings.Contains(w.Pack.Info.Text, "streams at 6.10 GB/s") {
			t.Errorf("pack info %q", w.Pack.Info.Text)
		}
	})
	waitFor(t, "trunk folder check", func() bool { return w.Pack.checkJob == nil })
	ui(func() { test.Tap(w.Pack.PackBt) })
	waitFor(t, "pack", func() bool { return !w.Pack.Packing })
	trunkDir := bridge.DefaultTrunkDir("/fast", dir)
	ui(func() {
		if w.D.TrunkDir != trunkDir || w.Pack.Status.Text != "Packed into "+trunkDir+" (packed without saving disk space)." {
			t.Errorf("trunk %q status %q", w.D.TrunkDir, w.Pack.Status.Text)
		}
		test.Tap(w.NextBtn)
	})

	// 4 Memory: the recommended preset, a live plan, impossible settings refused.
	waitFor(t, "plan", func() bool { return w.Memory.Plan != nil && !w.Memory.busy })
	ui(func() {
		if w.Memory.Preset.Selected != "desktop" || w.Memory.Trunk.Value != 16 || w.Memory.Cache.Value != 10 ||
			w.Memory.PresetNote.Text != presetNotes["desktop"] {
			t.Errorf("preset %q %v/%v", w.Memory.Preset.Selected, w.Memory.Trunk.Value, w.Memory.Cache.Value)
		}
		// 16 + 10 + 2 = 28 GB of 16 GB usable: refused
		if w.Memory.PlanErr == nil || !w.NextBtn.Disabled() || !strings.HasPrefix(w.Memory.Verdict.Text, "These settings do not fit") {
			t.Errorf("28 GB on 16 GB must be refused: %v %q", w.Memory.PlanErr, w.Memory.Verdict.Text)
		}
		w.Memory.Preset.SetSelected("laptop") // 3 + 1 + 2 = 6 GB
	})
	waitFor(t, "replan", func() bool { return !w.Memory.busy && w.Memory.PlanErr == nil })
	ui(func() {
		if w.Memory.Verdict.Text != "Fits: the plan needs 6.00 GB of the 16.00 GB available." || w.NextBtn.Disabled() {
			t.Errorf("verdict %q", w.Memory.Verdict.Text)
		}
		w.Memory.Cache.SetValue(12.5) // 3 + 12.5 + 2 = 17.5 GB
	})
	waitFor(t, "replan", func() bool { return !w.Memory.busy && w.Memory.PlanErr != nil })
	ui(func() {
		if !w.NextBtn.Disabled() {
			t.Error("Next must be disabled for a plan that does not fit")
		}
		if w.Memory.Preset.Selected != bridge.CustomPreset || w.D.Preset != bridge.CustomPreset {
			t.Errorf("a slider moved away from the preset makes it custom, not %q", w.Memory.Preset.Selected)
		}
		w.Memory.Cache.SetValue(2)
	})
	waitFor(t, "replan", func() bool { return !w.Memory.busy && w.Memory.PlanErr == nil })
	ui(func() {
		if w.D.CacheGB != 2 || w.Memory.Plan.CacheBytes != 2e9 {
			t.Errorf("cache GB %v, plan %v", w.D.CacheGB, w.Memory.Plan.CacheBytes)
		}
		test.Tap(w.NextBtn)
	})

	// 5 Done: opens the chat and remembers it.
	ui(func() {
		if w.Cur != 4 || !strings.Contains(w.Done.Summary.Text, "Packed shared weights: "+trunkDir) ||
			!strings.Contains(w.Done.Summary.Text, "only the first 4") {
			t.Errorf("summary %q", w.Done.Summary.Text)
		}
		test.Tap(w.Done.OpenBt)
		got := bridge.LoadSettings(a.Preferences())
		if u.Chat == nil || u.Win.Content() != u.Chat.Root || !u.N.wizardDone() || !a.Preferences().Bool(bridge.KeyWizardDone) || got.ModelDir != dir || got.TrunkDir != trunkDir ||
			got.TrunkModel != dir || got.Preset != bridge.CustomPreset || got.CacheGB != 2 {
			t.Errorf("Done must open the chat and persist the setup: %+v", got.Setup())
		}
	})

	// A restart goes straight to the chat; the wizard can be re-run.
	u2 := newTestUIOn(t, a, &fakeChat{})
	ui(func() {
		u2.Start()
		if u2.Chat == nil || u2.wizard != nil {
			t.Fatal("second start must open the chat")
		}
		u2.ShowWizard()
		if u2.wizard == nil || u2.Win.Content() != u2.wizard.Root || u2.wizard.CloseBtn.Hidden {
			t.Error("re-running the wizard")
		}
	})
	waitFor(t, "re-run machine step", func() bool { return u2.wizard.Machine.Report != nil })
}

func TestWizardMeasureCancel(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	fm := &fakeMachine{block: make(chan struct{})}
	u.B.Machine = fm
	ui(u.Start)
	w := u.wizard
	waitFor(t, "measuring", func() bool { return (w.Machine.job != nil) && w.Machine.Status.Text != "Measuring…" })
	ui(func() {
		if w.NextBtn.Disabled() {
			t.Error("measuring runs in the background: Next stays available")
		}
		test.Tap(w.Machine.CancelBt)
	})
	waitFor(t, "cancelled", func() bool { return !(w.Machine.job != nil) })
	ui(func() {
		if w.Machine.Report != nil || !strings.HasPrefix(w.Machine.Status.Text, "Stopped.") {
			t.Errorf("after cancel: report %v status %q", w.Machine.Report, w.Machine.Status.Text)
		}
	})
}

func TestDownloadPauseResumeSurvivesRestart(t *testing.T) {
	u, a := newTestUI(t, &fakeChat{})
	fd := &fakeDownloader{gate: make(chan struct{})}
	u.B.Downloader = fd
	ui(u.Start)
	w := u.wizard
	dir := filepath.Join(t.TempDir(), "m")
	ui(func() {
		w.Go(1)
		w.Model.Dir.SetText(dir)
		w.Model.Revision.SetText("abc123")
		test.Tap(w.Model.DownloadBt)
	})
	waitFor(t, "progress", func() bool { return strings.HasPrefix(w.Model.DlStatus.Text, "50.00 MB of 100.00 MB") })
	ui(func() {
		if w.Model.DlStatus.Text != "50.00 MB of 100.00 MB, 1 of 2 files, 25.00 MB/s, about 2s left" {
			t.Errorf("overall line %q", w.Model.DlStatus.Text)
		}
		if !strings.Contains(w.Model.DlFiles.Text, "model-00002-of-00002.safetensors") || !strings.Contains(w.Model.DlFiles.Text, "25.00 MB/s") {
			t.Errorf("per-file lines %q", w.Model.DlFiles.Text)
		}
		if w.Model.DownloadBt.Text != "Pause" || !w.NextBtn.Disabled() {
			t.Errorf("button %q", w.Model.DownloadBt.Text)
		}
		test.Tap(w.Model.DownloadBt) // pause
	})
	waitFor(t, "paused", func() bool { return !w.Model.Downloading })
	ui(func() {
		if w.Model.DownloadBt.Text != "Resume download" || !strings.HasPrefix(w.Model.DlStatus.Text, "Paused.") {
			t.Errorf("after pause %q %q", w.Model.DownloadBt.Text, w.Model.DlStatus.Text)
		}
	})
	// "restart": a new UI on the same preferences offers to resume
	u2 := newTestUIOn(t, a, &fakeChat{})
	fd2 := &fakeDownloader{}
	u2.B.Downloader = fd2
	ui(u2.Start)
	w2 := u2.wizard
	ui(func() {
		w2.Go(1)
		if w2.Model.Dir.Text != dir || w2.Model.Revision.Text != "abc123" || w2.Model.DownloadBt.Text != "Resume download" {
			t.Errorf("resume offer: dir %q rev %q button %q", w2.Model.Dir.Text, w2.Model.Revision.Text, w2.Model.DownloadBt.Text)
		}
		test.Tap(w2.Model.DownloadBt)
	})
	waitFor(t, "resumed download", func() bool { return !w2.Model.Downloading && fd2.calls == 1 })
	ui(func() {
		if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil || a.Preferences().String(bridge.KeyDownloadDest) != "" {
			t.Errorf("resume did not finish: %v pending %q", err, a.Preferences().String(bridge.KeyDownloadDest))
		}
	})
}

func TestSuggestTrunkDir(t *testing.T) {
	r, _ := (&fakeMachine{}).Measure(t.Context(), []string{"/"}, true, func(float64, string) {})
	if d, _ := suggestTrunkDir(r, 109e9, "/m/K3", ""); d != bridge.DefaultTrunkDir("/fast", "/m/K3") {
		t.Errorf("109 GB: %q", d)
	}
	if d, _ := suggestTrunkDir(r, 600e9, "/m/K3", ""); d != bridge.DefaultTrunkDir("/slow", "/m/K3") {
		t.Errorf("600 GB: %q (only /slow has room)", d)
	}
	if d, _ := suggestTrunkDir(r, 5000e9, "/m/K3", ""); d != "" {
		t.Errorf("5 TB: %q", d)
	}
}

// G10: the app's own folder (where the demo model lives) is not suggested
// for the trunk when another disk path has room, even when it measured a
// little faster; it still is when nothing else has room.
func TestSuggestTrunkDirAvoidsTheAppFolder(t *testing.T) {
	fast, slow := 4.76, 4.5
	r := &doctor.Report{Disks: []doctor.DiskResult{
		{Path: "/home/me/.config/k3/demo-model", FreeBytes: 100e9, SeqGBps: &fast},
		{Path: "/home/me", FreeBytes: 100e9, SeqGBps: &slow},
	}}
	d, why := suggestTrunkDir(r, 1e9, "/m/K3", "/home/me/.config/k3")
	assert.Equal(t, bridge.DefaultTrunkDir("/home/me", "/m/K3"), d)
	assert.Contains(t, why, "the disk of /home/me streams")
	r.Disks[1].FreeBytes = 0
	d, _ = suggestTrunkDir(r, 1e9, "/m/K3", "/home/me/.config/k3")
	assert.Equal(t, bridge.DefaultTrunkDir("/home/me/.config/k3/demo-model", "/m/K3"), d)
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
		assert.Equal(t, first, w.Machine.Report, "the measurement shown again (free space read again)")
		assert.Nil(t, w.Machine.job, "no measurement runs")
		assert.Equal(t, "Measured a moment ago (in 12 s). Measure thoroughly measures again.", w.Machine.Status.Text)
		assert.Equal(t, 1.0, w.Machine.Progress.Value)
		ok, why := w.Machine.Ready()
		assert.True(t, ok, why)
	})
	ui(func() { assert.Equal(t, 1, m.n) })
}

// "Other models…" shows the measurement made at setup instead of measuring
// this machine again (10-16 s each time): the model's folder is on a disk
// measured then; a later start shows it too, with its age; Measure
// thoroughly measures again, on request.
func TestOtherModelsMeasuresOnce(t *testing.T) {
	t.Setenv("HOME", t.TempDir()) // setup measures the home folder's disk
	u, a := newTestUI(t, &fakeChat{})
	m := &countingMachine{}
	u.B.Machine = m
	ui(u.Start)
	waitFor(t, "the measurement at setup", func() bool { return u.wizard.Machine.Report != nil })
	u.S.ModelDir = modelFolder(t, t.TempDir(), "kimi-k3", false) // another folder, the same disk
	require.NoError(t, u.SaveSettings())
	u.N.WizardDone.Set(true)
	ui(u.ShowChat)
	for range 2 {
		ui(func() {
			test.Tap(findButton(u.Chat.Root, "Other models…"))
			w := u.wizard
			require.NotNil(t, w)
			assert.Equal(t, 0, w.Cur)
			assert.Nil(t, w.Machine.job, "no measurement runs")
			assert.NotNil(t, w.Machine.Report)
			assert.Equal(t, "Measured a moment ago (in 12 s). Measure thoroughly measures again.", w.Machine.Status.Text)
			u.ShowChat()
		})
	}
	ui(func() { assert.Equal(t, 1, m.n, "measurements") })

	// the next start (the same data folder) shows it too
	u2 := newTestUIOn(t, a, &fakeChat{})
	m2 := &countingMachine{}
	u2.B.Machine, u2.B.DataDir = m2, u.B.DataDir
	u2.machines = bridge.NewMachineMemo(u.B.DataDir)
	u2.S = u.S
	ui(func() {
		u2.ShowWizard()
		assert.Nil(t, u2.wizard.Machine.job)
		assert.Equal(t, 12.0, u2.wizard.Machine.Report.Seconds)
		test.Tap(u2.wizard.Machine.MeasureBt)
	})
	waitFor(t, "measured again", func() bool { return u2.wizard.Machine.job == nil })
	ui(func() { assert.Equal(t, 1, m2.n, "measured on request only") })
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

// Defect 6: typing another folder in the wizard does not touch the model in
// use; going back to the chat asks, and "keep" keeps the working model.
func TestWizardChangesApplyOnlyOnDone(t *testing.T) {
	fc := &fakeChat{}
	u, v := chatUI(t, fc)
	working := u.S.ModelDir
	require.NoError(t, writeSmallModel(working))
	ui(func() { v.Send("hello") })
	waitFor(t, "turn", func() bool { return !v.Busy })
	other := filepath.Join(t.TempDir(), "other")
	require.NoError(t, writeSmallModel(other))
	ui(u.ShowWizard)
	w := u.wizard
	ui(func() {
		w.Go(1)
		w.Model.Dir.SetText(other)
	})
	waitFor(t, "folder check", func() bool { return w.Model.Check != nil && w.D.ModelDir == other })
	ui(func() {
		assert.Equal(t, working, u.S.ModelDir, "typing a folder does not change the model in use")
		assert.Equal(t, working, bridge.LoadSettings(u.App.Preferences()).ModelDir)
		test.Tap(w.CloseBtn)
		tapDialog(t, u.Win, "Keep the one in use")
		assert.Equal(t, u.Chat.Root, u.Win.Content())
		assert.Equal(t, working, u.S.ModelDir)
		assert.NotNil(t, u.Chat.engine, "the working engine stays")
	})
	// and "use" switches: the engine is released and reopened for the new one
	ui(u.ShowWizard)
	w = u.wizard
	ui(func() {
		w.Go(1)
		w.Model.Dir.SetText(other)
	})
	waitFor(t, "folder check", func() bool { return w.Model.Check != nil && w.D.ModelDir == other })
	ui(func() {
		test.Tap(w.CloseBtn)
		tapDialog(t, u.Win, "Use the new setup")
		assert.Equal(t, other, u.S.ModelDir)
		assert.Equal(t, other, bridge.LoadSettings(u.App.Preferences()).ModelDir)
		assert.Nil(t, u.Chat.engine, "the next message opens the new model")
	})
}
