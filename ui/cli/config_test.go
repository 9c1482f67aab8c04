package cli

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/storage/hub"
	"k3/storage/verify"
)

// TestParseDownload reads k3 download's command lines into their config
// without downloading: the options the hub gets, --draft's pinned release
// in DEST/draft, and the refusals (exit 2, one line naming the flags).
func TestParseDownload(t *testing.T) {
	var errs bytes.Buffer
	c, code := parseDownload([]string{"/m", "--layers", "2", "--jobs", "3", "--revision", "v1", "--progress", "1s"}, &errs)
	require.Equal(t, -1, code, errs.String())
	assert.Equal(t, "/m", c.dest)
	assert.Equal(t, hub.Options{Dest: "/m", Revision: "v1", Layers: 2, Jobs: 3, Interval: time.Second}, c.opt)
	assert.Equal(t, hub.DefaultRepo, c.repo)
	assert.Equal(t, time.Second, c.interval)

	c, code = parseDownload([]string{"/m", "--draft"}, &errs)
	require.Equal(t, -1, code, errs.String())
	assert.Equal(t, filepath.Join("/m", "draft"), c.dest)
	assert.Equal(t, c.dest, c.opt.Dest)
	assert.Equal(t, "/m", c.given)
	assert.Equal(t, hub.DraftRepo, c.repo)
	assert.Equal(t, hub.DraftRevision, c.opt.Revision)
	assert.Equal(t, downloadDraftPins, c.opt.Pinned)

	for _, args := range [][]string{{"/m", "--jobs", "0"}, {"/m", "--layers", "-1"}, {"/m", "--draft", "--layers", "2"}, {"/m", "--draft", "--repo", "x/y"}} {
		errs.Reset()
		_, code = parseDownload(args, &errs)
		assert.Equal(t, ExitUsage, code, "%v", args)
		assert.Contains(t, errs.String(), "k3 download: --", "%v", args)
	}
}

// TestParseVerify reads k3 verify's command lines into their config
// without checking a folder.
func TestParseVerify(t *testing.T) {
	var out, errs bytes.Buffer
	c, code := parseVerify([]string{"/m", "--sha256", "--jobs", "2", "--json"}, &out, &errs)
	require.Equal(t, -1, code, errs.String())
	assert.Equal(t, "/m", c.dir)
	assert.Equal(t, verify.Options{SHA256: true, Jobs: 2}, c.opt)
	assert.True(t, c.asJSON)
	assert.False(t, c.logits)

	errs.Reset()
	_, code = parseVerify([]string{"/m", "--logits"}, &out, &errs)
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs.String(), "--logits needs --golden DIR")
}

// TestServeChecks: k3 serve's limits, its model id and its access checks
// in order (the key file, the limits, an address beyond loopback without
// a key), without starting a server.
func TestServeChecks(t *testing.T) {
	ms := time.Millisecond
	assert.True(t, serveLimitsOK(0, 2, 1, 1024, ms, ms, ms))
	for _, bad := range [][7]float64{{-1, 2, 1, 8, 1, 1, 1}, {0, 1, 1, 8, 1, 1, 1}, {0, 2, 0, 8, 1, 1, 1}, {0, 2, 1, 0, 1, 1, 1}, {0, 2, 1, 1025, 1, 1, 1}, {0, 2, 1, 8, 0, 1, 1}, {0, 2, 1, 8, 1, 0, 1}, {0, 2, 1, 8, 1, 1, 0}} {
		assert.False(t, serveLimitsOK(int(bad[0]), int(bad[1]), int(bad[2]), bad[3], time.Duration(bad[4])*ms, time.Duration(bad[5])*ms, time.Duration(bad[6])*ms), "%v", bad)
	}
	assert.Equal(t, "given", serveModelID("given", "/models/k3"))
	assert.Equal(t, "k3", serveModelID("", "/models/k3/"))

	key, err := serveAccess("", "", "127.0.0.1:8080", true)
	require.NoError(t, err)
	assert.Equal(t, "", key)
	_, err = serveAccess("", filepath.Join(t.TempDir(), "none"), "127.0.0.1:8080", false)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "--queue", "the key file is checked first")
	_, err = serveAccess("k", "", "127.0.0.1:8080", false)
	assert.ErrorContains(t, err, "--queue must be >= 0")
	_, err = serveAccess("", "", "0.0.0.0:8080", true)
	assert.Error(t, err, "an address beyond loopback needs a key")
	key, err = serveAccess("k", "", "0.0.0.0:8080", true)
	require.NoError(t, err)
	assert.Equal(t, "k", key)
}
