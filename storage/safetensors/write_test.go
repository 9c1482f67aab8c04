package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func sampleTensors() []WriteTensor {
	return []WriteTensor{
		{Name: "odd.u8", DType: U8, Shape: []int64{3}, Data: []byte{1, 2, 3}},
		{Name: "w.f32", DType: F32, Shape: []int64{2, 2}, Data: EncodeF32([]float32{1, -2, 3.5, 1e-3})},
		{Name: "scalar", DType: F32, Shape: []int64{}, Data: EncodeF32([]float32{7})},
		{Name: "h.f16", DType: F16, Shape: []int64{5}, Data: EncodeF16([]float32{0.5, -1, 65504, 6e-8, 2})},
		{Name: "empty", DType: BF16, Shape: []int64{0, 4}, Data: nil},
		{Name: "b.bf16", DType: BF16, Shape: []int64{1, 1, 1, 3}, Data: EncodeBF16([]float32{1, 2.5, -0.125})},
		{Name: "quo\"te\\ \n tab\t ctl\x01 é 😀", DType: U8, Shape: []int64{1}, Data: []byte{9}},
	}
}

func TestWriteFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.safetensors")
	in := sampleTensors()
	meta := map[string]string{"format": "pt", "note": "é \"q\""}
	if err := WriteFile(path, in, meta); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(raw)
	if (8+n)%8 != 0 {
		t.Errorf("data region starts at %d, not 8-aligned", 8+n)
	}
	var generic map[string]json.RawMessage
	if err := json.Unmarshal(raw[8:8+n], &generic); err != nil || len(generic) != len(in)+1 {
		t.Fatalf("header is not the expected JSON: %v (%d keys)", err, len(generic))
	}
	s, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Len() != len(in) {
		t.Fatalf("Len = %d", s.Len())
	}
	if got := s.Files()[0].Metadata; len(got) != 2 || got["note"] != meta["note"] {
		t.Errorf("metadata = %v", got)
	}
	prevEnd := int64(0)
	for _, w := range in {
		tn, ok := s.Get(w.Name)
		if !ok {
			t.Fatalf("%q missing", w.Name)
		}
		if tn.DType != w.DType || !slices.Equal(tn.Shape, w.Shape) || tn.Size != int64(len(w.Data)) || tn.Offset%8 != 0 {
			t.Errorf("%q: %v", w.Name, tn)
		}
		if tn.Offset < prevEnd {
			t.Errorf("%q: not laid out in order", w.Name)
		}
		prevEnd = tn.Offset + tn.Size
		got := make([]byte, tn.Size)
		if err := s.ReadTensor(tn, got); err != nil || !bytes.Equal(got, w.Data) {
			t.Errorf("%q: data %v, err %v", w.Name, got, err)
		}
	}
	if prevEnd != int64(len(raw)) {
		t.Errorf("file has %d bytes, data ends at %d", len(raw), prevEnd)
	}
	tn, _ := s.Get("h.f16")
	f := make([]float32, 5)
	if err := s.ReadFloat32(tn, f); err != nil || !slices.Equal(f, []float32{0.5, -1, 65504, F16ToFloat32(Float32ToF16(6e-8)), 2}) {
		t.Errorf("f16 = %v %v", f, err)
	}
	tn, _ = s.Get("b.bf16")
	if err := s.ReadFloat32(tn, f); err != nil || !slices.Equal(f[:3], []float32{1, 2.5, -0.125}) {
		t.Errorf("bf16 = %v %v", f, err)
	}
	// Re-writing the seed fixture's tensors reproduces them.
	seed, err := Open(stDir)
	if err != nil {
		t.Fatal(err)
	}
	defer seed.Close()
	var again []WriteTensor
	for _, name := range seed.Names() {
		tn, _ := seed.Get(name)
		b := make([]byte, tn.Size)
		if err := seed.ReadTensor(tn, b); err != nil {
			t.Fatal(err)
		}
		again = append(again, WriteTensor{Name: name, DType: tn.DType, Shape: tn.Shape, Data: b})
	}
	p2 := filepath.Join(t.TempDir(), "seed.safetensors")
	if err := WriteFile(p2, again, nil); err != nil {
		t.Fatal(err)
	}
	s2, err := OpenFile(p2)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	for _, w := range again {
		tn, _ := s2.Get(w.Name)
		b := make([]byte, tn.Size)
		if err := s2.ReadTensor(tn, b); err != nil || !bytes.Equal(b, w.Data) || tn.DType != w.DType || !slices.Equal(tn.Shape, w.Shape) {
			t.Errorf("%q differs after rewrite", w.Name)
		}
	}
}

