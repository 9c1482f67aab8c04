// Package atomicfile writes files so that a reader sees either the old
// content or the new, never a partial file: the data goes to a temporary
// file in the same directory, is synced, and is renamed over the target.
package atomicfile

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Write replaces path with data atomically (mode 0644), syncing the file
// before the rename.
func Write(path string, data []byte) error { return write(path, bytesFill(data), true, false) }

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
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	if err = fill(f); err == nil {
		err = f.Chmod(0o644)
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
		if d, err := os.Open(dir); err == nil {
			err = d.Sync()
			d.Close()
			if err != nil {
				return fmt.Errorf("sync %s: %w", dir, err)
			}
		}
	}
	return nil
}
