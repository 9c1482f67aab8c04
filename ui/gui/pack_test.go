package gui

import (
	"path/filepath"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/ui/bridge"
)

// The pack step shows the packer's own rate and time left.
func TestPackProgressShowsRateAndETA(t *testing.T) {
	u, _ := newTestUI(t, nil)
	ui(u.Start)
	s := u.wizard.Pack
	ui(func() {
		s.showProgress(bridge.PackProgress{Done: 50e6, Total: 100e6, Rate: 25e6, ETA: 2 * time.Second, Parts: 1, PartsTotal: 2})
		assert.Equal(t, "Packing: 1 of 2 parts done, 50.00 MB of 100.00 MB, 25.00 MB/s, about 2s left", s.Status.Text)
		assert.Equal(t, 0.5, s.Bar.Value)
		s.showProgress(bridge.PackProgress{Done: 0, Total: 100e6, ETA: -1, PartsTotal: 2})
		assert.Equal(t, "Packing: 0 of 2 parts done, 0.00 B of 100.00 MB, 0.00 B/s, estimating time left", s.Status.Text)
	})
}

// packStepOn opens the wizard's pack step for model (a small generated
// checkpoint) with the settings s, once the folder is looked at.
func packStepOn(t *testing.T, u *appUI, model string) *wizard {
	t.Helper()
	u.S.ModelDir = model
	u.N.WizardDone.Set(true)
	ui(u.ShowWizard)
	w := u.wizard
	waitFor(t, "machine", func() bool { return w.Machine.Report != nil })
	ui(func() { w.Go(1) })
	waitFor(t, "folder check", func() bool { return w.Model.Check != nil })
	ui(func() { w.Go(2) })
	waitFor(t, "trunk check", func() bool { return w.Pack.checkJob == nil })
	return w
}

// The pack step offers the compressed trunk in plain words; the choice is
// what Pack packs, the Done step and the folder's status say which kind
// the trunk is, and the choice persists with the setup.
func TestPackStepSaveDiskSpace(t *testing.T) {
	u, a := newTestUI(t, &fakeChat{})
	model := filepath.Join(t.TempDir(), "m")
	require.NoError(t, writeSmallModel(model))
	fp := u.B.Packer.(*fakePacker)
	w := packStepOn(t, u, model)
	dir := bridge.DefaultTrunkDir("/fast", model)
	ui(func() {
		require.Equal(t, dir, w.Pack.Dir.Text)
		assert.Equal(t, "Save disk space (smaller file, same answers; packing takes longer)", w.Pack.Compress.Text)
		assert.False(t, w.Pack.Compress.Checked, "off unless chosen, as k3 pack without --compress")
		assert.Contains(t, w.Pack.Info.Text, "about a fifth less when packed to save disk space")
		for _, s := range []string{w.Pack.Info.Text, w.Pack.Compress.Text, w.Pack.Status.Text} {
			assert.NotContains(t, s, "BF16C")
			assert.NotContains(t, s, "--")
		}
		w.Pack.Compress.SetChecked(true)
		assert.True(t, w.D.TrunkCompress)
		test.Tap(w.Pack.PackBt)
		assert.True(t, w.Pack.Compress.Disabled(), "the choice is fixed while packing")
	})
	waitFor(t, "pack", func() bool { return !w.Pack.Packing })
	ui(func() {
		assert.Equal(t, bridge.PackOptions{Compress: true}, fp.opt)
		assert.Equal(t, "Packed into "+dir+" (packed to save disk space).", w.Pack.Status.Text)
		assert.False(t, w.Pack.Compress.Disabled())
		assert.Equal(t, "Packed", w.Pack.PackBt.Text)
		w.Go(4)
		assert.Contains(t, w.Done.Summary.Text, "Packed shared weights: "+dir+" (packed to save disk space)\n")
		test.Tap(w.Done.OpenBt)
		assert.True(t, bridge.LoadSettings(a.Preferences()).TrunkCompress, "the choice is saved with the setup")
	})

	// a restart: the choice is kept, the folder says which kind it holds
	u2 := newTestUIOn(t, a, &fakeChat{})
	u2.B.Packer = fp
	ui(func() { u2.Start() })
	w2 := packStepOn(t, u2, model)
	ui(func() {
		assert.True(t, w2.Pack.Compress.Checked)
		assert.Equal(t, "This model's shared weights are packed in "+dir+" (packed to save disk space).", w2.Pack.Status.Text)
		assert.True(t, w2.Pack.PackBt.Disabled())

		// the other choice: the trunk there is still used, and Pack
		// replaces it (as k3 pack --force), never mixing the two
		w2.Pack.Compress.SetChecked(false)
		assert.Equal(t, "Pack again without saving disk space (replaces it)", w2.Pack.PackBt.Text)
		assert.False(t, w2.Pack.PackBt.Disabled())
		assert.Equal(t, "This model's shared weights are packed in "+dir+", packed to save disk space. It is used as it is; pack again to replace it.", w2.Pack.Status.Text)
		assert.Equal(t, dir, w2.D.TrunkDir, "a trunk of the other kind gives the same answers: it stays in use")
		w2.Pack.Compress.SetChecked(true)
		assert.Equal(t, "Packed", w2.Pack.PackBt.Text)
		w2.Pack.Compress.SetChecked(false)
		test.Tap(w2.Pack.PackBt)
	})
	waitFor(t, "pack", func() bool { return !w2.Pack.Packing })
	ui(func() {
		assert.Equal(t, bridge.PackOptions{Force: true}, fp.opt)
		assert.Equal(t, "Packed into "+dir+" (packed without saving disk space).", w2.Pack.Status.Text)
		w2.Go(4)
		assert.Contains(t, w2.Done.Summary.Text, "Packed shared weights: "+dir+" (packed without saving disk space)\n")
	})
}

