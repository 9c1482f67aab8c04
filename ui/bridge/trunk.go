package bridge

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k3/storage/trunk"
)

// TrunkFolderName is the folder, on a chosen disk, that holds one packed
// trunk per model (see DefaultTrunkDir).
const TrunkFolderName = "k3-trunk"

// DefaultTrunkDir is the trunk folder for modelDir on the disk of base:
// base/k3-trunk/<model folder name>-<6 hex digits of its absolute path>, so
// two models never share a trunk (two folders called Kimi-K3 included).
func DefaultTrunkDir(base, modelDir string) string {
	abs, err := filepath.Abs(modelDir)
	if err != nil {
		abs = modelDir
	}
	sum := sha256.Sum256([]byte(filepath.Clean(abs)))
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == ':' || r < ' ' {
			return '-'
		}
		return r
	}, filepath.Base(abs))
	if name == "" || name == "." || name == string(filepath.Separator) {
		name = "model"
	}
	return filepath.Join(base, TrunkFolderName, name+"-"+hex.EncodeToString(sum[:3]))
}

// TrunkBase is where trunk folders go on the disk of p (a folder the
// doctor measured): the home folder when p is in it, else p, never inside
// a trunk folder or a model folder (G10: a second model's trunk was
// suggested inside the demo's trunk folder).
func TrunkBase(p string) string {
	p = filepath.Clean(p)
	if home, err := os.UserHomeDir(); err == nil && home != "" && within(filepath.Clean(home), p) {
		return filepath.Clean(home)
	}
	parts := strings.Split(p, string(filepath.Separator))
	for i, e := range parts {
		if e == TrunkFolderName {
			p = strings.Join(parts[:i], string(filepath.Separator))
			if p == "" {
				p = string(filepath.Separator)
			}
			break
		}
	}
	for {
		if _, err := os.Stat(filepath.Join(p, "config.json")); err != nil {
			return p
		}
		parent := filepath.Dir(p) // a model folder: its parent
		if parent == p {
			return p
		}
		p = parent
	}
}

// within reports whether p is dir or inside it.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// TrunkStatus is what a trunk folder holds for a model.
type TrunkStatus int

// Trunk folder states.
const (
	TrunkNone    TrunkStatus = iota // nothing packed here (or no folder yet)
	TrunkPartial                    // an interrupted pack of this model: Pack continues it
	TrunkPacked                     // a complete trunk of this model
	TrunkOther                      // a trunk (or interrupted pack) of another checkpoint
	TrunkBroken                     // a trunk that cannot be used (corrupt manifest, wrong size, ...)
)

// TrunkCheck is the state of a trunk folder for a model.
type TrunkCheck struct {
	Status      TrunkStatus
	Why         string // for TrunkOther and TrunkBroken: what differs or is wrong
	Done, Total int    // for TrunkPartial: parts packed of all
	// Compressed: for TrunkPacked and TrunkPartial, the trunk is (being)
	// packed compressed (PackOptions.Compress).
	Compressed bool
	Err        error // the model itself could not be read (see CheckFolder)
}

// CheckTrunk tells what trunkDir holds for the checkpoint in modelDir: the
// same comparison the engine makes before it uses a trunk (file names and
// sizes of the checkpoint it was packed from), so a trunk the engine would
// refuse is never reported as packed.
func CheckTrunk(modelDir, trunkDir string) TrunkCheck {
	final := filepath.Join(trunkDir, trunk.ManifestFile)
	part := filepath.Join(trunkDir, trunk.PartialFile)
	if _, err := os.Stat(final); err == nil {
		t, err := trunk.Open(trunkDir)
		if err != nil {
			return TrunkCheck{Status: TrunkBroken, Why: err.Error()}
		}
		defer t.Close()
		if err := t.CheckSource(modelDir); err != nil {
			if errors.Is(err, trunk.ErrSourceMismatch) {
				return TrunkCheck{Status: TrunkOther, Why: mismatchWhy(err, trunkDir)}
			}
			return TrunkCheck{Status: TrunkNone, Err: err}
		}
		return TrunkCheck{Status: TrunkPacked, Compressed: t.Manifest().Compressed()}
	}
	data, err := os.ReadFile(part)
	if err != nil {
		return TrunkCheck{Status: TrunkNone}
	}
	var p struct {
		Source      trunk.Source      `json:"source"`
		Compression string            `json:"compression"`
		Runs        []json.RawMessage `json:"runs"`
		Done        []string          `json:"done"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		// Pack discards an unreadable partial file and starts over
		return TrunkCheck{Status: TrunkNone}
	}
	want, err := trunk.Plan(modelDir)
	if err != nil {
		return TrunkCheck{Status: TrunkNone, Err: err}
	}
	if why := sourceDiff(p.Source, want.Source); why != "" {
		return TrunkCheck{Status: TrunkOther, Why: why}
	}
	return TrunkCheck{Status: TrunkPartial, Done: len(p.Done), Total: len(p.Runs), Compressed: p.Compression != ""}
}

// mismatchWhy is the difference the trunk package names, without the
// trunk folder and the command-line advice.
func mismatchWhy(err error, trunkDir string) string {
	s := strings.TrimPrefix(err.Error(), trunk.ErrSourceMismatch.Error()+": ")
	s = strings.TrimPrefix(s, trunkDir+": ")
	for _, cut := range []string{"; repack it", ", so its weights may differ", ": pack again", ": run k3 pack"} {
		if i := strings.Index(s, cut); i >= 0 {
			s = s[:i]
		}
	}
	return s
}

// sourceDiff says how the checkpoint a pack was started from differs from
// want ("" when it is the same).
func sourceDiff(have, want trunk.Source) string {
	if have.Prefix != want.Prefix {
		return fmt.Sprintf("tensor prefix %q, this checkpoint's is %q", have.Prefix, want.Prefix)
	}
	if !slices.Equal(have.Files, want.Files) {
		if len(have.Files) != len(want.Files) {
			return fmt.Sprintf("it was packed from %d files, this checkpoint has %d", len(have.Files), len(want.Files))
		}
		for i := range have.Files {
			if have.Files[i] != want.Files[i] {
				return fmt.Sprintf("%s was %d bytes, this checkpoint's %s is %d", have.Files[i].Name, have.Files[i].Size, want.Files[i].Name, want.Files[i].Size)
			}
		}
	}
	return ""
}
