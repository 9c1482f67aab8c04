package direct

import (
	"os"

	"golang.org/x/sys/unix"
)

// adviseHuge asks for transparent huge pages; THP mode "madvise" (the
// development machines' setting) only backs advised regions with them.
func adviseHuge(b []byte) bool { return unix.Madvise(b, unix.MADV_HUGEPAGE) == nil }

// dropCache tells the kernel the file's cached pages are not needed.
func dropCache(f *os.File) error { return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED) }
