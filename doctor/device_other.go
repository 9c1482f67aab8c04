//go:build !unix

package doctor

// deviceOf is unknown on this system: every directory counts as its own
// device.
func deviceOf(dir string) string { return "" }
