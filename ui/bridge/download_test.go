package bridge

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/storage/hub"
)

// A hub that cannot be reached is reported within seconds as a retry with
// its attempt number and wait, and the download keeps trying until paused.
func TestDownloadUnreachableHubReportsRetries(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now: connections are refused
	t.Setenv("HF_ENDPOINT", "http://"+addr)
	t.Setenv("HTTP_PROXY", "")
	t.Setenv("http_proxy", "")

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events := make(chan hub.Event, 16)
	errc := make(chan error, 1)
	start := time.Now()
	go func() {
		errc <- hubDownloader{}.Download(ctx, DownloadRequest{Dest: t.TempDir()}, func(ev hub.Event) { events <- ev })
	}()
	ev := <-events
	assert.Less(t, time.Since(start), probeTimeout+time.Second, "the first report comes within the probe's time")
	assert.Equal(t, hub.EventRetry, ev.Kind)
	assert.Equal(t, 1, ev.Attempt)
	assert.Equal(t, probeWait(1), ev.Wait)
	var ue *UnreachableError
	require.True(t, errors.As(ev.Err, &ue), "%v", ev.Err)
	assert.Equal(t, "127.0.0.1", ue.Host)
	assert.Contains(t, Explain(ev.Err), "k3 cannot reach the model hub (127.0.0.1)")
	cancel()
	assert.ErrorIs(t, <-errc, context.Canceled)
}
