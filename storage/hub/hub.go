// Package hub downloads a model from a Hugging Face-compatible hub:
// resumable (.part files and HTTP Range), pinned to one commit, verified
// (size and SHA-256 against the hub's LFS metadata, git blob id for small
// files), parallel, with a progress event API the desktop app subscribes to.
//
// Hub API used (the shapes huggingface_hub itself uses):
//
//	GET {endpoint}/api/models/{repo}/revision/{rev}?blobs=true
//	    -> {"sha": "<40-hex commit>", "siblings": [{"rfilename", "size",
//	        "blobId", "lfs": {"sha256", "size"}}]}
//	GET {endpoint}/{repo}/resolve/{commit}/{file}   (Range: bytes=N-)
//	    -> 200/206, possibly after a 302 to a CDN; the hub's response carries
//	       X-Repo-Commit, X-Linked-Size and X-Linked-Etag (the LFS sha256)
//	       or ETag; errors carry X-Error-Code (RepoNotFound,
//	       RevisionNotFound, EntryNotFound, GatedRepo).
//
// The endpoint defaults to https://huggingface.co and is overridden by
// HF_ENDPOINT (tests point it at an httptest server). The token comes from
// HF_TOKEN, or the file named by HF_TOKEN_PATH, or $HF_HOME/token, or
// ~/.cache/huggingface/token. It is sent only to the endpoint's host (never
// to a CDN a redirect leads to) and never appears in errors, events, logs
// or files.
package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k3/storage/verify"
)

// DefaultEndpoint is the public hub.
const DefaultEndpoint = "https://huggingface.co"

// DefaultRepo is the released Kimi K3 checkpoint.
const DefaultRepo = "moonshotai/Kimi-K3"

// DraftRepo is the released DSpark drafter for Kimi K3, DraftRevision the
// commit k3 pins it to and DraftFiles its files (docs/DSPARK.md §1).
const (
	DraftRepo     = "Inferact/Kimi-K3-DSpark"
	DraftRevision = "cf6b8244620e7ea4b0651d214f28e89eac75bed6"
)

// DraftFiles are the released drafter's files with their sizes and SHA-256.
var DraftFiles = []RemoteFile{
	{Name: "config.json", Size: 1251, SHA256: "5a3c2f4f91c965ed93b14de5f12a4e9c17fd98d8c99916ed2deb26ce8702f970"},
	{Name: "model.safetensors", Size: 7_124_633_450, SHA256: "f9972a636d92a11994cdcfc88fd4c5b5d50d6eb2a89af016031593b8c65c2053"},
}

// EndpointFromEnv returns HF_ENDPOINT if set, else DefaultEndpoint, without
// a trailing slash.
func EndpointFromEnv() string {
	if e := strings.TrimSpace(os.Getenv("HF_ENDPOINT")); e != "" {
		return strings.TrimRight(e, "/")
	}
	return DefaultEndpoint
}

// Token is a hub access token. Its String, GoString and MarshalJSON never
// reveal it, so it cannot leak through fmt or encoding/json.
type Token struct {
	value  string
	Source string // where it came from: "HF_TOKEN", a file path, or ""
}

// NewToken wraps a token value.
func NewToken(value, source string) Token {
	return Token{value: strings.TrimSpace(value), Source: source}
}

// Set reports whether a token is present.
func (t Token) Set() bool { return t.value != "" }

func (t Token) String() string {
	if !t.Set() {
		return "(no token)"
	}
	return "(token from " + t.Source + ")"
}

// GoString keeps %#v from printing the value.
func (t Token) GoString() string { return t.String() }

// MarshalJSON keeps encoding/json from writing the value.
func (t Token) MarshalJSON() ([]byte, error) { return json.Marshal(t.String()) }

