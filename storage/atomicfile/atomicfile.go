// Package atomicfile writes files so that a reader sees either the old
// content or the new, never a partial file: the data goes to a temporary
// file in the same directory (.NAME.tmpPID-RANDOM), is synced, and is
// renamed over the target. A writer killed before the rename leaves its
// temporary file; CleanStale removes those of writers no longer running.
package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Write replaces path with data atomically (mode 0644), syncing the file
// before the rename.
func Write(path string, data []byte) error { return write(path, bytesFill(data), true, false) }

// WritePrivate is WriteDurable for a file only its owner may read (mode
// 0600 from the start: a secret is never readable by others, not even
// while it is written).
func WritePrivate(path string, data []byte) error {
	return writeMode(path, bytesFill(data), true, true, 0o600)
}

// WriteDurable is Write followed by a sync of the directory, so the new name
// survives a crash.
func WriteDurable(path string, data []byte) error { return write(path, bytesFill(data), true, true) }

// WriteNoSync is Write without any fsync: for progress records whose loss
// in a crash costs only progress (a reader must verify what they claim).
func WriteNoSync(path string, data []byte) error { return write(path, bytesFill(data), false, false) }

// WriteFunc is Write for content produced as a stream: fill writes the new
// content to w (buffered; a write error is returned by the next write or at
// the end). If fill returns an error, path is left as it was and that error
// is returned unwrapped.
func WriteFunc(path string, fill func(w io.Writer) error) error {
	return write(path, func(f *os.File) error {
		w := bufio.NewWriterSize(f, 1<<20)
		if err := fill(w); err != nil {
			return fillError{err}
		}
		return w.Flush()
	}, true, false)
}

// fillError marks an error of the caller's fill function, returned as is.
type fillError struct{ err error }

func (e fillError) Error() string { return e.err.Error() }

func bytesFill(data []byte) func(*os.File) error {
	return func(f *os.File) error {
		_, err := f.Write(data)
		return err
	}
}

func write(path string, fill func(*os.File) error, fileSync, dirSync bool) error {
	return writeMode(path, fill, fileSync, dirSync, 0o644)
}

func writeMode(path string, fill func(*os.File) error, fileSync, dirSync bool, mode os.FileMode) error {
	dir := filepath.Dir(path)
	// the writer's pid in the name lets CleanStale tell a temporary file
	// of a writer killed before its rename from one still being written
	f, err := os.CreateTemp(dir, tempPrefix(path)+strconv.Itoa(os.Getpid())+"-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	if err = fill(f); err == nil {
		err = f.Chmod(mode)
	}
	if err == nil && fileSync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		if fe, ok := err.(fillError); ok {
			return fe.err
		}
		return fmt.Errorf("write %s: %w", path, err)
	}
	if dirSync {
		if err := syncDir(dir); err != nil {
			return fmt.Errorf("sync %s: %w", dir, err)
		}
	}
	return nil
}

func tempPrefix(path string) string { return "." + filepath.Base(path) + ".tmp" }

// Stale is a temporary file CleanStale removed.
type Stale struct {
	Path string
	Size int64
}

// legacyAge is how old a temporary file without a writer pid (written by
// an older k3) must be before CleanStale takes it for abandoned.
const legacyAge = time.Hour

// CleanStale removes the temporary files an interrupted Write of path left
// beside it: those whose writer process no longer runs (and, from older k3
// versions that did not record the writer, those over an hour old). A
// temporary file of a live writer, this process's included, is kept. It
// returns what it removed.
func CleanStale(path string) ([]Stale, error) {
	dir := filepath.Dir(path)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	pre := tempPrefix(path)
	var out []Stale
	var errs []error
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), pre)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		pidText, _, withPID := strings.Cut(rest, "-")
		pid, perr := strconv.Atoi(pidText)
		switch {
		case withPID && perr == nil && pid > 0:
			if pid == os.Getpid() || processAlive(pid) {
				continue
			}
		case isDigits(rest):
			if time.Since(info.ModTime()) < legacyAge {
				continue
			}
		default:
			continue // not ours
		}
		p := filepath.Join(dir, e.Name())
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		out = append(out, Stale{p, info.Size()})
	}
	return out, errors.Join(errs...)
}

// ProcessAlive reports whether a process with this id runs (a process the
// caller may not signal counts as running).
func ProcessAlive(pid int) bool { return pid == os.Getpid() || processAlive(pid) }

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
