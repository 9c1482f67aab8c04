package gui

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/storage/hub"
	"k3/ui/bridge"
)

// tapDialog presses the button labelled text in the dialog on top.
func tapDialog(t *testing.T, w fyne.Window, text string) {
	t.Helper()
	top := w.Canvas().Overlays().Top()
	require.NotNil(t, top, "no dialog is shown")
	b := findButton(top, text)
	require.NotNil(t, b, "the dialog has no %q button", text)
	test.Tap(b)
}

// Defect 3: a trunk packed for another model is not reported as packed;
// every model gets its own default trunk folder; "Pack again here"
// replaces the other model's trunk.
func TestPackStepTrunkOfAnotherModel(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	models := t.TempDir()
	modelA, modelB := filepath.Join(models, "a"), filepath.Join(models, "b")
	require.NoError(t, writeSmallModel(modelA))
	require.NoError(t, writeSmallModel(modelB))
	trunkA := bridge.DefaultTrunkDir("/fast", modelA)
	fp := u.B.Packer.(*fakePacker)
	fp.into = map[string]string{trunkA: modelA}
	// the settings of a machine where model A was packed, then B chosen
	u.S.ModelDir, u.S.TrunkDir, u.S.TrunkModel = modelA, trunkA, modelA
	u.N.WizardDone.Set(true)
	ui(u.ShowWizard)
	w := u.wizard
	waitFor(t, "machine", func() bool { return w.Machine.Report != nil })
	ui(func() {
		w.Go(1)
		w.Model.Dir.SetText(modelB)
	})
	waitFor(t, "folder check", func() bool { return w.Model.Check != nil && w.D.ModelDir == modelB })
	ui(func() { w.Go(2) })
	waitFor(t, "trunk check", func() bool { return w.Pack.checkJob == nil })
	ui(func() {
		assert.Equal(t, bridge.DefaultTrunkDir("/fast", modelB), w.Pack.Dir.Text, "B gets its own trunk folder")
		assert.Equal(t, "", w.D.TrunkDir, "A's trunk is not B's")
		w.Pack.Dir.SetText(trunkA) // the shared folder of before
	})
	waitFor(t, "trunk check", func() bool { return w.Pack.checkJob == nil })
	ui(func() {
		assert.Equal(t, bridge.TrunkOther, w.Pack.State.Status)
		assert.Equal(t, "This folder holds another model's packed weights, so it will not be used. "+
			"Pack again here to replace it, or choose another folder.", w.Pack.Status.Text, "G26: no manifest details")
		assert.Equal(t, "Pack again here (replaces it)", w.Pack.PackBt.Text)
		assert.Equal(t, "", w.D.TrunkDir)
		assert.Contains(t, w.why.Text, "another model's packed weights")
		w.Go(4)
		assert.Contains(t, w.Done.Summary.Text, "Packed trunk: none")
		w.Go(2)
	})
	waitFor(t, "trunk check", func() bool { return w.Pack.checkJob == nil })
	ui(func() { test.Tap(w.Pack.PackBt) })
	waitFor(t, "pack", func() bool { return !w.Pack.Packing && w.Pack.checkJob == nil })
	ui(func() {
		assert.True(t, fp.forced, "Pack again here replaces the other trunk")
		assert.Equal(t, bridge.TrunkPacked, w.Pack.State.Status)
		assert.Equal(t, trunkA, w.D.TrunkDir)
		assert.Equal(t, modelB, w.D.TrunkModel)
	})
}

// breakShard cuts model-00003 of a generated model to 1000 bytes.
func breakShard(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, os.Truncate(filepath.Join(dir, "model-00003-of-00009.safetensors"), 1000))
}

// Defect 5: a cut shard is named in step 2 (Next refused), by Verify, and
// in the later steps instead of the memory sliders.
func TestModelStepNamesTheBrokenShard(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	u.B.Verifier = bridge.RealBackends(u.B.DataDir).Verifier
	dir := filepath.Join(t.TempDir(), "trunc")
	require.NoError(t, writeSmallModel(dir))
	require.NoError(t, unmarkDemo(dir))
	breakShard(t, dir)
	ui(u.Start)
	w := u.wizard
	ui(func() {
		w.Go(1)
		w.Model.Dir.SetText(dir)
	})
	waitFor(t, "folder check", func() bool { return w.Model.Check != nil })
	ui(func() {
		assert.True(t, strings.HasPrefix(w.Model.Status.Text, "model-00003-of-00009.safetensors is incomplete: 1.00 KB"), w.Model.Status.Text)
		assert.Contains(t, w.Model.Status.Text, "Download it again")
		assert.True(t, w.NextBtn.Disabled())
		assert.Contains(t, w.why.Text, "model-00003-of-00009.safetensors is incomplete")
		test.Tap(w.Model.VerifyBt)
	})
	waitFor(t, "verify", func() bool { return w.Model.Verified != nil })
	ui(func() {
		var bad []string
		for _, f := range w.Model.Verified.Files {
			if l := describeFile(f); strings.HasPrefix(l, "✗") {
				bad = append(bad, l)
			}
		}
		require.Len(t, bad, 1, "%v", bad)
		assert.True(t, strings.HasPrefix(bad[0], "✗ model-00003-of-00009.safetensors is incomplete: 1.00 KB"), bad[0])
		// the later steps repeat the cause, not the sliders
		w.D.ModelDir = dir
		w.Go(3)
	})
	waitFor(t, "plan", func() bool { return !w.Memory.busy })
	ui(func() {
		assert.Contains(t, w.Memory.Verdict.Text, "model-00003-of-00009.safetensors is incomplete")
		assert.NotContains(t, w.why.Text, "Lower the sliders")
		assert.True(t, w.NextBtn.Disabled())
	})
}

