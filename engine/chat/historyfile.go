package chat

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"k3/storage/atomicfile"
	"k3/storage/filelock"
)

// ErrHistoryInUse is wrapped by LockHistory's error when another k3 (the
// REPL, the app or the server) holds the history file.
var ErrHistoryInUse = errors.New("the history file is in use by another k3")

// HistoryLock is a held history file lock (see LockHistory).
type HistoryLock struct {
	key string
	l   *filelock.Lock
}

// LockHistory takes the history file's advisory lock (a hidden
// .NAME.lock beside it) for a session that writes it turn after turn, so
// that a second writer is refused up front instead of one of them losing
// turns. The operating system drops the lock when the process exits.
func LockHistory(path string) (*HistoryLock, error) {
	key := fileKey(path)
	l, err := filelock.TryLock(lockPath(path))
	if err != nil {
		var le *filelock.LockedError
		if errors.As(err, &le) {
			who := "another k3"
			if le.PID > 0 {
				who = fmt.Sprintf("another k3 (process %d)", le.PID)
			}
			return nil, fmt.Errorf("%s is in use by %s, a chat or the app: close it there or use another history file: %w", path, who, ErrHistoryInUse)
		}
		return nil, fmt.Errorf("cannot lock %s: %w", path, err)
	}
	files.mu.Lock()
	files.held[key] = l
	files.mu.Unlock()
	return &HistoryLock{key: key, l: l}, nil
}

// Release drops the lock.
func (h *HistoryLock) Release() {
	if h == nil {
		return
	}
	files.mu.Lock()
	if files.held[h.key] == h.l {
		delete(files.held, h.key)
	}
	files.mu.Unlock()
	h.l.Unlock()
}

// ConflictError is SaveHistory declining to overwrite a history it does
// not own; the history went to SavedAs instead.
type ConflictError struct {
	Path, SavedAs, Why string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s was not overwritten (%s); this conversation was saved as %s instead, nothing is lost", e.Path, e.Why, e.SavedAs)
}

// files is what this process knows about the history files it touched.
var files = &historyFiles{held: map[string]*filelock.Lock{}, seen: map[string]version{}}

type historyFiles struct {
	mu   sync.Mutex
	held map[string]*filelock.Lock // LockHistory locks
	seen map[string]version        // content last read or written
}

type version struct {
	exists bool
	sum    [32]byte
}

func versionOf(data []byte, exists bool) version {
	if !exists {
		return version{}
	}
	return version{true, sha256.Sum256(data)}
}

func fileKey(path string) string {
	if a, err := filepath.Abs(path); err == nil {
		return a
	}
	return filepath.Clean(path)
}

func lockPath(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".lock")
}

func (f *historyFiles) remember(path string, data []byte, exists bool) {
	f.mu.Lock()
	f.seen[fileKey(path)] = versionOf(data, exists)
	f.mu.Unlock()
}

func (f *historyFiles) save(path string, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := fileKey(path)
	if f.held[key] == nil {
		l, err := filelock.TryLock(lockPath(path))
		var le *filelock.LockedError
		if errors.As(err, &le) {
			who := "it is open in another k3"
			if le.PID > 0 {
				who = fmt.Sprintf("it is open in another k3, process %d", le.PID)
			}
			return f.saveAside(path, data, who)
		}
		if err != nil {
			return fmt.Errorf("cannot lock %s: %w", path, err)
		}
		defer l.Unlock()
	}
	if want, ok := f.seen[key]; ok {
		cur, err := os.ReadFile(path)
		exists := err == nil
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if versionOf(cur, exists) != want {
			return f.saveAside(path, data, "another program changed it after it was read")
		}
	}
	if err := atomicfile.Write(path, data); err != nil {
		return err
	}
	f.seen[key] = versionOf(data, true)
	return nil
}

// saveAside writes data to the first free NAME.conflict-N.EXT beside path.
func (f *historyFiles) saveAside(path string, data []byte, why string) error {
	ext := filepath.Ext(path)
	stem := strings.TrimSuffix(path, ext)
	for n := 1; n < 10000; n++ {
		alt := fmt.Sprintf("%s.conflict-%d%s", stem, n, ext)
		if _, err := os.Lstat(alt); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := atomicfile.Write(alt, data); err != nil {
			return fmt.Errorf("%s: %s, and saving it as %s failed: %w", path, why, alt, err)
		}
		f.seen[fileKey(alt)] = versionOf(data, true)
		return &ConflictError{Path: path, SavedAs: alt, Why: why}
	}
	return fmt.Errorf("%s: %s, and no free NAME.conflict-N name is left", path, why)
}
