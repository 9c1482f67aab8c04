package kernels

import "golang.org/x/sys/cpu"

var bestLevel = detectLevel()

func detectLevel() Level {
	x := cpu.X86
	if x.HasAVX512F && x.HasAVX512BW && x.HasAVX512DQ && x.HasAVX512VL && x.HasAVX512VBMI && x.HasAVX2 && x.HasFMA {
		return LevelAVX512
	}
	if x.HasAVX2 && x.HasFMA {
		return LevelAVX2
	}
	return LevelPortable
}

// runs reports whether l is an amd64 level this CPU has.
func runs(l Level) bool { return l <= bestLevel && l <= LevelAVX512 }
