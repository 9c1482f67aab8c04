//go:build !(linux || darwin)

// Command faults runs the fault matrix on Linux and macOS (it needs named
// pipes, tmpfs mounts and POSIX signals).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "faults: the fault matrix runs on Linux and macOS")
	os.Exit(2)
}
