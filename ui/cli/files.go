package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"k3/storage/atomicfile"
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
		return err
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}
