package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/drawings"
	"k3/internal/fixture"
)

// TestServeDemoNamesPicturesSDKs is issue 40's proof through the official
// clients: `k3 serve` on the trained demo (as `k3 demo` writes it), held-out
// drawings (internal/drawings) sent by openai's chat.completions as
// image_url data: URLs and by @anthropic-ai/sdk's messages as base64 image
// blocks (tools/openai-conformance/pictures.mjs). Each client's replies
// name the colour and the shape of at least 90% of the pictures.
func TestServeDemoNamesPicturesSDKs(t *testing.T) {
	clients := fixture.NodeClients(t, "openai", "@anthropic-ai/sdk")
	dir := filepath.Join(t.TempDir(), "demo")
	code, _, errs := runK3("demo", dir)
	require.Equal(t, ExitOK, code, errs)

	pics := drawings.HeldOut(24, 41)
	picDir := t.TempDir()
	type entry struct {
		File  string `json:"file"`
		Label string `json:"label"`
	}
	list := make([]entry, len(pics))
	for i, p := range pics {
		list[i] = entry{File: fmt.Sprintf("p%02d.png", i), Label: p.Label()}
		require.NoError(t, os.WriteFile(filepath.Join(picDir, list[i].File), p.PNG, 0o644))
	}
	b, err := json.Marshal(list)
	require.NoError(t, err)
	listPath := filepath.Join(picDir, "pictures.json")
	require.NoError(t, os.WriteFile(listPath, b, 0o644))

	const key = "pictures-key"
	url, stop := startServe(t, dir, "--addr", "127.0.0.1:0", "--api-key", key, "--model-id", "k3-demo",
		"--queue", "0", "--max-tokens", "200", "--keep-alive", "100ms")
	defer stop()
	var got struct{ OpenAI, Anthropic []string }
	clients.Run(t, &got, "pictures.mjs", "K3_BASE_URL="+url, "K3_API_KEY="+key, "K3_MODEL=k3-demo", "K3_PICTURES="+listPath)

	for client, replies := range map[string][]string{"openai": got.OpenAI, "anthropic": got.Anthropic} {
		require.Len(t, replies, len(pics), client)
		named := 0
		for i, r := range replies {
			if strings.Contains(strings.ToLower(r), pics[i].Label()) {
				named++
			} else {
				t.Logf("%s: picture %d (%s) -> %q", client, i, pics[i].Label(), r)
			}
		}
		t.Logf("%s: named %d of %d held-out pictures", client, named, len(pics))
		assert.GreaterOrEqual(t, float64(named)/float64(len(pics)), 0.9, client)
	}
}

// TestChatDemoNamesPicture: `k3 chat DEMO --image FILE` on the trained
// demo, with thinking on and off: the reply names the drawing, and with
// thinking off the answer comes with no thought before it.
func TestChatDemoNamesPicture(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	code, _, errs := runK3("demo", dir)
	require.Equal(t, ExitOK, code, errs)
	defer func() { stdin = nil }()
	for i, p := range drawings.HeldOut(2, 43) {
		pic := filepath.Join(t.TempDir(), "p.png")
		require.NoError(t, os.WriteFile(pic, p.PNG, 0o644))
		args := []string{"chat", dir, "--image", pic}
		if i == 1 {
			args = append(args, "--no-think")
		}
		stdin = strings.NewReader("What is in this picture?\n/exit\n")
		code, out, errs := runK3(args...)
		require.Equal(t, ExitOK, code, errs)
		t.Log(out)
		assert.Contains(t, strings.ToLower(out), "a "+p.Label()+".", "picture %d", i)
		if i == 1 {
			assert.NotContains(t, out, "The picture shows", "with thinking off")
		}
	}
}
