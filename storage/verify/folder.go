package verify

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"k3/storage/config"
	"k3/storage/safetensors"
	"k3/storage/units"
)

// CheckFolder is the one checkpoint check of `k3 verify` and the app: Check
// against the release's file list when dir holds the release, else against
// the folder's own index (a demo, another checkpoint), with the sizes the
// download recorded; then every present shard is opened by the engine's
// strict reader (a cut file or a damaged header is named) and config.json
// is read by the engine's config reader. Their problems mark their files.
//
// A folder whose config.json names a DSpark drafter (model_type k3_dspark
// or architecture K3DSparkModel) is checked as one: its config.json and
// weights, its config read by the drafter's config reader.
func CheckFolder(ctx context.Context, dir string, opt Options) (*Report, error) {
	if IsDraftFolder(dir) {
		if opt.Layers > 0 {
			return nil, fmt.Errorf("%s holds a draft model; --layers applies to the main model only", dir)
		}
		opt.Draft = true
	}
	if opt.Shards == nil {
		if shards, err := FolderShards(dir, 0); err == nil && !released(shards) {
			sizes := ExpectedSizes(dir)
			for _, n := range shards {
				sz, ok := sizes[n]
				if !ok {
					sz = -1
				}
				opt.Shards = append(opt.Shards, FileSpec{Name: n, Size: sz})
			}
		}
	}
	rep, err := Check(ctx, dir, opt)
	if err != nil {
		return nil, err
	}
	want := ExpectedSizes(dir)
	for i := range rep.Files {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		f := &rep.Files[i]
		if f.Status != StatusOK {
			continue
		}
		var problem string
		switch {
		case f.Name == "config.json" && opt.Draft:
			problem = CheckDraftConfig(filepath.Join(dir, f.Name))
		case f.Name == "config.json":
			problem = CheckConfig(filepath.Join(dir, f.Name))
		case strings.HasSuffix(f.Name, ".safetensors"):
			problem = CheckShard(filepath.Join(dir, f.Name), f.Size, want[f.Name])
		}
		if problem == "" {
			continue
		}
		counted := !strings.HasPrefix(f.Detail, "not needed") // a shard --layers does not need is not counted
		f.Detail = problem
		f.Status = StatusUnreadable
		if strings.Contains(problem, "incomplete") {
			f.Status = StatusWrongSize
		}
		if counted {
			rep.OK--
			rep.Bytes -= max(f.Size, 0)
			if f.Status == StatusWrongSize {
				rep.WrongSize++
			} else {
				rep.Unreadable++
			}
		}
	}
	rep.Complete = rep.OK == rep.Required
	return rep, nil
}

// released reports whether every shard named is one of the release's.
func released(shards []string) bool {
	for _, n := range shards {
		if _, ok := ReleasedSize(n); !ok {
			return false
		}
	}
	return len(shards) > 0
}

// ExpectedSizes are the shard sizes the download recorded, else the
// release's.
func ExpectedSizes(dir string) map[string]int64 {
	out := map[string]int64{}
	for _, s := range ReleasedShards {
		out[s.Name] = s.Size
	}
	if m, err := ReadManifest(dir); err == nil {
		for _, f := range m.Files {
			out[f.Name] = f.Size
		}
	}
	return out
}

// FolderShards lists the shards the folder's index names (those the first
// layers need when layers > 0), or else its model-N-of-M set (every N of M,
// present or not), or its .safetensors files; the error says in a sentence
// why it cannot.
func FolderShards(dir string, layers int) ([]string, error) {
	if _, err := os.Stat(filepath.Join(dir, safetensors.IndexFile)); err == nil {
		ix, err := safetensors.ReadIndex(dir)
		if err != nil {
			return nil, fmt.Errorf("%s cannot be read (%v). Download it again", safetensors.IndexFile, firstLine(err))
		}
		if layers > 0 {
			need, err := ShardsForLayers(ix, layers)
			if err != nil {
				return nil, fmt.Errorf("the index cannot say which files the first %d layers need (%v)", layers, firstLine(err))
			}
			return need, nil
		}
		names := ix.Files()
		sort.Strings(names)
		return names, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("the folder cannot be read (%v)", err)
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
		return names, nil
	}
	if len(single) == 0 {
		return nil, errors.New("there are no .safetensors files (the model's weights) in this folder. Download them")
	}
	return single, nil
}

