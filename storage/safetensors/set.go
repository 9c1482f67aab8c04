package safetensors

import (
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k3/storage/regfile"
	"k3/storage/units"
)

// IndexFile is the name of the optional shard index of a sharded set.
const IndexFile = "model.safetensors.index.json"

// FileInfo describes one file of a Set.
type FileInfo struct {
	Path      string
	Size      int64 // file size in bytes
	HeaderLen int64 // JSON header length N (data starts at 8+N)
	// HeaderSHA256 is the SHA-256 of the file's first 8+HeaderLen bytes
	// (the length and the header): it changes with any tensor's name,
	// dtype, shape or offset.
	HeaderSHA256 [32]byte
	ModTime      time.Time         // modification time when the set was opened
	NumTensors   int               // tensors in this file
	Metadata     map[string]string // the header's __metadata__, nil if absent; do not modify
}

// Set is an opened safetensors file or sharded set. Its methods are safe for
// concurrent use; Close must not race with reads.
type Set struct {
	files  []FileInfo
	fds    []*os.File
	byPath map[string]int
	table  *nameTable // name -> index into all
	all    []*Tensor
	// absent: tensors of shards the index names but the directory lacks
	// (OpenPartial only)
	absent []AbsentTensor

	namesOnce sync.Once
	names     []string
	closeOnce sync.Once
	closeErr  error
}

// Get returns the tensor called name. The returned value must not be
// modified.
func (s *Set) Get(name string) (*Tensor, bool) {
	i, ok := s.lookup(name)
	if !ok {
		return nil, false
	}
	return s.all[i], true
}

func (s *Set) nameOf(i int) string { return s.all[i].Name }

func (s *Set) lookup(name string) (int, bool) { return s.table.lookup(name, s.nameOf) }

// Len returns the number of tensors.
func (s *Set) Len() int { return len(s.all) }

// Names returns all tensor names in byte-wise sorted order, as a fresh slice.
func (s *Set) Names() []string {
	s.namesOnce.Do(func() {
		s.names = make([]string, len(s.all))
		for i, t := range s.all {
			s.names[i] = t.Name
		}
		slices.Sort(s.names)
	})
	return slices.Clone(s.names)
}

// Files describes the files of the set in shard order.
func (s *Set) Files() []FileInfo { return slices.Clone(s.files) }

// Close closes every shard file. Reads after Close fail. Calling Close more
// than once returns the first result.
func (s *Set) Close() error {
	s.closeOnce.Do(func() {
		for _, f := range s.fds {
			if f != nil {
				if err := f.Close(); err != nil && s.closeErr == nil {
					s.closeErr = err
				}
			}
		}
	})
	return s.closeErr
}

func (s *Set) file(t *Tensor) (*os.File, int, error) {
	if t == nil {
		return nil, 0, errors.New("safetensors: nil tensor")
	}
	i, ok := s.byPath[t.Path]
	if !ok || s.fds[i] == nil {
		return nil, 0, fmt.Errorf("safetensors: tensor %q: file %s is not part of this set", t.Name, t.Path)
	}
	return s.fds[i], i, nil
}

// ReadTensor reads t's data into dst[:t.Size] with positional reads; dst
// must hold at least t.Size bytes. It is safe for concurrent use.
func (s *Set) ReadTensor(t *Tensor, dst []byte) error {
	if t == nil {
		return errors.New("safetensors: nil tensor")
	}
	if t.Size < 0 || int64(len(dst)) < t.Size {
		return fmt.Errorf("safetensors: tensor %q: buffer holds %d bytes, need %d", t.Name, len(dst), t.Size)
	}
	return s.ReadTensorAt(t, 0, dst[:t.Size])
}