// LoadToken finds the token the way the Hugging Face tools do: HF_TOKEN,
// then the file HF_TOKEN_PATH names, then $HF_HOME/token, then
// ~/.cache/huggingface/token ($XDG_CACHE_HOME honoured). No token is not an
// error (public repositories need none).
func LoadToken() Token {
	if v := strings.TrimSpace(os.Getenv("HF_TOKEN")); v != "" {
		return NewToken(v, "HF_TOKEN")
	}
	var paths []string
	if p := os.Getenv("HF_TOKEN_PATH"); p != "" {
		paths = append(paths, p)
	} else {
		home := os.Getenv("HF_HOME")
		if home == "" {
			cache := os.Getenv("XDG_CACHE_HOME")
			if cache == "" {
				if h, err := os.UserHomeDir(); err == nil {
					cache = filepath.Join(h, ".cache")
				}
			}
			if cache != "" {
				home = filepath.Join(cache, "huggingface")
			}
		}
		if home != "" {
			paths = append(paths, filepath.Join(home, "token"))
		}
	}
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			if t := NewToken(string(b), p); t.Set() {
				return t
			}
		}
	}
	return Token{}
}

// Client talks to one repository on one hub.
type Client struct {
	Endpoint string // base URL, no trailing slash
	Repo     string // owner/name
	Token    Token
	HTTP     *http.Client // nil: a client with sane timeouts
	// Backoff returns the wait before retry number attempt (1-based) after a
	// network error, 5xx or 429. Nil: 1 s doubling to 60 s.
	Backoff func(attempt int) time.Duration
	// Retries is how many consecutive failed attempts without new bytes a
	// file may take before the download gives up (default 8).
	Retries int
	// StallTimeout aborts a response that delivers no bytes for this long
	// (default 60 s); the attempt is then retried.
	StallTimeout time.Duration
}

// NewClient returns a client for repo at endpoint ("" = EndpointFromEnv)
// with the token from LoadToken.
func NewClient(endpoint, repo string) *Client {
	if endpoint == "" {
		endpoint = EndpointFromEnv()
	}
	if repo == "" {
		repo = DefaultRepo
	}
	return &Client{Endpoint: strings.TrimRight(endpoint, "/"), Repo: repo, Token: LoadToken()}
}

func (c *Client) backoff(attempt int) time.Duration {
	if c.Backoff != nil {
		return c.Backoff(attempt)
	}
	d := time.Second << min(attempt-1, 6)
	return min(d, 60*time.Second)
}

func (c *Client) retries() int {
	if c.Retries > 0 {
		return c.Retries
	}
	return 8
}

func (c *Client) stall() time.Duration {
	if c.StallTimeout > 0 {
		return c.StallTimeout
	}
	return 60 * time.Second
}

type hubHeadersKey struct{}

// httpClient returns the HTTP client, with a redirect policy that drops the
// token when a redirect leaves the endpoint's host and records the hub's
// own response headers (X-Repo-Commit, X-Linked-*) before the redirect.
func (c *Client) httpClient() *http.Client {
	base := c.HTTP
	if base == nil {
		base = &http.Client{Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			ResponseHeaderTimeout: 60 * time.Second,
			TLSHandshakeTimeout:   30 * time.Second,
			IdleConnTimeout:       90 * time.Second,
			MaxIdleConnsPerHost:   16,
		}}
	}
	cl := *base
	ep, _ := url.Parse(c.Endpoint)
	cl.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("more than 10 redirects")
		}
		if ep == nil || req.URL.Host != ep.Host {
			req.Header.Del("Authorization")
		}
		if h, ok := req.Context().Value(hubHeadersKey{}).(*http.Header); ok && req.Response != nil && len(via) == 1 {
			*h = req.Response.Header.Clone()
		}
		return nil
	}
	return &cl
}

