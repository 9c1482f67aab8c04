package kernels

import "golang.org/x/sys/cpu"

var bestLevel = detectLevel()

// detectLevel: ASIMD (with scalar FP) is part of ARMv8-A, so every arm64
// machine k3 targets has it; the check keeps a kernel without it portable.
func detectLevel() Level {
	if cpu.ARM64.HasASIMD && cpu.ARM64.HasFP {
		return LevelNEON
	}
	return LevelPortable
}

// runs reports whether l is portable or NEON on a CPU that has it.
func runs(l Level) bool { return l == LevelPortable || l == bestLevel }
