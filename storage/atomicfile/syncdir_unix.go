//go:build !windows

package atomicfile

import "os"

// syncDir fsyncs the directory, so a rename into it survives a crash. A
// directory that cannot be opened is left alone (the rename itself
// succeeded).
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return nil
	}
	err = d.Sync()
	d.Close()
	return err
}
