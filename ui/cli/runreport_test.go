package cli

import (
	"os"
	"path/filepath"
)

// Runs without --out write their report into a temporary directory, not
// into the package's directory (the C engine's k3_run.json in the working
// directory, see defaultRunOut).
func init() {
	dir, err := os.MkdirTemp("", "k3-cli-test")
	if err != nil {
		panic(err)
	}
	defaultRunOut = filepath.Join(dir, "k3_run.json")
}
