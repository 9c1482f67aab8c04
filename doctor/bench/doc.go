// Package bench computes the reports of `k3 bench` as rows: Compress,
// Layer and Spec run doctor/measure's measurements (disk, RAM, kernels,
// decode passes through engine.Generate) and project them onto the
// released model with doctor's cost model. Each row is one JSON line of
// `k3 bench WHAT --json`; ui/cli parses the flags and prints the rows, as
// JSON or as the tables.
//
// It sits above doctor, which sits above doctor/measure (doctor's own disk
// and kernel checks use measure, so measure cannot use doctor's model).
package bench
