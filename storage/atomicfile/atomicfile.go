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
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k3/storage/units"
)

// Write replaces path with data atomically, syncing the file before the
// rename. A file that exists keeps its permission bits; a new file gets
// 0666 less the umask, as os.Create would give it.
func Write(path string, data []byte) error {
	return write(path, bytesFill(data), opts{perm: 0o666, fileSync: true})
}

// WritePrivate is Write for what only its owner should read (histories,
// state files, keys): a new file gets 0600 less the umask; a file that
// exists keeps its permission bits.
func WritePrivate(path string, data []byte) error {
	return write(path, bytesFill(data), opts{perm: 0o600, fileSync: true})
}

// WriteNew writes data to path atomically only if path does not exist yet:
// the complete file appears under its name at once (a hard link of the
// synced temporary file), or not at all. When path exists it returns an
// error wrapping fs.ErrExist and leaves path alone, so concurrent writers
// of the same name, in this process or in others, never replace each
// other. perm is the new file's mode before the umask.
func WriteNew(path string, data []byte, perm fs.FileMode) error {
	return write(path, bytesFill(data), opts{perm: perm, fileSync: true, exclusive: true})
}

// WriteDurable is Write followed by a sync of the directory, so the new name
// survives a crash.
func WriteDurable(path string, data []byte) error {
	return write(path, bytesFill(data), opts{perm: 0o666, fileSync: true, dirSync: true})
}

// WriteNoSync is Write without any fsync: for progress records whose loss
// in a crash costs only progress (a reader must verify what they claim).
func WriteNoSync(path string, data []byte) error {
	return write(path, bytesFill(data), opts{perm: 0o666})
}

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
	}, opts{perm: 0o666, fileSync: true})
}

// opts is how write writes.
type opts struct {
	perm              fs.FileMode // a new file's mode before the umask
	fileSync, dirSync bool
	exclusive         bool // never replace an existing path (WriteNew)
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

func write(path string, fill func(*os.File) error, o opts) error {
	dir := filepath.Dir(path)
	// the writer's pid in the name lets CleanStale tell a temporary file
	// of a writer killed before its rename from one still being written
	f, err := createTemp(dir, tempPrefix(path)+strconv.Itoa(os.Getpid())+"-", o.perm)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	err = fill(f)
	if err == nil && !o.exclusive {
		// an existing file keeps its mode (the temporary one was created
		// with o.perm less the umask, what a new file gets)
		if fi, serr := os.Stat(path); serr == nil && fi.Mode().IsRegular() {
			err = f.Chmod(fi.Mode().Perm())
		}
	}
	if err == nil && o.fileSync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if o.exclusive {
			err = os.Link(tmp, path)
			os.Remove(tmp)
		} else {
			err = os.Rename(tmp, path)
		}
	}
	if err != nil {
		os.Remove(tmp)
		if fe, ok := err.(fillError); ok {
			return fe.err
		}
		return fmt.Errorf("write %s: %w", path, err)
	}
	if o.dirSync {
		if err := syncDir(dir); err != nil {
			return fmt.Errorf("sync %s: %w", dir, err)
		}
	}
	return nil
}

// createTemp creates a new file prefix+RANDOM in dir with mode perm less
// the umask (os.CreateTemp would always give 0600).
func createTemp(dir, prefix string, perm fs.FileMode) (*os.File, error) {
	for range 10000 {
		name := filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, err
	}
	return nil, fmt.Errorf("no free temporary name in %s", dir)
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
		case units.Digits(rest):
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
