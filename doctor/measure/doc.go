// Package measure holds k3's measurements of this machine and of the engine
// on it: disk reads done the way the engine reads (O_DIRECT into huge-page
// buffers, a chosen request size and queue depth, the page cache dropped),
// a probe file's write speed, RAM read bandwidth, kernel timing against it,
// and the layer and stream benchmarks on generated checkpoints.
//
// `k3 doctor` (package doctor) and `k3 bench` (ui/cli) both measure through
// it, so they report the same disk and RAM numbers from the same code. It
// sits above engine: the engine does not import it, nor the checkpoint
// generator it uses.
package measure
