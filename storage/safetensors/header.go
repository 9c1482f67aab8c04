package safetensors

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxHeaderLen is the largest header length accepted (100 MB). The released
// checkpoint's largest header is under 1 MB.
const MaxHeaderLen = 100 << 20

// metadataKey is the reserved header key holding string metadata.
const metadataKey = "__metadata__"

// maxDepth bounds nesting when skipping arbitrary JSON values.
const maxDepth = 256

// entry is one parsed tensor entry; its shape lives in the header's arena
// until the header is converted to Tensors.
type entry struct {
	name       string
	shapeOff   int32
	rank       int8
	dtype      DType
	start, end int64
}

// header is the result of parsing one JSON header.
type header struct {
	entries []entry
	shapes  []int64 // arena of all shapes
	meta    map[string]string
}

// hdrError is a parse failure before the file path is known.
type hdrError struct {
	tensor string
	msg    string
}

// scanner walks a JSON text held in memory.
type scanner struct {
	b       string
	i       int
	scratch []byte
}

func (s *scanner) errf(format string, args ...any) *hdrError {
	return &hdrError{msg: fmt.Sprintf(format, args...) + fmt.Sprintf(" at byte %d", s.i)}
}

func (s *scanner) truncated() *hdrError {
	return &hdrError{msg: fmt.Sprintf("JSON is truncated (ends at byte %d inside a value)", len(s.b))}
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// expect skips whitespace and consumes byte c.
func (s *scanner) expect(c byte, what string) *hdrError {
	s.ws()
	if s.i >= len(s.b) {
		return s.truncated()
	}
	if s.b[s.i] != c {
		return s.errf("expected %s, found %s", what, quoteByte(s.b[s.i]))
	}
	s.i++
	return nil
}

// next skips whitespace and returns the next byte without consuming it.
func (s *scanner) next() (byte, *hdrError) {
	s.ws()
	if s.i >= len(s.b) {
		return 0, s.truncated()
	}
	return s.b[s.i], nil
}

// sep consumes ',' (returning more=true) or the closing byte (more=false).
func (s *scanner) sep(closing byte) (more bool, err *hdrError) {
	c, err := s.next()
	if err != nil {
		return false, err
	}
	switch c {
	case ',':
		s.i++
		return true, nil
	case closing:
		s.i++
		return false, nil
	}
	return false, s.errf("expected ',' or %s, found %s", quoteByte(closing), quoteByte(c))
}

// object parses a JSON object whose '{' comes next (what names it if it
// does not). member is called with each key, before its ':' (read it with
// colon), and parses the value.
func (s *scanner) object(what string, member func(key string) *hdrError) *hdrError {
	if err := s.expect('{', what); err != nil {
		return err
	}
	c, err := s.next()
	if err != nil {
		return err
	}
	if c == '}' {
		s.i++
		return nil
	}
	for {
		key, err := s.str()
		if err != nil {
			return err
		}
		if err = member(key); err != nil {
			return err
		}
		more, err := s.sep('}')
		if err != nil || !more {
			return err
		}
	}
}

// colon consumes the ':' after an object key.
func (s *scanner) colon() *hdrError { return s.expect(':', "':'") }

func quoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("'%c'", c)
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// str parses a JSON string at the current position (after whitespace) and
// returns its decoded, UTF-8-validated contents. Plain ASCII strings without
// escapes (every name in a real checkpoint) are returned as substrings of the
// input without copying.
func (s *scanner) str() (string, *hdrError) {
	c, err := s.next()
	if err != nil {
		return "", err
	}
	if c != '"' {
		return "", s.errf("expected a string, found %s", quoteByte(c))
	}
	start := s.i + 1
	if n := strings.IndexByte(s.b[start:], '"'); n >= 0 {
		raw := s.b[start : start+n]
		if plainASCII(raw) && strings.IndexByte(raw, '\\') < 0 {
			s.i = start + n + 1
			return raw, nil
		}
	}
	dst, err := s.strSlow(s.scratch[:0], start)
	s.scratch = dst
	if err != nil {
		return "", err
	}
	return string(dst), nil
}

// plainASCII reports whether s holds only bytes 0x20..0x7f.
func plainASCII(s string) bool {
	const lo, hi = 0x2020202020202020, 0x8080808080808080
	i := 0
	for ; i+8 <= len(s); i += 8 {
		v := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		// A byte below 0x20 borrows and sets its high bit; one at or
		// above 0x80 has it set already.
		if ((v-lo)|v)&hi != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if s[i] < 0x20 || s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// strSlow decodes a string that may contain escapes or non-ASCII bytes,
// starting after the opening quote, appending to dst.
func (s *scanner) strSlow(dst []byte, i int) ([]byte, *hdrError) {
	b := s.b
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			s.i = i + 1
			return dst, nil
		case c == '\\':
			if i+1 >= len(b) {
				return dst, s.truncated()
			}
			e := b[i+1]
			i += 2
			switch e {
			case '"', '\\', '/':
				dst = append(dst, e)
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r, ok := hex4(b, i)
				if !ok {
					s.i = i
					return dst, s.errf("bad \\u escape")
				}
				i += 4
				if utf16.IsSurrogate(r) {
					var r2 rune = -1
					if r < 0xdc00 && i+6 <= len(b) && b[i] == '\\' && b[i+1] == 'u' {
						r2, _ = hex4(b, i+2)
					}
					dec := utf16.DecodeRune(r, r2)
					if dec == utf8.RuneError {
						s.i = i
						return dst, s.errf("string is not valid UTF-8 (unpaired surrogate \\u%04x)", r)
					}
					r = dec
					i += 6
				}
				dst = utf8.AppendRune(dst, r)
			default:
				s.i = i - 1
				return dst, s.errf("invalid escape %s", quoteByte(e))
			}
		case c < 0x20:
			s.i = i
			return dst, s.errf("control character 0x%02x in string", c)
		case c < 0x80:
			dst = append(dst, c)
			i++
		default:
			r, n := utf8.DecodeRuneInString(b[i:])
			if r == utf8.RuneError && n <= 1 {
				s.i = i
				return dst, s.errf("string is not valid UTF-8")
			}
			dst = append(dst, b[i:i+n]...)
			i += n
		}
	}
	return dst, s.truncated()
}

func hex4(b string, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// uint parses a non-negative JSON integer that fits in int64.
func (s *scanner) uint() (int64, *hdrError) {
	c, err := s.next()
	if err != nil {
		return 0, err
	}
	b := s.b
	if c == '-' {
		return 0, s.errf("negative value")
	}
	if c < '0' || c > '9' {
		return 0, s.errf("expected a non-negative integer, found %s", quoteByte(c))
	}
	var v int64
	i := s.i
	if c == '0' {
		i++
		if i < len(b) && b[i] >= '0' && b[i] <= '9' {
			s.i = i
			return 0, s.errf("integer with a leading zero")
		}
	} else {
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			d := int64(b[i] - '0')
			if v > (math.MaxInt64-d)/10 {
				s.i = i
				return 0, s.errf("integer overflows int64")
			}
			v = v*10 + d
		}
	}
	if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
		s.i = i
		return 0, s.errf("expected an integer, found a fraction or exponent")
	}
	s.i = i
	return v, nil
}

