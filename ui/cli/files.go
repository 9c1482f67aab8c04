package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k3/storage/atomicfile"
	"k3/storage/units"
)

// writeAtomic writes a result file atomically.
var writeAtomic = atomicfile.Write

// checkWritable fails early when path cannot be written (its directory is
// missing or read-only, or it is a directory).
func checkWritable(path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".probe*")
	if err != nil {
		// the probe's own name says nothing to the user
		var pe *os.PathError
		if errors.As(err, &pe) {
			return fmt.Errorf("the folder %s: %w", filepath.Dir(path), pe.Err)
		}
		return err
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// noteStale says what CleanStale removed: temporary files that a run of
// the same command, killed before it could clean up, left behind.
func noteStale(w io.Writer, cmd string, removed []atomicfile.Stale, err error) {
	if len(removed) > 0 {
		parts := make([]string, len(removed))
		for i, s := range removed {
			parts[i] = fmt.Sprintf("%s (%s)", s.Path, units.Bytes(s.Size))
		}
		fmt.Fprintf(w, "note: removed %d temporary file(s) an interrupted k3 %s left: %s\n", len(removed), cmd, strings.Join(parts, ", "))
	}
	if err != nil {
		fmt.Fprintf(w, "note: could not remove every stale temporary file: %v\n", err)
	}
}

// cleanStaleFiles removes the stale temporary files of atomic writes of
// paths (empty ones skipped) and says so.
func cleanStaleFiles(w io.Writer, cmd string, paths ...string) {
	var all []atomicfile.Stale
	var errs []error
	for _, p := range paths {
		if p == "" {
			continue
		}
		s, err := atomicfile.CleanStale(p)
		all = append(all, s...)
		errs = append(errs, err)
	}
	noteStale(w, cmd, all, errors.Join(errs...))
}

// checkDirWritable fails early when the files could not be written in dir:
// dir exists and they are writable there, or dir can be created (its
// nearest existing ancestor is a writable directory). Nothing is created.
func checkDirWritable(dir string, files ...string) error {
	st, err := os.Stat(dir)
	if err == nil {
		if !st.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		for _, f := range files {
			if err := checkWritable(filepath.Join(dir, f)); err != nil {
				return err
			}
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for p := filepath.Dir(filepath.Clean(dir)); ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err == nil {
			if !st.IsDir() {
				return fmt.Errorf("%s is not a directory", p)
			}
			return checkWritable(filepath.Join(p, "probe"))
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if filepath.Dir(p) == p {
			return err
		}
	}
}