// ReadTensorAt reads len(dst) bytes of t's data starting off bytes into it
// (for example one row of an embedding table). The range must lie inside
// the tensor.
func (s *Set) ReadTensorAt(t *Tensor, off int64, dst []byte) error {
	f, i, err := s.file(t)
	if err != nil {
		return err
	}
	n := int64(len(dst))
	if off < 0 || off > t.Size || n > t.Size-off {
		return fmt.Errorf("safetensors: tensor %q: range [%d, %d) outside its %d bytes", t.Name, off, off+n, t.Size)
	}
	if t.Offset < 0 || t.Offset+t.Size > s.files[i].Size || t.Offset+t.Size < t.Offset {
		return fmt.Errorf("safetensors: tensor %q: span [%d, %d) outside %s", t.Name, t.Offset, t.Offset+t.Size, t.Path)
	}
	if n == 0 {
		return nil
	}
	k, err := f.ReadAt(dst, t.Offset+off)
	if k == len(dst) {
		return nil
	}
	if err == io.EOF || err == nil {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("safetensors: %s: tensor %q: short read (%d of %d bytes at offset %d): %w", t.Path, t.Name, k, n, t.Offset+off, err)
}

// readChunk is the staging size for ReadFloat32.
const readChunk = 4 << 20

// ReadFloat32 reads t (F32, BF16 or F16) into dst[:t.Numel()], converting
// exactly to float32. U8 tensors are refused: their bytes are packed data,
// not numbers.
func (s *Set) ReadFloat32(t *Tensor, dst []float32) error {
	if t == nil {
		return errors.New("safetensors: nil tensor")
	}
	sz := t.DType.Size()
	if sz == 0 || t.DType == U8 {
		return fmt.Errorf("safetensors: tensor %q: cannot read %s as float32", t.Name, dtName(t.DType))
	}
	n := t.Size / sz
	if int64(len(dst)) < n {
		return fmt.Errorf("safetensors: tensor %q: destination holds %d values, need %d", t.Name, len(dst), n)
	}
	buf := make([]byte, min(t.Size, readChunk))
	for off := int64(0); off < t.Size; {
		c := min(int64(len(buf)), t.Size-off)
		if err := s.ReadTensorAt(t, off, buf[:c]); err != nil {
			return err
		}
		if err := DecodeFloat32(t.DType, buf[:c], dst[off/sz:]); err != nil {
			return err
		}
		off += c
	}
	return nil
}

// OpenFile opens a single safetensors file.
func OpenFile(path string) (*Set, error) {
	seed := maphash.MakeSeed()
	shards, err := loadShards([]string{path}, seed)
	if err != nil {
		return nil, err
	}
	return assemble(shards, seed, nil)
}

// Open opens the safetensors set in dir:
//
//   - with model.safetensors.index.json, the shards it names; every tensor in
//     its weight_map must be in the shard it names, and every tensor of those
//     shards must be listed;
//   - otherwise every model-NNNNN-of-MMMMM.safetensors file, which must form
//     a complete set (all N of M);
//   - otherwise model.safetensors, or the directory's only *.safetensors file.
//
// If dir is a regular file, Open behaves as OpenFile. Tensor names must be
// unique across the set. Shard headers are parsed in parallel.
func Open(dir string) (*Set, error) { return open(dir, false) }

// OpenPartial is Open for a partial shard set (what `k3 download --layers
// N` leaves): shards its index names that are not in dir are left out
// instead of refused, and their tensors are listed by Absent. At least one
// named shard must be present; the present ones are checked as Open does.
// The caller decides whether what it needs is there.
func OpenPartial(dir string) (*Set, error) { return open(dir, true) }

func open(dir string, partial bool) (*Set, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	if fi.Mode().IsRegular() {
		return OpenFile(dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	var hasIndex bool
	var all []string
	for _, e := range ents {
		n := e.Name()
		if n == IndexFile {
			hasIndex = true
		} else if strings.HasSuffix(n, ".safetensors") {
			all = append(all, n)
		}
	}
	if hasIndex {
		return openIndexed(dir, all, partial)
	}
	files, err := shardSet(dir, all)
	if err != nil {
		return nil, err
	}
	if files == nil {
		switch {
		case slices.Contains(all, "model.safetensors"):
			files = []string{"model.safetensors"}
		case len(all) == 1:
			files = all
		case len(all) == 0:
			return nil, &FormatError{Path: dir, Msg: "no .safetensors files"}
		default:
			return nil, &FormatError{Path: dir, Msg: fmt.Sprintf("%d .safetensors files but neither an index, nor a model-N-of-M set, nor model.safetensors", len(all))}
		}
	}
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = filepath.Join(dir, f)
	}
	seed := maphash.MakeSeed()
	shards, err := loadShards(paths, seed)
	if err != nil {
		return nil, err
	}
	return assemble(shards, seed, nil)
}

// parseShardName splits "model-N-of-M.safetensors" into N and M (digit
// strings, both non-empty).
func parseShardName(name string) (n, m string, ok bool) {
	rest, ok := strings.CutPrefix(name, "model-")
	if !ok {
		return "", "", false
	}
	rest, ok = strings.CutSuffix(rest, ".safetensors")
	if !ok {
		return "", "", false
	}
	n, m, ok = strings.Cut(rest, "-of-")
	if !ok || !units.Digits(n) || !units.Digits(m) {
		return "", "", false
	}
	return n, m, true
}

// shardSet picks the model-N-of-M files among names and checks they form a
// complete set. It returns nil if there are none.
func shardSet(dir string, names []string) ([]string, error) {
	var total string
	var first string
	byN := map[int]string{}
	for _, name := range names {
		ns, ms, ok := parseShardName(name)
		if !ok {
			continue
		}
		if total == "" {
			total, first = ms, name
		} else if ms != total {
			return nil, &FormatError{Path: dir, Msg: fmt.Sprintf("shard files disagree on the shard count: %s and %s", first, name)}
		}
		n, _ := strconv.Atoi(ns)
		m, _ := strconv.Atoi(ms)
		if n < 1 || n > m {
			return nil, &FormatError{Path: filepath.Join(dir, name), Msg: fmt.Sprintf("shard number %d is outside 1..%d", n, m)}
		}
		if prev, dup := byN[n]; dup {
			return nil, &FormatError{Path: dir, Msg: fmt.Sprintf("two files claim shard %d: %s and %s", n, prev, name)}
		}
		byN[n] = name
	}
	if total == "" {
		return nil, nil
	}
	m, _ := strconv.Atoi(total)
	var missing []string
	files := make([]string, 0, m)
	for n := 1; n <= m; n++ {
		name, ok := byN[n]
		if !ok {
			missing = append(missing, fmt.Sprintf("model-%0*d-of-%s.safetensors", len(total), n, total))
			continue
		}
		files = append(files, name)
	}
	if len(missing) > 0 {
		return nil, &FormatError{Path: dir, Msg: fmt.Sprintf("incomplete shard set: %d of %d missing: %s", len(missing), m, summarize(missing, 10))}
	}
	return files, nil
}

func summarize(list []string, max int) string {
	if len(list) <= max {
		return strings.Join(list, ", ")
	}
	return strings.Join(list[:max], ", ") + fmt.Sprintf(", ... (%d more)", len(list)-max)
}

// loadShards opens and parses each path in parallel. On error every opened
// file is closed and the error of the first failing path (in order) is
// returned.
func loadShards(paths []string, seed maphash.Seed) ([]*shardFile, error) {
	out := make([]*shardFile, len(paths))
	errs := make([]error, len(paths))
	parallelFor(len(paths), 4, func(i int) { out[i], errs[i] = loadShard(paths[i], seed) })
	for i, err := range errs {
		if err != nil {
			for _, sf := range out {
				if sf != nil {
					sf.f.Close()
				}
			}
			return nil, errs[i]
		}
	}
	return out, nil
}

// shardFile is a parsed shard with its open descriptor and its names'
// hashes (computed in the parsing goroutine to shorten the serial merge).
type shardFile struct {
	*shard
	f      *os.File
	hashes []uint64
}

func newShardFile(sh *shard, f *os.File, seed maphash.Seed) *shardFile {
	hs := make([]uint64, len(sh.tensors))
	for i := range sh.tensors {
		hs[i] = maphash.String(seed, sh.tensors[i].Name)
	}
	return &shardFile{shard: sh, f: f, hashes: hs}
}

func loadShard(path string, seed maphash.Seed) (*shardFile, error) {
	// a named pipe would block open(2) forever
	if err := regfile.Check(path); err != nil {
		var nr *regfile.NotRegularError
		if errors.As(err, &nr) {
			return nil, &FormatError{Path: path, Msg: nr.Error()}
		}
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &FormatError{Path: path, Msg: "not a regular file"}
	}
	sh, err := readShard(f, fi.Size(), path)
	if err != nil {
		f.Close()
		return nil, err
	}
	sh.modTime = fi.ModTime()
	return newShardFile(sh, f, seed), nil
}

// assemble builds the name index over parsed shards, refusing duplicate
// names. With check non-nil it is called before returning (index
// cross-check). On error the shards' files are closed.
func assemble(shards []*shardFile, seed maphash.Seed, check func(*Set) error) (*Set, error) {
	s, err := merge(shards, seed)
	if err == nil && check != nil {
		err = check(s)
	}
	if err != nil {
		for _, sf := range shards {
			if sf.f != nil {
				sf.f.Close()
			}
		}
		return nil, err
	}
	return s, nil
}

// merge indexes the shards' tensors by name.
func merge(shards []*shardFile, seed maphash.Seed) (*Set, error) {
	total := 0
	for _, sf := range shards {
		total += len(sf.tensors)
	}
	if total > math.MaxInt32 {
		return nil, &FormatError{Path: shards[0].path, Msg: fmt.Sprintf("%d tensors is too many", total)}
	}
	s := &Set{
		byPath: make(map[string]int, len(shards)),
		all:    make([]*Tensor, 0, total),
	}
	bases := make([]int, len(shards))
	for i, sf := range shards {
		if _, dup := s.byPath[sf.path]; dup {
			return nil, &FormatError{Path: sf.path, Msg: "file listed twice"}
		}
		s.byPath[sf.path] = i
		s.fds = append(s.fds, sf.f)
		s.files = append(s.files, FileInfo{Path: sf.path, Size: sf.size, HeaderLen: sf.headerLen, HeaderSHA256: sf.headerSHA256, ModTime: sf.modTime, NumTensors: len(sf.tensors), Metadata: sf.meta})
		bases[i] = len(s.all)
		for j := range sf.tensors {
			s.all = append(s.all, &sf.tensors[j])
		}
	}
	// Fast path: insert shards concurrently. Which copy of a duplicated
	// name wins then depends on timing, so on any duplicate the table is
	// rebuilt serially to report the first duplicate in shard order.
	s.table = newNameTable(seed, total)
	var dup atomic.Bool
	parallelFor(len(shards), 1, func(i int) {
		sf := shards[i]
		for j := range sf.tensors {
			if _, fresh := s.table.insert(sf.hashes[j], sf.tensors[j].Name, bases[i]+j, s.nameOf); !fresh {
				dup.Store(true)
				return
			}
		}
	})
	if !dup.Load() {
		return s, nil
	}
	s.table = newNameTable(seed, total)
	for i, sf := range shards {
		for j := range sf.tensors {
			t := &sf.tensors[j]
			if k, fresh := s.table.insert(sf.hashes[j], t.Name, bases[i]+j, s.nameOf); !fresh {
				prev := s.all[k]
				if prev.Path == t.Path {
					return nil, &FormatError{Path: t.Path, Tensor: t.Name, Msg: "duplicate tensor name in the header"}
				}
				return nil, &FormatError{Path: t.Path, Tensor: t.Name, Msg: "tensor is also present in " + prev.Path}
			}
		}
	}
	return nil, &FormatError{Path: shards[0].path, Msg: "internal error: duplicate vanished"}
}

// Forget drops the tensors whose names match from the set's index and
// returns how many it dropped: for a caller that has recorded where they
// lie (the engine's expert store keeps the routed experts' offsets), so
// the index is not held twice. Afterwards Get does not find them and Len
// and Names count the rest; Files still describes every file (NumTensors
// included), and *Tensor values obtained before stay valid for reads. The
// kept entries are copied (names and shapes too) so that nothing of the
// parsed headers stays referenced. Forget must not race with other
// methods.
func (s *Set) Forget(match func(name string) bool) int {
	keep := 0
	for _, t := range s.all {
		if !match(t.Name) {
			keep++
		}
	}
	dropped := len(s.all) - keep
	if dropped == 0 {
		return 0
	}
	kept := make([]Tensor, 0, keep)
	for _, t := range s.all {
		if !match(t.Name) {
			c := *t
			c.Name = strings.Clone(t.Name)
			c.Shape = slices.Clone(t.Shape)
			kept = append(kept, c)
		}
	}
	s.all = make([]*Tensor, len(kept))
	table := newNameTable(s.table.seed, len(kept))
	for i := range kept {
		s.all[i] = &kept[i]
		table.insert(maphash.String(table.seed, kept[i].Name), kept[i].Name, i, s.nameOf)
	}
	s.table = table
	s.namesOnce, s.names = sync.Once{}, nil
	return dropped
}
