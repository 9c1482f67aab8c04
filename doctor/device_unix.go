//go:build unix

package doctor

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// deviceOf returns "major:minor" of the filesystem holding dir ("" if
// unknown).
func deviceOf(dir string) string {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return ""
	}
	return fmt.Sprintf("%d:%d", unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)))
}
