package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
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
	if runtime.GOOS != "windows" { // no permission bits there: a writable file is 0666
		assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
	}

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

// Audit D11 (row 3.28): a writer killed between its temporary write and the
// rename leaves .NAME.tmpPID-N; CleanStale removes it once that process is
// gone, and leaves live writers' and other files alone.
func TestCleanStale(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s.k3state")
	require.NoError(t, Write(p, []byte("old")))
	dead := fixture.DeadPID(t)
	live := exec.Command(os.Args[0], "-test.run=^TestHelperSleep$")
	live.Env = append(os.Environ(), "K3_ATOMICFILE_SLEEP=1")
	require.NoError(t, live.Start())
	defer func() { live.Process.Kill(); live.Wait() }()
	old := time.Now().Add(-2 * time.Hour)
	files := map[string]bool{ // name -> removed
		fmt.Sprintf(".s.k3state.tmp%d-123456", dead):        true,
		fmt.Sprintf(".s.k3state.tmp%d-9", live.Process.Pid): false,
		fmt.Sprintf(".s.k3state.tmp%d-77", os.Getpid()):     false,
		".s.k3state.tmp763677893":                           true, // an older k3's, over an hour old
		".s.k3state.tmp55":                                  false,
		fmt.Sprintf(".other.k3state.tmp%d-1", dead):         false,
	}
	for name := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("partial"), 0o644))
	}
	require.NoError(t, os.Chtimes(filepath.Join(dir, ".s.k3state.tmp763677893"), old, old))
	removed, err := CleanStale(p)
	require.NoError(t, err)
	var got []string
	for _, s := range removed {
		got = append(got, filepath.Base(s.Path))
		assert.Equal(t, int64(7), s.Size)
	}
	var want []string
	for name, rm := range files {
		if rm {
			want = append(want, name)
		}
	}
	assert.ElementsMatch(t, want, got)
	for name, rm := range files {
		_, err := os.Stat(filepath.Join(dir, name))
		assert.Equal(t, rm, os.IsNotExist(err), name)
	}
	b, _ := os.ReadFile(p)
	assert.Equal(t, "old", string(b), "the target is never touched")
	// a fresh Write names its temporary file so
	assert.True(t, strings.HasPrefix(tempPrefix(p)+strconv.Itoa(os.Getpid())+"-", ".s.k3state.tmp"))
}

func TestHelperSleep(t *testing.T) {
	if os.Getenv("K3_ATOMICFILE_SLEEP") == "" {
		t.Skip("helper process only")
	}
	time.Sleep(time.Minute)
}
