package safetensors

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"unicode/utf8"

	"k3/storage/atomicfile"
)

// WriteTensor is one tensor to write: Data holds Numel*DType.Size()
// little-endian bytes.
type WriteTensor struct {
	Name  string
	DType DType
	Shape []int64
	Data  []byte
}

// headerSpec describes a tensor for header encoding.
type headerSpec struct {
	name  string
	dtype DType
	shape []int64
	size  int64
}

// dataAlign is the alignment of every tensor's data offset (and of the data
// region, via header padding).
const dataAlign = 8

func alignUp(n int64) int64 { return (n + dataAlign - 1) &^ (dataAlign - 1) }

// encodeHeader validates specs and lays them out in order with 8-aligned
// data offsets. It returns the header padded with spaces so that the data
// region starts 8-aligned, each tensor's start offset within the data
// region, and the data region's length.
func encodeHeader(specs []headerSpec, metadata map[string]string) (hdr []byte, starts []int64, dataLen int64, err error) {
	seen := make(map[string]struct{}, len(specs))
	starts = make([]int64, len(specs))
	hdr = make([]byte, 0, 64+len(specs)*128)
	hdr = append(hdr, '{')
	first := true
	if metadata != nil {
		if hdr, err = appendMetadata(hdr, metadata); err != nil {
			return nil, nil, 0, err
		}
		first = false
	}
	var off int64
	for i, sp := range specs {
		if err := sp.check(seen); err != nil {
			return nil, nil, 0, err
		}
		off = alignUp(off)
		if off < 0 || off > math.MaxInt64-sp.size {
			return nil, nil, 0, sp.errf("data too large")
		}
		starts[i] = off
		if !first {
			hdr = append(hdr, ',')
		}
		first = false
		hdr = sp.appendEntry(hdr, off)
		off += sp.size
	}
	hdr = append(hdr, '}')
	for (8+len(hdr))%dataAlign != 0 {
		hdr = append(hdr, ' ')
	}
	if len(hdr) > MaxHeaderLen {
		return nil, nil, 0, fmt.Errorf("safetensors: header of %d bytes exceeds the %d-byte limit", len(hdr), MaxHeaderLen)
	}
	return hdr, starts, off, nil
}

// appendMetadata appends the __metadata__ entry, its keys sorted.
func appendMetadata(hdr []byte, metadata map[string]string) ([]byte, error) {
	keys := make([]string, 0, len(metadata))
	for k, v := range metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, fmt.Errorf("safetensors: metadata %q is not valid UTF-8", k)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	hdr = appendJSONString(hdr, metadataKey)
	hdr = append(hdr, ":{"...)
	for i, k := range keys {
		if i > 0 {
			hdr = append(hdr, ',')
		}
		hdr = appendJSONString(hdr, k)
		hdr = append(hdr, ':')
		hdr = appendJSONString(hdr, metadata[k])
	}
	return append(hdr, '}'), nil
}

func (sp *headerSpec) errf(format string, args ...any) error {
	return fmt.Errorf("safetensors: tensor %q: %s", sp.name, fmt.Sprintf(format, args...))
}

// check refuses a bad or duplicate (in seen, which it adds to) name, an
// unknown dtype, and a shape that does not give the data's size.
func (sp *headerSpec) check(seen map[string]struct{}) error {
	switch {
	case sp.name == "":
		return sp.errf("empty name")
	case sp.name == metadataKey:
		return sp.errf("name is reserved")
	case !utf8.ValidString(sp.name):
		return sp.errf("name is not valid UTF-8")
	case !sp.dtype.Valid():
		return sp.errf("%s", unsupportedDType(string(sp.dtype)))
	case len(sp.shape) > MaxRank:
		return sp.errf("rank %d exceeds %d", len(sp.shape), MaxRank)
	}
	if _, dup := seen[sp.name]; dup {
		return sp.errf("duplicate name")
	}
	seen[sp.name] = struct{}{}
	numel, ok := shapeNumel(sp.shape)
	if !ok || numel > math.MaxInt64/sp.dtype.Size() {
		return sp.errf("invalid shape %v", sp.shape)
	}
	if want := numel * sp.dtype.Size(); want != sp.size {
		return sp.errf("%s%v needs %d bytes, data has %d", sp.dtype, sp.shape, want, sp.size)
	}
	return nil
}

// appendEntry appends the tensor's entry with its data at offset off.
func (sp *headerSpec) appendEntry(hdr []byte, off int64) []byte {
	hdr = appendJSONString(hdr, sp.name)
	hdr = append(hdr, `:{"dtype":"`...)
	hdr = append(hdr, sp.dtype...)
	hdr = append(hdr, `","shape":[`...)
	for j, d := range sp.shape {
		if j > 0 {
			hdr = append(hdr, ',')
		}
		hdr = strconv.AppendInt(hdr, d, 10)
	}
	hdr = append(hdr, `],"data_offsets":[`...)
	hdr = strconv.AppendInt(hdr, off, 10)
	hdr = append(hdr, ',')
	hdr = strconv.AppendInt(hdr, off+sp.size, 10)
	return append(hdr, "]}"...)
}

