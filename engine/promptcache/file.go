package promptcache

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"

	"k3/engine"
	"k3/kernels"
	"k3/storage/atomicfile"
)

// An entry file holds one snapshot:
//
//	"K3PROMPT" | u32 version | u32 kernel contract | u64 model fingerprint
//	| u32 partition length | partition | the state file (engine.EncodeState)
//	| u32 CRC-32C of everything before
//
// little-endian. The state file inside has its own magic, version,
// fingerprint and checksum (engine.DecodeState checks them again).
const (
	fileMagic   = "K3PROMPT"
	fileVersion = 1
	fileExt     = ".k3p"
	// stateHead is the state file's bytes before its ids: magic, version,
	// fingerprint, layers, positions.
	stateHead = 8 + 4 + 8 + 4 + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errForeign is a file in the cache folder that is not this cache's.
var errForeign = errors.New("not a prompt-cache entry of this model and kernel contract")

// fileName is the entry file of a partition's snapshot of ids.
func fileName(part string, ids []int) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d|%s|", len(part), part)
	var b [4]byte
	for _, id := range ids {
		binary.LittleEndian.PutUint32(b[:], uint32(id))
		h.Write(b[:])
	}
	return hex.EncodeToString(h.Sum(nil)[:16]) + fileExt
}

// encode is the entry file of snapshot s in partition part.
func encode(m *engine.Model, part string, s *engine.State) ([]byte, error) {
	st, err := m.EncodeState(s)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(fileMagic)
	w32 := func(v uint32) { _ = binary.Write(&b, binary.LittleEndian, v) }
	w32(fileVersion)
	w32(kernels.Contract)
	_ = binary.Write(&b, binary.LittleEndian, m.Fingerprint)
	w32(uint32(len(part)))
	b.WriteString(part)
	b.Write(st)
	w32(crc32.Checksum(b.Bytes(), castagnoli))
	return b.Bytes(), nil
}

// header is what an entry file says of itself before its state: read when
// the cache is opened, without reading the state.
type header struct {
	part string
	ids  []int
}

// readHeader reads an entry file's header and ids, checking that it is
// this model's and contract's and that the file can hold what it says.
func readHeader(m *engine.Model, path string, size int64) (*header, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	var magic [8]byte
	var ver, contract, plen uint32
	var fp uint64
	if _, err := io.ReadFull(r, magic[:]); err != nil || string(magic[:]) != fileMagic {
		return nil, errForeign
	}
	for _, v := range []any{&ver, &contract, &fp, &plen} {
		if err := binary.Read(r, binary.LittleEndian, v); err != nil {
			return nil, fmt.Errorf("truncated header")
		}
	}
	if ver != fileVersion || contract != kernels.Contract || fp != m.Fingerprint {
		return nil, fmt.Errorf("%w (version %d, contract %d)", errForeign, ver, contract)
	}
	if int64(plen) > size {
		return nil, fmt.Errorf("truncated header")
	}
	part := make([]byte, plen)
	var sh [stateHead]byte
	if _, err := io.ReadFull(r, part); err != nil {
		return nil, fmt.Errorf("truncated header")
	}
	if _, err := io.ReadFull(r, sh[:]); err != nil {
		return nil, fmt.Errorf("truncated header")
	}
	n := int64(binary.LittleEndian.Uint32(sh[24:]))
	if 8+4*4+8+int64(plen)+stateHead+4*n+8 > size {
		return nil, fmt.Errorf("%d positions do not fit the file (truncated)", n)
	}
	ids := make([]int, n)
	var b [4]byte
	for i := range ids {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, fmt.Errorf("truncated ids")
		}
		ids[i] = int(binary.LittleEndian.Uint32(b[:]))
	}
	return &header{part: string(part), ids: ids}, nil
}

// load reads an entry file whole and checks it: its checksum, header and
// state (engine.DecodeState), and that it is the snapshot of part and ids.
func load(m *engine.Model, path, part string, ids []int) (*engine.State, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(raw) < 8+4*4+8+4 || string(raw[:8]) != fileMagic {
		return nil, errForeign
	}
	body := raw[:len(raw)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(raw[len(raw)-4:]) {
		return nil, errors.New("checksum mismatch (the file is damaged or truncated)")
	}
	le := binary.LittleEndian
	if le.Uint32(raw[8:]) != fileVersion || le.Uint32(raw[12:]) != kernels.Contract || le.Uint64(raw[16:]) != m.Fingerprint {
		return nil, errForeign
	}
	plen := int(le.Uint32(raw[24:]))
	if 28+plen > len(body) || string(body[28:28+plen]) != part {
		return nil, errors.New("holds another partition's snapshot")
	}
	s, err := m.DecodeState(body[28+plen:], path)
	if err != nil {
		return nil, err
	}
	if s.Pos != len(ids) || !slices.Equal(s.IDs, ids) {
		return nil, errors.New("holds another prompt than its header says")
	}
	return s, nil
}

// write stores an entry file atomically, private to the user.
func write(path string, raw []byte) error { return atomicfile.WritePrivate(path, raw) }
