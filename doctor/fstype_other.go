//go:build unix && !linux

package doctor

func fsType(dir string) string { return "" }