// shapeNumel returns the element count, false on a negative dim or overflow.
func shapeNumel(shape []int64) (int64, bool) {
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, false
		}
		if d == 0 {
			n = 0
		}
	}
	if n == 0 {
		return 0, true
	}
	for _, d := range shape {
		if n > math.MaxInt64/d {
			return 0, false
		}
		n *= d
	}
	return n, true
}

// appendJSONString appends s (valid UTF-8) as a JSON string literal.
func appendJSONString(b []byte, s string) []byte {
	const hexd = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\t':
			b = append(b, '\\', 't')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexd[c>>4], hexd[c&15])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// WriteFile writes tensors, in the given order, to a safetensors file at
// path. Each tensor's data offset is 8-byte aligned (gaps are zero-filled) and
// the header is padded with spaces so that the data region starts 8-aligned.
// metadata, if non-nil, becomes the header's __metadata__. The file is
// written to a temporary file in the same directory, synced, and renamed
// into place, so readers never see a partial file.
//
// Strict readers that require contiguous spans (the Rust safetensors crate)
// accept the output when every tensor's byte size is a multiple of 8.
func WriteFile(path string, tensors []WriteTensor, metadata map[string]string) error {
	specs := make([]headerSpec, len(tensors))
	for i, t := range tensors {
		specs[i] = headerSpec{name: t.Name, dtype: t.DType, shape: t.Shape, size: int64(len(t.Data))}
	}
	hdr, starts, dataLen, err := encodeHeader(specs, metadata)
	if err != nil {
		return err
	}
	return atomicfile.WriteFunc(path, func(w io.Writer) error {
		var lenBuf [8]byte
		binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(hdr)))
		w.Write(lenBuf[:])
		w.Write(hdr)
		var pos int64
		var zeros [dataAlign]byte
		for i, t := range tensors {
			w.Write(zeros[:starts[i]-pos])
			w.Write(t.Data)
			pos = starts[i] + int64(len(t.Data))
		}
		if pos != dataLen {
			return fmt.Errorf("safetensors: internal layout error (%d != %d)", pos, dataLen)
		}
		return nil
	})
}

// ShardName returns the conventional file name of shard n (1-based) of m:
// model-0000n-of-0000m.safetensors.
func ShardName(n, m int) string { return fmt.Sprintf("model-%05d-of-%05d.safetensors", n, m) }

// WriteSharded writes shards[i] to dir/ShardName(i+1, len(shards)) (each
// with __metadata__ {"format": "pt"}) and then dir/model.safetensors.index.json
// holding {"metadata": {"total_size": N}, "weight_map": {name: file}}, N being
// the sum of the tensors' data sizes. dir is created if needed. Tensor names
// must be unique across all shards, and no shard may be empty.
func WriteSharded(dir string, shards [][]WriteTensor) error {
	if len(shards) == 0 {
		return fmt.Errorf("safetensors: no shards to write")
	}
	if len(shards) > 99999 {
		return fmt.Errorf("safetensors: %d shards is too many", len(shards))
	}
	where := map[string]string{}
	var total int64
	for i, sh := range shards {
		if len(sh) == 0 {
			return fmt.Errorf("safetensors: shard %d is empty", i+1)
		}
		file := ShardName(i+1, len(shards))
		for _, t := range sh {
			if prev, dup := where[t.Name]; dup {
				return fmt.Errorf("safetensors: tensor %q is in both %s and %s", t.Name, prev, file)
			}
			where[t.Name] = file
			total += int64(len(t.Data))
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	for i, sh := range shards {
		if err := WriteFile(filepath.Join(dir, ShardName(i+1, len(shards))), sh, map[string]string{"format": "pt"}); err != nil {
			return err
		}
	}
	return WriteIndex(dir, where, total)
}

// WriteIndex writes dir/model.safetensors.index.json atomically:
// {"metadata": {"total_size": totalSize}, "weight_map": weightMap}, the
// names sorted, in the layout of the released checkpoint's index.
func WriteIndex(dir string, weightMap map[string]string, totalSize int64) error {
	return atomicfile.Write(filepath.Join(dir, IndexFile), encodeIndex(weightMap, totalSize))
}

// encodeIndex renders model.safetensors.index.json for a name -> file map.
func encodeIndex(where map[string]string, total int64) []byte {
	names := make([]string, 0, len(where))
	for n := range where {
		names = append(names, n)
	}
	slices.Sort(names)
	idx := make([]byte, 0, 64+len(names)*96)
	idx = append(idx, "{\n  \"metadata\": {\n    \"total_size\": "...)
	idx = strconv.AppendInt(idx, total, 10)
	idx = append(idx, "\n  },\n  \"weight_map\": {"...)
	for i, n := range names {
		if i > 0 {
			idx = append(idx, ',')
		}
		idx = append(idx, "\n    "...)
		idx = appendJSONString(idx, n)
		idx = append(idx, ": "...)
		idx = appendJSONString(idx, where[n])
	}
	return append(idx, "\n  }\n}\n"...)
}
