package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteReplacesAndLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.json")
	for _, body := range []string{"one", "two, longer"} {
		require.NoError(t, WriteDurable(p, []byte(body)))
		got, err := os.ReadFile(p)
		require.NoError(t, err)
		assert.Equal(t, body, string(got))
	}
	ents, _ := os.ReadDir(dir)
	assert.Len(t, ents, 1, "temporary files left behind")
	// a missing directory fails cleanly, naming the file
	err := Write(filepath.Join(dir, "no", "x"), []byte("x"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Join(dir, "no", "x"))
}

func TestWriteFunc(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "big.bin")
	// more than the 1 MiB buffer, in small writes
	want := strings.Repeat("0123456789abcdef", 100_000)
	require.NoError(t, WriteFunc(p, func(w io.Writer) error {
		for i := 0; i < len(want); i += 16 {
			if _, err := io.WriteString(w, want[i:i+16]); err != nil {
				return err
			}
		}
		return nil
	}))
	got, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, want, string(got))
	fi, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm())

	// a failing fill keeps the old file, leaves no temporary and returns
	// fill's error as is
	boom := errors.New("boom")
	err = WriteFunc(p, func(w io.Writer) error {
		fmt.Fprint(w, "partial")
		return boom
	})
	require.ErrorIs(t, err, boom)
	assert.Equal(t, "boom", err.Error())
	got, _ = os.ReadFile(p)
	assert.Equal(t, want, string(got), "a failed WriteFunc must leave the old content")
	ents, _ := os.ReadDir(dir)
	assert.Len(t, ents, 1, "temporary files left behind")
}
