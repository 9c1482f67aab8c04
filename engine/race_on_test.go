//go:build race

package engine

// raceEnabled: the race detector is on. Its shadow memory multiplies the
// resident size, so the tests that measure peak RSS against the memory
// plan are left to the plain run.
const raceEnabled = true
