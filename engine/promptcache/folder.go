package promptcache

import (
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k3/storage/direct"
)

// DefaultDir is the per-user cache folder: <user cache dir>/k3/prompts.
func DefaultDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "k3", "prompts"), nil
}

// Env, when set, is the cache folder's default, or "off".
const Env = "K3_PROMPT_CACHE"

// ResolveDir is the cache folder a flag value names: the value, else $K3_PROMPT_CACHE,
// else DefaultDir; "" when it is off ("off", "none", "0" or "false").
func ResolveDir(flag string) (string, error) {
	d := flag
	if d == "" {
		d = os.Getenv(Env)
	}
	switch strings.ToLower(strings.TrimSpace(d)) {
	case "off", "none", "0", "false":
		return "", nil
	case "":
		return DefaultDir()
	}
	return d, nil
}

// DefaultDiskBytes is the disk budget when none is given: a tenth of the
// free space of the folder's disk (what is already cached counted as
// free), at most 64 GB.
func DefaultDiskBytes(dir string) int64 {
	probe := dir
	for probe != "" {
		if _, err := os.Stat(probe); err == nil {
			break
		}
		up := filepath.Dir(probe)
		if up == probe {
			break
		}
		probe = up
	}
	free, _, err := direct.DiskFree(probe)
	if err != nil {
		return 1 << 30
	}
	var held int64
	for _, f := range Files(dir) {
		held += f.Size
	}
	return min((free+held)/10, 64<<30)
}

// File is one entry file in a cache folder, as `k3 cache` lists it.
type File struct {
	Path      string
	Model     string // the model fingerprint's subfolder
	Positions int
	Size      int64
	Used      time.Time
	OK        bool // its header reads as an entry (the state is checked when used)
}

// Files lists the entry files under dir (every model's), most recently
// used first. Nothing is checked beyond the header.
func Files(dir string) []File {
	var out []File
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(d.Name(), fileExt) || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		f := File{Path: path, Model: filepath.Base(filepath.Dir(path)), Size: fi.Size(), Used: fi.ModTime()}
		f.Positions, f.OK = peek(path, fi.Size())
		out = append(out, f)
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Used.After(out[j].Used) })
	return out
}

// peek reads an entry file's position count from its header.
func peek(path string, size int64) (int, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	var h [28]byte
	if _, err := io.ReadFull(f, h[:]); err != nil || string(h[:8]) != fileMagic {
		return 0, false
	}
	plen := int64(binary.LittleEndian.Uint32(h[24:]))
	if 28+plen+stateHead > size {
		return 0, false
	}
	var sh [stateHead]byte
	if _, err := f.ReadAt(sh[:], 28+plen); err != nil {
		return 0, false
	}
	return int(binary.LittleEndian.Uint32(sh[24:])), true
}

// ClearDir removes every entry file under dir (of every model) and the
// empty model folders; it returns the files and bytes removed.
func ClearDir(dir string) (files int, bytes int64, err error) {
	for _, f := range Files(dir) {
		if e := os.Remove(f.Path); e != nil && !errors.Is(e, fs.ErrNotExist) {
			if err == nil {
				err = e
			}
			continue
		}
		files++
		bytes += f.Size
	}
	if des, e := os.ReadDir(dir); e == nil {
		for _, de := range des {
			if de.IsDir() {
				_ = os.Remove(filepath.Join(dir, de.Name())) // only when empty
			}
		}
	}
	return files, bytes, err
}
