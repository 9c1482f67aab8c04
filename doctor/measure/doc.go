// Package measure holds k3's measurements of this machine and of the engine
// on it: disk reads done the way the engine reads (O_DIRECT into huge-page
// buffers, a chosen request size and queue depth, the page cache dropped),
// a probe file's write speed, RAM read bandwidth, kernel timing against it,
// the layer and stream benchmarks on generated checkpoints, and the timing
// of decode passes (MeasurePasses, MeasureOverlap, the per-layer times of
// Layer). Those decode through engine.Generate, as every generation does,
// and read its measurement of each pass (GenTrace.OnPass): the engine
// keeps no decode loop of its own for benchmarks.
//
// `k3 doctor` (package doctor) and `k3 bench` (ui/cli) both measure through
// it, so they report the same disk and RAM numbers from the same code. It
// sits above engine: the engine does not import it, nor the checkpoint
// generator it uses.
package measure
