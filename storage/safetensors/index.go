package safetensors

import (
	"fmt"
	"hash/maphash"
	"iter"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"k3/storage/regfile"
)

// maxIndexLen bounds the size of model.safetensors.index.json (the released
// checkpoint's is about 40 MB).
const maxIndexLen = 1 << 30

// Index is a parsed model.safetensors.index.json: the shard file of every
// tensor its weight_map lists, in the file's order.
type Index struct{ x *index }

// ReadIndex reads dir/model.safetensors.index.json and parses it as
// ParseIndex does. A missing index gives an error satisfying
// errors.Is(err, fs.ErrNotExist).
func ReadIndex(dir string) (*Index, error) {
	ipath := filepath.Join(dir, IndexFile)
	b, err := readIndexFile(ipath)
	if err != nil {
		return nil, err
	}
	return parseIndexStrict(ipath, b)
}

// ParseIndex parses the content of an index, strictly: a JSON object whose
// weight_map is a non-empty object mapping each tensor name, once, to a
// plain *.safetensors file name (no directory, no NUL). Other members are
// checked to be JSON and otherwise ignored. Errors are *FormatError.
func ParseIndex(b []byte) (*Index, error) { return parseIndexStrict(IndexFile, string(b)) }

func parseIndexStrict(path, b string) (*Index, error) {
	x, herr := parseIndex(b)
	if herr != nil {
		return nil, &FormatError{Path: path, Tensor: herr.tensor, Msg: herr.msg}
	}
	// parseIndex leaves duplicates to Open's cross-check against the
	// shards, which finds them at no extra cost; alone, the index needs
	// the map.
	seen := make(map[string]struct{}, len(x.entries))
	for _, e := range x.entries {
		if _, dup := seen[e.name]; dup {
			return nil, &FormatError{Path: path, Tensor: e.name, Msg: "listed twice in weight_map"}
		}
		seen[e.name] = struct{}{}
	}
	return &Index{x}, nil
}

// Files returns the distinct shard files the index names, sorted.
func (ix *Index) Files() []string {
	files := slices.Clone(ix.x.files)
	slices.Sort(files)
	return files
}

// All yields every tensor name with its shard file, in the index's order.
func (ix *Index) All() iter.Seq2[string, string] {
	return func(yield func(tensor, file string) bool) {
		for _, e := range ix.x.entries {
			if !yield(e.name, ix.x.files[e.file]) {
				return
			}
		}
	}
}

// index is the parsed weight_map.
type index struct {
	files   []string // distinct shard file names, in first-seen order
	entries []indexEntry
}

type indexEntry struct {
	name string
	file int32 // into files
}

