package cli

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServeFlagRefusals: absurd durations, sizes and keys are refused
// with exit 2 and one line, before the model is opened (was: --keep-alive
// 1ns started and the first stream panicked; --max-body-mb 1e13 became
// 8 MiB; a key with a space could never match).
func TestServeFlagRefusals(t *testing.T) {
	dir := demoModel(t)
	empty := filepath.Join(t.TempDir(), "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--keep-alive", "0s"}, "--keep-alive, --body-timeout and --write-timeout at least 1ms"},
		{[]string{"--keep-alive", "-1s"}, "--keep-alive, --body-timeout and --write-timeout at least 1ms"},
		{[]string{"--keep-alive", "1ns"}, "--keep-alive, --body-timeout and --write-timeout at least 1ms"},
		{[]string{"--body-timeout", "0s"}, "--body-timeout and --write-timeout at least 1ms"},
		{[]string{"--write-timeout", "-5s"}, "--body-timeout and --write-timeout at least 1ms"},
		{[]string{"--max-body-mb", "1e13"}, "--max-body-mb above 0 and at most 1024"},
		{[]string{"--max-body-mb", "0"}, "--max-body-mb above 0"},
		{[]string{"--api-key", "abc "}, "--api-key holds a space"},
		{[]string{"--api-key-file", empty}, "is empty"},
		{[]string{"--api-key-file", empty, "--api-key", "k"}, "give the key once"},
		{[]string{"--api-key-file", filepath.Join(t.TempDir(), "none")}, "--api-key-file:"},
	} {
		code, out, errs := runK3(append([]string{"serve", dir, "--addr", "127.0.0.1:0"}, c.args...)...)
		assert.Equal(t, ExitUsage, code, c.args)
		assert.Contains(t, errs, c.want, c.args)
		assert.Equal(t, 1, strings.Count(strings.TrimSpace(errs), "\n")+1, "one line: %q", errs)
		assert.Empty(t, out, c.args)
	}
}

// TestServeAPIKeyFile: the key comes from the file's first line (not the
// command line, which every local user can read) and is required.
func TestServeAPIKeyFile(t *testing.T) {
	dir := demoModel(t)
	f := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(f, []byte("s3cret-key\n"), 0o600))
	url, stop := startServe(t, dir, "--addr", "127.0.0.1:0", "--api-key-file", f, "--quiet")
	get := func(key string) int {
		req, err := http.NewRequest("GET", url+"/models", nil)
		require.NoError(t, err)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, 401, get(""))
	assert.Equal(t, 401, get("wrong"))
	assert.Equal(t, 200, get("s3cret-key"))
	code, out, _ := stop()
	assert.Equal(t, ExitOK, code)
	assert.Contains(t, out, "API key required")
}