func TestWriteFileRefuses(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.safetensors")
	for name, ts := range map[string][]WriteTensor{
		"size mismatch":  {{Name: "a", DType: F32, Shape: []int64{2}, Data: make([]byte, 4)}},
		"bad dtype":      {{Name: "a", DType: "F64", Shape: []int64{1}, Data: make([]byte, 8)}},
		"negative dim":   {{Name: "a", DType: U8, Shape: []int64{-1}}},
		"rank 5":         {{Name: "a", DType: U8, Shape: []int64{1, 1, 1, 1, 1}, Data: []byte{1}}},
		"duplicate":      {{Name: "a", DType: U8, Shape: []int64{1}, Data: []byte{1}}, {Name: "a", DType: U8, Shape: []int64{1}, Data: []byte{1}}},
		"empty name":     {{Name: "", DType: U8, Shape: []int64{1}, Data: []byte{1}}},
		"reserved name":  {{Name: "__metadata__", DType: U8, Shape: []int64{1}, Data: []byte{1}}},
		"invalid UTF-8":  {{Name: "a\xff", DType: U8, Shape: []int64{1}, Data: []byte{1}}},
		"numel overflow": {{Name: "a", DType: U8, Shape: []int64{1 << 40, 1 << 40}}},
	} {
		if err := WriteFile(path, ts, nil); err == nil {
			t.Errorf("%s: WriteFile succeeded", name)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("failed writes left files behind: %v", ents)
	}
}

func TestWriteSharded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "model")
	all := sampleTensors()
	shards := [][]WriteTensor{all[:3], all[3:4], all[4:]}
	if err := WriteSharded(dir, shards); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	var idx struct {
		Metadata  map[string]int64  `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(raw, &idx); err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, w := range all {
		total += int64(len(w.Data))
	}
	if idx.Metadata["total_size"] != total || len(idx.WeightMap) != len(all) || idx.WeightMap["h.f16"] != "model-00002-of-00003.safetensors" {
		t.Fatalf("index = %+v", idx)
	}
	for pass := range 2 {
		if pass == 1 { // without the index: the glob path
			os.Remove(filepath.Join(dir, IndexFile))
		}
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		files := s.Files()
		if s.Len() != len(all) || len(files) != 3 || filepath.Base(files[2].Path) != "model-00003-of-00003.safetensors" || files[0].Metadata["format"] != "pt" {
			t.Fatalf("pass %d: %d tensors, files %+v", pass, s.Len(), files)
		}
		for i, sh := range shards {
			for _, w := range sh {
				tn, ok := s.Get(w.Name)
				b := make([]byte, len(w.Data))
				if !ok || tn.Path != files[i].Path || s.ReadTensor(tn, b) != nil || !bytes.Equal(b, w.Data) {
					t.Errorf("pass %d: %q wrong", pass, w.Name)
				}
			}
		}
		s.Close()
	}
	if err := WriteSharded(t.TempDir(), [][]WriteTensor{all[:2], all[1:3]}); err == nil {
		t.Error("WriteSharded accepted a name in two shards")
	}
	if err := WriteSharded(t.TempDir(), [][]WriteTensor{all[:2], nil}); err == nil {
		t.Error("WriteSharded accepted an empty shard")
	}
}

// TestManyTensors exercises the concurrent merge and index cross-check
// (several shards, more index entries than one cross-check chunk) and their
// serial fallbacks for error reporting.
func TestManyTensors(t *testing.T) {
	dir := t.TempDir()
	shards := make([][]WriteTensor, 4)
	for i := range shards {
		for j := range 5000 {
			shards[i] = append(shards[i], WriteTensor{Name: fmt.Sprintf("layers.%d.t%d", i, j), DType: U8, Shape: []int64{1}, Data: []byte{byte(i + j)}})
		}
	}
	if err := WriteSharded(dir, shards); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	tn, ok := s.Get("layers.3.t4999")
	b := make([]byte, 1)
	if s.Len() != 20000 || !ok || s.ReadTensor(tn, b) != nil || b[0] != byte((3+4999)%256) {
		t.Fatalf("Len %d, %v", s.Len(), tn)
	}
	s.Close()
	// The same name in shards 2 and 4 (and 3): the first in shard order
	// is reported, however the concurrent insert interleaves.
	for i := 1; i < 4; i++ {
		shards[i][4000].Name = "shared"
	}
	dir2 := t.TempDir()
	for i, sh := range shards {
		if err := WriteFile(filepath.Join(dir2, ShardName(i+1, 4)), sh, nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		_, err = Open(dir2)
		var fe *FormatError
		if !errors.As(err, &fe) || fe.Tensor != "shared" || fe.Path != filepath.Join(dir2, ShardName(3, 4)) || fe.Msg != "tensor is also present in "+filepath.Join(dir2, ShardName(2, 4)) {
			t.Fatalf("err = %v", err)
		}
	}
}
