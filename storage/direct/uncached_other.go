//go:build !linux && !darwin && !windows

package direct

import "os"

// UncachedName is how this system would bypass the page cache: it does not.
const UncachedName = "uncached I/O"

func openUncached(path string, flag int, perm os.FileMode) (*os.File, error) {
	return nil, ErrNoUncached
}

func osRefuses(err error) bool { return false }

func diskFull(err error) bool { return false }
