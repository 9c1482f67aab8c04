package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

const stDir = "../../testdata/seed-v1/st"

func f32bits(v float32) uint32 { return math.Float32bits(v) }

// The expected values below were obtained independently with python3
// (struct.unpack '<f' / '<e' on the fixture bytes, and bf16 as the high half
// of a float32), not with this package.
func TestSeedFixtures(t *testing.T) {
	s, err := Open(stDir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Len() != 13 {
		t.Fatalf("Len = %d, want 13", s.Len())
	}
	files := s.Files()
	if len(files) != 2 ||
		files[0].Path != filepath.Join(stDir, "model-00001-of-00002.safetensors") || files[0].Size != 2906 || files[0].HeaderLen != 1022 || files[0].NumTensors != 10 ||
		files[1].Size != 973 || files[1].HeaderLen != 253 || files[1].NumTensors != 3 {
		t.Fatalf("Files = %+v", files)
	}
	if files[0].Metadata["format"] != "pt" || files[1].Metadata != nil {
		t.Fatalf("metadata = %v / %v", files[0].Metadata, files[1].Metadata)
	}
	wantNames := []string{
		"empty.f32",
		"language_model.model.layers.0.block_sparse_moe.experts.0.w1.weight_packed",
		"language_model.model.layers.0.block_sparse_moe.experts.1.w1.weight_packed",
		"packed.u8.2d", "plain.bf16.1d", "plain.f32.2d", "rank3.f32", "rank4.u8", "scalar.f32",
		"second.shard.f32", "second.shard.u8", "tricky.f16.1d", `weird\name."with"quotes`,
	}
	if got := s.Names(); !slices.Equal(got, wantNames) {
		t.Fatalf("Names = %q", got)
	}
	type want struct {
		dt     DType
		shape  []int64
		file   int
		offset int64
	}
	for name, w := range map[string]want{
		"plain.f32.2d":            {F32, []int64{16, 16}, 0, 1030},
		"plain.bf16.1d":           {BF16, []int64{128}, 0, 2054},
		"tricky.f16.1d":           {F16, []int64{64}, 0, 2310},
		"packed.u8.2d":            {U8, []int64{7, 32}, 0, 2438},
		"scalar.f32":              {F32, []int64{}, 0, 2662},
		"empty.f32":               {F32, []int64{0, 8}, 0, 2666},
		"rank3.f32":               {F32, []int64{2, 3, 4}, 0, 2794},
		"rank4.u8":                {U8, []int64{2, 2, 2, 2}, 0, 2890},
		"second.shard.f32":        {F32, []int64{10, 10}, 1, 261},
		"second.shard.u8":         {U8, []int64{300}, 1, 661},
		`weird\name."with"quotes`: {F32, []int64{3}, 1, 961},
	} {
		tn, ok := s.Get(name)
		if !ok {
			t.Fatalf("%s missing", name)
		}
		n, _ := shapeNumel(w.shape)
		if tn.Name != name || tn.DType != w.dt || !slices.Equal(tn.Shape, w.shape) || tn.Path != files[w.file].Path ||
			tn.Offset != w.offset || tn.Size != n*w.dt.Size() || tn.Numel() != n {
			t.Errorf("%s = %v size %d", name, tn, tn.Size)
		}
	}
	if _, ok := s.Get("__metadata__"); ok {
		t.Error("__metadata__ indexed as a tensor")
	}
	if _, ok := s.Get("nope"); ok {
		t.Error("Get(nope) succeeded")
	}

	readF := func(name string) []float32 {
		tn, _ := s.Get(name)
		out := make([]float32, tn.Numel())
		if err := s.ReadFloat32(tn, out); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return out
	}
	readB := func(name string) []byte {
		tn, _ := s.Get(name)
		out := make([]byte, tn.Size)
		if err := s.ReadTensor(tn, out); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return out
	}
	checkBits := func(name string, got []float32, idx []int, bits []uint32) {
		t.Helper()
		for i, k := range idx {
			if f32bits(got[k]) != bits[i] {
				t.Errorf("%s[%d] = %#08x (%g), want %#08x", name, k, f32bits(got[k]), got[k], bits[i])
			}
		}
	}
	f := readF("plain.f32.2d")
	checkBits("plain.f32.2d", f, []int{0, 1, 2, 254, 255}, []uint32{0x3b71dba5, 0x3f656fc3, 0xbf5289b2, 0xc06120f7, 0xc0349d48})
	bf := readF("plain.bf16.1d")
	checkBits("plain.bf16.1d", bf, []int{0, 1, 2, 3, 4, 5, 6, 7, 11},
		[]uint32{0x7f800000, 0xff800000, 0x7fc00000, 0, 0x80000000, 0x00800000, 0xd3ab0000, 0xc35f0000, 0x218e0000})
	if bf[7] != -223 {
		t.Errorf("bf16[7] = %g, want -223", bf[7])
	}
	h := readF("tricky.f16.1d")
	// f16: +inf, -inf, NaN, +0, -0, smallest subnormal 2^-24, largest
	// subnormal, smallest normal, then ordinary values; last three too.
	checkBits("tricky.f16.1d", h, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 61, 62, 63},
		[]uint32{0x7f800000, 0xff800000, 0x7fc00000, 0, 0x80000000, 0x33800000, 0x387fc000, 0x38800000, 0xbf0e2000, 0xbec76000, 0x3f0da000, 0x3ff9e000, 0xbe498000})
	if h[5] != 5.960464477539063e-08 || h[8] != -0.55517578125 || h[63] != -0.19677734375 {
		t.Errorf("f16 values %g %g %g", h[5], h[8], h[63])
	}
	if got := readF("scalar.f32"); len(got) != 1 || got[0] != 3.5 {
		t.Errorf("scalar = %v", got)
	}
	if got := readF("empty.f32"); len(got) != 0 {
		t.Errorf("empty = %v", got)
	}
	if got := readF(`weird\name."with"quotes`); !slices.Equal(got, []float32{1, 2, 3}) {
		t.Errorf("weird = %v", got)
	}
	r3 := readF("rank3.f32")
	checkBits("second.shard.f32", readF("second.shard.f32"), []int{0, 1, 99}, []uint32{0xbec47471, 0xbe9766ce, 0xbf8f9775})
	if r3[0] != -0.47405046224594116 || r3[23] != 1.3477122783660889 {
		t.Errorf("rank3 = %v", r3)
	}
	u := readB("packed.u8.2d")
	if !bytes.Equal(u[:32], []byte{23, 157, 148, 190, 142, 111, 40, 58, 101, 199, 198, 131, 90, 221, 249, 31, 229, 105, 198, 108, 132, 65, 116, 8, 132, 62, 134, 252, 78, 168, 218, 128}) || sum(u) != 29301 {
		t.Errorf("packed.u8.2d row 0 = %v sum %d", u[:32], sum(u))
	}
	if r4 := readB("rank4.u8"); !bytes.Equal(r4, []byte{148, 180, 49, 116, 13, 165, 110, 171, 189, 60, 189, 106, 190, 121, 131, 53}) {
		t.Errorf("rank4 = %v", r4)
	}
	if su := readB("second.shard.u8"); sum(su) != 34613 || !bytes.Equal(su[:8], []byte{3, 247, 193, 48, 109, 21, 81, 134}) {
		t.Errorf("second.shard.u8 sum %d", sum(su))
	}
	if e0, e1 := readB("language_model.model.layers.0.block_sparse_moe.experts.0.w1.weight_packed"), readB("language_model.model.layers.0.block_sparse_moe.experts.1.w1.weight_packed"); sum(e0) != 8244 || sum(e1) != 8948 {
		t.Errorf("expert sums %d %d", sum(e0), sum(e1))
	}
	// U8 is packed data, not numbers.
	tn, _ := s.Get("packed.u8.2d")
	if err := s.ReadFloat32(tn, make([]float32, 224)); err == nil {
		t.Error("ReadFloat32 of U8 succeeded")
	}
	// Partial reads.
	tn, _ = s.Get("second.shard.u8")
	part := make([]byte, 3)
	if err := s.ReadTensorAt(tn, 297, part); err != nil || !bytes.Equal(part, []byte{232, 21, 217}) {
		t.Errorf("ReadTensorAt = %v %v", part, err)
	}
	if err := s.ReadTensorAt(tn, 298, part); err == nil {
		t.Error("ReadTensorAt past the tensor succeeded")
	}
	if err := s.ReadTensor(tn, make([]byte, 10)); err == nil {
		t.Error("ReadTensor into a short buffer succeeded")
	}
	if err := s.ReadTensor(&Tensor{Name: "x", Path: "/elsewhere", Size: 1}, make([]byte, 1)); err == nil {
		t.Error("ReadTensor of a foreign tensor succeeded")
	}
}

