package cachesim

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/expertcache"
)

func TestRealTraceFormat(t *testing.T) {
	b, err := os.ReadFile(realTrace)
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := DecodeTrace(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 100096 {
		t.Fatalf("%d requests, want 100096", len(reqs))
	}
	// Little-endian int32 pairs (layer, expert): layers 1..92 (layer 0 is
	// dense), experts 0..895, the first request is layer 1.
	minL, maxL, maxE := int32(1<<30), int32(-1), int32(-1)
	for _, r := range reqs {
		minL, maxL, maxE = min(minL, r.Layer), max(maxL, r.Layer), max(maxE, r.Expert)
	}
	if minL != 1 || maxL != 92 || maxE != 895 {
		t.Errorf("layers %d..%d, max expert %d; want 1..92, 895", minL, maxL, maxE)
	}
	if reqs[0] != (Request{1, 498}) || reqs[1] != (Request{1, 764}) {
		t.Errorf("first requests %v %v", reqs[0], reqs[1])
	}
	if !bytes.Equal(EncodeTrace(reqs), b) {
		t.Error("EncodeTrace does not round-trip the real trace")
	}
}

func TestDecodeTraceErrors(t *testing.T) {
	good := EncodeTrace([]Request{{1, 2}, {3, 4}})
	if r, err := DecodeTrace(nil); err != nil || len(r) != 0 {
		t.Errorf("empty trace: %v %v", r, err)
	}
	cases := []struct {
		name string
		b    []byte
		off  int64
		msg  string
	}{
		{"short", good[:13], 13, "not a multiple of 8"},
		{"odd int32", good[:12], 12, "not a multiple of 8"},
		{"neg layer", patch(good, 8, -1), 8, "request 1: negative layer -1"},
		{"neg expert", patch(good, 4, -7), 4, "request 0: negative expert -7"},
	}
	dir := t.TempDir()
	for _, c := range cases {
		_, err := DecodeTrace(c.b)
		var te *TraceError
		if !errors.As(err, &te) || te.Offset != c.off || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: err %v, want offset %d and %q", c.name, err, c.off, c.msg)
		}
		path := filepath.Join(dir, c.name+".bin")
		os.WriteFile(path, c.b, 0o644)
		_, err = ReadTrace(path)
		if err == nil || !strings.HasPrefix(err.Error(), path+": offset ") {
			t.Errorf("%s: ReadTrace error %v does not name the file and offset", c.name, err)
		}
	}
	if _, err := ReadTrace(filepath.Join(dir, "missing.bin")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func patch(b []byte, off int, v int32) []byte {
	c := append([]byte(nil), b...)
	binary.LittleEndian.PutUint32(c[off:], uint32(v))
	return c
}

func TestWriteTraceAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "expert_trace.bin")
	os.WriteFile(path, []byte("old"), 0o644)
	reqs := []Request{{1, 0}, {92, 895}, {1, 0}}
	if err := WriteTrace(path, reqs); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	want := []byte{1, 0, 0, 0, 0, 0, 0, 0, 92, 0, 0, 0, 0x7f, 3, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}
	if !bytes.Equal(b, want) {
		t.Errorf("file bytes %v, want %v", b, want)
	}
	got, err := ReadTrace(path)
	if err != nil || len(got) != 3 || got[1] != (Request{92, 895}) {
		t.Errorf("read back %v %v", got, err)
	}
	if err := WriteTrace(path, []Request{{-1, 0}}); err == nil {
		t.Error("negative layer written")
	}
	if err := WriteTrace(filepath.Join(dir, "no", "such", "dir", "t.bin"), reqs); err == nil {
		t.Error("write into a missing directory succeeded")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("directory holds %d entries (temporary files left behind?)", len(ents))
	}
	if b2, _ := os.ReadFile(path); !bytes.Equal(b2, want) {
		t.Error("a refused write changed the file")
	}
}

func TestHistogram(t *testing.T) {
	reqs := []Request{{2, 5}, {1, 7}, {2, 5}, {1, 10}, {2, 5}}
	want := `{"n_layers":93,"n_experts":896,"counts":{"1,7":1,"1,10":1,"2,5":3}}` + "\n"
	assert.Equal(t, want, string(NewHistogram(93, 896, reqs).Marshal()))
	path := filepath.Join(t.TempDir(), "expert_hist.json")
	require.NoError(t, WriteHistogram(path, 93, 896, reqs))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, want, string(b))
	assert.True(t, json.Valid(b))
}

func FuzzReadTrace(f *testing.F) {
	f.Add([]byte{})
	f.Add(EncodeTrace([]Request{{1, 2}, {92, 895}}))
	f.Add([]byte{1, 2, 3})
	f.Add(patch(EncodeTrace([]Request{{1, 2}}), 0, -5))
	b, _ := os.ReadFile(realTrace)
	if len(b) >= 1600 {
		f.Add(b[:1600])
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "fuzz.bin")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		reqs, err := ReadTrace(path)
		valid := len(data)%8 == 0
		for i := 0; valid && i+4 <= len(data); i += 4 {
			valid = int32(binary.LittleEndian.Uint32(data[i:])) >= 0
		}
		if (err == nil) != valid {
			t.Fatalf("valid=%v but err=%v", valid, err)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), path+": offset ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if len(reqs) != len(data)/8 || !bytes.Equal(EncodeTrace(reqs), data) {
			t.Fatal("decode/encode does not round-trip")
		}
		// Every policy accepts any valid trace (small key spaces only, to
		// keep the fuzzer fast; large raw indices are compacted by NewTrace).
		tr := NewTrace(reqs)
		if tr.KeySpace() > 1<<14 {
			return
		}
		for _, p := range Policies {
			st, err := Simulate(tr, K3, p, 3)
			if err != nil && tr.NExperts == 0 && strings.HasPrefix(p, expertcache.NameLayer) {
				continue // opaque keys: no layer to cycle on
			}
			if err != nil || st.Hits+st.Misses != len(reqs) {
				t.Fatalf("%s: %+v %v", p, st, err)
			}
		}
	})
}
