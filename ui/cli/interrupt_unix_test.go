//go:build !windows

package cli

import (
	"os"
	"syscall"
)

// interruptSelf is a Ctrl-C: SIGINT to this process.
func interruptSelf() error { return syscall.Kill(os.Getpid(), syscall.SIGINT) }