func firstLine(err error) string { return strings.SplitN(err.Error(), "\n", 2)[0] }

// CheckShard opens a shard with the engine's strict reader: the file must
// be as long as its header says (a cut download is the usual fault; want,
// when > 0, is the size the download or the release recorded) and the
// header must be one the engine reads. It returns "" for a good shard,
// else a sentence naming the file.
func CheckShard(path string, size, want int64) string {
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
	// the header's length, to name a file cut inside its header
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("%s cannot be read (%v).", name, err)
	}
	var lenBuf [8]byte
	_, err = io.ReadFull(f, lenBuf[:])
	f.Close()
	if err != nil {
		return of(8)
	}
	n := int64(binary.LittleEndian.Uint64(lenBuf[:]))
	if n <= 0 || n > safetensors.MaxHeaderLen {
		return fmt.Sprintf("%s is not a safetensors file (its header length is %d).", name, n) + again
	}
	if 8+n > size {
		return fmt.Sprintf("%s is incomplete: %s, but its header alone takes %s.", name, units.Bytes(size), units.Bytes(8+n)) + again
	}
	set, err := safetensors.OpenFile(path)
	if err != nil {
		msg := strings.TrimPrefix(firstLine(err), "safetensors: ")
		if need, nerr := safetensors.NeededSize(path); nerr == nil && need > size {
			return of(need)
		}
		return fmt.Sprintf("%s cannot be used: %s.", name, msg) + again
	}
	set.Close()
	return ""
}

// IsDraftFolder reports whether dir/config.json names a DSpark drafter
// (model_type "k3_dspark" or architecture "K3DSparkModel").
func IsDraftFolder(dir string) bool {
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return false
	}
	var c struct {
		ModelType     any   `json:"model_type"`
		Architectures []any `json:"architectures"`
	}
	if json.Unmarshal(raw, &c) != nil {
		return false
	}
	if c.ModelType == "k3_dspark" {
		return true
	}
	for _, a := range c.Architectures {
		if a == "K3DSparkModel" {
			return true
		}
	}
	return false
}

// CheckDraftConfig reads a drafter's config.json with the engine's draft
// config reader; "" when it is complete, else a sentence naming every
// missing or wrong field.
func CheckDraftConfig(path string) string {
	_, err := config.LoadDraft(path)
	return configProblem(err, "choose the folder of a DSpark drafter (k3 download DEST --draft fetches the released one)")
}

// CheckConfig reads config.json with the engine's reader; "" when it is
// one k3 can run, else a sentence.
func CheckConfig(path string) string {
	_, err := config.Load(path)
	return configProblem(err, "choose the folder of the Kimi K3 release")
}

func configProblem(err error, choose string) string {
	var ce *config.Error
	switch {
	case errors.As(err, &ce):
		if slices.Contains(ce.Invalid, config.NotAnObject) {
			return fmt.Sprintf("config.json is damaged: it is not a JSON object, as a model's settings are. Download config.json again, or %s.", choose)
		}
		var what []string
		if len(ce.Missing) > 0 {
			what = append(what, "it lacks "+strings.Join(ce.Missing, ", "))
		}
		if len(ce.Mistyped) > 0 {
			what = append(what, "a value of the wrong kind: "+strings.Join(ce.Mistyped, "; "))
		}
		if len(ce.Invalid) > 0 {
			what = append(what, "a wrong value: "+strings.Join(ce.Invalid, "; "))
		}
		return fmt.Sprintf("config.json does not describe a model k3 can run (%s). Download config.json again, or %s.",
			strings.Join(what, "; "), choose)
	case err != nil:
		return fmt.Sprintf("config.json cannot be read (%v). Download it again.", firstLine(err))
	}
	return ""
}
