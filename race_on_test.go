//go:build race

package main

// raceEnabled: the race detector is on. Its shadow memory multiplies a
// process's resident size, so the tests that measure memory held
// (a process's base, bytes per tensor) are left to the plain run.
const raceEnabled = true
