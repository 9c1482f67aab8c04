module k3

go 1.26.0

require (
	github.com/shirou/gopsutil/v4 v4.26.10 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
