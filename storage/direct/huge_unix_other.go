//go:build unix && !linux

package direct

// adviseHuge: transparent huge pages are a Linux feature.
func adviseHuge(b []byte) bool { return false }
