package safetensors

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
)

// NeededSize is the size the file at path must have for its header: 8 +
// the header length + the end of its last tensor. It parses the header as
// strictly as OpenFile but without the file's size, so a cut download can
// be told from a damaged header ("99 KB of 198 KB").
func NeededSize(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("safetensors: %w", err)
	}
	defer f.Close()
	var lenBuf [8]byte
	if _, err := io.ReadFull(f, lenBuf[:]); err != nil {
		return 0, &FormatError{Path: path, Msg: "too short for a header length"}
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n == 0 || n > MaxHeaderLen {
		return 0, &FormatError{Path: path, Msg: fmt.Sprintf("header length %d is impossible", n)}
	}
	hdr, err := readString(f, 8, int64(n))
	if err != nil {
		return 0, &FormatError{Path: path, Msg: fmt.Sprintf("reading the %d-byte header: %v", n, err)}
	}
	h, herr := parseHeader(hdr, math.MaxInt64-8-int64(n))
	if herr != nil {
		return 0, &FormatError{Path: path, Tensor: herr.tensor, Msg: "header: " + herr.msg}
	}
	var end int64
	for i := range h.entries {
		end = max(end, h.entries[i].end)
	}
	return 8 + int64(n) + end, nil
}
