package filelock

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTryLockExcludesASecondHolder(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.lock")
	a, err := TryLock(p)
	require.NoError(t, err)
	_, err = TryLock(p)
	require.ErrorIs(t, err, ErrLocked)
	var le *LockedError
	require.True(t, errors.As(err, &le))
	assert.Equal(t, os.Getpid(), le.PID)
	assert.Contains(t, err.Error(), p)
	require.NoError(t, a.Unlock())
	require.NoError(t, a.Unlock(), "a second unlock is harmless")
	b, err := TryLock(p)
	require.NoError(t, err, "free again after Unlock")
	require.NoError(t, b.Unlock())
}

// TestLockHelperProcess holds a lock for TestLockAcrossProcesses.
func TestLockHelperProcess(t *testing.T) {
	p := os.Getenv("K3_FILELOCK_HELPER")
	if p == "" {
		t.Skip("helper process only")
	}
	if _, err := TryLock(p); err != nil {
		os.Stdout.WriteString("error " + err.Error() + "\n")
		os.Exit(1)
	}
	os.Stdout.WriteString("locked\n")
	select {} // until killed
}

func TestLockAcrossProcessesAndKill(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.lock")
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHelperProcess$")
	cmd.Env = append(os.Environ(), "K3_FILELOCK_HELPER="+p)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "locked\n", line)

	_, err = TryLock(p)
	var le *LockedError
	require.True(t, errors.As(err, &le), "another process holds it: %v", err)
	assert.Equal(t, cmd.Process.Pid, le.PID)

	// kill -9 releases it: no stale lock
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	l, err := TryLock(p)
	require.NoError(t, err)
	require.NoError(t, l.Unlock())
}
