// Package trunk packs the dense part of a Kimi K3 checkpoint (everything but
// the routed experts) into one file the engine can stream layer by layer
// with large O_DIRECT reads, and reads it back.
//
// # Why
//
// In the released checkpoint the trunk of a layer (attention, norms, router,
// shared experts: ~1.2 GB) is interleaved with its 896 routed experts and
// may be split across shards, so reading one layer's trunk costs dozens of
// small reads. A packed trunk turns it into one aligned read per layer (at
// ~3.6 GB/s on the development machines: a 1.2 GB layer in ~0.33 s).
//
// # Files
//
// A trunk directory holds
//
//	trunk.bin           the packed bytes
//	trunk.json          the manifest; present only when the trunk is complete
//	trunk.partial.json  while packing: the manifest plus the runs done so far
//
// # trunk.bin
//
// A sequence of runs. Every run starts at a multiple of 4096 bytes and its
// length is its data rounded up to 4096 (the gap filled with zeros), so an
// O_DIRECT read of a whole run never overruns the file. The runs, in file
// order, are
//
//	"embed"    model.embed_tokens.weight
//	"head"     lm_head.weight
//	"final"    model.norm.weight, model.output_attn_res_norm.weight,
//	           model.output_attn_res_proj.weight
//	"layer.0" ... "layer.N-1"
//	           every tensor named [prefix]model.layers.{i}.* except the routed
//	           experts (names containing ".block_sparse_moe.experts.")
//
// where prefix is "language_model." (the release) or "" (text-only
// converters), and N is one more than the highest layer index found (every
// layer 0..N-1 must have trunk tensors). The first run starts at offset 0;
// each following run starts at the previous run's end (there are no gaps).
//
// Inside a run each tensor starts at a multiple of 64 bytes relative to the
// run start (zero bytes in between), so the engine can alias bf16 and f32
// slices of a 2 MiB-aligned read buffer in place. Tensors are placed in
// source order: by shard (the order of source.files), then by their byte
// offset in that shard. This is deterministic for a given checkpoint and
// makes reading the source sequential. Tensors keep their on-disk dtype and
// bytes exactly, except in a compressed trunk (below).
//
// # Compressed trunks
//
// Packed with compression (k3 pack --compress, Options.Compress), the
// matrices the engine reads only by rows — the embedding, lm_head and the
// layers' projection, router and expert-latent matrices, non-empty 2-D
// BF16 with at least 32 columns (see Compressible) — are stored in the
// kernels' lossless BF16C form, serialised as kernels.BF16CBytes writes
// it: Rows+1 little-endian uint64 row offsets (the first 0, the last the
// length of the rows), then the rows (each 32-weight block a base exponent
// and 4-bit offsets, or raw). Every weight decodes to its bf16 bits, so
// the engine's output is the same bit for bit. Left as they are: norms and
// vectors, f32 tensors, the [1, hidden] AttnRes projections (read as
// vectors) and self_attn.kv_b_proj.weight (read column-wise). A tensor's
// stored size then depends on its values, so its place is known only once
// the tensors before it are written: runs still follow one another and
// tensors still sit at multiples of 64 (so the row offsets are 8-byte
// aligned in a run buffer), but nothing else about the places can be
// predicted from the checkpoint's headers.
//
// The engine reads a compressed layer as it is stored, except when a run's
// trunk budget holds the whole trunk at its bf16 size: then the memory
// plan (engine/plan.Make) pins every layer expanded, and the engine
// decodes each layer as it loads it into the layout Run.Expanded gives
// (the uncompressed pack's run, byte for byte) and frees the compressed
// bytes. The reason is where each layer's time goes: a layer held in RAM
// is read by mat-vecs limited by compute, which BF16C's decode makes
// slower than bf16's, while a layer read from disk is limited by the disk,
// and BF16C reads fewer bytes. So a run with everything pinned computes at
// bf16's speed, and every other run keeps its layers compressed, pinned
// and streamed: more of them pin in the budget, and each streamed one
// reads fewer bytes. The model tables stay compressed. docs/BENCHMARKS.md
// has the measurements.
//
// # trunk.json
//
//	{"format": "k3-trunk", "version": 4,
//	 "compression": "BF16C",                           // only in a compressed trunk
//	 "source": {"files": [{"name": "model-00001-of-00096.safetensors", "size": 123,
//	                       "mtime_ns": 1764581860920324731,   // modification time when packed
//	                       "header_sha256": "9f2c..."}, ...], // SHA-256 of the length + header
//	            "prefix": "language_model.",
//	            "weights_sha256": "5d1e..."},        // sampled content of the runs' tensors
//	 "runs": [{"name": "layer.0", "layer": 0,        // -1 for embed, head, final
//	           "offset": 4096, "length": 8192,       // in trunk.bin; both multiples of 4096
//	           "data_bytes": 5000,                   // length without the tail padding
//	           "crc32c": 1234,                       // CRC-32C (Castagnoli) of all length bytes
//	           "tensors": [{"name": "language_model.model.layers.0.input_layernorm.weight",
//	                        "dtype": "BF16", "shape": [7168],
//	                        "offset": 0,             // relative to the run start, multiple of 64
//	                        "size": 14336}, ...]}, ...],
//	 "total_bytes": 12288}                            // size of trunk.bin
//
// A compressed tensor has "dtype": "BF16C", its logical shape [rows, cols]
// (the checkpoint's; the source tensor is BF16) and "size" the stored
// bytes, which must lie between the serialised sizes of the matrix with
// every full block compressed and with every one raw, and differ from the
// first by a multiple of 16 (a raw block is 16 bytes longer). BF16C
// tensors appear only when "compression" is "BF16C", and "compression"
// only from version 3 on; version 2 (the same without compression) is
// read as it is. "weights_sha256" (version 4 on) is
// safetensors.Set.SampleDigest over every tensor of the runs in order: the
// first, middle and last 4 KiB of each, so a fine-tune of the same layout
// whose files keep the original times is told apart by reading a few
// blocks per tensor. A version 2 or 3 trunk is read, but CheckSet refuses
// it until k3 pack has compared its runs with the checkpoint and recorded
// the fingerprint (trunk.bin is kept).
//
// source identifies the checkpoint the trunk was packed from: the base
// names, sizes, modification times and header hashes of its safetensors
// files in shard order, and the tensor name prefix; the runs' crc32c
// identify the packed content. ParseManifest (used by Open) checks every
// rule above and refuses anything else with a message naming the problem.
// Trunk.CheckSet refuses a trunk for a checkpoint whose files differ in
// name, size, header or modification time, or in the weights fingerprint,
// or whose tensors' dtypes,
// shapes and places differ from trunk.json's (for a compressed trunk: the
// tensors, their order, dtypes — BF16C standing for BF16 — and shapes, as
// the places depend on the compressed sizes). Pack, finding a complete
// trunk whose checkpoint files were modified since (or a version 1
// trunk.json, which had names and sizes only), gathers (and compresses)
// the runs drawn from those files again and compares their CRCs: equal, it keeps trunk.bin and
// rewrites trunk.json with the current identity; different, it refuses
// (Options.Force repacks). A resumed pack packs again the runs drawn from
// files modified since it was interrupted.
//
// trunk.partial.json has the same fields plus "done": the names of the runs
// written and verified so far (their crc32c is set; the others' is 0). In
// a compressed pack the runs not done yet are placed provisionally, their
// BF16C tensors at the largest size their shape allows, after the last run
// written.
//
// # Packing
//
// Pack gathers each run's tensors from wherever they are (several shards,
// not contiguous), reading runs of adjacent tensors with large sequential
// O_DIRECT reads into huge-page buffers, assembling the run in staging
// buffers and writing them with O_DIRECT while the next chunk is read.
// After each run it re-reads the run from trunk.bin (O_DIRECT, so from the
// device), checks the CRC and records the run in trunk.partial.json
// (written atomically). An interrupted pack resumes: the runs the partial
// file lists are re-verified (a corrupted one is rewritten) and packing
// continues. trunk.bin is fsynced and trunk.json renamed into place only
// after every run is written and verified; trunk.partial.json is then
// removed. A trunk directory packed from another checkpoint is refused
// (Options.Force starts over); a complete trunk of the same checkpoint is
// left untouched.
//
// With compression the rows of a BF16C tensor are compressed a chunk of
// rows (about 4 MiB, cut into one part per processor compressed in
// parallel) at a time as they arrive in the staging buffers, so the pack's
// memory stays three buffers plus the row chunk, its compressed form and
// one offset per row of the tensor in progress. The tensor's row offsets, which come
// first, are known only after its last row: when the staging buffer
// holding them has already been written, they are written afterwards over
// the zeros left in their place (rewriting those pages), and the run's
// CRC is corrected for them (the CRC is linear). Runs are written in order
// and a resumed compressed pack keeps the runs done before the first one
// it has to pack again (a corrupt or modified one) and packs the rest,
// since their places depend on it. trunk.bin is not reserved ahead (its
// size is known only at the end) and is cut to its size before the
// fsync; the free-space check asks for the uncompressed size. Packing with
// the other compression setting into a directory holding a complete or
// interrupted trunk of the same checkpoint is refused (Options.Force
// repacks), so a trunk is never a mix of both.
package trunk
