package doctor

import "golang.org/x/sys/unix"

// fsType names the filesystem holding dir ("" if unknown or unremarkable).
func fsType(dir string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return ""
	}
	return fsTypeName(int64(st.Type))
}

// fsTypeName names the filesystems whose speed means something special.
func fsTypeName(magic int64) string {
	switch magic {
	case 0x01021994:
		return "tmpfs"
	case 0x858458f6:
		return "ramfs"
	case 0xef53:
		return "ext4"
	case 0x58465342:
		return "xfs"
	case 0x9123683e:
		return "btrfs"
	case 0x2fc12fc1:
		return "zfs"
	case 0x6969:
		return "nfs"
	case 0x65735546:
		return "fuse"
	case 0x794c7630:
		return "overlay"
	}
	return ""
}
