package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesAndLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.json")
	for _, body := range []string{"one", "two, longer"} {
		if err := WriteDurable(p, []byte(body)); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(p)
		if string(got) != body {
			t.Fatalf("read %q, wrote %q", got, body)
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("left %d files", len(ents))
	}
	// a missing directory fails cleanly, naming the file
	if err := Write(filepath.Join(dir, "no", "x"), []byte("x")); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
}
