package bridge

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"k3/storage/hub"
)

// UnreachableError is a model hub the machine cannot reach at all (no
// network, no name resolution, a refused connection).
type UnreachableError struct {
	Host string
	Err  error
}

func (e *UnreachableError) Error() string { return fmt.Sprintf("cannot reach %s: %v", e.Host, e.Err) }
func (e *UnreachableError) Unwrap() error { return e.Err }

// probeTimeout bounds one reachability check: a user learns within seconds
// that the hub cannot be reached, instead of after the hub client's quiet
// retries (minutes).
const probeTimeout = 5 * time.Second

// Reachable checks that endpoint's host (or the proxy the environment names
// for it) accepts a TCP connection.
func Reachable(ctx context.Context, endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return fmt.Errorf("the hub address %q is not a URL", endpoint)
	}
	target := u
	if p, err := http.ProxyFromEnvironment(&http.Request{URL: u}); err == nil && p != nil {
		target = p
	}
	host := target.Host
	if target.Port() == "" {
		port := "443"
		if target.Scheme == "http" {
			port = "80"
		}
		host = net.JoinHostPort(target.Hostname(), port)
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer in %s", probeTimeout)
		}
		return &UnreachableError{Host: u.Hostname(), Err: plainNetError(err)}
	}
	return conn.Close()
}

// plainNetError keeps what a user can act on from a dial error, in plain
// words (netReason).
func plainNetError(err error) error {
	if why, ok := netReason(err); ok {
		return errors.New(why)
	}
	return err
}

// WaitReachable checks that the hub at endpoint can be reached, again and
// again (tries: at most that many checks, 0 without end) with a
// hub.EventRetry before each pause (wait: the pause after check number
// attempt; nil: 5 s more each time, at most 30 s). It returns nil once
// reachable, ctx.Err() when cancelled, or the last *UnreachableError.
func WaitReachable(ctx context.Context, endpoint string, tries int, wait func(attempt int) time.Duration, progress func(hub.Event)) error {
	if wait == nil {
		wait = probeWait
	}
	for attempt := 1; ; attempt++ {
		err := Reachable(ctx, endpoint)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if tries > 0 && attempt >= tries {
			return err
		}
		w := wait(attempt)
		progress(hub.Event{Kind: hub.EventRetry, Attempt: attempt, Wait: w, Err: err})
		t := time.NewTimer(w)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// probeWait is the pause before reachability check number attempt+1.
func probeWait(attempt int) time.Duration {
	return min(time.Duration(attempt)*5*time.Second, 30*time.Second)
}

// hubDownloader downloads from the Hugging Face hub (HF_ENDPOINT honoured).
// Before the hub client starts it checks that the hub can be reached at
// all, and reports each failed check as a retry (attempt n, the wait), so
// a machine without network says so within seconds and keeps trying
// visibly; the hub client's own waits are reported too.
type hubDownloader struct{}

func (hubDownloader) Download(ctx context.Context, req DownloadRequest, progress func(hub.Event)) error {
	if progress == nil {
		progress = func(hub.Event) {}
	}
	c := hub.NewClient("", "")
	if req.Token != "" {
		c.Token = hub.NewToken(req.Token, "the app")
	}
	if err := WaitReachable(ctx, c.Endpoint, 0, nil, progress); err != nil {
		return err
	}
	c.Backoff = func(attempt int) time.Duration {
		wait := min(time.Second<<min(attempt-1, 6), time.Minute)
		progress(hub.Event{Kind: hub.EventRetry, Attempt: attempt, Wait: wait, Err: errors.New("the hub did not answer")})
		return wait
	}
	_, err := c.Download(ctx, hub.Options{Dest: req.Dest, Revision: req.Revision, Layers: req.Layers, Progress: progress})
	return err
}