// get issues a GET to the hub with the token. hubHeaders receives the
// headers of the hub's own response (the first one, before redirects).
func (c *Client) get(ctx context.Context, rawURL string, header http.Header, hubHeaders *http.Header) (*http.Response, error) {
	if hubHeaders != nil {
		ctx = context.WithValue(ctx, hubHeadersKey{}, hubHeaders)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", "k3-download/1")
	if c.Token.Set() {
		req.Header.Set("Authorization", "Bearer "+c.Token.value)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, err
	}
	if hubHeaders != nil && *hubHeaders == nil {
		*hubHeaders = resp.Header.Clone() // no redirect: the hub answered itself
	}
	return resp, nil
}

// HTTPError is a refused request with a message that says what to do.
type HTTPError struct {
	Status int
	Code   string // X-Error-Code
	What   string // "revision main", "file config.json", …
	Msg    string
}

func (e *HTTPError) Error() string { return e.Msg }

// Retryable reports whether the request may succeed if repeated.
func (e *HTTPError) Retryable() bool { return e.Status >= 500 || e.Status == 429 || e.Status == 408 }

// httpError turns a non-success response into an HTTPError (and drains it).
func (c *Client) httpError(resp *http.Response, what string) *HTTPError {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	code := resp.Header.Get("X-Error-Code")
	e := &HTTPError{Status: resp.StatusCode, Code: code, What: what}
	repoURL := c.Endpoint + "/" + c.Repo
	switch {
	case resp.StatusCode == 401 || resp.StatusCode == 403 || code == "GatedRepo":
		if c.Token.Set() {
			e.Msg = fmt.Sprintf("hub refused %s of %s (HTTP %d): the token %s was rejected or has no access; check it, and accept the model's terms at %s", what, c.Repo, resp.StatusCode, c.Token, repoURL)
		} else {
			e.Msg = fmt.Sprintf("hub refused %s of %s (HTTP %d): no token found; set HF_TOKEN or put one in ~/.cache/huggingface/token (or HF_TOKEN_PATH), and accept the model's terms at %s", what, c.Repo, resp.StatusCode, repoURL)
		}
	case code == "RevisionNotFound":
		e.Msg = fmt.Sprintf("hub has no %s in %s (HTTP 404 RevisionNotFound): check --revision (a branch, tag or 40-hex commit)", what, c.Repo)
	case code == "RepoNotFound":
		e.Msg = fmt.Sprintf("hub has no repository %s (HTTP 404 RepoNotFound): check the name; a private repository also needs HF_TOKEN", c.Repo)
	case code == "EntryNotFound" || resp.StatusCode == 404:
		e.Msg = fmt.Sprintf("hub has no %s in %s (HTTP 404 %s): the file list and the commit disagree; re-run, or pass another --revision", what, c.Repo, code)
	case resp.StatusCode == 416:
		e.Msg = fmt.Sprintf("hub refused the byte range for %s (HTTP 416)", what)
	default:
		e.Msg = fmt.Sprintf("hub answered HTTP %d for %s of %s", resp.StatusCode, what, c.Repo)
	}
	return e
}

// RemoteFile is one file of a repository at a commit.
type RemoteFile struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"` // LFS files: sha256 of the content
	BlobID string `json:"blob_id,omitempty"`
}

// RepoInfo is a repository at one commit.
type RepoInfo struct {
	Commit string
	Files  []RemoteFile
}

// Info fetches the commit a revision resolves to and its files with sizes
// and hashes (GET /api/models/{repo}/revision/{rev}?blobs=true).
func (c *Client) Info(ctx context.Context, revision string) (*RepoInfo, error) {
	if revision == "" {
		revision = "main"
	}
	u := fmt.Sprintf("%s/api/models/%s/revision/%s?blobs=true", c.Endpoint, c.Repo, url.PathEscape(revision))
	var info *RepoInfo
	err := c.retry(ctx, "revision "+revision, func() (bool, error) {
		resp, err := c.get(ctx, u, nil, nil)
		if err != nil {
			return false, err
		}
		if resp.StatusCode != http.StatusOK {
			return false, c.httpError(resp, "revision "+revision)
		}
		defer resp.Body.Close()
		info, err = parseInfo(io.LimitReader(resp.Body, 256<<20))
		if err != nil {
			return false, &HTTPError{Status: 200, What: "revision " + revision, Msg: fmt.Sprintf("hub sent unreadable metadata for %s of %s: %v", revision, c.Repo, err)}
		}
		return false, nil
	}, nil)
	if err != nil {
		return nil, err
	}
	return info, nil
}

