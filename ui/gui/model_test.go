package gui

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/storage/verify"
	"k3/ui/bridge"
)

// G17: the app's Verify says what `k3 verify` says about the same folder
// (one function, verify.CheckFolder): a shard whose header has damaged
// bytes is named, and a complete folder is not called "right" beyond what
// was checked.
func TestAppVerifySaysWhatTheCLISays(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	u.B.Verifier = bridge.RealBackends(u.B.DataDir).Verifier
	dir := filepath.Join(t.TempDir(), "flip")
	require.NoError(t, writeSmallModel(dir))
	require.NoError(t, unmarkDemo(dir))
	shard := filepath.Join(dir, "model-00002-of-00009.safetensors")
	b, err := os.ReadFile(shard)
	require.NoError(t, err)
	i := strings.Index(string(b), `"dtype"`)
	require.Positive(t, i)
	copy(b[i:], `"dtypo"`) // damaged bytes in the header
	require.NoError(t, os.WriteFile(shard, b, 0o644))

	cli, err := verify.CheckFolder(t.Context(), dir, verify.Options{})
	require.NoError(t, err)
	ui(u.Start)
	w := u.wizard
	ui(func() {
		w.Go(1)
		w.Model.Dir.SetText(dir)
	})
	waitFor(t, "folder check", func() bool { return w.Model.Check != nil })
	ui(func() { test.Tap(w.Model.VerifyBt) })
	waitFor(t, "verify", func() bool { return w.Model.Verified != nil })
	ui(func() {
		assert.Equal(t, cli.Files, w.Model.Verified.Files, "the app and k3 verify disagree")
		assert.False(t, w.Model.Verified.Complete)
		assert.Equal(t, 1, w.Model.Verified.Unreadable)
		assert.Contains(t, w.Model.VfStatus.Text, "1 unreadable")
	})

	// a good folder: what was checked, not "right"
	good := filepath.Join(t.TempDir(), "good")
	require.NoError(t, writeSmallModel(good))
	require.NoError(t, unmarkDemo(good))
	ui(func() { w.Model.Dir.SetText(good) })
	waitFor(t, "folder check", func() bool { return w.Model.Check != nil && w.Model.Check.Dir == good })
	ui(func() {
		assert.Equal(t, "", w.Model.VfStatus.Text, "the other folder's result stays")
		test.Tap(w.Model.VerifyBt)
	})
	waitFor(t, "verify", func() bool { return w.Model.Verified != nil })
	ui(func() {
		assert.True(t, w.Model.Verified.Complete)
		assert.Contains(t, w.Model.VfStatus.Text, "of the right size, and k3 reads every header")
		assert.Contains(t, w.Model.VfStatus.Text, "not compared with checksums")
	})
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

// gui-check 2-model: the Download part of step 2 showed a blank band under
// its progress bar (an empty status line); an empty status takes no room.
func TestModelStepEmptyStatusTakesNoRoom(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	ui(u.Start)
	w := u.wizard
	d := fyne.CurrentApp().Driver()
	ui(func() {
		w.Go(1)
		u.Win.Resize(fyne.NewSize(1280, 760))
		relayout(u.Win)
		m := w.Model
		assert.Equal(t, "", m.DlStatus.Text)
		assert.False(t, m.DlStatus.Visible())
		assert.False(t, m.VfStatus.Visible())
		assert.False(t, m.dlSide.Visible(), "no file lines, no room for them")
		gap := func() float32 {
			relayout(u.Win)
			return d.AbsolutePositionForObject(m.VerifyBt).Y - (d.AbsolutePositionForObject(m.DlBar).Y + m.DlBar.Size().Height)
		}
		empty := gap()
		m.DlStatus.SetText("Connecting to the model hub…")
		m.setFiles("model-00001-of-00002.safetensors  done")
		assert.GreaterOrEqual(t, gap(), empty+m.DlStatus.MinSize().Height+m.DlFiles.MinSize().Height)
		m.DlStatus.SetText("")
		m.setFiles("")
		assert.Equal(t, empty, gap(), "the lines give their room back")
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
