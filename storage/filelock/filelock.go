// Package filelock takes advisory, exclusive, non-blocking locks on files:
// flock on Unix, LockFileEx on Windows. The operating system releases a lock
// when its holder exits, however it exits (kill -9 included), so a lock is
// never stale. Locks are per open file: a second TryLock on the same path
// fails even within one process.
package filelock

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ErrLocked is returned (wrapped in a *LockedError) when another holder has
// the lock.
var ErrLocked = errors.New("locked by another process")

// LockedError names the lock file and, when it recorded one, the holder's
// process id.
type LockedError struct {
	Path string
	PID  int // 0 when unknown
}

func (e *LockedError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("%s: %v (process %d)", e.Path, ErrLocked, e.PID)
	}
	return fmt.Sprintf("%s: %v", e.Path, ErrLocked)
}

func (e *LockedError) Unwrap() error { return ErrLocked }

// Lock is a held lock.
type Lock struct {
	f *os.File
}

// TryLock creates path if needed and locks it exclusively without waiting.
// When another holder has it, the error is a *LockedError (errors.Is
// ErrLocked). The holder's process id is written into the file so that the
// refused side can name it.
func TryLock(path string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f); err != nil {
		f.Close()
		if errors.Is(err, ErrLocked) {
			return nil, &LockedError{Path: path, PID: readPID(path)}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	// Best effort: the pid is only for messages.
	if f.Truncate(0) == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Unlock releases the lock (the file stays, so that the next holder locks
// the same file). Unlocking twice is harmless.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	uerr := unlockFile(f)
	cerr := f.Close()
	return errors.Join(uerr, cerr)
}

func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil || len(b) > 32 {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n <= 0 {
		return 0
	}
	return n
}
