package direct

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// uncachedOS: the systems with a way around the page cache.
func uncachedOS() bool {
	switch runtime.GOOS {
	case "linux", "darwin", "windows":
		return true
	}
	return false
}

// TestLargeRequestsSplit: a read or write of 2 GiB or more goes to the
// system in calls of at most MaxIO (macOS pread refuses 2 GiB, Windows
// ReadFile takes a 32-bit length), at consecutive offsets, and the whole
// request is delivered. The system calls are stand-ins that move no bytes,
// so the 2.5 GiB buffer is never touched (no memory is used).
func TestLargeRequestsSplit(t *testing.T) {
	if strconv.IntSize < 64 {
		t.Skip("needs a 64-bit address space")
	}
	const n = 5 << 29 // 2.5 GiB
	buf, err := AllocHuge(n)
	require.NoError(t, err)
	defer buf.Free()
	f, err := Open(writeTemp(t, pattern(Align)))
	require.NoError(t, err)
	defer f.Close()
	type call struct {
		off int64
		n   int
	}
	var reads, writes []call
	f.preadFn = func(_ *os.File, p []byte, off int64) (int, error) {
		reads = append(reads, call{off, len(p)})
		return len(p), nil
	}
	f.pwriteFn = func(_ *os.File, p []byte, off int64) (int, error) {
		writes = append(writes, call{off, len(p)})
		return len(p), nil
	}
	want := []call{{4096, 1 << 30}, {4096 + 1<<30, 1 << 30}, {4096 + 2<<30, 1 << 29}}
	got, err := f.ReadAt(buf.Bytes(), 4096)
	require.NoError(t, err)
	assert.Equal(t, n, got)
	assert.Equal(t, want, reads)
	wrote, err := f.WriteAt(buf.Bytes(), 4096)
	require.NoError(t, err)
	assert.Equal(t, n, wrote)
	assert.Equal(t, want, writes)
}

// TestPathsWithSpaces: files in directories with spaces, non-ASCII names
// and (on Windows, where t.TempDir has a drive letter) a path longer than
// the old 260-character MAX_PATH open, read and are created like any other.
func TestPathsWithSpaces(t *testing.T) {
	base := t.TempDir()
	if runtime.GOOS == "windows" {
		require.NotEmpty(t, filepath.VolumeName(base), "a temp dir with a drive letter")
	}
	long := filepath.Join(base, "Program Files", "k3 model ü")
	for len(long) < 300 {
		long = filepath.Join(long, "a longer directory name with spaces")
	}
	for _, dir := range []string{filepath.Join(base, "Program Files", "k3 model ü"), long} {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		data := pattern(3*Align + 17)
		p := filepath.Join(dir, "model 00001.safetensors")
		require.NoError(t, os.WriteFile(p, data, 0o600))
		f, err := Open(p)
		require.NoError(t, err)
		if uncachedOS() && !f.Direct() {
			assert.Contains(t, f.Note(), "refused")
		}
		got := make([]byte, len(data)-5)
		n, err := f.ReadAt(got, 5)
		require.NoError(t, err)
		assert.Equal(t, len(got), n)
		assert.True(t, bytes.Equal(data[5:], got))
		require.NoError(t, f.Close())

		c, err := Create(filepath.Join(dir, "trunk new.bin"))
		require.NoError(t, err)
		b, err := AllocHuge(Align)
		require.NoError(t, err)
		copy(b.Bytes(), "k3 ")
		_, err = c.WriteAt(b.Bytes(), 0)
		require.NoError(t, err)
		require.NoError(t, c.Close())
		require.NoError(t, b.Free())
		back, err := os.ReadFile(filepath.Join(dir, "trunk new.bin"))
		require.NoError(t, err)
		assert.True(t, strings.HasPrefix(string(back), "k3 "))
		assert.Len(t, back, Align)
	}
}

// TestOpenUncached: where the system has uncached I/O, OpenUncached gives a
// file (or the filesystem's refusal); elsewhere ErrNoUncached.
func TestOpenUncached(t *testing.T) {
	p := writeTemp(t, pattern(2*Align))
	f, err := OpenUncached(p, os.O_RDONLY, 0)
	if !uncachedOS() {
		require.ErrorIs(t, err, ErrNoUncached)
		return
	}
	if err != nil {
		require.True(t, RefusesUncached(err), "%v", err)
		t.Skipf("%s refused here: %v", UncachedName, err)
	}
	b, err := AllocHuge(Align)
	require.NoError(t, err)
	defer b.Free()
	n, err := pread(f, b.Bytes(), Align)
	require.NoError(t, err)
	assert.Equal(t, Align, n)
	assert.Equal(t, pattern(2 * Align)[Align:], b.Bytes())
	// one system call at the end of the file: nothing, and no error
	n, err = pread(f, b.Bytes(), 2*Align)
	require.NoError(t, err)
	assert.Zero(t, n)
	require.NoError(t, f.Close())
}

// TestDiskFull: ENOSPC, EDQUOT and (on Windows) ERROR_DISK_FULL, wrapped
// or not, are a full disk; other errors are not.
func TestDiskFull(t *testing.T) {
	assert.True(t, DiskFull(&WriteError{Path: "x", Err: fmt.Errorf("write: %w", syscall.ENOSPC)}))
	assert.True(t, DiskFull(syscall.EDQUOT))
	assert.False(t, DiskFull(io.ErrShortWrite))
	assert.False(t, DiskFull(syscall.EIO))
	if runtime.GOOS == "windows" {
		assert.True(t, DiskFull(&os.PathError{Op: "write", Path: "x", Err: syscall.Errno(112)})) // ERROR_DISK_FULL
	}
}
