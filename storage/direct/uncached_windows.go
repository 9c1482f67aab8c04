package direct

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// UncachedName is how this system bypasses the page cache.
const UncachedName = "FILE_FLAG_NO_BUFFERING"

// openUncached opens the file unbuffered: os.OpenFile passes the FILE_FLAG_*
// bits of flag to CreateFile (and keeps its handling of drive letters, long
// paths and sharing). Unbuffered I/O needs offsets, lengths and addresses
// aligned to the volume's sector size, which Align (4096) covers.
func openUncached(path string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(path, flag|windows.FILE_FLAG_NO_BUFFERING, perm)
}

// osRefuses: an unbuffered request the volume cannot serve fails with
// ERROR_INVALID_PARAMETER (or ERROR_NOT_SUPPORTED on some redirectors).
func osRefuses(err error) bool {
	return errors.Is(err, windows.ERROR_INVALID_PARAMETER) || errors.Is(err, windows.ERROR_NOT_SUPPORTED)
}

// diskFull: Windows reports a full volume as ERROR_DISK_FULL or
// ERROR_HANDLE_DISK_FULL, never as ENOSPC.
func diskFull(err error) bool {
	return errors.Is(err, windows.ERROR_DISK_FULL) || errors.Is(err, windows.ERROR_HANDLE_DISK_FULL)
}
