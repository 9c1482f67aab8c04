//go:build unix

package doctor

import (
	"fmt"

	"golang.org/x/sys/unix"
)

type fsInfo struct {
	free, total uint64
	device      string // "major:minor" of the filesystem holding the path
	fstype      string
}

func statFS(dir string) fsInfo {
	var fi fsInfo
	var s unix.Statfs_t
	if err := unix.Statfs(dir, &s); err == nil {
		fi.free = uint64(s.Bavail) * uint64(s.Bsize)
		fi.total = uint64(s.Blocks) * uint64(s.Bsize)
		fi.fstype = fsTypeName(int64(s.Type))
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err == nil {
		fi.device = fmt.Sprintf("%d:%d", unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)))
	}
	return fi
}
