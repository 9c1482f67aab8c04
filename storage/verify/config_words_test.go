package verify

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// G26: what is wrong with config.json in plain words (the app and k3 verify
// say the same), not "is not one k3 can run: these are not valid: the file
// is not a JSON object".
func TestCheckConfigWords(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.json")
	for _, c := range []struct{ raw, want string }{
		{"[1, 2]", "config.json is damaged: it is not a JSON object, as a model's settings are. " +
			"Download config.json again, or choose the folder of the Kimi K3 release."},
		{"{\"model_type\": \"kimi_k3\"", "config.json is damaged: it is not a JSON object"},
		{"{}", "config.json does not describe a model k3 can run (it lacks "},
	} {
		require.NoError(t, os.WriteFile(p, []byte(c.raw), 0o644))
		got := CheckConfig(p)
		assert.Contains(t, got, c.want, c.raw)
		assert.NotContains(t, got, "these are not valid")
	}
}
