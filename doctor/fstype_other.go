//go:build unix && !linux

package doctor

func fsTypeName(magic int64) string { return "" }