// Defect 5: a config without fields names them in step 2.
func TestModelStepNamesMissingConfigFields(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	dir := filepath.Join(t.TempDir(), "badcfg")
	require.NoError(t, writeSmallModel(dir))
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	raw = []byte(strings.Replace(string(raw), `"hidden_size"`, `"hidden_size_was"`, 1))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644))
	ui(u.Start)
	w := u.wizard
	ui(func() {
		w.Go(1)
		w.Model.Dir.SetText(dir)
	})
	waitFor(t, "folder check", func() bool { return w.Model.Check != nil })
	ui(func() {
		assert.Contains(t, w.Model.Status.Text, "config.json does not describe a model k3 can run (it lacks hidden_size)")
		assert.True(t, w.NextBtn.Disabled())
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

// unreachableDownloader reports what the real downloader reports without a
// network, then waits to be paused.
type unreachableDownloader struct{ calls int }

func (d *unreachableDownloader) Download(ctx context.Context, req bridge.DownloadRequest, progress func(hub.Event)) error {
	d.calls++
	progress(hub.Event{Kind: hub.EventRetry, Attempt: d.calls, Wait: 5 * time.Second,
		Err: &bridge.UnreachableError{Host: "huggingface.co", Err: errors.New("the name huggingface.co does not resolve (no network, or no DNS)")}})
	<-ctx.Done()
	return ctx.Err()
}

// Defect 4: without a network the download says so at once, with the
// attempt and the wait, and offers Try again now and Pause.
func TestDownloadWithoutNetworkSaysSo(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	fd := &unreachableDownloader{}
	u.B.Downloader = fd
	ui(u.Start)
	w := u.wizard
	ui(func() {
		w.Go(1)
		w.Model.Dir.SetText(t.TempDir())
		test.Tap(w.Model.DownloadBt)
	})
	waitFor(t, "the retry report", func() bool { return strings.HasPrefix(w.Model.DlStatus.Text, "Cannot reach") })
	ui(func() {
		assert.Equal(t, "Cannot reach the model hub (huggingface.co): the name huggingface.co does not resolve (no network, or no DNS) (attempt 1). "+
			"Trying again in 5s; finished files are kept.", w.Model.DlStatus.Text)
		assert.False(t, w.Model.RetryBt.Hidden)
		assert.Equal(t, "Pause", w.Model.DownloadBt.Text)
		test.Tap(w.Model.RetryBt)
	})
	waitFor(t, "the second attempt", func() bool { return strings.Contains(w.Model.DlStatus.Text, "(attempt 2)") })
	ui(func() { test.Tap(w.Model.DownloadBt) })
	waitFor(t, "paused", func() bool { return !w.Model.Downloading })
	ui(func() {
		assert.True(t, strings.HasPrefix(w.Model.DlStatus.Text, "Paused."))
		assert.True(t, w.Model.RetryBt.Hidden)
	})
}

// Defect 10: both sliders at 0 GB plan 0 GB (not the auto plan), and a
// slider moved by hand makes the preset "custom".
func TestMemorySlidersAtZeroPlanZero(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	u.S.ModelDir = t.TempDir()
	ui(u.Start)
	w := u.wizard
	ui(func() {
		w.D.ModelDir = u.S.ModelDir
		w.Go(3)
		w.Memory.Preset.SetSelected("laptop")
	})
	waitFor(t, "plan", func() bool { return !w.Memory.busy && w.Memory.Plan != nil })
	ui(func() {
		w.Memory.Trunk.SetValue(0)
		w.Memory.Cache.SetValue(0)
	})
	waitFor(t, "replan", func() bool { return !w.Memory.busy && w.Memory.Plan != nil && w.Memory.Plan.CacheBytes == 0 })
	ui(func() {
		assert.Equal(t, bridge.CustomPreset, w.Memory.Preset.Selected)
		assert.Equal(t, int64(0), w.Memory.Plan.PinnedBytes)
		assert.Equal(t, int64(2e9), w.Memory.Plan.Total)
		assert.Equal(t, presetNotes[bridge.CustomPreset], w.Memory.PresetNote.Text)
	})
}

// Walk-through 19: the machine step speaks of the app, not of flags, and
// gives the preset and speed it would have once the model has room.
func TestMachineStepWordsAndPrediction(t *testing.T) {
	r, _ := (&fakeMachine{}).Measure(t.Context(), []string{"/"}, true, func(float64, string) {})
	r.CanRun = false
	r.Problems = []string{"no directory given has room for the checkpoint: it needs 1.56 TB more and the most free space is 52.2 GB (/home); pass --dir on a disk with at least 1.67 TB free"}
	md := describeReport(r)
	assert.NotContains(t, md, "--dir")
	assert.Contains(t, md, "no disk measured has room for the checkpoint")
	assert.Contains(t, md, "Choose a model folder (step 2) on a disk with at least 1.67 TB free")
	assert.Contains(t, md, "**Once that is solved:** the *desktop* preset")
	assert.Contains(t, md, "**25.3 s per token**")
}
