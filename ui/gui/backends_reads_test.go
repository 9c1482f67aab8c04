package gui

import (
	"context"
	"errors"
	"sync"
	"testing"

	"fyne.io/fyne/v2/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/ui/bridge"
)

// fakeServers answers model lists without a network.
type fakeServers struct {
	mu    sync.Mutex
	asked []string // base URL and key of each question
	ids   []string
	err   error
}

func (f *fakeServers) Models(_ context.Context, baseURL, key string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, baseURL+" "+key)
	return f.ids, f.err
}

// The server picker asks the server through the bridge's Backends, so a
// fake answers it: the address as the app keeps it, the key, the models.
func TestBackendFormAsksThroughTheBackends(t *testing.T) {
	test.NewTempApp(t)
	fs := &fakeServers{ids: []string{"m1", "m2"}}
	f := NewBackendForm(bridge.DefaultSettings(), func(fn func()) { ui(fn) })
	f.B = bridge.Backends{Servers: fs}
	ui(func() {
		f.Where.SetSelected(choiceServer)
		f.URL.SetText("http://gpu-box:8000")
		f.Key.SetText(" sk-1 ")
		test.Tap(f.Find)
	})
	waitFor(t, "models", func() bool { return len(f.Model.Options) == 2 })
	ui(func() {
		assert.Equal(t, "m1", f.Model.Selected)
		assert.Equal(t, "the server serves m1, m2", f.Status.Text)
	})
	fs.mu.Lock()
	assert.Equal(t, []string{"http://gpu-box:8000/v1  sk-1 "}, fs.asked)
	fs.mu.Unlock()

	fs.err = errors.New("connection refused")
	ui(func() { test.Tap(f.Find) })
	waitFor(t, "the answer", func() bool { return !f.Find.Disabled() && f.Status.Text != "asking http://gpu-box:8000/v1 …" })
	ui(func() { assert.Equal(t, bridge.ExplainServer("http://gpu-box:8000/v1", fs.err), f.Status.Text) })
}

// The wizard's model step asks the Backends whether a folder is the demo:
// a folder the fake calls the demo needs no Verify.
func TestModelStepAsksTheBackendsForTheDemo(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	dir := t.TempDir()
	var mu sync.Mutex
	var asked []string
	u.B.Demo = func(d string) (bool, bool) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, d)
		return d == dir, d == dir
	}
	ui(u.Start)
	var w *wizard
	ui(func() { w = u.wizard })
	require.NotNil(t, w)
	ui(func() {
		w.Model.Dir.SetText(dir)
		w.Model.StartVerify()
		assert.Equal(t, "The demo model was generated here: there is nothing to verify.", w.Model.VfStatus.Text)
	})
	mu.Lock()
	assert.Contains(t, asked, dir)
	mu.Unlock()
}
