//go:build !linux

package doctor

func fsType(dir string) string { return "" }
