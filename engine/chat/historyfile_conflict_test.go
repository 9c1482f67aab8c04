package chat

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The environment of TestHelperConflictSaver, the saver process that
// TestConcurrentSaversKeepEveryConflictCopy starts.
const (
	envSaverPath = "K3_TEST_SAVER_PATH"
	envSaverTag  = "K3_TEST_SAVER_TAG"
	envSaverN    = "K3_TEST_SAVER_N"
)

// TestHelperConflictSaver is not a test of its own: started as a process
// by TestConcurrentSaversKeepEveryConflictCopy, it saves the history its
// environment names N times from 2 goroutines, each save a distinct
// conversation TAG-g-i.
func TestHelperConflictSaver(t *testing.T) {
	path := os.Getenv(envSaverPath)
	if path == "" {
		t.Skip("started by TestConcurrentSaversKeepEveryConflictCopy")
	}
	n, err := strconv.Atoi(os.Getenv(envSaverN))
	require.NoError(t, err)
	saveMany(t, path, os.Getenv(envSaverTag), n)
}

// saveMany saves n distinct conversations to path from 2 goroutines and
// checks each was refused as a conflict and saved aside.
func saveMany(t *testing.T, path, tag string, n int) {
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n / 2 {
				err := SaveHistory(path, []Message{{Role: "user", Content: fmt.Sprintf("%s-%d-%d", tag, g, i)}, {Role: "assistant", Content: "a"}})
				var ce *ConflictError
				assert.True(t, errors.As(err, &ce), "%v", err)
			}
		}()
	}
	wg.Wait()
}

// Audit N4 (H3): three processes, each with two goroutines, save one
// history while another holds it; every save becomes its own conflict
// copy and every one is found on disk (before, two writers picked the same
// free name and one renamed over the other: 458 of 900 lost).
func TestConcurrentSaversKeepEveryConflictCopy(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "h.jsonl")
	require.NoError(t, SaveHistory(path, []Message{{Role: "user", Content: "held"}, {Role: "assistant", Content: "a"}}))
	// held by this process: the savers (other processes) must save aside
	lock, err := LockHistory(path)
	require.NoError(t, err)
	defer lock.Release()

	const procs, per = 3, 60
	var cmds []*exec.Cmd
	for p := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperConflictSaver$", "-test.count=1")
		cmd.Env = append(os.Environ(), envSaverPath+"="+path, envSaverTag+"="+fmt.Sprintf("p%d", p), envSaverN+"="+strconv.Itoa(per))
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		require.NoError(t, cmd.Start())
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		require.NoError(t, cmd.Wait())
	}

	found := map[string]int{}
	copies, err := filepath.Glob(filepath.Join(dir, "h.conflict-*.jsonl"))
	require.NoError(t, err)
	for _, c := range copies {
		h, err := LoadHistory(c)
		require.NoError(t, err, c)
		require.Len(t, h, 2, c)
		found[h[0].Content]++
		fi, err := os.Stat(c)
		require.NoError(t, err)
		assert.Zero(t, fi.Mode().Perm()&0o077, "%s is %v: a conflict copy is private", c, fi.Mode())
	}
	want := 0
	for p := range procs {
		for g := range 2 {
			for i := range per / 2 {
				want++
				assert.Equal(t, 1, found[fmt.Sprintf("p%d-%d-%d", p, g, i)], "save p%d-%d-%d", p, g, i)
			}
		}
	}
	assert.Len(t, copies, want, "one copy per save")
}
