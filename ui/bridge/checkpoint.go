package bridge

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"k3/storage/config"
	"k3/storage/safetensors"
	"k3/storage/units"
	"k3/storage/verify"
	"k3/tokenizer"
)

// FolderProblem is one thing wrong with a model folder, in plain words: the
// file, what is wrong with it and what to do.
type FolderProblem struct {
	File string
	Text string
}

// FolderCheck is what a model folder holds, checked against the folder's
// own files: its config.json read by the engine's reader, and every shard
// its index names (present, as large as its header says, header readable).
type FolderCheck struct {
	Dir       string
	HasConfig bool
	Layers    int // num_hidden_layers of a readable config (0: unknown)
	Shards    []string
	Bytes     int64 // bytes of the shards present
	Problems  []FolderProblem
}

// OK reports whether the folder holds a checkpoint the engine can open.
func (c *FolderCheck) OK() bool { return c.HasConfig && len(c.Problems) == 0 }

// Summary is one sentence for the wizard: the first problem, and how many
// more there are.
func (c *FolderCheck) Summary() string {
	if len(c.Problems) == 0 {
		return ""
	}
	s := c.Problems[0].Text
	if n := len(c.Problems) - 1; n == 1 {
		s += " (and 1 more problem: see Verify)"
	} else if n > 1 {
		s += fmt.Sprintf(" (and %d more problems: see Verify)", n)
	}
	return s
}

// Err is the folder's problems as one error (nil when OK), for the later
// steps to repeat the real cause.
func (c *FolderCheck) Err() error {
	if c.OK() {
		return nil
	}
	if !c.HasConfig {
		return &FolderError{Check: c, Msg: "there is no checkpoint in " + c.Dir + " (no config.json)"}
	}
	return &FolderError{Check: c, Msg: c.Summary()}
}

// FolderError is a model folder the engine cannot open, in plain words.
type FolderError struct {
	Check *FolderCheck
	Msg   string
}

func (e *FolderError) Error() string { return e.Msg }

// CheckFolder checks the model folder dir, only the shards the first
// layers need when layers > 0 (a partial download). It reads every shard's
// header (a few hundred KB each for the release), not the weights.
func CheckFolder(ctx context.Context, dir string, layers int) *FolderCheck {
	c := &FolderCheck{Dir: dir}
	problem := func(file, format string, args ...any) {
		c.Problems = append(c.Problems, FolderProblem{File: file, Text: fmt.Sprintf(format, args...)})
	}
	cfgPath := filepath.Join(dir, "config.json")
	if _, err := os.Stat(cfgPath); err != nil {
		return c
	}
	c.HasConfig = true
	cfg, err := config.Load(cfgPath)
	var ce *config.Error
	switch {
	case errors.As(err, &ce):
		var what []string
		if len(ce.Missing) > 0 {
			what = append(what, "it lacks "+strings.Join(ce.Missing, ", "))
		}
		if len(ce.Mistyped) > 0 {
			what = append(what, "these have the wrong type: "+strings.Join(ce.Mistyped, "; "))
		}
		if len(ce.Invalid) > 0 {
			what = append(what, "these are not valid: "+strings.Join(ce.Invalid, "; "))
		}
		problem("config.json", "config.json is not one k3 can run: %s. Download config.json again, or choose the folder of the Kimi K3 release.",
			strings.Join(what, "; "))
	case err != nil:
		problem("config.json", "config.json cannot be read (%v). Download it again.", firstLine(err))
	default:
		c.Layers = cfg.Layers
	}
	for _, f := range []string{tokenizer.ModelFile, "tokenizer_config.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			problem(f, "%s is missing: the tokenizer needs it. Download it (Download fetches only the missing files).", f)
		}
	}
	shards, why := folderShards(dir, layers)
	if why != "" {
		problem(safetensors.IndexFile, "%s", why)
		return c
	}
	c.Shards = shards
	want := expectedSizes(dir)
	for _, name := range shards {
		if ctx.Err() != nil {
			return c
		}
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if _, perr := os.Stat(p + verify.PartSuffix); perr == nil {
				problem(name, "%s is still being downloaded. Resume the download.", name)
			} else {
				problem(name, "%s is missing. Download it again (Download fetches only the missing files).", name)
			}
			continue
		case err != nil:
			problem(name, "%s cannot be read (%v).", name, err)
			continue
		}
		c.Bytes += fi.Size()
		if text := checkShard(p, fi.Size(), want[name]); text != "" {
			problem(name, "%s", text)
		}
	}
	return c
}

// folderShards lists the shards the folder's index names, or else its
// model-N-of-M set (every N of M, present or not), or model.safetensors;
// when it cannot, it says why in a sentence.
func folderShards(dir string, layers int) ([]string, string) {
	if _, err := os.Stat(filepath.Join(dir, safetensors.IndexFile)); err == nil {
		ix, err := safetensors.ReadIndex(dir)
		if err != nil {
			return nil, fmt.Sprintf("%s cannot be read (%v). Download it again.", safetensors.IndexFile, firstLine(err))
		}
		if layers > 0 {
			need, err := verify.ShardsForLayers(ix, layers)
			if err != nil {
				return nil, fmt.Sprintf("The index cannot say which files the first %d layers need (%v).", layers, firstLine(err))
			}
			return need, ""
		}
		names := ix.Files()
		sort.Strings(names)
		return names, ""
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Sprintf("The folder cannot be read (%v).", err)
	}
	total := 0
	var single []string
	for _, e := range ents {
		n := e.Name()
		var i, m int
		if _, err := fmt.Sscanf(n, "model-%05d-of-%05d.safetensors", &i, &m); err == nil && safetensors.ShardName(i, m) == n {
			total = max(total, m)
		} else if strings.HasSuffix(n, ".safetensors") {
			single = append(single, n)
		}
	}
	if total > 0 {
		names := make([]string, total)
		for i := range names {
			names[i] = safetensors.ShardName(i+1, total)
		}
		return names, ""
	}
	if len(single) == 0 {
		return nil, "There are no .safetensors files (the model's weights) in this folder. Download them."
	}
	return single, ""
}

