package doctor

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
