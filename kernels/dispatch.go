package kernels

import (
	"fmt"
	"os"
	"sync/atomic"
)

// Level names an implementation of the hot loops. Every level gives results
// bit-identical to LevelPortable (see the contract in doc.go).
type Level int32

// Implementation levels; those of one architecture in increasing order of
// preference.
const (
	LevelPortable Level = iota // plain Go, every architecture
	LevelAVX2                  // amd64 AVX2 + FMA
	LevelAVX512                // amd64 AVX-512 F/BW/DQ/VL/VBMI
	LevelNEON                  // arm64 Advanced SIMD (ASIMD)
)

func (l Level) String() string {
	switch l {
	case LevelPortable:
		return "portable"
	case LevelAVX2:
		return "avx2"
	case LevelAVX512:
		return "avx512"
	case LevelNEON:
		return "neon"
	}
	return fmt.Sprintf("level(%d)", int32(l))
}

// level is the implementation in use; read on every kernel call.
var level atomic.Int32

// PortableEnv is the environment variable that, when set to a non-empty
// value other than "0", forces the portable path at start-up.
const PortableEnv = "K3_PORTABLE"

func init() {
	l := BestLevel()
	if v := os.Getenv(PortableEnv); v != "" && v != "0" {
		l = LevelPortable
	}
	level.Store(int32(l))
}

// BestLevel is the fastest level this CPU supports.
func BestLevel() Level { return bestLevel }

// Levels lists the levels this CPU runs, portable first and BestLevel last.
func Levels() []Level {
	var ls []Level
	for l := LevelPortable; l <= bestLevel; l++ {
		if runs(l) {
			ls = append(ls, l)
		}
	}
	return ls
}

// CurrentLevel is the level the kernels use now.
func CurrentLevel() Level { return Level(level.Load()) }

// SetLevel switches the implementation (clamped to what the CPU supports:
// above BestLevel means BestLevel, another architecture's level means
// portable) and returns the previous level. It is meant for tests and benchmarks; do
// not call it while kernels run on other goroutines if you need a definite
// level for those calls (results are identical either way).
func SetLevel(l Level) Level {
	if l > bestLevel {
		l = bestLevel
	}
	if l < LevelPortable || !runs(l) {
		l = LevelPortable
	}
	return Level(level.Swap(int32(l)))
}

// Contract is the version of the floating-point contract (doc.go): the
// reduction orders every level follows. A change that gives other bits
// bumps it, so results kept across runs (the prompt cache's state
// snapshots) made under another contract are not reused.
const Contract = 1
