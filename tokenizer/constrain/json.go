package constrain

import (
	"encoding/binary"
	"slices"
)

// MaxSpace is how many whitespace bytes in a row the constraint lets a
// value have outside strings: enough for pretty-printed JSON, and a model
// cannot fill its budget with blanks.
const MaxSpace = 16

type fkind uint8

const (
	fValue fkind = iota // a value of s is expected
	fObj
	fArr
	fStr
	fNum
	fLit
)

// object substates
const (
	oStart    = iota // after {: a key or }
	oKey             // in a declared key: cand, pos
	oColon           // after a key: ':'
	oAfterVal        // ',' or '}'
	oNeedKey         // after ',': a key
)

// array substates
const (
	aStart    = iota // after [: a value or ]
	aAfterVal        // ',' or ']'
)

// string substates
const (
	sNormal = iota
	sEscape
	sHex // n: hex digits read
)

// number substates
const (
	nMinus = iota // after '-'
	nZero         // after a leading 0 (accepting)
	nInt          // in the integer digits (accepting)
	nDot          // after '.'
	nFrac         // in the fraction (accepting)
	nE            // after e/E
	nESign        // after the exponent's sign
	nExp          // in the exponent (accepting)
)

type frame struct {
	k    fkind
	st   uint8
	cur  uint8 // object: the property whose value is read
	utf  uint8 // string: continuation bytes still expected
	ulo  uint8 // string: the next continuation byte's range (well-formed UTF-8 only)
	uhi  uint8
	pos  uint32 // literal, object key: bytes read
	cnt  uint32 // string: characters written; array: items begun
	pst  uint32 // string with a pattern: the pattern's state
	s    *Schema
	seen uint64 // object: properties written; string: hex digits (sHex)
	cand uint64 // object key: properties whose name still matches
	num  string // number with bounds: its text so far
}

// MaxReadings bounds the readings a State keeps (anyOf branches that
// still fit). Past it the last ones are dropped: every reading kept is a
// valid one, so the output stays valid; only some valid outputs are no
// longer offered.
const MaxReadings = 64

// machine is one way of reading the output so far: a stack of frames
// (the innermost last) and the whitespace run.
type machine struct {
	fr []frame
	ws uint8
}

// State is what the output so far can be: one machine per reading (anyOf
// and enum branches that still fit). The zero State accepts nothing.
type State struct{ ms []machine }

// Start returns the state before any output: one value of s, optionally
// after whitespace.
func Start(s *Schema) *State {
	m := machine{}
	return &State{ms: dedupe(push(nil, m, s))}
}

// dedupe drops readings equal to an earlier one, and those past
// MaxReadings.
func dedupe(ms []machine) []machine {
	if len(ms) < 2 {
		return ms
	}
	out := ms[:0]
	for _, m := range ms {
		dup := false
		for _, o := range out {
			if o.ws == m.ws && slices.Equal(o.fr, m.fr) {
				dup = true
				break
			}
		}
		if !dup && len(out) < MaxReadings {
			out = append(out, m)
		}
	}
	return out
}

// push expands a value of s on m (one machine per anyOf branch) onto out.
func push(out []machine, m machine, s *Schema) []machine {
	if s.kind == kAnyOf {
		for _, a := range s.anyOf {
			out = push(out, m.clone(), a)
		}
		return out
	}
	m.fr = append(m.fr, frame{k: fValue, s: s})
	return append(out, m)
}

func (m machine) clone() machine {
	return machine{fr: slices.Clone(m.fr), ws: m.ws}
}

// Clone returns an independent copy.
func (st *State) Clone() *State {
	c := &State{ms: make([]machine, len(st.ms))}
	for i, m := range st.ms {
		c.ms[i] = m.clone()
	}
	return c
}

// Feed reads bytes; it returns false (and leaves st dead) if they cannot
// continue the output.
func (st *State) Feed(b []byte) bool {
	for _, c := range b {
		var next []machine
		for _, m := range st.ms {
			next = step(next, m, c)
		}
		st.ms = dedupe(next)
		if len(st.ms) == 0 {
			return false
		}
	}
	return true
}

// Alive reports whether the output so far is a valid prefix.
func (st *State) Alive() bool { return len(st.ms) > 0 }

