//go:build !amd64 && !arm64

package kernels

const bestLevel = LevelPortable

func runs(l Level) bool { return l == LevelPortable }