// skipValue validates and skips any JSON value.
func (s *scanner) skipValue(depth int) *hdrError {
	if depth > maxDepth {
		return s.errf("JSON nested deeper than %d levels", maxDepth)
	}
	c, err := s.next()
	if err != nil {
		return err
	}
	switch {
	case c == '"':
		_, err = s.str()
		return err
	case c == '{':
		return s.object("'{'", func(string) *hdrError {
			if err := s.colon(); err != nil {
				return err
			}
			return s.skipValue(depth + 1)
		})
	case c == '[':
		s.i++
		if c, err = s.next(); err != nil {
			return err
		}
		if c == ']' {
			s.i++
			return nil
		}
		for {
			if err = s.skipValue(depth + 1); err != nil {
				return err
			}
			more, err := s.sep(']')
			if err != nil || !more {
				return err
			}
		}
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return s.errf("expected a JSON value, found %s", quoteByte(c))
}

func (s *scanner) literal(lit string) *hdrError {
	if len(s.b)-s.i < len(lit) {
		return s.truncated()
	}
	if s.b[s.i:s.i+len(lit)] != lit {
		return s.errf("invalid literal")
	}
	s.i += len(lit)
	return nil
}

// number validates a JSON number per RFC 8259.
func (s *scanner) number() *hdrError {
	b, i := s.b, s.i
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if digits() == 0 {
		s.i = i
		return s.errf("malformed number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			s.i = i
			return s.errf("malformed number")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			s.i = i
			return s.errf("malformed number")
		}
	}
	s.i = i
	return nil
}

// parseHeader parses and validates a header. dataLen is the size of the data
// region (file size - 8 - header length); every span must fit inside it.
func parseHeader(b string, dataLen int64) (*header, *hdrError) {
	h := &header{}
	// Rough preallocation: a K3 entry is ~150 bytes of JSON.
	est := len(b)/128 + 1
	h.entries = make([]entry, 0, est)
	h.shapes = make([]int64, 0, 2*est)
	s := &scanner{b: b}
	err := s.object("'{' opening the header", func(key string) *hdrError {
		err := s.colon()
		switch {
		case err != nil:
			return err
		case key == metadataKey:
			if h.meta != nil {
				return s.errf("duplicate %s", metadataKey)
			}
			h.meta, err = s.metadata()
			return err
		case len(key) == 0:
			return s.errf("empty tensor name")
		case len(h.shapes) > math.MaxInt32-MaxRank:
			return s.errf("header too large")
		}
		e := entry{name: key}
		if err = s.tensorEntry(h, &e, dataLen); err != nil {
			err.tensor = key
			return err
		}
		h.entries = append(h.entries, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.ws()
	if s.i != len(b) {
		return nil, s.errf("unexpected %s after the header object (header length too large?)", quoteByte(b[s.i]))
	}
	if err := h.checkOverlap(); err != nil {
		return nil, err
	}
	return h, nil
}

// metadata parses the __metadata__ object: string keys to string values.
func (s *scanner) metadata() (map[string]string, *hdrError) {
	m := map[string]string{}
	err := s.object("'{' opening __metadata__", func(k string) *hdrError {
		if _, dup := m[k]; dup {
			return s.errf("duplicate %s key %q", metadataKey, k)
		}
		if err := s.colon(); err != nil {
			return err
		}
		if c, err := s.next(); err != nil {
			return err
		} else if c != '"' {
			return s.errf("%s value for %q is not a string", metadataKey, k)
		}
		v, err := s.str()
		if err != nil {
			return err
		}
		m[k] = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// tensorEntry parses {"dtype":..,"shape":[..],"data_offsets":[a,b]} and
// validates it against dataLen.
func (s *scanner) tensorEntry(h *header, e *entry, dataLen int64) *hdrError {
	const (
		seenDType = 1 << iota
		seenShape
		seenOffsets
	)
	seen := 0
	err := s.object("'{' opening the tensor entry", func(key string) *hdrError {
		var bit int
		switch key {
		case "dtype":
			bit = seenDType
		case "shape":
			bit = seenShape
		case "data_offsets":
			bit = seenOffsets
		default:
			return s.errf("unknown key %q in tensor entry", key)
		}
		if seen&bit != 0 {
			return s.errf("duplicate key %q in tensor entry", key)
		}
		seen |= bit
		if err := s.colon(); err != nil {
			return err
		}
		return s.entryValue(h, e, key)
	})
	if err != nil {
		return err
	}
	switch {
	case seen&seenDType == 0:
		return &hdrError{msg: "entry has no dtype"}
	case seen&seenShape == 0:
		return &hdrError{msg: "entry has no shape"}
	case seen&seenOffsets == 0:
		return &hdrError{msg: "entry has no data_offsets"}
	}
	return e.checkSize(h.shapes[e.shapeOff:int(e.shapeOff)+int(e.rank)], dataLen)
}

// entryValue parses the value of the tensor entry's key (dtype, shape or
// data_offsets) into e, appending a shape to h.shapes.
func (s *scanner) entryValue(h *header, e *entry, key string) *hdrError {
	switch key {
	case "dtype":
		v, err := s.str()
		if err != nil {
			return err
		}
		dt, ok := dtypeFromString(v)
		if !ok {
			return &hdrError{msg: unsupportedDType(v)}
		}
		e.dtype = dt
	case "shape":
		vals, n, err := s.intArray(MaxRank, "shape")
		if err != nil {
			return err
		}
		e.shapeOff = int32(len(h.shapes))
		e.rank = int8(n)
		h.shapes = append(h.shapes, vals[:n]...)
	case "data_offsets":
		offs, n, err := s.intArray(2, "data_offsets")
		if err != nil {
			return err
		}
		if n != 2 {
			return s.errf("data_offsets has %d values, want 2", n)
		}
		e.start, e.end = offs[0], offs[1]
	}
	return nil
}

// checkSize checks that the entry's data_offsets span exactly the bytes its
// dtype and shape need, refusing overflow, and end within the data region
// of dataLen bytes.
func (e *entry) checkSize(shape []int64, dataLen int64) *hdrError {
	// Element count, refusing overflow.
	numel := int64(1)
	for _, d := range shape {
		if d == 0 {
			numel = 0
			break
		}
	}
	if numel != 0 {
		for _, d := range shape {
			if numel > math.MaxInt64/d {
				return &hdrError{msg: fmt.Sprintf("shape %v overflows the element count", shape)}
			}
			numel *= d
		}
	}
	sz := e.dtype.Size()
	if numel > math.MaxInt64/sz {
		return &hdrError{msg: fmt.Sprintf("shape %v of %s overflows the byte count", shape, e.dtype)}
	}
	want := numel * sz
	if e.end < e.start {
		return &hdrError{msg: fmt.Sprintf("data_offsets [%d, %d] end before they start", e.start, e.end)}
	}
	if e.end-e.start != want {
		return &hdrError{msg: fmt.Sprintf("data_offsets [%d, %d] span %d bytes but %s%v needs %d", e.start, e.end, e.end-e.start, e.dtype, shape, want)}
	}
	if e.end > dataLen {
		return &hdrError{msg: fmt.Sprintf("data_offsets [%d, %d] end past the end of the file (data region is %d bytes)", e.start, e.end, dataLen)}
	}
	return nil
}

// intArray parses an array of at most max (<= MaxRank) non-negative
// integers and returns them with their count.
func (s *scanner) intArray(max int, what string) (vals [MaxRank]int64, n int, err *hdrError) {
	if err = s.expect('[', "'['"); err != nil {
		err.msg = what + ": " + err.msg
		return vals, 0, err
	}
	c, err := s.next()
	if err != nil {
		return vals, 0, err
	}
	if c == ']' {
		s.i++
		return vals, 0, nil
	}
	for {
		v, err := s.uint()
		if err != nil {
			err.msg = what + ": " + err.msg
			return vals, 0, err
		}
		if n >= max {
			if what == "shape" {
				return vals, 0, s.errf("rank exceeds %d", max)
			}
			return vals, 0, s.errf("%s has more than %d values", what, max)
		}
		vals[n] = v
		n++
		more, err := s.sep(']')
		if err != nil {
			return vals, 0, err
		}
		if !more {
			return vals, n, nil
		}
	}
}

// checkOverlap refuses non-empty data spans that share bytes.
func (h *header) checkOverlap() *hdrError {
	es := h.entries
	sorted := true
	for i := 1; i < len(es); i++ {
		if es[i].start < es[i-1].start {
			sorted = false
			break
		}
	}
	idx := make([]int32, 0, len(es))
	for i := range es {
		if es[i].end > es[i].start {
			idx = append(idx, int32(i))
		}
	}
	if !sorted {
		sort.Slice(idx, func(a, b int) bool { return es[idx[a]].start < es[idx[b]].start })
	}
	for k := 1; k < len(idx); k++ {
		p, c := &es[idx[k-1]], &es[idx[k]]
		if c.start < p.end {
			return &hdrError{tensor: c.name, msg: fmt.Sprintf("data span [%d, %d) overlaps tensor %q [%d, %d)", c.start, c.end, p.name, p.start, p.end)}
		}
	}
	return nil
}

// shard is one parsed safetensors file.
type shard struct {
	path      string
	size      int64
	headerLen int64
	// headerSHA256 is the SHA-256 of the 8-byte length and the header.
	headerSHA256 [32]byte
	modTime      time.Time // set by loadShard
	tensors      []Tensor
	meta         map[string]string
}

// readShard reads and validates the header of a safetensors file of the
// given size. path is used for Tensor.Path and in errors.
func readShard(r io.ReaderAt, size int64, path string) (*shard, error) {
	fail := func(tensor, format string, args ...any) error {
		return &FormatError{Path: path, Tensor: tensor, Msg: fmt.Sprintf(format, args...)}
	}
	if size < 8 {
		return nil, fail("", "file is %d bytes, too short for a header length", size)
	}
	var lenBuf [8]byte
	if _, err := r.ReadAt(lenBuf[:], 0); err != nil {
		return nil, fail("", "reading the header length: %v", err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	switch {
	case n == 0:
		return nil, fail("", "header length 0 is impossible")
	case n > MaxHeaderLen:
		return nil, fail("", "header length %d exceeds the %d-byte limit", n, MaxHeaderLen)
	case n > uint64(size-8):
		return nil, fail("", "header length %d exceeds the file size %d", n, size)
	}
	hdr, err := readString(r, 8, int64(n))
	if err != nil {
		return nil, fail("", "reading the %d-byte header: %v", n, err)
	}
	h, herr := parseHeader(hdr, size-8-int64(n))
	if herr != nil {
		return nil, &FormatError{Path: path, Tensor: herr.tensor, Msg: "header: " + herr.msg}
	}
	// The data region must end exactly where the last tensor does (as the
	// format's reference implementation requires): a header length a few
	// bytes short still parses when it only cuts padding, but shifts every
	// tensor, and bytes past the last tensor are no tensor's.
	dataLen := size - 8 - int64(n)
	var end int64
	for i := range h.entries {
		end = max(end, h.entries[i].end)
	}
	if end != dataLen {
		return nil, fail("", "the data region is %d bytes but the last tensor ends at byte %d of it: %d byte(s) belong to no tensor (a wrong header length, or data appended to the file)", dataLen, end, dataLen-end)
	}
	sh := &shard{path: path, size: size, headerLen: int64(n), headerSHA256: sha256.Sum256(append(lenBuf[:], hdr...)), meta: h.meta}
	base := 8 + int64(n)
	sh.tensors = make([]Tensor, len(h.entries))
	for i := range h.entries {
		e := &h.entries[i]
		end := int(e.shapeOff) + int(e.rank)
		sh.tensors[i] = Tensor{
			Name:   e.name,
			DType:  e.dtype,
			Shape:  h.shapes[e.shapeOff:end:end],
			Path:   path,
			Offset: base + e.start,
			Size:   e.end - e.start,
		}
	}
	return sh, nil
}

// readString reads n bytes at off into a string, without the zeroing and
// extra copy of make+ReadAt+string (headers and the index are large).
func readString(r io.ReaderAt, off, n int64) (string, error) {
	var sb strings.Builder
	sb.Grow(int(n))
	buf := make([]byte, min(n, 128<<10))
	for done := int64(0); done < n; {
		k, err := r.ReadAt(buf[:min(int64(len(buf)), n-done)], off+done)
		sb.Write(buf[:k])
		done += int64(k)
		if done < n && err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return "", fmt.Errorf("short read (%d of %d bytes): %w", done, n, err)
		}
	}
	return sb.String(), nil
}
