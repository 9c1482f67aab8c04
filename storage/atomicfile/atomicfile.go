// Package atomicfile writes files so that a reader sees either the old
// content or the new, never a partial file: the data goes to a temporary
// file in the same directory, is synced, and is renamed over the target.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces path with data atomically (mode 0644), syncing the file
// before the rename.
func Write(path string, data []byte) error { return write(path, data, true, false) }

// WriteDurable is Write followed by a sync of the directory, so the new name
// survives a crash.
func WriteDurable(path string, data []byte) error { return write(path, data, true, true) }

// WriteNoSync is Write without any fsync: for progress records whose loss
// in a crash costs only progress (a reader must verify what they claim).
func WriteNoSync(path string, data []byte) error { return write(path, data, false, false) }

func write(path string, data []byte, fileSync, dirSync bool) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	if _, err = f.Write(data); err == nil {
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
		return fmt.Errorf("write %s: %w", path, err)
	}
	if dirSync {
		if err := syncDir(dir); err != nil {
			return fmt.Errorf("sync %s: %w", dir, err)
		}
	}
	return nil
}
