package bridge

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
)

// openRemote opens a chat on the server at base as the app does (Settings
// backend "server"), with hc as its HTTP client when set, and returns the
// words the window shows for its error.
func openRemote(t *testing.T, base string, hc *http.Client) string {
	t.Helper()
	s := DefaultSettings()
	s.Backend, s.ServerURL, s.ServerModel = BackendServer, base, "k3"
	e, err := NewRemoteChat(s)
	require.NoError(t, err)
	if hc != nil {
		e.(*remoteChat).c.HTTP = hc
	}
	_, err = e.Open(context.Background(), func(engine.Event) {})
	require.Error(t, err)
	return Explain(err)
}

// jsonErrorServer answers every request with status and an OpenAI error body.
func jsonErrorServer(t *testing.T, status int, msg string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"message":%q,"type":"x","code":%d}}`, msg, status)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A server that cannot be reached, or answers with an error, reads as one
// plain sentence: no "dial tcp", no system error text, no Go error chain.
func TestServerErrorsInPlainWords(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refusedAddr := closed.Addr().String()
	require.NoError(t, closed.Close())

	// accepts connections (the kernel's backlog) and never answers
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = silent.Close() })

	tlsSrv := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(tlsSrv.Close)
	plain := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(plain.Close)

	noName := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		// what the dialer returns for a name no DNS server knows
		return nil, &net.OpError{Op: "dial", Net: network, Err: &net.DNSError{Err: "no such host", Name: "k3-box.invalid", IsNotFound: true}}
	}}}
	reset := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ECONNRESET)}
	}}}
	host := func(u string) string { return strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://") }
	where := " Check the address in k3 → Model location…"
	cases := []struct {
		name, base string
		hc         *http.Client
		want       string
	}{
		{"refused", "http://" + refusedAddr, nil,
			"Cannot reach the server at " + refusedAddr + ": nothing answers there, so the server is not running or the port is wrong." + where},
		{"timeout", "http://" + silent.Addr().String(), &http.Client{Timeout: 200 * time.Millisecond},
			"Cannot reach the server at " + silent.Addr().String() + ": it did not answer in time." + where},
		{"dns", "http://k3-box.invalid:8080", noName,
			"Cannot reach the server at k3-box.invalid:8080: the name k3-box.invalid is not known here (no network, or the address is misspelt)." + where},
		{"tls", tlsSrv.URL, nil,
			"Cannot reach the server at " + host(tlsSrv.URL) + ": its secure connection (https) cannot be trusted: " +
				"its certificate is not one this machine trusts, or not for this name." + where},
		{"https to http", "https://" + host(plain.URL), nil,
			"Cannot reach the server at " + host(plain.URL) + ": it does not use a secure connection: write its address with http:// instead of https://." + where},
		{"reset", "http://127.0.0.1:9", reset,
			"Cannot reach the server at 127.0.0.1:9: it closed the connection." + where},
	}
	statuses := []struct {
		status int
		msg    string
		want   string
	}{
		{401, "Invalid API key: sk-…", "does not accept this API key (HTTP 401). Enter its key in k3 → Model location…"},
		{404, "The model `k3` does not exist.", "does not know this model or address (HTTP 404). Enter"},
		{500, "CUDA out of memory.\nTraceback (most recent call last): …",
			`failed on this request (HTTP 500): it said "CUDA out of memory". Press Retry; if it fails again, the server's own log says why.`},
		{400, "max_tokens must be positive", `refused this request (HTTP 400): it said "max_tokens must be positive".`},
	}
	for _, st := range statuses {
		u := jsonErrorServer(t, st.status, st.msg)
		want := "The server at " + host(u) + " " + st.want
		if st.status == 404 {
			want = "The server at " + host(u) + " does not know this model or address (HTTP 404). Choose the model again in k3 → Model location…"
		}
		cases = append(cases, struct {
			name, base string
			hc         *http.Client
			want       string
		}{fmt.Sprint(st.status), u, nil, want})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := openRemote(t, c.base, c.hc)
			assert.Equal(t, c.want, got)
			for _, tech := range []string{"dial", "tcp", "connect:", "x509", "tls:", "Get \"", "/v1", "EOF", "errno", "%!", "http: "} {
				assert.NotContains(t, got, tech)
			}
		})
	}
}

// Serving on a port another program holds says so, without "listen tcp"
// or "bind:".
func TestPortInUseInPlainWords(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	_, err = net.Listen("tcp", l.Addr().String())
	require.Error(t, err)
	assert.Equal(t, "The server cannot start there: another program already uses that port: choose another port, or stop that program.", Explain(err))
}
