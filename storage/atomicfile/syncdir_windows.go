package atomicfile

// syncDir does nothing on Windows: a directory handle cannot be flushed
// (FlushFileBuffers on it fails with "Access denied"), and NTFS records the
// rename (MoveFileEx, which os.Rename calls) in its metadata journal.
func syncDir(dir string) error { return nil }
