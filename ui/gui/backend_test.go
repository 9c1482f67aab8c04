package gui

import (
	"net"
	"strings"
	"testing"

	"fyne.io/fyne/v2/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/ui/bridge"
)

// closedURL is a loopback address nothing listens on (a listener opened
// and closed again).
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return "http://" + addr + "/v1"
}

// G4: a server nobody answers at gets server advice with its address and
// the error, not download advice ("press Resume"), in the server dialog
// and in the chat.
func TestUnreachableServerIsExplainedAsAServer(t *testing.T) {
	url := closedURL(t)
	test.NewTempApp(t)
	f := NewBackendForm(bridge.DefaultSettings(), func(fn func()) { ui(fn) })
	ui(func() {
		f.Where.SetSelected(choiceServer)
		f.URL.SetText(url)
		test.Tap(f.Find)
	})
	waitFor(t, "the answer", func() bool { return f.Find.Disabled() == false && strings.HasPrefix(f.Status.Text, "Cannot") })
	host := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/v1")
	ui(func() {
		// plain words: no "dial tcp …: connect: connection refused"
		assert.Equal(t, "Cannot reach the server at "+host+": nothing answers there, so the server is not running or the port is wrong. "+
			"Check the address above.", f.Status.Text)
		assert.NotContains(t, f.Status.Text, "Resume")
		assert.NotContains(t, f.Status.Text, "download")
	})

	u, _ := newTestUI(t, nil)
	u.B.NewChat = bridge.NewChatFor
	u.S.Backend, u.S.ServerURL = bridge.BackendServer, url
	u.SaveSettings()
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	require.NotNil(t, v)
	ui(func() {
		// the Engine panel: a server's model is asked, not loaded here
		// (it said "No model loaded yet: it loads with the first message"
		// beside this machine's memory and disk)
		assert.Equal(t, "the server's model on "+host+": "+stateAsked, v.Gauges.Model.Text)
		assert.False(t, v.Gauges.Local.Visible(), "this machine's gauges for a server")
		v.Send("Hello?")
	})
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() {
		assert.Equal(t, "Cannot reach the server at "+host+": nothing answers there, so the server is not running or the port is wrong. "+
			"Check the address in k3 → Model location…", v.Notice.Text)
		assert.NotContains(t, v.Notice.Text, "Resume")
		assert.Equal(t, "the server's model on "+host+": "+stateDown, v.Gauges.Model.Text)
		assert.False(t, v.Gauges.Local.Visible())
	})
}