// An interrupted pack of the other kind is continued only with the choice
// it was started with; otherwise Pack starts over, and says so first.
func TestPackStepInterruptedPackOfTheOtherKind(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	model := filepath.Join(t.TempDir(), "m")
	require.NoError(t, writeSmallModel(model))
	fp := u.B.Packer.(*fakePacker)
	dir := bridge.DefaultTrunkDir("/fast", model)
	fp.partial = map[string]bool{dir: true}
	w := packStepOn(t, u, model)
	ui(func() {
		require.Equal(t, bridge.TrunkCheck{Status: bridge.TrunkPartial, Done: 1, Total: 3, Compressed: true}, w.Pack.State)
		assert.Equal(t, "Start over (drops the interrupted pack)", w.Pack.PackBt.Text)
		assert.Equal(t, `An interrupted pack of this model that saves disk space is here (1 of 3 parts done). Tick "Save disk space" to continue it, or start over.`, w.Pack.Status.Text)
		assert.Equal(t, "", w.D.TrunkDir)
		w.Pack.Compress.SetChecked(true)
		assert.Equal(t, "Continue packing", w.Pack.PackBt.Text)
		test.Tap(w.Pack.PackBt)
	})
	waitFor(t, "pack", func() bool { return !w.Pack.Packing })
	ui(func() {
		assert.Equal(t, bridge.PackOptions{Compress: true}, fp.opt, "continued, not forced")
		assert.Equal(t, dir, w.D.TrunkDir)
	})

	// not ticked: starting over is forced (the real packer refuses to mix)
	fp.partial = map[string]bool{dir: true}
	ui(func() {
		w.Pack.checked = ""
		w.Pack.Compress.SetChecked(false)
		w.Pack.dirChanged()
	})
	waitFor(t, "trunk check", func() bool { return w.Pack.checkJob == nil })
	ui(func() { test.Tap(w.Pack.PackBt) })
	waitFor(t, "pack", func() bool { return !w.Pack.Packing })
	ui(func() {
		assert.Equal(t, bridge.PackOptions{Force: true}, fp.opt)
		assert.Equal(t, bridge.TrunkCheck{Status: bridge.TrunkPacked}, w.Pack.State)
	})
}

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
		assert.Contains(t, w.Done.Summary.Text, "Packed shared weights: none")
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
