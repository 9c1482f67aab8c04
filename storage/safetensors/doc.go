// Package safetensors reads and writes the safetensors container format used
// by the Kimi K3 checkpoint: one file, or a directory holding a sharded set
// (model-0000N-of-0000M.safetensors, optionally described by
// model.safetensors.index.json).
//
// A safetensors file is
//
//	u64 little-endian N | N bytes of JSON header | data region
//
// where the header maps tensor names to {"dtype", "shape", "data_offsets"}
// entries (offsets relative to the start of the data region) plus an optional
// "__metadata__" object of string values.
//
// The reader is deliberately strict: the header is parsed by a hand-written
// JSON scanner (fast enough to index the released checkpoint's ~497k tensors
// across 96 shards in a fraction of a second, and able to see duplicate keys
// that encoding/json would silently merge), every span is checked against the
// shape, the dtype and the file size, and spans may not overlap. Any
// malformed input yields a *FormatError naming the file and, where there is
// one, the tensor; no input makes the package panic.
//
// Only the dtypes the engine needs are accepted: F32, BF16, F16 and U8, with
// rank 0 to 4.
package safetensors
