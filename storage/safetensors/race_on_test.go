//go:build race

package safetensors

const raceEnabled = true
