//go:build linux || darwin

package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// S2 is the demo's second shard, the audit's usual victim.
const S2 = "model-00002-of-00009.safetensors"

func shard(dir string, n int) string {
	return filepath.Join(dir, fmt.Sprintf("model-%05d-of-00009.safetensors", n))
}

func truncateBy(path string, n int64) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	return os.Truncate(path, st.Size()-n)
}

func appendBytes(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write(b)
	return err
}

// headerLen reads a safetensors file's header length.
func headerLen(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var b [8]byte
	if _, err := f.ReadAt(b[:], 0); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

func setHeaderLen(path string, n uint64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], n)
	_, err = f.WriteAt(b[:], 0)
	return err
}

// editHeader replaces the first occurrence of old in a safetensors header
// with new, which must have the same length.
func editHeader(path, old, new string) error {
	if len(old) != len(new) {
		return fmt.Errorf("editHeader: %q and %q differ in length", old, new)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	n := binary.LittleEndian.Uint64(b[:8])
	i := bytes.Index(b[8:8+n], []byte(old))
	if i < 0 {
		return fmt.Errorf("%s: %q not in the header", path, old)
	}
	copy(b[8+i:], new)
	return os.WriteFile(path, b, 0o644)
}

// editJSON rewrites a JSON file through fn (numbers kept exact).
func editJSON(path string, fn func(m map[string]any)) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return err
	}
	fn(m)
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}

// replaceIn replaces the first occurrence of old in a text file.
func replaceIn(path, old, new string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if !bytes.Contains(b, []byte(old)) {
		return fmt.Errorf("%s: %q not found", path, old)
	}
	return os.WriteFile(path, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644)
}

func textConfig(m map[string]any) map[string]any { return m["text_config"].(map[string]any) }

func lines(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strings.Count(string(b), "\n"), nil
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// randomBytes is deterministic junk.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}
