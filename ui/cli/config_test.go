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
