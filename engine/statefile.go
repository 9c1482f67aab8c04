package engine

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io"
	"path/filepath"
	"strings"

	"k3/storage/atomicfile"
	st "k3/storage/safetensors"

	"k3/storage/regfile"
)

// State files hold the exact decode state (ids, KDA recurrent and conv
// state, MLA latent cache) so a conversation can resume bit for bit:
//
//	"K3STATE\x00" | u32 version | u64 model fingerprint | u32 layers | u32 positions
//	| u32 ids[positions] | per layer: KDA: f32 S, f32 conv q,k,v ; MLA: f32 rows[positions][w]
//	| u32 draft positions D (0: none) | if D > 0: u64 draft model fingerprint | u32 draft layers
//	| u32 draft row width dw | per draft layer: f32 rows[D][dw]
//	| u32 CRC-32C of everything before
//
// little-endian throughout.
//
// Version 2 added the weights to the model fingerprint (weightsDigest);
// version 1 files are refused with what to do. Version 3 added the draft
// model's context rows (docs/DSPARK.md §3), written when the state holds
// them for every position, so a state loaded with the same draft model
// attached keeps drafting; loaded without it (or with another) they are
// read past and the state is the same, only without draft context.
// Version 2 files still load (no draft rows).
const (
	stateMagic   = "K3STATE\x00"
	stateVersion = 3
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Fingerprint identifies a model by content, never by where it is: its
// config values (not the config's path), the bound layer count, the
// checkpoint's files (base names, sizes and header hashes) and its weights
// (weights, from weightsDigest). The same model reached by another path,
// or copied elsewhere, has the same fingerprint; a fine-tune of the same
// layout has another.
func Fingerprint(m *Model, files []st.FileInfo, weights [32]byte) uint64 {
	h := fnv.New64a()
	cfg := *m.Cfg
	cfg.Path = ""
	fmt.Fprintf(h, "%+v|%d|", cfg, m.Bound)
	for _, f := range files {
		fmt.Fprintf(h, "%s:%d:%x|", filepath.Base(f.Path), f.Size, f.HeaderSHA256)
	}
	fmt.Fprintf(h, "weights:%x|", weights)
	return h.Sum64()
}

// expertSampleStride: weightsDigest samples every tensor except the routed
// experts', and one routed-expert tensor in this many (in name order).
const expertSampleStride = 256

// weightsNames lists the tensors weightsDigest samples: every tensor but
// the routed experts', and every expertSampleStride-th of those. For the
// released checkpoint that is about 2,600 + 1,900 of its 497,220 tensors.
func weightsNames(set *st.Set) []string {
	var out []string
	k := 0
	for _, n := range set.Names() {
		if strings.Contains(n, ".experts.") && !strings.Contains(n, "shared_experts") {
			k++
			if (k-1)%expertSampleStride != 0 {
				continue
			}
		}
		out = append(out, n)
	}
	return out
}

// weightsDigest fingerprints the checkpoint's weights from sampled blocks
// (safetensors.Set.SampleDigest over weightsNames).
func weightsDigest(set *st.Set) ([32]byte, error) {
	return set.SampleDigest(weightsNames(set))
}

func f32raw(s []float32) []byte { return f32bytes(s) }

// SaveState writes s atomically (temporary file, then rename), private.
func (m *Model) SaveState(path string, s *State) error {
	raw, err := m.EncodeState(s)
	if err != nil {
		return err
	}
	return atomicfile.WritePrivate(path, raw)
}

// EncodeState is the state file of s (SaveState's bytes).
func (m *Model) EncodeState(s *State) ([]byte, error) {
	if s.damaged || s.stale {
		return nil, errors.New("the state holds a stopped prompt chunk that was dropped: it is read again at the next step; save it after that")
	}
	var b bytes.Buffer
	b.WriteString(stateMagic)
	w32 := func(v uint32) { binary.Write(&b, binary.LittleEndian, v) }
	w32(stateVersion)
	binary.Write(&b, binary.LittleEndian, m.Fingerprint)
	w32(uint32(m.Bound))
	w32(uint32(s.Pos))
	if len(s.IDs) != s.Pos {
		return nil, fmt.Errorf("state has %d ids for %d positions", len(s.IDs), s.Pos)
	}
	for _, id := range s.IDs {
		w32(uint32(id))
	}
	for i := 0; i < m.Bound; i++ {
		if k := s.kda[i]; k != nil {
			b.Write(f32raw(k.S))
			for _, c := range k.conv {
				b.Write(f32raw(c))
			}
		} else {
			b.Write(f32raw(s.mla[i].rows))
		}
	}
	if ds := s.draft; ds != nil && ds.n == s.Pos && s.Pos > 0 && m.draft != nil {
		w32(uint32(ds.n))
		binary.Write(&b, binary.LittleEndian, m.draft.Fingerprint)
		w32(uint32(len(ds.rows)))
		w32(uint32(ds.width))
		for _, r := range ds.rows {
			b.Write(f32raw(r))
		}
	} else {
		w32(0)
	}
	w32(crc32.Checksum(b.Bytes(), castagnoli))
	return b.Bytes(), nil
}

// ErrStateMismatch is wrapped by LoadState when the file belongs to another
// model or format version.
var ErrStateMismatch = errors.New("state file does not belong to this model")

// cStateMagic starts the C engine's state files (kimi-k3-in-c, "K3ST").
const cStateMagic = "K3ST"

// ErrCState is a state file written by the C engine: another format.
var ErrCState = errors.New("made by the C engine (kimi-k3-in-c): its state files are another format; run the prompt again with k3 run --save-state")

// LoadState reads a state file written by SaveState for this model.
func (m *Model) LoadState(path string) (*State, error) {
	raw, err := regfile.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return m.DecodeState(raw, path)
}

// DecodeState reads a state file's bytes (EncodeState's) for this model,
// with LoadState's checks; path names it in errors.
func (m *Model) DecodeState(raw []byte, path string) (*State, error) {
	if _, err := checkStateHeader(raw, path); err != nil {
		return nil, err
	}
	if len(raw) < stateHeaderBytes+4 {
		return nil, fmt.Errorf("%s is not a k3 state file", path)
	}
	body := raw[:len(raw)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(raw[len(raw)-4:]) {
		return nil, fmt.Errorf("%s: checksum mismatch (the file is corrupt or truncated)", path)
	}
	r := bufio.NewReader(bytes.NewReader(body[8:]))
	var ver, layers, npos uint32
	var fp uint64
	binary.Read(r, binary.LittleEndian, &ver)
	binary.Read(r, binary.LittleEndian, &fp)
	binary.Read(r, binary.LittleEndian, &layers)
	binary.Read(r, binary.LittleEndian, &npos)
	if fp != m.Fingerprint || int(layers) != m.Bound {
		return nil, fmt.Errorf("%s was saved from another model (other weights or config) or layer count: %w", path, ErrStateMismatch)
	}
	c := m.Cfg
	w := c.KVLoraRank + c.QKRope
	if int64(npos) > int64(len(body)) {
		return nil, fmt.Errorf("%s: %d positions do not fit the file", path, npos)
	}
	s := m.NewState()
	s.Pos = int(npos)
	s.IDs = make([]int, npos)
	for i := range s.IDs {
		var v uint32
		if err := binary.Read(r, binary.LittleEndian, &v); err != nil {
			return nil, fmt.Errorf("%s: truncated ids", path)
		}
		if int(v) >= c.VocabSize {
			return nil, fmt.Errorf("%s: id %d outside the vocabulary", path, v)
		}
		s.IDs[i] = int(v)
	}
	read := func(dst []float32) error {
		_, err := io.ReadFull(r, f32raw(dst))
		return err
	}
	var err error
	for i := 0; i < m.Bound; i++ {
		if k := s.kda[i]; k != nil {
			err = read(k.S)
			for _, cv := range k.conv {
				if err == nil {
					err = read(cv)
				}
			}
		} else {
			s.mla[i].rows = make([]float32, int(npos)*w)
			err = read(s.mla[i].rows)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: truncated at layer %d", path, i)
		}
	}
	if ver >= 3 {
		if err := m.readDraftRows(r, s, path, len(body)); err != nil {
			return nil, err
		}
	}
	if _, err := r.ReadByte(); err != io.EOF {
		return nil, fmt.Errorf("%s: trailing bytes after the state", path)
	}
	return s, nil
}

// readDraftRows reads a state file's draft section (version 3): the draft
// model's context rows, kept in s when this model's attached draft model
// is the one they were made by, else read past.
func (m *Model) readDraftRows(r io.Reader, s *State, path string, limit int) error {
	var n, layers, width uint32
	if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
		return fmt.Errorf("%s: truncated before the draft rows", path)
	}
	if n == 0 {
		return nil
	}
	var fp uint64
	binary.Read(r, binary.LittleEndian, &fp)
	binary.Read(r, binary.LittleEndian, &layers)
	if err := binary.Read(r, binary.LittleEndian, &width); err != nil {
		return fmt.Errorf("%s: truncated draft rows", path)
	}
	if int(n) != s.Pos || layers == 0 || width == 0 || int64(layers)*int64(n)*int64(width)*4 > int64(limit) {
		return fmt.Errorf("%s: draft rows for %d positions, %d layers of width %d do not fit the state", path, n, layers, width)
	}
	ds := &draftState{n: int(n), width: int(width), rows: make([][]float32, layers)}
	for l := range ds.rows {
		ds.rows[l] = make([]float32, int(n)*int(width))
		if _, err := io.ReadFull(r, f32raw(ds.rows[l])); err != nil {
			return fmt.Errorf("%s: truncated draft rows", path)
		}
	}
	if d := m.draft; d != nil && d.Fingerprint == fp && int(layers) == d.Cfg.Layers && int(width) == d.Cfg.KVLoraRank+d.Cfg.QKRope {
		s.draft = ds
	}
	return nil
}

// stateHeaderBytes is the header before the ids: magic, version,
// fingerprint, layers and positions.
const stateHeaderBytes = len(stateMagic) + 4 + 8 + 4 + 4

// checkStateHeader checks what a state file's header says without the
// model: a k3 state file (not the C engine's), of a version this k3
// reads. It returns the version.
func checkStateHeader(h []byte, path string) (uint32, error) {
	if len(h) >= 8 && string(h[:4]) == cStateMagic && string(h[:8]) != stateMagic {
		return 0, fmt.Errorf("%s: %w", path, ErrCState)
	}
	if len(h) < stateHeaderBytes || string(h[:8]) != stateMagic {
		return 0, fmt.Errorf("%s is not a k3 state file", path)
	}
	switch ver := binary.LittleEndian.Uint32(h[8:]); ver {
	case 1:
		return 0, fmt.Errorf("%s was saved by an older k3, whose state files do not identify the model's weights, so it cannot be checked against this model: run the prompt again and save a new state: %w", path, ErrStateMismatch)
	case 2, stateVersion:
		return ver, nil
	default:
		return 0, fmt.Errorf("%s: state format version %d, this k3 reads version %d: %w", path, ver, stateVersion, ErrStateMismatch)
	}
}

// PeekStatePositions checks a state file's header (checkStateHeader: what
// can be refused before the model is opened, so a foreign or stale file
// costs no weight reads) and reads its position count.
func PeekStatePositions(path string) (int, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var h [stateHeaderBytes]byte
	k, _ := io.ReadFull(f, h[:])
	if _, err := checkStateHeader(h[:k], path); err != nil {
		return 0, err
	}
	n := int64(binary.LittleEndian.Uint32(h[24:]))
	// the checksum is checked by LoadState; a count the file cannot hold
	// (4 bytes of id per position) must not size a memory plan meanwhile,
	// and is named for what it is: a corrupt file fails its checksum
	if st, err := f.Stat(); err != nil || int64(len(h))+4*n+4 > st.Size() {
		if raw, err := regfile.ReadFile(path); err == nil && len(raw) >= 4 &&
			crc32.Checksum(raw[:len(raw)-4], castagnoli) != binary.LittleEndian.Uint32(raw[len(raw)-4:]) {
			return 0, fmt.Errorf("%s: checksum mismatch (the file is corrupt or truncated)", path)
		}
		return 0, fmt.Errorf("%s: %d positions do not fit the file (corrupt or truncated)", path, n)
	}
	return int(n), nil
}
