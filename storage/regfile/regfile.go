// Package regfile reads files that must be regular files. Opening a named
// pipe blocks until a writer appears, and a device or socket is never a
// checkpoint, config or state file: such paths are refused before they are
// opened, with the kind of file named.
package regfile

import (
	"errors"
	"io/fs"
	"os"
)

// ErrNotRegular is wrapped (in an *fs.PathError) for paths that are not
// regular files.
var ErrNotRegular = errors.New("not a regular file")

// NotRegularError says what kind of file a path is instead.
type NotRegularError struct{ Kind string }

func (e *NotRegularError) Error() string { return "not a regular file (" + e.Kind + ")" }

func (e *NotRegularError) Is(target error) bool { return target == ErrNotRegular }

// Check stats path (following symlinks) and refuses anything but a regular
// file; a missing file gives an error satisfying errors.Is(err,
// fs.ErrNotExist).
func Check(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	return checkMode(path, fi.Mode())
}

func checkMode(path string, m fs.FileMode) error {
	if m.IsRegular() {
		return nil
	}
	kind := "special file"
	switch {
	case m.IsDir():
		kind = "a directory"
	case m&fs.ModeNamedPipe != 0:
		kind = "a named pipe"
	case m&fs.ModeSocket != 0:
		kind = "a socket"
	case m&fs.ModeCharDevice != 0:
		kind = "a character device"
	case m&fs.ModeDevice != 0:
		kind = "a device"
	}
	return &fs.PathError{Op: "open", Path: path, Err: &NotRegularError{kind}}
}

// ReadFile is os.ReadFile for a path that must be a regular file.
func ReadFile(path string) ([]byte, error) {
	if err := Check(path); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}

// Open is os.Open for a path that must be a regular file; the opened file
// is checked again (the path may have changed in between).
func Open(path string) (*os.File, error) {
	if err := Check(path); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = checkMode(path, fi.Mode())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
