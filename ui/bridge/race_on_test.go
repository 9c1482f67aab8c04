//go:build race

package bridge

// raceEnabled: the race detector is on; it keeps shadow memory for every
// allocation, so measured memory says nothing of the plan.
const raceEnabled = true
