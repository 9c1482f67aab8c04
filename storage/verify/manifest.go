package verify

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"sync"

	"k3/storage/atomicfile"

	"k3/storage/regfile"
)

// ManifestFile is the record `k3 download` keeps in the model directory:
// which commit every finished file came from, its size and its SHA-256.
// `k3 verify --sha256` checks files against it.
const ManifestFile = "k3-manifest.json"

// ManifestFormat is the current manifest format number.
const ManifestFormat = 1

// Manifest is the content of k3-manifest.json.
type Manifest struct {
	Format   int             `json:"format"`
	Repo     string          `json:"repo"`     // e.g. moonshotai/Kimi-K3
	Revision string          `json:"revision"` // as asked: branch, tag or commit
	Commit   string          `json:"commit"`   // the 40-hex commit it resolved to, pinned
	Files    []ManifestEntry `json:"files"`    // finished, verified files, sorted by name

	mu sync.Mutex
}

// ManifestEntry is one finished file.
type ManifestEntry struct {
	Name    string `json:"name"`
	Size    int64  `json:"size"`
	SHA256  string `json:"sha256"`   // lowercase hex
	Commit  string `json:"commit"`   // commit the file was downloaded from
	ModTime int64  `json:"mtime_ns"` // mtime of the finished file; lets a re-run skip re-hashing
	// Checked is what the content was compared with when it was
	// downloaded: CheckedSHA256, CheckedGitBlob or CheckedSize ("" in
	// manifests of older k3 versions, which did not say).
	Checked string `json:"checked,omitempty"`
}

// What a download compared a file's content with.
const (
	CheckedSHA256  = "sha256"   // the hub's LFS sha256
	CheckedGitBlob = "git-blob" // the hub's git blob id
	// CheckedSize: the hub published no hash, only the size was checked;
	// SHA256 is then the file's own hash, not a verified one.
	CheckedSize = "size"
)

// ParseManifest reads and validates a manifest.
func ParseManifest(r io.Reader) (*Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(io.LimitReader(r, 64<<20))
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("manifest: not valid JSON: %v", err)
	}
	if m.Format != ManifestFormat {
		return nil, fmt.Errorf("manifest: format %d, this k3 reads format %d", m.Format, ManifestFormat)
	}
	if m.Commit != "" && !IsCommit(m.Commit) {
		return nil, fmt.Errorf("manifest: commit %q is not a 40-hex commit id", m.Commit)
	}
	seen := map[string]bool{}
	for _, f := range m.Files {
		if !SafeName(f.Name) {
			return nil, fmt.Errorf("manifest: %q is not a plain file name", f.Name)
		}
		if seen[f.Name] {
			return nil, fmt.Errorf("manifest: %s listed twice", f.Name)
		}
		seen[f.Name] = true
		if f.Size < 0 {
			return nil, fmt.Errorf("manifest: %s has negative size %d", f.Name, f.Size)
		}
		if !IsSHA256(f.SHA256) {
			return nil, fmt.Errorf("manifest: %s has sha256 %q, want 64 lowercase hex digits", f.Name, f.SHA256)
		}
		if f.Commit != "" && !IsCommit(f.Commit) {
			return nil, fmt.Errorf("manifest: %s has commit %q, want 40 hex digits", f.Name, f.Commit)
		}
		switch f.Checked {
		case "", CheckedSHA256, CheckedGitBlob, CheckedSize:
		default:
			return nil, fmt.Errorf("manifest: %s has checked %q, want %s, %s or %s", f.Name, f.Checked, CheckedSHA256, CheckedGitBlob, CheckedSize)
		}
	}
	return &m, nil
}

// ReadManifest reads dir/k3-manifest.json. A missing file gives an error
// satisfying errors.Is(err, fs.ErrNotExist).
func ReadManifest(dir string) (*Manifest, error) {
	p := filepath.Join(dir, ManifestFile)
	f, err := regfile.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, err := ParseManifest(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %v (delete it to re-hash everything on the next 'k3 download')", p, err)
	}
	return m, nil
}

// Lookup returns the entry for name.
func (m *Manifest) Lookup(name string) (ManifestEntry, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.Files {
		if f.Name == name {
			return f, true
		}
	}
	return ManifestEntry{}, false
}

// Set adds or replaces the entry for e.Name.
func (m *Manifest) Set(e ManifestEntry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.Files {
		if m.Files[i].Name == e.Name {
			m.Files[i] = e
			return
		}
	}
	m.Files = append(m.Files, e)
	sort.Slice(m.Files, func(i, j int) bool { return m.Files[i].Name < m.Files[j].Name })
}

// Remove deletes the entry for name, if any.
func (m *Manifest) Remove(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.Files {
		if m.Files[i].Name == name {
			m.Files = append(m.Files[:i], m.Files[i+1:]...)
			return
		}
	}
}

// Write stores the manifest in dir atomically (temporary file, fsync,
// rename), so a crash leaves either the old or the new manifest.
func (m *Manifest) Write(dir string) error {
	m.mu.Lock()
	m.Format = ManifestFormat
	b, err := json.MarshalIndent(m, "", "  ")
	m.mu.Unlock()
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, ManifestFile), append(b, '\n'))
}

// IsSHA256 reports whether s is 64 lowercase hex digits.
func IsSHA256(s string) bool { return len(s) == 64 && isHex(s) }

// IsCommit reports whether s is a full 40-hex git commit id.
func IsCommit(s string) bool { return len(s) == 40 && isHex(s) }

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