// Complete reports whether the output so far is a whole value (a number
// may still go on).
func (st *State) Complete() bool {
	for _, m := range st.ms {
		if len(m.fr) == 0 || len(m.fr) == 1 && m.fr[0].k == fNum && numEnds(&m.fr[0]) {
			return true
		}
	}
	return false
}

// Done reports whether the value is complete and nothing but whitespace
// may follow.
func (st *State) Done() bool {
	for _, m := range st.ms {
		if len(m.fr) != 0 {
			return false
		}
	}
	return len(st.ms) > 0
}

func numAccepts(s uint8) bool { return s == nZero || s == nInt || s == nFrac || s == nExp }

// numEnds reports whether the number read so far is whole and fits its
// bounds.
func numEnds(f *frame) bool {
	return numAccepts(f.st) && (f.s.num == nil || f.s.num.fits(f.num))
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// step reads one byte on m, appending the machines it leads to.
func step(out []machine, m machine, c byte) []machine {
	if len(m.fr) == 0 {
		return out // the value is whole; the answer ends here
	}
	top := &m.fr[len(m.fr)-1]
	switch {
	case top.k == fObj && top.st == oKey:
		return objByte(out, m, top, c) // a declared key's bytes, blanks included
	case len(m.fr) == 1 && top.k == fValue && isSpace(c):
		return out // the answer starts with the value
	}
	switch top.k {
	case fStr:
		m.ws = 0
		return strByte(out, m, top, c)
	case fLit:
		if top.s.lit[top.pos] != c { // pos < len(lit): a whole literal is popped
			return out
		}
		top.pos++
		if int(top.pos) == len(top.s.lit) {
			m.fr = m.fr[:len(m.fr)-1]
		}
		m.ws = 0
		return append(out, m)
	case fNum:
		if ok := numByte(top, c); ok {
			m.ws = 0
			return append(out, m)
		}
		if !numEnds(top) {
			return out
		}
		m.fr = m.fr[:len(m.fr)-1] // the number ended; its parent reads c
		return step(out, m, c)
	}
	if isSpace(c) {
		if m.ws >= MaxSpace {
			return out
		}
		m.ws++
		return append(out, m)
	}
	m.ws = 0
	switch top.k {
	case fValue:
		return valueByte(out, m, top, c)
	case fObj:
		return objByte(out, m, top, c)
	case fArr:
		switch {
		case c == ']':
			if int(top.cnt) < top.s.minItems {
				return out
			}
			m.fr = m.fr[:len(m.fr)-1]
			return append(out, m)
		case top.s.maxItems >= 0 && int(top.cnt) >= top.s.maxItems:
			return out
		case c == ',' && top.st == aAfterVal:
			// the value after ',' is not optional: push it now
			top.cnt++
			return push(out, m, top.s.items)
		case top.st == aStart:
			top.st = aAfterVal
			top.cnt++
			var next []machine
			next = push(next, m, top.s.items)
			for _, n := range next {
				out = step(out, n, c)
			}
			return out
		}
		return out
	}
	return out
}

func valueByte(out []machine, m machine, top *frame, c byte) []machine {
	s := top.s
	set := func(k fkind, s *Schema) { *top = frame{k: k, s: s} }
	switch s.kind {
	case kAny:
		switch {
		case c == '{':
			set(fObj, anyObject)
		case c == '[':
			set(fArr, anyArray)
		case c == '"':
			set(fStr, anyString)
		case c == '-' || isDigit(c):
			set(fNum, anyNumber)
			numByte(top, c)
		case c == 't':
			set(fLit, litTrue)
			top.pos = 1
		case c == 'f':
			set(fLit, litFalse)
			top.pos = 1
		case c == 'n':
			set(fLit, litNull)
			top.pos = 1
		default:
			return out
		}
	case kObject:
		if c != '{' {
			return out
		}
		set(fObj, s)
	case kArray:
		if c != '[' {
			return out
		}
		set(fArr, s)
	case kString:
		if c != '"' {
			return out
		}
		set(fStr, s)
		top.pst = 1
	case kNumber, kInteger:
		set(fNum, s)
		if !numByte(top, c) {
			return out
		}
	case kBool:
		switch c {
		case 't':
			set(fLit, litTrue)
		case 'f':
			set(fLit, litFalse)
		default:
			return out
		}
		top.pos = 1
	case kNull:
		if c != 'n' {
			return out
		}
		set(fLit, litNull)
		top.pos = 1
	case kConst:
		if s.lit[0] != c {
			return out
		}
		set(fLit, s)
		top.pos = 1
	default:
		return out
	}
	if top.k == fLit && int(top.pos) == len(top.s.lit) {
		m.fr = m.fr[:len(m.fr)-1]
	}
	return append(out, m)
}

var (
	anyValue  = &Schema{id: -1, kind: kAny, maxItems: -1, maxLen: -1, mini: []byte("0")}
	anyObject = &Schema{id: -2, kind: kObject, free: true, maxItems: -1, maxLen: -1, mini: []byte("{}")}
	anyArray  = &Schema{id: -3, kind: kArray, items: anyValue, maxItems: -1, maxLen: -1, mini: []byte("[]")}
	anyNumber = &Schema{id: -4, kind: kNumber, maxItems: -1, maxLen: -1, mini: []byte("0")}
	litTrue   = &Schema{id: -5, kind: kConst, lit: []byte("true"), mini: []byte("true")}
	litFalse  = &Schema{id: -6, kind: kConst, lit: []byte("false"), mini: []byte("false")}
	litNull   = &Schema{id: -7, kind: kConst, lit: []byte("null"), mini: []byte("null")}
	anyString = &Schema{id: -8, kind: kString, maxItems: -1, maxLen: -1, mini: []byte(`""`)}
)

func objByte(out []machine, m machine, top *frame, c byte) []machine {
	s := top.s
	all := s.live // the properties that may be written
	switch top.st {
	case oStart, oAfterVal:
		if c == '}' && s.required&^top.seen == 0 {
			m.fr = m.fr[:len(m.fr)-1]
			return append(out, m)
		}
		if top.st == oAfterVal {
			if c != ',' || !s.free && all&^top.seen == 0 {
				return out
			}
			top.st = oNeedKey
			return append(out, m)
		}
		fallthrough
	case oNeedKey:
		if c != '"' {
			return out
		}
		if s.free {
			top.st = oColon
			m.fr = append(m.fr, frame{k: fStr, s: anyString, pst: 1})
			return append(out, m)
		}
		if all&^top.seen == 0 {
			return out // an object with no keys left (or none at all)
		}
		top.st, top.cand, top.pos = oKey, all&^top.seen, 0
		return append(out, m)
	case oKey:
		cand := top.cand
		if c == '"' { // the key's end, unless an escaped quote of a key goes on
			for i := range s.props {
				if cand&(1<<i) != 0 && len(s.props[i].key) == int(top.pos) {
					top.st, top.cur = oColon, uint8(i)
					return append(out, m)
				}
			}
		}
		for i := range s.props {
			if cand&(1<<i) != 0 && (len(s.props[i].key) <= int(top.pos) || s.props[i].key[top.pos] != c) {
				cand &^= 1 << i
			}
		}
		if cand == 0 {
			return out
		}
		top.cand, top.pos = cand, top.pos+1
		return append(out, m)
	case oColon:
		if c != ':' {
			return out
		}
		top.st = oAfterVal
		vs := anyValue
		if s.values != nil {
			vs = s.values
		}
		if !s.free {
			top.seen |= 1 << top.cur
			vs = s.props[top.cur].s
		}
		return push(out, m, vs)
	}
	return out
}

// utfLead is what a UTF-8 lead byte needs: how many continuation bytes,
// and the range of the first (no overlong forms, no surrogates, nothing
// above U+10FFFF).
func utfLead(c byte) (n, lo, hi uint8) {
	switch {
	case c <= 0xDF:
		return 1, 0x80, 0xBF
	case c == 0xE0:
		return 2, 0xA0, 0xBF
	case c == 0xED:
		return 2, 0x80, 0x9F
	case c <= 0xEF:
		return 2, 0x80, 0xBF
	case c == 0xF0:
		return 3, 0x90, 0xBF
	case c == 0xF4:
		return 3, 0x80, 0x8F
	}
	return 3, 0x80, 0xBF
}

func strByte(out []machine, m machine, top *frame, c byte) []machine {
	s := top.s
	switch top.st {
	case sEscape:
		switch c {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			top.st = sNormal
		case 'u':
			top.st, top.seen = sHex, 0
		default:
			return out
		}
		return append(out, m)
	case sHex:
		if !isDigit(c) && !(c >= 'a' && c <= 'f') && !(c >= 'A' && c <= 'F') {
			return out
		}
		if top.seen == 0 && (s.minLen > 0 || s.maxLen >= 0) && (c == 'd' || c == 'D') {
			return out // a surrogate pair: one code point, two UTF-16 units
		}
		top.seen++
		if top.seen == 4 {
			top.st = sNormal
		}
		return append(out, m)
	}
	if c == '"' && top.utf == 0 {
		if int(top.cnt) < s.minLen || s.pat != nil && !s.pat.accept[top.pst] {
			return out
		}
		m.fr = m.fr[:len(m.fr)-1]
		return append(out, m)
	}
	if s.pat != nil { // no escapes, no control characters: the bytes are the characters
		t := s.pat.next[top.pst][c]
		if !s.pat.live(t) {
			return out
		}
		top.pst = t
	}
	if top.utf > 0 {
		if c < top.ulo || c > top.uhi {
			return out
		}
		top.utf, top.ulo, top.uhi = top.utf-1, 0x80, 0xBF
		return append(out, m)
	}
	if c < 0x20 || s.maxLen >= 0 && int(top.cnt) >= s.maxLen {
		return out
	}
	top.cnt++
	switch {
	case c == '\\':
		if s.pat != nil {
			return out
		}
		top.st = sEscape
	case c < 0x80:
	case c >= 0xC2 && c <= 0xF4:
		if c >= 0xF0 && (s.minLen > 0 || s.maxLen >= 0) {
			return out // two UTF-16 units, one code point: lengths would disagree
		}
		top.utf, top.ulo, top.uhi = utfLead(c)
	default:
		return out
	}
	return append(out, m)
}

// numByte reads c into a number; false if c cannot continue it (or, for
// a number with bounds, no value of them can follow).
func numByte(f *frame, c byte) bool {
	if !numSyntax(f, c) {
		return false
	}
	if r := f.s.num; r != nil {
		f.num += string(c)
		return r.feasible(f.num)
	}
	return true
}

// numSyntax reads c into a number's syntax (no exponent with bounds).
func numSyntax(f *frame, c byte) bool {
	integer := f.s.kind == kInteger
	bounded := f.s.num != nil
	switch f.k {
	case fNum:
	default:
		return false
	}
	if f.pos == 0 { // the first byte
		f.pos = 1
		switch {
		case c == '-':
			f.st = nMinus
		case c == '0':
			f.st = nZero
		case isDigit(c):
			f.st = nInt
		default:
			return false
		}
		return true
	}
	switch f.st {
	case nMinus:
		switch {
		case c == '0':
			f.st = nZero
		case isDigit(c):
			f.st = nInt
		default:
			return false
		}
	case nZero, nInt:
		switch {
		case isDigit(c) && f.st == nInt:
		case c == '.' && !integer:
			f.st = nDot
		case (c == 'e' || c == 'E') && !integer && !bounded:
			f.st = nE
		default:
			return false
		}
	case nDot, nFrac:
		switch {
		case isDigit(c):
			f.st = nFrac
		case (c == 'e' || c == 'E') && f.st == nFrac && !bounded:
			f.st = nE
		default:
			return false
		}
	case nE:
		switch {
		case c == '+' || c == '-':
			f.st = nESign
		case isDigit(c):
			f.st = nExp
		default:
			return false
		}
	case nESign, nExp:
		if !isDigit(c) {
			return false
		}
		f.st = nExp
	}
	return true
}

// key appends a compact encoding of the state (hashed with the schema's
// fingerprint for the mask cache's key) to buf.
func (st *State) key(buf []byte) []byte {
	for _, m := range st.ms {
		buf = binary.AppendUvarint(buf, uint64(len(m.fr)))
		buf = append(buf, m.ws)
		for _, f := range m.fr {
			buf = append(buf, byte(f.k), f.st, f.cur, f.utf, f.ulo, f.uhi)
			buf = binary.LittleEndian.AppendUint32(buf, f.pos)
			buf = binary.LittleEndian.AppendUint32(buf, f.cnt)
			buf = binary.LittleEndian.AppendUint32(buf, f.pst)
			buf = binary.LittleEndian.AppendUint32(buf, uint32(f.s.id))
			buf = binary.LittleEndian.AppendUint64(buf, f.seen)
			buf = binary.LittleEndian.AppendUint64(buf, f.cand)
			buf = binary.AppendUvarint(buf, uint64(len(f.num)))
			buf = append(buf, f.num...)
		}
	}
	return buf
}
