package regfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok")
	require.NoError(t, os.WriteFile(ok, []byte("x"), 0o644))
	b, err := ReadFile(ok)
	require.NoError(t, err)
	assert.Equal(t, "x", string(b))
	f, err := Open(ok)
	require.NoError(t, err)
	f.Close()

	_, err = ReadFile(dir)
	require.ErrorIs(t, err, ErrNotRegular)
	assert.Contains(t, err.Error(), "a directory")

	_, err = ReadFile(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, fs.ErrNotExist)

	fifo := filepath.Join(dir, "fifo")
	if err := mkfifo(fifo); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	// would block forever in open(2) without the check
	_, err = Open(fifo)
	require.ErrorIs(t, err, ErrNotRegular)
	assert.Contains(t, err.Error(), fifo)
	assert.Contains(t, err.Error(), "named pipe")
	var nr *NotRegularError
	assert.True(t, errors.As(err, &nr))
}
