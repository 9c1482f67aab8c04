package cli

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k3/internal/fixture"
)

// copyReleasedConfig puts the release's config.json in dir.
func copyReleasedConfig(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile(fixture.Path("kimi-k3/released-config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeSparseShard makes path a sparse file of size bytes that is a valid
// safetensors file (one U8 tensor filling the data region), so `k3 verify`,
// which opens every shard with the engine's reader, finds it good.
func writeSparseShard(path string, size int64) error {
	var hdr string
	for n := 0; ; {
		hdr = fmt.Sprintf(`{"x":{"dtype":"U8","shape":[%d],"data_offsets":[0,%d]}}`, size-8-int64(n), size-8-int64(n))
		if len(hdr) == n {
			break
		}
		n = len(hdr)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(hdr)))
	if _, err := f.Write(append(lenBuf[:], hdr...)); err != nil {
		return err
	}
	return f.Truncate(size)
}
