package direct

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDiskFree(t *testing.T) {
	free, total, err := DiskFree(t.TempDir())
	require.NoError(t, err)
	assert.Positive(t, total)
	assert.GreaterOrEqual(t, free, int64(0))
	assert.LessOrEqual(t, free, total)

	missing := filepath.Join(t.TempDir(), "no", "such", "dir")
	_, _, err = DiskFree(missing)
	require.Error(t, err)
	assert.Contains(t, err.Error(), missing)
}
