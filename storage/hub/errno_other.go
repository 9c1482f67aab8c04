//go:build !windows

package hub

import "syscall"

// errConnRefused is this system's error for a connection nothing accepts;
// osLocal and osTransient add the system's own codes to retryable's lists
// (none here: Unix reports the POSIX errors those lists hold).
var (
	errConnRefused error = syscall.ECONNREFUSED
	osLocal        []error
	osTransient    []error
)
