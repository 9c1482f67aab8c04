package trunk

import (
	"encoding/json"
	"testing"
)

// FuzzParseManifest: no input makes the parser panic, and whatever it
// accepts satisfies the format's invariants and survives a round trip.
func FuzzParseManifest(f *testing.F) {
	// Real manifests cut to their first layer (the fuzzer minimises
	// 40 KB inputs too slowly to keep the full ones).
	for _, model := range []string{tinyRelease, tinyFlat} {
		m, err := Plan(model)
		if err != nil {
			f.Fatal(err)
		}
		m.Runs = m.Runs[:4]
		m.TotalBytes = m.Runs[3].Offset + m.Runs[3].Length
		good, err := json.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		if _, err := ParseManifest(good); err != nil {
			f.Fatal(err)
		}
		f.Add(good)
		f.Add(good[:len(good)/2])
	}
	// Compressed packs (BF16C tensors, "compression"), and one edited
	// into a hand-made BF16C entry at the smallest size its shape allows.
	for _, b := range compressedSeeds(f) {
		f.Add(b)
	}
	f.Add([]byte(`{"format":"k3-trunk","version":3,"compression":"BF16C","source":{"files":[{"name":"a.safetensors","size":10,"mtime_ns":1,"header_sha256":"0000000000000000000000000000000000000000000000000000000000000000"}],"prefix":""},` +
		`"runs":[{"name":"embed","layer":-1,"offset":0,"length":4096,"data_bytes":122,"crc32c":0,"tensors":[{"name":"model.embed_tokens.weight","dtype":"BF16C","shape":[2,32],"offset":0,"size":122}]},` +
		`{"name":"head","layer":-1,"offset":4096,"length":4096,"data_bytes":2,"crc32c":7,"tensors":[{"name":"lm_head.weight","dtype":"BF16","shape":[1],"offset":0,"size":2}]},` +
		`{"name":"final","layer":-1,"offset":8192,"length":4096,"data_bytes":2,"crc32c":0,"tensors":[{"name":"model.norm.weight","dtype":"BF16","shape":[1],"offset":0,"size":2}]},` +
		`{"name":"layer.0","layer":0,"offset":12288,"length":4096,"data_bytes":129,"crc32c":0,"tensors":[{"name":"model.layers.0.a","dtype":"BF16C","shape":[1,40],"offset":0,"size":82},{"name":"model.layers.0.b","dtype":"U8","shape":[1],"offset":128,"size":1}]}],"total_bytes":16384}`))
	f.Add([]byte(`{"format":"k3-trunk","version":1,"source":{"files":[{"name":"a.safetensors","size":10}],"prefix":""},` +
		`"runs":[{"name":"embed","layer":-1,"offset":0,"length":4096,"data_bytes":4,"crc32c":0,"tensors":[{"name":"model.embed_tokens.weight","dtype":"F32","shape":[1],"offset":0,"size":4}]},` +
		`{"name":"head","layer":-1,"offset":4096,"length":4096,"data_bytes":2,"crc32c":7,"tensors":[{"name":"lm_head.weight","dtype":"BF16","shape":[1],"offset":0,"size":2}]},` +
		`{"name":"final","layer":-1,"offset":8192,"length":4096,"data_bytes":66,"crc32c":0,"tensors":[{"name":"model.norm.weight","dtype":"BF16","shape":[1],"offset":0,"size":2},{"name":"model.x","dtype":"U8","shape":[2],"offset":64,"size":2}]},` +
		`{"name":"layer.0","layer":0,"offset":12288,"length":4096,"data_bytes":1,"crc32c":0,"tensors":[{"name":"model.layers.0.a","dtype":"U8","shape":[],"offset":0,"size":1}]}],"total_bytes":16384}`))
	f.Add([]byte(`{"format":"k3-trunk","version":1}`))
	f.Add([]byte(`{"runs":[{"tensors":[{"shape":[9223372036854775807,9223372036854775807]}]}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			return
		}
		var end int64
		for _, r := range m.Runs {
			if r.Offset%RunAlign != 0 || r.Length%RunAlign != 0 || r.DataBytes > r.Length {
				t.Fatalf("accepted a misaligned run %+v", r)
			}
			end = max(end, r.Offset+r.Length)
			for _, tt := range r.Tensors {
				if tt.Offset%TensorAlign != 0 || tt.Offset+tt.Size > r.DataBytes {
					t.Fatalf("accepted a bad tensor %+v in run %s", tt, r.Name)
				}
				if tt.Compressed() {
					// room for the offsets and rows of its shape, at
					// most their raw size
					rows, cols := tt.Shape[0], tt.Shape[1]
					if !m.Compressed() || rows < 1 || cols < 1 || tt.Size < 8*(rows+1)+rows*((cols+31)/32) || tt.Size > bf16cMaxSize(rows, cols) {
						t.Fatalf("accepted a bad BF16C tensor %+v (compression %q)", tt, m.Compression)
					}
				}
			}
		}
		if end != m.TotalBytes {
			t.Fatalf("accepted total_bytes %d with runs ending at %d", m.TotalBytes, end)
		}
		b, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		m2, err := ParseManifest(b)
		if err != nil {
			t.Fatalf("re-parse of an accepted manifest: %v", err)
		}
		if !sameLayout(m, m2) {
			t.Fatal("round trip changed the manifest")
		}
		for i := range m.Runs {
			if m.Runs[i].CRC32C != m2.Runs[i].CRC32C {
				t.Fatal("round trip changed a CRC")
			}
		}
	})
}
