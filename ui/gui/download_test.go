package gui

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2/test"
	"github.com/stretchr/testify/assert"

	"k3/storage/hub"
	"k3/ui/bridge"
)

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