// parseInfo reads the revision endpoint's JSON.
func parseInfo(r io.Reader) (*RepoInfo, error) {
	var raw struct {
		SHA      string `json:"sha"`
		Siblings []struct {
			RFilename string `json:"rfilename"`
			Size      *int64 `json:"size"`
			BlobID    string `json:"blobId"`
			LFS       *struct {
				SHA256 string `json:"sha256"`
				Size   int64  `json:"size"`
			} `json:"lfs"`
		} `json:"siblings"`
	}
	if err := json.NewDecoder(r).Decode(&raw); err != nil {
		return nil, err
	}
	if !verify.IsCommit(raw.SHA) {
		return nil, fmt.Errorf("commit %q is not a 40-hex id", raw.SHA)
	}
	info := &RepoInfo{Commit: raw.SHA}
	seen := map[string]bool{}
	for _, s := range raw.Siblings {
		if !safePath(s.RFilename) {
			return nil, fmt.Errorf("file name %q is not a safe relative path", s.RFilename)
		}
		if seen[s.RFilename] {
			return nil, fmt.Errorf("file %s listed twice", s.RFilename)
		}
		seen[s.RFilename] = true
		f := RemoteFile{Name: s.RFilename, Size: -1, BlobID: strings.ToLower(s.BlobID)}
		if s.Size != nil {
			f.Size = *s.Size
		}
		if s.LFS != nil {
			f.SHA256 = strings.ToLower(s.LFS.SHA256)
			if f.Size < 0 {
				f.Size = s.LFS.Size
			}
			if !verify.IsSHA256(f.SHA256) {
				return nil, fmt.Errorf("file %s has lfs sha256 %q", f.Name, s.LFS.SHA256)
			}
		}
		if f.Size < 0 {
			return nil, fmt.Errorf("file %s has no size (the request must ask for blobs=true)", f.Name)
		}
		info.Files = append(info.Files, f)
	}
	return info, nil
}

// safePath accepts relative slash-separated paths whose every component is
// a plain name.
func safePath(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || len(p) > 1024 {
		return false
	}
	for _, c := range strings.Split(p, "/") {
		if !verify.SafeName(c) {
			return false
		}
	}
	return true
}

// retry runs op until it succeeds, fails for good, or runs out of
// attempts. op returns progressed=true when it made progress, which resets
// the attempt count. onRetry, if set, is told about each wait.
func (c *Client) retry(ctx context.Context, what string, op func() (progressed bool, err error), onRetry func(attempt int, wait time.Duration, err error)) error {
	attempt := 0
	for {
		progressed, err := op()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !retryable(err) {
			return err
		}
		if progressed {
			attempt = 0
		}
		attempt++
		if attempt > c.retries() {
			return fmt.Errorf("%s: giving up after %d attempts without progress: %w", what, attempt-1, err)
		}
		wait := c.backoff(attempt)
		if onRetry != nil {
			onRetry(attempt, wait, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// errRetry marks an error as worth retrying (a short body, a stall, a range
// the server would not honour).
type errRetry struct{ err error }

func (e errRetry) Error() string { return e.err.Error() }
func (e errRetry) Unwrap() error { return e.err }

// retryable reports whether repeating the request can succeed: only what
// the network or the server may fix by itself is retried (a dropped or
// reset connection, a timeout, a temporary DNS failure, a 5xx/429/408, a
// short body). Local and deterministic failures are not: a full disk,
// denied permissions, a request net/http refuses to send (a token with a
// newline), a refused connection (nothing listens at the endpoint), an
// unknown host, a TLS certificate problem.
func retryable(err error) bool {
	var he *HTTPError
	if errors.As(err, &he) {
		return he.Retryable()
	}
	var r errRetry
	if errors.As(err, &r) {
		return true
	}
	var fatal *fatalError
	if errors.As(err, &fatal) {
		return false
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return false // a local file
	}
	for _, local := range append([]error{syscall.ENOSPC, syscall.EACCES, syscall.EPERM, syscall.EROFS, syscall.ECONNREFUSED}, osLocal...) {
		if errors.Is(err, local) {
			return false
		}
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return dns.IsTimeout || dns.IsTemporary
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, transient := range append([]error{io.EOF, io.ErrUnexpectedEOF, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
		syscall.ENETUNREACH, syscall.EHOSTUNREACH, syscall.ENETDOWN, syscall.ETIMEDOUT}, osTransient...) {
		if errors.Is(err, transient) {
			return true
		}
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return true // a read or write on an established connection failed
	}
	// HTTP/2 stream and connection resets come as plain strings.
	msg := err.Error()
	return strings.Contains(msg, "http2: ") || strings.Contains(msg, "stream error") || strings.Contains(msg, "connection reset")
}

// fatalError is a local failure that repeating will not fix (disk full,
// permissions, a hash mismatch after a full re-download).
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

func fatal(format string, a ...any) error { return &fatalError{fmt.Errorf(format, a...)} }
