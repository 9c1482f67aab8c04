//go:build !amd64

package kernels

const bestLevel = LevelPortable