func sum(b []byte) (n int) {
	for _, c := range b {
		n += int(c)
	}
	return n
}

func TestOpenSingleFileAndCacheFixture(t *testing.T) {
	for _, open := range []func(string) (*Set, error){OpenFile, Open} {
		s, err := open("../../testdata/seed-v1/cache/model-00001-of-00001.safetensors")
		if err != nil {
			t.Fatal(err)
		}
		if s.Len() != 144 || len(s.Files()) != 1 || s.Files()[0].HeaderLen != 20600 {
			t.Fatalf("cache fixture: %d tensors, %+v", s.Len(), s.Files())
		}
		// Values from python3: bytes at data offset 26048.
		tn, ok := s.Get("language_model.model.layers.0.block_sparse_moe.experts.3.w2.weight_packed")
		buf := make([]byte, 512)
		if !ok || tn.Offset != 26048 || s.ReadTensor(tn, buf) != nil || !bytes.Equal(buf[:8], []byte{146, 147, 148, 149, 150, 151, 152, 153}) {
			t.Fatalf("expert 3 w2: %v %v", tn, buf[:8])
		}
		s.Close()
		if err := s.ReadTensor(tn, buf); err == nil {
			t.Error("read after Close succeeded")
		}
		if err := s.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	}
	// A directory holding one model-00001-of-00001 file.
	s, err := Open("../../testdata/seed-v1/cache")
	if err != nil || s.Len() != 144 {
		t.Fatalf("Open(cache dir): %v", err)
	}
	s.Close()
}

