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
	l *filelock.Lock
}

// LockHistory takes the history file's advisory lock (a hidden
// .NAME.lock beside it) for a session that writes it turn after turn, so
// that a second writer is refused up front instead of one of them losing
// turns. The operating system drops the lock when the process exits.
func LockHistory(path string) (*HistoryLock, error) {
	l, err := tryLock(path)
	if err != nil {
		return nil, err
	}
	files.mu.Lock()
	files.held[fileKey(path)] = l
	files.mu.Unlock()
	return &HistoryLock{l: l}, nil
}

// tryLock takes path's lock file, or says who holds it (ErrHistoryInUse).
func tryLock(path string) (*filelock.Lock, error) {
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
	return l, nil
}

// Release drops the lock (after RemoveHistory it is already dropped).
func (h *HistoryLock) Release() {
	if h == nil {
		return
	}
	files.mu.Lock()
	for k, l := range files.held {
		if l == h.l { // under whatever name RenameHistory gave it
			delete(files.held, k)
		}
	}
	files.mu.Unlock()
	h.l.Unlock()
}

// hold returns this process's lock of path, or takes it for the call
// (done unlocks what was taken here). Called with files.mu held.
func (f *historyFiles) hold(path string) (l *filelock.Lock, done func(), err error) {
	if l := f.held[fileKey(path)]; l != nil {
		return l, func() {}, nil
	}
	l, err = tryLock(path)
	if err != nil {
		return nil, nil, err
	}
	return l, func() { l.Unlock() }, nil
}

// RenameHistory renames a history file and its lock file, so no lock file
// is left under the old name. It is refused (ErrHistoryInUse) while
// another k3 holds the history. A lock this process holds (LockHistory)
// moves with the file: the same HistoryLock then holds the new name.
func RenameHistory(from, to string) error {
	files.mu.Lock()
	defer files.mu.Unlock()
	l, done, err := files.hold(from)
	if err != nil {
		return err
	}
	defer done()
	if err := os.Rename(from, to); err != nil {
		return err
	}
	// the open lock file keeps its lock under the new name
	if err := os.Rename(lockPath(from), lockPath(to)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s was renamed, but its lock file was not: %w", from, err)
	}
	fk, tk := fileKey(from), fileKey(to)
	if f := files.held[fk]; f == l {
		delete(files.held, fk)
		files.held[tk] = l
	}
	if v, ok := files.seen[fk]; ok {
		delete(files.seen, fk)
		files.seen[tk] = v
	}
	return nil
}

// RemoveHistory deletes a history file and its lock file. It is refused
// (ErrHistoryInUse) while another k3 holds the history; a lock this
// process holds is dropped. A missing file is not an error.
func RemoveHistory(path string) error {
	files.mu.Lock()
	defer files.mu.Unlock()
	l, _, err := files.hold(path)
	if err != nil {
		return err
	}
	defer l.Unlock()
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	key := fileKey(path)
	delete(files.held, key)
	delete(files.seen, key)
	// removed while locked, so no other k3 takes it in between (a system
	// that cannot remove an open file: removed once unlocked)
	if os.Remove(lockPath(path)) != nil {
		l.Unlock()
		os.Remove(lockPath(path))
	}
	return nil
}

// RemoveStaleLocks deletes, in dir, the lock files of histories that no
// longer exist (left by versions that renamed or deleted a history without
// its lock file), except those someone holds.
func RemoveStaleLocks(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	files.mu.Lock()
	defer files.mu.Unlock()
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".lock")
		if !ok || !strings.HasPrefix(name, ".") || e.IsDir() {
			continue
		}
		path := filepath.Join(dir, name[1:])
		if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) || files.held[fileKey(path)] != nil {
			continue
		}
		l, err := filelock.TryLock(lockPath(path))
		if err != nil {
			continue
		}
		if os.Remove(lockPath(path)) != nil {
			l.Unlock()
			os.Remove(lockPath(path))
			continue
		}
		l.Unlock()
	}
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
	// never overwrite content this process has not seen (a missing file
	// holds nothing to lose: one renamed or deleted since is written anew)
	if want, ok := f.seen[key]; ok {
		cur, err := os.ReadFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return err
		case versionOf(cur, true) != want:
			return f.saveAside(path, data, "another program changed it after it was read")
		}
	}
	if err := atomicfile.WritePrivate(path, data); err != nil {
		return err
	}
	f.seen[key] = versionOf(data, true)
	return nil
}

// saveAside writes data to the first free NAME.conflict-N.EXT beside path.
// The copy is created exclusively (atomicfile.WriteNew): another writer,
// in this process or another, taking the same name at the same moment
// makes this one try the next name, so no copy replaces another.
func (f *historyFiles) saveAside(path string, data []byte, why string) error {
	ext := filepath.Ext(path)
	stem := strings.TrimSuffix(path, ext)
	for n := 1; n < 10000; n++ {
		alt := fmt.Sprintf("%s.conflict-%d%s", stem, n, ext)
		if _, err := os.Lstat(alt); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		err := atomicfile.WriteNew(alt, data, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue // taken since the Lstat
		}
		if err != nil {
			return fmt.Errorf("%s: %s, and saving it as %s failed: %w", path, why, alt, err)
		}
		f.seen[fileKey(alt)] = versionOf(data, true)
		return &ConflictError{Path: path, SavedAs: alt, Why: why}
	}
	return fmt.Errorf("%s: %s, and no free NAME.conflict-N name is left", path, why)
}
