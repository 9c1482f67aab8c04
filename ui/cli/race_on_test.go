//go:build race

package cli

// raceEnabled: the race detector is on. The benchmark tests, which decode
// hundreds of tokens per case to count bytes and acceptance, are left to
// the plain run: under the detector they alone took most of make race's
// 30 minutes, and they add no concurrency the engine's own race tests lack.
const raceEnabled = true
