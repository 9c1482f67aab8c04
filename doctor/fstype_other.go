//go:build !linux

package doctor

func fsTypeName(magic int64) string { return "" }