func TestConcurrentReads(t *testing.T) {
	s, err := Open(stDir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	names := s.Names()
	ref := map[string][]byte{}
	for _, n := range names {
		tn, _ := s.Get(n)
		b := make([]byte, tn.Size)
		if err := s.ReadTensor(tn, b); err != nil {
			t.Fatal(err)
		}
		ref[n] = b
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				n := names[(g+i)%len(names)]
				tn, _ := s.Get(n)
				b := make([]byte, tn.Size)
				if err := s.ReadTensor(tn, b); err != nil || !bytes.Equal(b, ref[n]) {
					t.Errorf("%s: %v", n, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// file builds safetensors bytes from a raw header and a data-region length.
func file(hdr string, dataLen int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	b = append(b, hdr...)
	return append(b, make([]byte, dataLen)...)
}

func parseBytes(b []byte) (*Set, error) {
	sh, err := readShard(bytes.NewReader(b), int64(len(b)), "t.safetensors")
	if err != nil {
		return nil, err
	}
	return merge([]*shardFile{newShardFile(sh, nil, testSeed)}, testSeed)
}

var testSeed = maphash.MakeSeed()

func TestHeaderFaults(t *testing.T) {
	ok1 := `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`
	lenFF := append(bytes.Repeat([]byte{0xff}, 8), make([]byte, 64)...)
	bracket := file(ok1, 8)
	bracket[8] = '['
	overLen := file(ok1, 16)
	binary.LittleEndian.PutUint64(overLen, uint64(len(ok1)+4)) // swallows 4 data bytes
	overLen[8+len(ok1)] = 0x12
	underLen := file(ok1, 8)
	binary.LittleEndian.PutUint64(underLen, uint64(len(ok1)-5))
	// Audit D7 (row 1.23): one byte short of a padded header still parses,
	// but every tensor would be read one byte early.
	padded := file(ok1+"   ", 8)
	short := slices.Clone(padded)
	binary.LittleEndian.PutUint64(short, uint64(len(ok1)+2))
	cases := []struct {
		name   string
		data   []byte
		tensor string
		msg    string
	}{
		{"header length one byte short, cutting padding", short, "", "the data region is 9 bytes but the last tensor ends at byte 8 of it: 1 byte(s) belong to no tensor"},
		{"bytes after the last tensor", append(slices.Clone(padded), make([]byte, 4096)...), "", "4096 byte(s) belong to no tensor"},
		{"4-byte file", []byte{1, 2, 3, 4}, "", "too short for a header length"},
		{"header length all 0xFF", lenFF, "", "exceeds the 104857600-byte limit"},
		{"header length 0", file("", 8), "", "header length 0 is impossible"},
		{"header length past EOF", append(binary.LittleEndian.AppendUint64(nil, 100), "{}"...), "", "exceeds the file size"},
		{"{ replaced by [", bracket, "", "expected '{' opening the header"},
		{"lying header length (too long)", overLen, "", "after the header object"},
		{"truncated header (length too short)", underLen, "a", "JSON is truncated"},
		{"truncated JSON", file(`{"a":{"dtype":"F32","sha`, 8), "a", "JSON is truncated"},
		{"overlapping spans", file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, 16), "b", `overlaps tensor "a" [0, 8)`},
		{"overlapping spans, unsorted", file(`{"b":{"dtype":"U8","shape":[4],"data_offsets":[6,10]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 16), "b", `overlaps tensor "a"`},
		{"offset past end", file(ok1, 4), "a", "end past the end of the file"},
		{"span length mismatch", file(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, 16), "a", "span 8 bytes but F32[3] needs 12"},
		{"end before start", file(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, 16), "a", "end before they start"},
		{"duplicate name", file(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, 2), "a", "duplicate tensor name in the header"},
		{"duplicate escaped name", file(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"\u0061":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, 2), "a", "duplicate tensor name in the header"},
		{"non-UTF-8 name", file("{\"a\xff\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 2), "", "not valid UTF-8"},
		{"lone surrogate name", file(`{"a\ud800":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 2), "", "not valid UTF-8"},
		{"bad dtype", file(`{"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}`, 8), "w", "dtype F64 is not supported"},
		{"odd dtype", file(`{"w":{"dtype":"f 32","shape":[1],"data_offsets":[0,4]}}`, 8), "w", `dtype "f 32" is not supported`},
		{"numel overflow", file(`{"w":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`, 8), "w", "overflows the element count"},
		{"byte count overflow", file(`{"w":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}}`, 8), "w", "overflows the byte count"},
		{"int64 overflow", file(`{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,99999999999999999999]}}`, 8), "w", "integer overflows int64"},
		{"negative dim", file(`{"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}}`, 8), "w", "shape: negative value"},
		{"fractional dim", file(`{"w":{"dtype":"U8","shape":[1.0],"data_offsets":[0,1]}}`, 8), "w", "fraction or exponent"},
		{"rank 5", file(`{"w":{"dtype":"U8","shape":[1,1,1,1,1],"data_offsets":[0,1]}}`, 8), "w", "rank exceeds 4"},
		{"three offsets", file(`{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}}`, 8), "w", "data_offsets has more than 2 values"},
		{"one offset", file(`{"w":{"dtype":"U8","shape":[1],"data_offsets":[0]}}`, 8), "w", "data_offsets has 1 values"},
		{"unknown key", file(`{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"foo":1}}`, 8), "w", `unknown key "foo"`},
		{"duplicate key", file(`{"w":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 8), "w", `duplicate key "dtype"`},
		{"missing offsets", file(`{"w":{"dtype":"U8","shape":[1]}}`, 8), "w", "no data_offsets"},
		{"missing dtype", file(`{"w":{"shape":[1],"data_offsets":[0,1]}}`, 8), "w", "no dtype"},
		{"trailing comma", file(`{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},}`, 8), "", "expected a string"},
		{"entry not an object", file(`{"w":[1]}`, 8), "w", "expected '{' opening the tensor entry"},
		{"metadata not string", file(`{"__metadata__":{"a":1}}`, 8), "", "is not a string"},
		{"duplicate metadata", file(`{"__metadata__":{},"__metadata__":{}}`, 8), "", "duplicate __metadata__"},
		{"duplicate metadata key", file(`{"__metadata__":{"a":"1","a":"2"}}`, 8), "", `duplicate __metadata__ key "a"`},
		{"empty name", file(`{"":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 8), "", "empty tensor name"},
		{"control char", file("{\"a\tb\":{}}", 8), "", "control character"},
		{"header of spaces", file("        ", 8), "", "JSON is truncated"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseBytes(c.data)
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a *FormatError", err)
			}
			if fe.Path != "t.safetensors" || fe.Tensor != c.tensor || !strings.Contains(fe.Msg, c.msg) {
				t.Fatalf("err = %v (tensor %q), want tensor %q and %q", err, fe.Tensor, c.tensor, c.msg)
			}
			if !strings.Contains(err.Error(), "t.safetensors") {
				t.Fatalf("message does not name the file: %v", err)
			}
		})
	}
}

func TestHeaderAccepts(t *testing.T) {
	for _, c := range []struct {
		hdr     string
		dataLen int
	}{
		{`{}`, 0},
		{` {"__metadata__":{}} `, 0},
		{"\t{\"a\" : {\"data_offsets\" : [0 , 4], \"shape\":[ ], \"dtype\":\"F32\"}}\n  ", 4},
		{`{"\u00e9t\u00e9\ud83d\ude00/x":{"dtype":"BF16","shape":[0,3],"data_offsets":[2,2]},"b":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}}`, 4},
		{`{"z":{"dtype":"U8","shape":[1],"data_offsets":[7,8]},"y":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}}`, 8},
	} {
		hdr := c.hdr
		s, err := parseBytes(file(hdr, c.dataLen))
		if err != nil {
			t.Errorf("%s: %v", hdr, err)
			continue
		}
		if strings.Contains(hdr, "\\u00e9") {
			if _, ok := s.Get("été😀/x"); !ok {
				t.Errorf("escaped name not decoded: %q", s.Names())
			}
		}
	}
}

func TestDirectoryFaults(t *testing.T) {
	u8 := func(name string, n int) WriteTensor {
		return WriteTensor{Name: name, DType: U8, Shape: []int64{int64(n)}, Data: bytes.Repeat([]byte{byte(n)}, n)}
	}
	write := func(t *testing.T, dir, name string, ts ...WriteTensor) {
		t.Helper()
		if err := WriteFile(filepath.Join(dir, name), ts, nil); err != nil {
			t.Fatal(err)
		}
	}
	check := func(t *testing.T, dir, path, tensor, msg string) {
		t.Helper()
		_, err := Open(dir)
		var fe *FormatError
		if !errors.As(err, &fe) {
			t.Fatalf("err = %v, want a *FormatError", err)
		}
		if fe.Path != path || fe.Tensor != tensor || !strings.Contains(fe.Msg, msg) {
			t.Fatalf("err = %v\nwant path %s tensor %q msg %q", err, path, tensor, msg)
		}
	}
	t.Run("missing shard", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "model-00001-of-00004.safetensors", u8("a", 1))
		write(t, dir, "model-00003-of-00004.safetensors", u8("b", 1))
		check(t, dir, dir, "", "2 of 4 missing: model-00002-of-00004.safetensors, model-00004-of-00004.safetensors")
	})
	t.Run("shard counts disagree", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "model-00001-of-00002.safetensors", u8("a", 1))
		write(t, dir, "model-00002-of-00003.safetensors", u8("b", 1))
		check(t, dir, dir, "", "disagree on the shard count")
	})
	t.Run("tensor in two shards", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "model-00001-of-00002.safetensors", u8("a", 1), u8("dup", 2))
		write(t, dir, "model-00002-of-00002.safetensors", u8("dup", 3))
		check(t, dir, filepath.Join(dir, "model-00002-of-00002.safetensors"), "dup", "also present in "+filepath.Join(dir, "model-00001-of-00002.safetensors"))
	})
	t.Run("corrupt shard", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "model-00001-of-00002.safetensors", u8("a", 1))
		os.WriteFile(filepath.Join(dir, "model-00002-of-00002.safetensors"), []byte{1, 2, 3}, 0o644)
		check(t, dir, filepath.Join(dir, "model-00002-of-00002.safetensors"), "", "too short")
	})
	t.Run("no files", func(t *testing.T) {
		dir := t.TempDir()
		check(t, dir, dir, "", "no .safetensors files")
	})
	t.Run("ambiguous files", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "x.safetensors", u8("a", 1))
		write(t, dir, "y.safetensors", u8("b", 1))
		check(t, dir, dir, "", "neither an index")
	})

	indexed := func(t *testing.T, index string) string {
		dir := t.TempDir()
		write(t, dir, "model-00001-of-00002.safetensors", u8("a", 1), u8("b", 2))
		write(t, dir, "model-00002-of-00002.safetensors", u8("c", 3))
		if err := os.WriteFile(filepath.Join(dir, IndexFile), []byte(index), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	const s1, s2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
	t.Run("index ok", func(t *testing.T) {
		dir := indexed(t, `{"metadata":{"total_size":6,"x":[1,{"y":null}]},"weight_map":{"c":"`+s2+`","a":"`+s1+`","b":"`+s1+`"}}`)
		s, err := Open(dir)
		if err != nil || s.Len() != 3 {
			t.Fatalf("Open: %v", err)
		}
		s.Close()
	})
	t.Run("index names a missing tensor", func(t *testing.T) {
		dir := indexed(t, `{"weight_map":{"a":"`+s1+`","b":"`+s1+`","c":"`+s2+`","ghost":"`+s2+`"}}`)
		check(t, dir, filepath.Join(dir, s2), "ghost", "listed in model.safetensors.index.json but not present in this shard")
	})
	t.Run("index places tensor in the wrong shard", func(t *testing.T) {
		dir := indexed(t, `{"weight_map":{"a":"`+s1+`","b":"`+s2+`","c":"`+s2+`"}}`)
		check(t, dir, filepath.Join(dir, s2), "b", "present in "+filepath.Join(dir, s1))
	})
	t.Run("index omits a tensor", func(t *testing.T) {
		dir := indexed(t, `{"weight_map":{"a":"`+s1+`","c":"`+s2+`"}}`)
		check(t, dir, filepath.Join(dir, s1), "b", "missing from model.safetensors.index.json")
	})
	t.Run("index lists a tensor twice", func(t *testing.T) {
		dir := indexed(t, `{"weight_map":{"a":"`+s1+`","b":"`+s1+`","a":"`+s1+`","c":"`+s2+`"}}`)
		check(t, dir, filepath.Join(dir, IndexFile), "a", "listed twice")
	})
	t.Run("index names a missing shard", func(t *testing.T) {
		dir := indexed(t, `{"weight_map":{"a":"`+s1+`","b":"`+s1+`","c":"model-00003-of-00003.safetensors"}}`)
		check(t, dir, filepath.Join(dir, IndexFile), "", "missing from the directory: model-00003-of-00003.safetensors")
	})
	t.Run("index omits a shard", func(t *testing.T) {
		dir := indexed(t, `{"weight_map":{"a":"`+s1+`","b":"`+s1+`"}}`)
		check(t, dir, filepath.Join(dir, IndexFile), "", "1 of 2 missing: "+s2)
	})
	t.Run("index path traversal", func(t *testing.T) {
		dir := indexed(t, `{"weight_map":{"a":"../`+s1+`"}}`)
		check(t, dir, filepath.Join(dir, IndexFile), "a", "not a plain file name")
	})
	t.Run("index without weight_map", func(t *testing.T) {
		dir := indexed(t, `{"metadata":{}}`)
		check(t, dir, filepath.Join(dir, IndexFile), "", "no weight_map")
	})
	t.Run("index not JSON", func(t *testing.T) {
		dir := indexed(t, `{"weight_map":{"a":"`+s1+`",}}`)
		check(t, dir, filepath.Join(dir, IndexFile), "", "expected a string")
	})
}
