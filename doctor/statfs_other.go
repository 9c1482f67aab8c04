//go:build !unix

package doctor

type fsInfo struct {
	free, total uint64
	device      string
	fstype      string
}

// statFS is not implemented on this system: free space reads as 0 and the
// report says so.
func statFS(dir string) fsInfo { return fsInfo{} }
