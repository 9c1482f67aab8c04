package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unicode/utf8"
)

// virtualFile is a header followed by a zero-filled data region of any
// length, without allocating the region.
type virtualFile struct {
	head []byte
	size int64
}

func (v *virtualFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= v.size {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && off+int64(n) < v.size {
		if i := off + int64(n); i < int64(len(v.head)) {
			p[n] = v.head[i]
		} else {
			p[n] = 0
		}
		n++
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func seedHeaders(f *testing.F) {
	for _, p := range []string{
		stDir + "/model-00001-of-00002.safetensors",
		stDir + "/model-00002-of-00002.safetensors",
		"../../testdata/seed-v1/cache/model-00001-of-00001.safetensors",
	} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		n := binary.LittleEndian.Uint64(b)
		f.Add(b[8:8+n], int64(len(b))-8-int64(n))
	}
	f.Add([]byte(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[1,1,1,1],"data_offsets":[8,9]}}`), int64(16))
	f.Add([]byte(`{"__metadata__":{"k":"v\u00e9"},"\ud83d\ude00":{"dtype":"BF16","shape":[],"data_offsets":[0,2]}}`), int64(2))
	f.Add([]byte(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`), int64(2))
}

// FuzzParseHeader feeds arbitrary headers through the full single-file
// path. Accepted headers are cross-checked against encoding/json: they must
// be valid JSON, decode to the same tensors, and satisfy every invariant the
// reader promises.
func FuzzParseHeader(f *testing.F) {
	seedHeaders(f)
	f.Fuzz(func(t *testing.T, hdr []byte, dataLen int64) {
		if dataLen < 0 || dataLen > 1<<40 {
			return
		}
		head := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
		head = append(head, hdr...)
		size := int64(len(head)) + dataLen
		sh, err := readShard(&virtualFile{head: head, size: size}, size, "f")
		if err != nil {
			return
		}
		s, err := merge([]*shardFile{newShardFile(sh, nil, testSeed)}, testSeed)
		if err != nil {
			return
		}
		if !json.Valid(hdr) {
			t.Fatalf("accepted invalid JSON %q", hdr)
		}
		var ref map[string]json.RawMessage
		if err := json.Unmarshal(hdr, &ref); err != nil {
			t.Fatalf("encoding/json refuses an accepted header: %v", err)
		}
		_, hasMeta := ref[metadataKey]
		if want := len(ref) - map[bool]int{true: 1}[hasMeta]; s.Len() != want {
			t.Fatalf("%d tensors, encoding/json sees %d", s.Len(), want)
		}
		type span struct{ a, b int64 }
		var spans []span
		for _, name := range s.Names() {
			tn, ok := s.Get(name)
			if !ok || !utf8.ValidString(name) || name == "" {
				t.Fatalf("bad name %q", name)
			}
			var e struct {
				DType   string  `json:"dtype"`
				Shape   []int64 `json:"shape"`
				Offsets []int64 `json:"data_offsets"`
			}
			if err := json.Unmarshal(ref[name], &e); err != nil {
				t.Fatalf("%q: %v", name, err)
			}
			base := 8 + int64(len(hdr))
			if string(tn.DType) != e.DType || !slices.Equal(tn.Shape, e.Shape) || len(e.Offsets) != 2 ||
				tn.Offset != base+e.Offsets[0] || tn.Size != e.Offsets[1]-e.Offsets[0] {
				t.Fatalf("%q: %v disagrees with %+v", name, tn, e)
			}
			if len(tn.Shape) > MaxRank || tn.Numel()*tn.DType.Size() != tn.Size || tn.Offset+tn.Size > size {
				t.Fatalf("%q: invariant broken: %v", name, tn)
			}
			if tn.Size > 0 {
				spans = append(spans, span{tn.Offset, tn.Offset + tn.Size})
			}
		}
		slices.SortFunc(spans, func(x, y span) int { return int(min(max(x.a-y.a, -1), 1)) })
		for i := 1; i < len(spans); i++ {
			if spans[i].a < spans[i-1].b {
				t.Fatalf("overlapping spans accepted: %v", spans)
			}
		}
	})
}

// FuzzOpenIndex feeds arbitrary index files to the index parser and, via a
// real directory, to Open.
func FuzzOpenIndex(f *testing.F) {
	f.Add([]byte(`{"metadata":{"total_size":3},"weight_map":{"a":"model-00001-of-00001.safetensors","b":"model-00001-of-00001.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"model-00001-of-00001.safetensors"}}`))
	f.Add([]byte(`{"metadata":[1,2,{"x":null}],"weight_map":{}}`))
	f.Add([]byte(`{"weight_map":{"a":"../x"}}`))
	dir := f.TempDir()
	if err := WriteFile(filepath.Join(dir, "model-00001-of-00001.safetensors"), []WriteTensor{
		{Name: "a", DType: U8, Shape: []int64{1}, Data: []byte{1}},
		{Name: "b", DType: F16, Shape: []int64{1}, Data: []byte{0, 0x3c}},
	}, nil); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, idx []byte) {
		x, herr := parseIndex(string(idx))
		if herr == nil {
			if !json.Valid(idx) {
				t.Fatalf("accepted invalid JSON %q", idx)
			}
			var ref struct {
				WeightMap map[string]string `json:"weight_map"`
			}
			if err := json.Unmarshal(idx, &ref); err != nil {
				t.Fatalf("encoding/json refuses an accepted index: %v", err)
			}
			for _, e := range x.entries {
				if _, ok := ref.WeightMap[e.name]; !ok {
					t.Fatalf("%q not in encoding/json's weight_map", e.name)
				}
			}
			// The strict parser accepts it iff no name is repeated.
			ix, err := ParseIndex(idx)
			if (err == nil) != (len(ref.WeightMap) == len(x.entries)) {
				t.Fatalf("ParseIndex: %v with %d distinct names of %d", err, len(ref.WeightMap), len(x.entries))
			}
			if err == nil {
				for name, file := range ix.All() {
					if ref.WeightMap[name] != file {
						t.Fatalf("%q: %q, encoding/json says %q", name, file, ref.WeightMap[name])
					}
				}
			}
		} else if _, err := ParseIndex(idx); err == nil {
			t.Fatal("ParseIndex accepts what parseIndex refuses")
		}
		if err := os.WriteFile(filepath.Join(dir, IndexFile), idx, 0o644); err != nil {
			t.Fatal(err)
		}
		if s, err := Open(dir); err == nil {
			if s.Len() != 2 || !bytes.Equal([]byte(s.Names()[0]), []byte("a")) {
				t.Fatalf("opened %d tensors", s.Len())
			}
			s.Close()
		}
	})
}
