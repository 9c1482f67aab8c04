package cli

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParsePack reads k3 pack's flags without packing: the values, and
// each refusal with its message.
func TestParsePack(t *testing.T) {
	var errs bytes.Buffer
	c, code := parsePack([]string{"m", "t", "--compress", "--layers", "4", "--buffer-mb", "8", "--disk-test-mb", "16"}, &errs)
	require.Equal(t, -1, code, errs.String())
	assert.Equal(t, &packConfig{model: "m", dir: "t", compress: true, bufMB: 8, diskMB: 16, layers: 4, measure: true}, c,
		"--disk-test-mb given asks for the disk test")
	c, code = parsePack([]string{"m", "t"}, &errs)
	require.Equal(t, -1, code)
	assert.False(t, c.measure, "no disk test unless asked for")
	for args, msg := range map[string]string{
		"--buffer-mb=0":     "k3 pack: --buffer-mb must be 1..1024\n",
		"--layers=-1":       "k3 pack: --layers must be 0 (all) or more\n",
		"--disk-test-mb=-1": "k3 pack: --disk-test-mb must be >= 0\n",
	} {
		errs.Reset()
		_, code := parsePack([]string{"m", "t", args}, &errs)
		assert.Equal(t, ExitUsage, code, args)
		assert.Equal(t, msg, errs.String(), args)
	}
}
