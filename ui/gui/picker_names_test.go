package gui

import (
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/ui/bridge"
)

// N6: two demo folders are told apart (only the app's own is "DEMO
// model"), one server is listed once (a nameless entry beside a named one
// at its address goes), the order stays when the selection changes, and a
// server that refused the last message says so.
func TestPickerTellsModelsApart(t *testing.T) {
	fc := &fakeChat{}
	u, _ := newTestUI(t, fc)
	u.B.NewChat = func(s bridge.Settings) (bridge.ChatEngine, error) {
		if s.Backend == bridge.BackendServer {
			return nil, nil
		}
		return fc, nil
	}
	demo := modelFolder(t, u.B.DataDir, "demo-model", false)
	large := modelFolder(t, t.TempDir(), "large", false)
	u.S.ModelDir, u.S.Demo = demo, true
	require.NoError(t, u.SaveSettings())
	u.S.ModelDir = large
	require.NoError(t, u.SaveSettings())
	srv := "http://127.0.0.1:1/v1"
	require.NoError(t, u.S.SetServer(srv, "", ""))
	require.NoError(t, u.SaveSettings())
	require.NoError(t, u.S.SetServer(srv, "", "small"))
	require.NoError(t, u.SaveSettings())
	u.S.Backend = bridge.BackendLocal
	require.NoError(t, u.SaveSettings())
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	p := v.Picker
	const loads, asked = " · loads with the first message", " · asked with the first message"
	want := []string{"DEMO model — on this machine" + loads, "large (a demo model) — on this machine" + loads, "small — on 127.0.0.1:1" + asked}
	ui(func() {
		require.Equal(t, u.demoDir(), demo)
		assert.Equal(t, want, p.Select.Options)
		p.Select.SetSelected(want[0])
		assert.Equal(t, want, p.Select.Options, "the entries moved under the mouse")
		// a server that did not answer says so
		v.serverDown = map[string]bool{srv: true}
		p.Refresh()
		assert.Equal(t, "small — on 127.0.0.1:1 · "+stateDown, p.Select.Options[2])
	})
}

// boxText is the text the picker's box draws (after any cut of its own).
func boxText(t *testing.T, s *widget.Select) string {
	t.Helper()
	var out []string
	for _, o := range test.WidgetRenderer(s).Objects() {
		if rt, ok := o.(*widget.RichText); ok {
			for _, c := range test.WidgetRenderer(rt).Objects() {
				if tx, ok := c.(*canvas.Text); ok {
					out = append(out, tx.Text)
				}
			}
		}
	}
	require.NotEmpty(t, out, "the box draws no text")
	return strings.Join(out, "")
}

// At 1024 wide the box shows the model in use readably: a long folder
// name is shortened in the middle and keeps where it runs, not cut at its
// end by the box ("DEMO model with draft model — on this …"); the list
// keeps every name whole; a wider window shows more of it.
func TestPickerBoxReadableAt1024(t *testing.T) {
	fc := &fakeChat{}
	u, _ := newTestUI(t, fc)
	const long = "Kimi-K3-Instruct-0905-w4a16-g128-packed-for-nvme"
	u.S.ModelDir = modelFolder(t, t.TempDir(), long, true)
	require.NoError(t, u.SaveSettings())
	require.NoError(t, u.S.SetServer("http://gpu-box.example.com:8000/v1", "", "moonshotai/Kimi-K3-Instruct-0905"))
	require.NoError(t, u.SaveSettings())
	u.S.Backend = bridge.BackendLocal
	require.NoError(t, u.SaveSettings())
	u.N.WizardDone.Set(true)
	ui(u.Start)
	p := u.Chat.Picker
	size := func(w, h float32) {
		ui(func() {
			u.Win.Resize(fyne.NewSize(w, h))
			relayout(u.Win)
		})
	}
	size(1024, 640)
	var at1024 string
	ui(func() {
		at1024 = p.Select.Selected
		assert.Equal(t, at1024, boxText(t, p.Select), "the box cut the name itself")
		// the name has the room: more of it than of where it runs
		assert.True(t, strings.HasPrefix(at1024, "Kimi-K3-Instruct-"), at1024)
		assert.True(t, strings.HasSuffix(at1024, "-for-nvme"), at1024)
		assert.Contains(t, at1024, "…")
		assert.Contains(t, p.Select.Options[0], long+" with draft model — on this machine", "the list shows it whole")
		// the server: its model and host
		p.Select.SetSelected(p.Select.Options[1])
		require.Equal(t, bridge.BackendServer, u.S.Backend)
	})
	size(1024, 640)
	ui(func() {
		sel := p.Select.Selected
		assert.Equal(t, sel, boxText(t, p.Select), "the box cut the server's name itself")
		assert.Equal(t, "moonshotai/Kimi-K3-Instruct-0905", sel, "the model's name whole, its host in the list")
		p.Select.SetSelected(p.Select.Options[0])
	})
	size(1280, 800)
	ui(func() {
		sel := p.Select.Selected
		assert.Equal(t, sel, boxText(t, p.Select))
		assert.Greater(t, len(sel), len(at1024), "a wider window shows more of the name")
	})
}