// parseIndex parses an index file: a JSON object whose "weight_map" member
// maps tensor names to shard file names. "metadata" and any other member is
// validated as JSON and otherwise ignored. Duplicate weight_map keys are
// caught later: by the cross-check against the shards in Open, by
// parseIndexStrict otherwise.
func parseIndex(b string) (*index, *hdrError) {
	x := &index{}
	s := &scanner{b: b}
	fileIdx := map[string]int32{}
	x.entries = make([]indexEntry, 0, len(b)/96+1)
	seenMap := false
	err := s.object("'{' opening the index", func(key string) *hdrError {
		if err := s.colon(); err != nil {
			return err
		}
		if key != "weight_map" {
			return s.skipValue(0)
		}
		if seenMap {
			return s.errf("duplicate weight_map")
		}
		seenMap = true
		return s.object("'{' opening weight_map", func(name string) *hdrError {
			if name == "" {
				return s.errf("empty tensor name in weight_map")
			}
			if err := s.colon(); err != nil {
				return err
			}
			if c, err := s.next(); err != nil {
				return err
			} else if c != '"' {
				return &hdrError{tensor: name, msg: s.errf("weight_map value is not a string").msg}
			}
			f, err := s.str()
			if err != nil {
				return err
			}
			fi, ok := fileIdx[f]
			if !ok {
				if !plainShardName(f) {
					return &hdrError{tensor: name, msg: fmt.Sprintf("weight_map names %q, which is not a plain file name ending in .safetensors", f)}
				}
				fi = int32(len(x.files))
				fileIdx[f] = fi
				x.files = append(x.files, f)
			}
			x.entries = append(x.entries, indexEntry{name: name, file: fi})
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	s.ws()
	if s.i != len(b) {
		return nil, s.errf("unexpected %s after the index object", quoteByte(b[s.i]))
	}
	if !seenMap {
		return nil, &hdrError{msg: "no weight_map"}
	}
	if len(x.files) == 0 {
		return nil, &hdrError{msg: "weight_map is empty"}
	}
	return x, nil
}

// plainShardName reports whether an index may name f: a *.safetensors file
// directly in the checkpoint's directory.
func plainShardName(f string) bool {
	return strings.HasSuffix(f, ".safetensors") && len(f) <= 255 && !strings.ContainsAny(f, "/\\\x00")
}

// openIndexed opens dir through its index. present lists the directory's
// *.safetensors files. With partial, shards the index names but the
// directory lacks are left out and recorded (Set.Absent) instead of refused.
func openIndexed(dir string, present []string, partial bool) (*Set, error) {
	ipath := filepath.Join(dir, IndexFile)
	seed := maphash.MakeSeed()
	// Reading and parsing the index is serial work (the released
	// checkpoint's is ~40 MB), so the model-N-of-M shards present are
	// parsed meanwhile, on the bet that they are the ones the index names.
	specFiles, _ := shardSet(dir, present)
	spec := startLoad(dir, specFiles, seed)
	defer spec.result(false)

	b, err := readIndexFile(ipath)
	if err != nil {
		return nil, err
	}
	x, herr := parseIndex(b)
	if herr != nil {
		return nil, &FormatError{Path: ipath, Tensor: herr.tensor, Msg: herr.msg}
	}
	files, missing, err := indexedFiles(dir, ipath, x, present, partial)
	if err != nil {
		return nil, err
	}
	var shards []*shardFile
	if slices.Equal(files, specFiles) {
		shards, err = spec.result(true)
	} else {
		spec.result(false)
		shards, err = loadShards(joinAll(dir, files), seed)
	}
	if err != nil {
		return nil, err
	}
	return assemble(shards, seed, func(s *Set) error {
		if len(missing) > 0 {
			s.absent = absentOf(x, missing)
			x = presentOnly(x, missing)
		}
		return crossCheck(s, x, dir, ipath)
	})
}

// indexedFiles is the shards the index x names that are present, in shard
// order, and the ones missing (refused unless partial, and even then when
// all are). If the index names model-N-of-M shards, it must name all of
// them.
func indexedFiles(dir, ipath string, x *index, present []string, partial bool) (files, missing []string, err error) {
	files = slices.Clone(x.files)
	slices.Sort(files)
	for _, f := range files {
		if !slices.Contains(present, f) {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 && (!partial || len(missing) == len(files)) {
		return nil, nil, &FormatError{Path: ipath, Msg: fmt.Sprintf("%d shard(s) named by the index are missing from the directory: %s", len(missing), summarize(missing, 10))}
	}
	set, err := shardSet(dir, files)
	if err != nil {
		if fe, ok := err.(*FormatError); ok && fe.Path == dir {
			fe.Path = ipath
			fe.Msg = "index: " + fe.Msg
		}
		return nil, nil, err
	}
	if set != nil {
		if len(set) != len(files) {
			return nil, nil, &FormatError{Path: ipath, Msg: fmt.Sprintf("index mixes model-N-of-M shards with other files: %s", summarize(files, 10))}
		}
		files = set // shard order
	}
	files = slices.DeleteFunc(files, func(f string) bool { return slices.Contains(missing, f) })
	return files, missing, nil
}

// shardLoad is a speculative load of shards on its own goroutine (nil
// when there is nothing to load).
type shardLoad struct {
	done   chan struct{}
	shards []*shardFile
	err    error
	taken  bool
}

// startLoad starts loading the files of dir (none: no load).
func startLoad(dir string, files []string, seed maphash.Seed) *shardLoad {
	if files == nil {
		return nil
	}
	l := &shardLoad{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		l.shards, l.err = loadShards(joinAll(dir, files), seed)
	}()
	return l
}

// result waits for the load; unless it is used, its files are closed. Only
// the first call counts.
func (l *shardLoad) result(use bool) ([]*shardFile, error) {
	if l == nil || l.taken {
		return nil, nil
	}
	<-l.done
	l.taken = true
	if !use && l.err == nil {
		for _, sf := range l.shards {
			sf.f.Close()
		}
	}
	return l.shards, l.err
}

// AbsentTensor is a tensor the index lists in a shard the directory lacks.
type AbsentTensor struct {
	Name  string
	Shard string // the missing file's name
}

// Absent lists, in the index's order, the tensors of the shards the index
// names but the directory lacks (only a set opened with OpenPartial has
// any).
func (s *Set) Absent() []AbsentTensor { return slices.Clone(s.absent) }

// absentOf lists the index's tensors in the missing files.
func absentOf(x *index, missing []string) []AbsentTensor {
	var out []AbsentTensor
	for _, e := range x.entries {
		if f := x.files[e.file]; slices.Contains(missing, f) {
			out = append(out, AbsentTensor{Name: e.name, Shard: f})
		}
	}
	return out
}

// presentOnly is x without the entries of the missing files (the file
// list is kept: entries refer to it by position).
func presentOnly(x *index, missing []string) *index {
	y := &index{files: x.files}
	for _, e := range x.entries {
		if !slices.Contains(missing, x.files[e.file]) {
			y.entries = append(y.entries, e)
		}
	}
	return y
}

func joinAll(dir string, files []string) []string {
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = filepath.Join(dir, f)
	}
	return paths
}

func readIndexFile(path string) (string, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return "", fmt.Errorf("safetensors: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("safetensors: %w", err)
	}
	if fi.Size() > maxIndexLen {
		return "", &FormatError{Path: path, Msg: fmt.Sprintf("index is %d bytes, over the %d-byte limit", fi.Size(), maxIndexLen)}
	}
	b, err := readString(f, 0, fi.Size())
	if err != nil {
		return "", &FormatError{Path: path, Msg: err.Error()}
	}
	return b, nil
}

// crossCheck verifies that the index's weight_map and the shards agree
// exactly: each listed tensor is in the shard named for it, no tensor is
// listed twice, and every tensor of the shards is listed.
func crossCheck(s *Set, x *index, dir, ipath string) error {
	full := make([]string, len(x.files))
	for i, f := range x.files {
		full[i] = filepath.Join(dir, f)
	}
	// Fast path: check chunks of entries concurrently. If anything is
	// wrong, rerun serially so the error reported is the first in index
	// order, independent of scheduling.
	seen := make([]atomic.Uint32, len(s.all))
	const chunk = 8192
	var bad atomic.Bool
	parallelFor((len(x.entries)+chunk-1)/chunk, 1, func(c int) {
		for _, e := range x.entries[c*chunk : min(len(x.entries), (c+1)*chunk)] {
			k, ok := s.lookup(e.name)
			if !ok || s.all[k].Path != full[e.file] || !seen[k].CompareAndSwap(0, 1) {
				bad.Store(true)
				return
			}
		}
	})
	if bad.Load() {
		return crossCheckSerial(s, x, full, ipath)
	}
	for k := range seen {
		if seen[k].Load() == 0 {
			t := s.all[k]
			return &FormatError{Path: t.Path, Tensor: t.Name, Msg: "present in the shard but missing from " + IndexFile}
		}
	}
	return nil
}

func crossCheckSerial(s *Set, x *index, full []string, ipath string) error {
	seen := make([]bool, len(s.all))
	for _, e := range x.entries {
		name := e.name
		want := full[e.file]
		k, ok := s.lookup(name)
		if !ok {
			return &FormatError{Path: want, Tensor: name, Msg: "listed in " + IndexFile + " but not present in this shard"}
		}
		t := s.all[k]
		if t.Path != want {
			return &FormatError{Path: want, Tensor: name, Msg: fmt.Sprintf("listed in %s for this shard but present in %s", IndexFile, t.Path)}
		}
		if seen[k] {
			return &FormatError{Path: ipath, Tensor: name, Msg: "listed twice in weight_map"}
		}
		seen[k] = true
	}
	return &FormatError{Path: ipath, Msg: "internal error: index mismatch vanished"}
}