// expectedSizes are the sizes the download recorded, else the release's.
func expectedSizes(dir string) map[string]int64 {
	out := map[string]int64{}
	for _, s := range verify.ReleasedShards {
		out[s.Name] = s.Size
	}
	if m, err := verify.ReadManifest(dir); err == nil {
		for _, f := range m.Files {
			out[f.Name] = f.Size
		}
	}
	return out
}

// checkShard reads a shard's header: the file must be as long as the
// header says (a cut download is the usual fault) and the header must be
// one the engine reads. It returns "" for a good shard.
func checkShard(path string, size, want int64) string {
	name := filepath.Base(path)
	again := " Download it again."
	of := func(need int64) string {
		if want > 0 {
			need = want
		}
		have, of := units.Bytes(size), units.Bytes(need)
		if have == of {
			have, of = fmt.Sprintf("%d", size), fmt.Sprintf("%d bytes", need)
		}
		return fmt.Sprintf("%s is incomplete: %s of %s.", name, have, of) + again
	}
	if want > 0 && size < want {
		return of(want)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("%s cannot be read (%v).", name, err)
	}
	defer f.Close()
	var lenBuf [8]byte
	if _, err := io.ReadFull(f, lenBuf[:]); err != nil {
		return of(8)
	}
	n := int64(binary.LittleEndian.Uint64(lenBuf[:]))
	if n <= 0 || n > 100<<20 {
		return fmt.Sprintf("%s is not a safetensors file (its header length is %d).", name, n) + again
	}
	if 8+n > size {
		if want > 0 {
			return of(want)
		}
		return fmt.Sprintf("%s is incomplete: %s, but its header alone takes %s.", name, units.Bytes(size), units.Bytes(8+n)) + again
	}
	hdr := make([]byte, n)
	if _, err := io.ReadFull(f, hdr); err != nil {
		return fmt.Sprintf("%s cannot be read (%v).", name, err)
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &entries); err != nil {
		return fmt.Sprintf("%s has a damaged header (%v).", name, err) + again
	}
	end := int64(0)
	for k, v := range entries {
		if k == "__metadata__" {
			continue
		}
		var t struct {
			Offsets []int64 `json:"data_offsets"`
		}
		if json.Unmarshal(v, &t) == nil && len(t.Offsets) == 2 {
			end = max(end, t.Offsets[1])
		}
	}
	if need := 8 + n + end; size < need {
		return of(need)
	}
	set, err := safetensors.OpenFile(path)
	if err != nil {
		return fmt.Sprintf("%s cannot be used: %s.", name, strings.TrimPrefix(firstLine(err), "safetensors: "))
	}
	set.Close()
	return ""
}

func firstLine(err error) string { return strings.SplitN(err.Error(), "\n", 2)[0] }

// VerifyFolder checks dir file by file: sizes (and checksums when the
// download recorded them) against the release's file list when the folder
// is the release, else against the folder's own index; then every shard's
// header and the config (CheckFolder), whose problems mark their files.
func VerifyFolder(ctx context.Context, dir string, layers int, progress func(done, total int64)) (*verify.Report, error) {
	opt := verify.Options{Layers: layers, Progress: progress}
	if shards, why := folderShards(dir, 0); why == "" && !released(shards) {
		sizes := expectedSizes(dir)
		for _, n := range shards {
			sz, ok := sizes[n]
			if !ok {
				sz = -1
			}
			opt.Shards = append(opt.Shards, verify.FileSpec{Name: n, Size: sz})
		}
	}
	rep, err := verify.Check(ctx, dir, opt)
	if err != nil {
		return nil, err
	}
	fc := CheckFolder(ctx, dir, layers)
	for _, p := range fc.Problems {
		i := slices.IndexFunc(rep.Files, func(f verify.FileResult) bool { return f.Name == p.File })
		if i < 0 {
			rep.Files = append(rep.Files, verify.FileResult{Name: p.File, Status: verify.StatusUnreadable, Size: -1, Want: -1, Detail: p.Text})
			rep.Unreadable++
			rep.Complete = false
			continue
		}
		f := &rep.Files[i]
		if f.Status != verify.StatusOK {
			if f.Detail == "" {
				f.Detail = p.Text
			}
			continue
		}
		rep.OK--
		rep.Bytes -= max(f.Size, 0)
		if strings.Contains(p.Text, "incomplete") {
			f.Status = verify.StatusWrongSize
			rep.WrongSize++
		} else {
			f.Status = verify.StatusUnreadable
			rep.Unreadable++
		}
		f.Detail = p.Text
		rep.Complete = false
	}
	return rep, nil
}

// released reports whether every shard named is one of the release's.
func released(shards []string) bool {
	for _, n := range shards {
		if _, ok := verify.ReleasedSize(n); !ok {
			return false
		}
	}
	return len(shards) > 0
}
