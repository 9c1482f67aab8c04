package constrain

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// A dfa holds a string's content to a pattern (JSON Schema `pattern`, or a
// `format` written as one). It reads the string's bytes as the output
// writes them: a string held to a pattern has no backslash escapes and no
// control characters, so its bytes are its characters. State 0 is dead;
// state 1 is the start.
type dfa struct {
	next   [][256]uint32 // next[state][byte]
	accept []bool
	short  [][]byte // short[state]: the shortest bytes from state to an accepting state (nil: none)
	src    string
}

// maxDFAStates bounds a pattern's automaton (each state is a 1 KiB table).
const maxDFAStates = 512

// formats are the string formats held as patterns (ECMAScript syntax,
// anchored). email and uri are the plain forms, not every form RFC 5321 and
// RFC 3986 allow.
var formats = map[string]string{
	"date":      `^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$`,
	"time":      `^([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`,
	"date-time": `^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`,
	"uuid":      `^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`,
	"email":     `^[A-Za-z0-9!#$%&'*+/=?^_{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_{|}~-]+)*@[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)+$`,
	"ipv4":      `^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$`,
	"uri":       `^[A-Za-z][A-Za-z0-9+.-]*:[^ <>"{}|^` + "`" + `]+$`,
}

// nfa is a Thompson automaton over bytes: each state has byte-range edges
// and empty edges.
type nfa struct {
	edges [][]nedge
	eps   [][]int
}

type nedge struct {
	lo, hi byte
	to     int
}

func (n *nfa) state() int {
	n.edges = append(n.edges, nil)
	n.eps = append(n.eps, nil)
	return len(n.edges) - 1
}

// frag is a piece of the automaton from in to out.
type frag struct{ in, out int }

// rparser reads the ECMAScript regex subset: literals, escapes (\d \w \s
// and escaped punctuation), classes, ., groups, |, ?, *, +, {m,n}; ^ and $
// only at the ends.
type rparser struct {
	src string
	i   int
	n   *nfa
}

const maxNFAStates = 2000

// formatDFAs keeps the formats' automata, built on first use.
var formatDFAs sync.Map // pattern source -> *dfa

func formatPattern(src string) (*dfa, error) {
	if d, ok := formatDFAs.Load(src); ok {
		return d.(*dfa), nil
	}
	d, err := compilePattern(src)
	if err != nil {
		return nil, err
	}
	formatDFAs.Store(src, d)
	return d, nil
}

func compilePattern(src string) (*dfa, error) {
	if len(src) > 1000 {
		return nil, fmt.Errorf("a pattern of %d bytes is too long (at most 1000)", len(src))
	}
	body, head, tail := src, false, false
	if strings.HasPrefix(body, "^") {
		body, head = body[1:], true
	}
	if strings.HasSuffix(body, "$") && !strings.HasSuffix(body, `\$`) {
		body, tail = body[:len(body)-1], true
	}
	p := &rparser{src: body, n: &nfa{}}
	f, err := p.alt()
	if err != nil {
		return nil, fmt.Errorf("pattern %q: %v", src, err)
	}
	if p.i != len(p.src) {
		return nil, fmt.Errorf("pattern %q: unexpected %q at %d", src, p.src[p.i], p.i)
	}
	if !head { // unanchored: any characters may come before and after
		f = p.cat(p.star(p.anyChar()), f)
	}
	if !tail {
		f = p.cat(f, p.star(p.anyChar()))
	}
	if len(p.n.edges) > maxNFAStates {
		return nil, fmt.Errorf("pattern %q is too large", src)
	}
	d, err := determinize(p.n, f)
	if err != nil {
		return nil, fmt.Errorf("pattern %q: %v", src, err)
	}
	d.src = src
	return d, nil
}

func (p *rparser) more() bool { return p.i < len(p.src) }

func (p *rparser) alt() (frag, error) {
	f, err := p.seq()
	if err != nil {
		return f, err
	}
	for p.more() && p.src[p.i] == '|' {
		p.i++
		g, err := p.seq()
		if err != nil {
			return g, err
		}
		in, out := p.n.state(), p.n.state()
		p.n.eps[in] = append(p.n.eps[in], f.in, g.in)
		p.n.eps[f.out] = append(p.n.eps[f.out], out)
		p.n.eps[g.out] = append(p.n.eps[g.out], out)
		f = frag{in, out}
	}
	return f, nil
}

func (p *rparser) empty() frag { s := p.n.state(); return frag{s, s} }

func (p *rparser) cat(a, b frag) frag {
	p.n.eps[a.out] = append(p.n.eps[a.out], b.in)
	return frag{a.in, b.out}
}

func (p *rparser) star(a frag) frag {
	s := p.n.state()
	p.n.eps[s] = append(p.n.eps[s], a.in)
	p.n.eps[a.out] = append(p.n.eps[a.out], s)
	return frag{s, s}
}

func (p *rparser) opt(a frag) frag {
	p.n.eps[a.in] = append(p.n.eps[a.in], a.out)
	return a
}

func (p *rparser) seq() (frag, error) {
	f := p.empty()
	for p.more() && p.src[p.i] != '|' && p.src[p.i] != ')' {
		start := p.i
		a, err := p.atom()
		if err != nil {
			return f, err
		}
		end := p.i
		a, err = p.repeat(a, start, end)
		if err != nil {
			return f, err
		}
		f = p.cat(f, a)
		if len(p.n.edges) > maxNFAStates {
			return f, fmt.Errorf("too large")
		}
	}
	return f, nil
}

// repeat applies a quantifier after the atom read from src[start:end]
// (re-read for each copy {m,n} needs).
func (p *rparser) repeat(a frag, start, end int) (frag, error) {
	if !p.more() {
		return a, nil
	}
	lo, hi := 1, 1
	switch p.src[p.i] {
	case '?':
		lo, hi = 0, 1
	case '*':
		lo, hi = 0, -1
	case '+':
		lo, hi = 1, -1
	case '{':
		j := strings.IndexByte(p.src[p.i:], '}')
		if j < 0 {
			return a, fmt.Errorf("unclosed {")
		}
		spec := p.src[p.i+1 : p.i+j]
		m, n, comma := strings.Cut(spec, ",")
		var err error
		if lo, err = strconv.Atoi(m); err != nil || lo > 1000 {
			return a, fmt.Errorf("bad repeat {%s}", spec)
		}
		hi = lo
		if comma {
			hi = -1
			if n != "" {
				if hi, err = strconv.Atoi(n); err != nil || hi < lo || hi > 1000 {
					return a, fmt.Errorf("bad repeat {%s}", spec)
				}
			}
		}
		p.i += j
	default:
		return a, nil
	}
	p.i++
	if p.more() && (p.src[p.i] == '?' || p.src[p.i] == '+') { // lazy or possessive: same language
		p.i++
	}
	after := p.i
	copyAtom := func() frag { // the atom again
		p.i = start
		c, _ := p.atom()
		p.i = after
		return c
	}
	f := p.empty()
	first := true
	next := func() frag {
		if first {
			first = false
			return a
		}
		return copyAtom()
	}
	for range lo {
		f = p.cat(f, next())
		if len(p.n.edges) > maxNFAStates {
			return f, fmt.Errorf("too large")
		}
	}
	switch {
	case hi < 0:
		f = p.cat(f, p.star(next()))
	default:
		for range hi - lo {
			f = p.cat(f, p.opt(next()))
			if len(p.n.edges) > maxNFAStates {
				return f, fmt.Errorf("too large")
			}
		}
	}
	_ = end
	return f, nil
}

func (p *rparser) atom() (frag, error) {
	c := p.src[p.i]
	switch c {
	case '(':
		p.i++
		if strings.HasPrefix(p.src[p.i:], "?:") {
			p.i += 2
		} else if p.more() && p.src[p.i] == '?' {
			return frag{}, fmt.Errorf("lookaround is not supported")
		}
		f, err := p.alt()
		if err != nil {
			return f, err
		}
		if !p.more() || p.src[p.i] != ')' {
			return f, fmt.Errorf("unclosed (")
		}
		p.i++
		return f, nil
	case '[':
		set, err := p.class()
		if err != nil {
			return frag{}, err
		}
		return p.chars(set), nil
	case '.':
		p.i++
		return p.anyChar(), nil
	case '\\':
		set, err := p.escape()
		if err != nil {
			return frag{}, err
		}
		return p.chars(set), nil
	case '^', '$', '*', '+', '?', '{', ')', '|':
		return frag{}, fmt.Errorf("unexpected %q at %d", c, p.i)
	}
	p.i++
	var set [128]bool
	if c >= 0x80 { // a UTF-8 literal: its bytes in a row
		f := p.lit(c)
		for p.more() && p.src[p.i]&0xC0 == 0x80 {
			f = p.cat(f, p.lit(p.src[p.i]))
			p.i++
		}
		return f, nil
	}
	set[c] = true
	return p.chars(set), nil
}

func (p *rparser) lit(c byte) frag {
	in, out := p.n.state(), p.n.state()
	p.n.edges[in] = append(p.n.edges[in], nedge{c, c, out})
	return frag{in, out}
}

// chars is one ASCII character of set (characters a JSON string must
// escape are left out: a held string is written without escapes).
func (p *rparser) chars(set [128]bool) frag {
	in, out := p.n.state(), p.n.state()
	for c := 0x20; c < 128; c++ {
		if set[c] && c != '"' && c != '\\' {
			p.n.edges[in] = append(p.n.edges[in], nedge{byte(c), byte(c), out})
		}
	}
	return frag{in, out}
}

// anyChar is any character a held string can have: printable ASCII but
// " and \, or one UTF-8 sequence.
func (p *rparser) anyChar() frag {
	var set [128]bool
	for c := range set {
		set[c] = true
	}
	f := p.chars(set)
	p.nonASCII(f)
	return f
}

// nonASCII adds the UTF-8 sequences of 2 to 4 bytes from f.in to f.out
// (the string frame checks the finer UTF-8 rules).
func (p *rparser) nonASCII(f frag) {
	for n, lead := range [][2]byte{{0xC2, 0xDF}, {0xE0, 0xEF}, {0xF0, 0xF4}} {
		s := p.n.state()
		p.n.edges[f.in] = append(p.n.edges[f.in], nedge{lead[0], lead[1], s})
		for range n {
			t := p.n.state()
			p.n.edges[s] = append(p.n.edges[s], nedge{0x80, 0xBF, t})
			s = t
		}
		p.n.edges[s] = append(p.n.edges[s], nedge{0x80, 0xBF, f.out})
	}
}

func (p *rparser) escape() ([128]bool, error) {
	var set [128]bool
	p.i++
	if !p.more() {
		return set, fmt.Errorf("trailing backslash")
	}
	c := p.src[p.i]
	p.i++
	switch c {
	case 'd':
		rangeSet(&set, '0', '9')
	case 'w':
		rangeSet(&set, '0', '9')
		rangeSet(&set, 'a', 'z')
		rangeSet(&set, 'A', 'Z')
		set['_'] = true
	case 's':
		set[' '] = true // the other blanks must be escaped in JSON
	case 'D', 'W', 'S':
		lower, err := (&rparser{src: `\` + strings.ToLower(string(c))}).escape()
		if err != nil {
			return set, err
		}
		for i := range set {
			set[i] = !lower[i]
		}
	case 'n', 't', 'r', 'f', 'v', 'b', 'B', 'u', 'x', 'c', 'p', 'P', 'k':
		return set, fmt.Errorf(`\%c is not supported`, c)
	default:
		if c >= '0' && c <= '9' {
			return set, fmt.Errorf("back references are not supported")
		}
		if c >= 0x80 {
			return set, fmt.Errorf("escaped non-ASCII is not supported")
		}
		set[c] = true
	}
	return set, nil
}

func rangeSet(set *[128]bool, lo, hi byte) {
	for c := lo; c <= hi; c++ {
		set[c] = true
	}
}

func (p *rparser) class() ([128]bool, error) {
	var set [128]bool
	p.i++ // [
	neg := p.more() && p.src[p.i] == '^'
	if neg {
		p.i++
	}
	first := true
	for p.more() && (p.src[p.i] != ']' || first) {
		first = false
		var lo byte
		switch c := p.src[p.i]; {
		case c == '\\':
			e, err := p.escape()
			if err != nil {
				return set, err
			}
			n := 0
			for i := range e {
				if e[i] {
					set[i], lo, n = true, byte(i), n+1
				}
			}
			if n != 1 {
				continue
			}
		case c >= 0x80:
			return set, fmt.Errorf("non-ASCII in a class is not supported")
		default:
			lo = c
			p.i++
			set[c] = true
		}
		if p.i+1 < len(p.src) && p.src[p.i] == '-' && p.src[p.i+1] != ']' {
			p.i++
			hi := p.src[p.i]
			if hi == '\\' {
				e, err := p.escape()
				if err != nil {
					return set, err
				}
				for i := range e {
					if e[i] {
						hi = byte(i)
					}
				}
			} else {
				p.i++
			}
			if hi < lo || hi >= 0x80 {
				return set, fmt.Errorf("bad class range")
			}
			rangeSet(&set, lo, hi)
		}
	}
	if !p.more() {
		return set, fmt.Errorf("unclosed [")
	}
	p.i++
	if neg {
		for i := range set {
			set[i] = !set[i]
		}
	}
	return set, nil
}

// dfaStates numbers the states of d as a construction finds them: each
// state stands for a value (a set of NFA states, a pair of DFA states)
// known by its key. State 0 is the dead state, state 1 the start.
type dfaStates[K comparable, V any] struct {
	d      *dfa
	index  map[K]uint32
	states []V
}

// newStates starts d with its dead state and the start state start.
func newStates[K comparable, V any](d *dfa, key K, start V) *dfaStates[K, V] {
	var dead V
	d.next, d.accept = make([][256]uint32, 2), make([]bool, 2)
	return &dfaStates[K, V]{d: d, index: map[K]uint32{key: 1}, states: []V{dead, start}}
}

// id is the state of key, added (with v) when new; at most maxDFAStates.
func (s *dfaStates[K, V]) id(key K, v V) (uint32, error) {
	if id, ok := s.index[key]; ok {
		return id, nil
	}
	if len(s.states) >= maxDFAStates {
		return 0, fmt.Errorf("more than %d states", maxDFAStates)
	}
	id := uint32(len(s.states))
	s.index[key] = id
	s.states = append(s.states, v)
	s.d.next = append(s.d.next, [256]uint32{})
	s.d.accept = append(s.d.accept, false)
	return id, nil
}

// determinize builds the dfa of f by subset construction, with at most
// maxDFAStates states.
func determinize(n *nfa, f frag) (*dfa, error) {
	closure := func(set []int) []int {
		seen := map[int]bool{}
		stack := append([]int(nil), set...)
		for len(stack) > 0 {
			s := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[s] {
				continue
			}
			seen[s] = true
			stack = append(stack, n.eps[s]...)
		}
		out := make([]int, 0, len(seen))
		for s := range n.edges {
			if seen[s] {
				out = append(out, s)
			}
		}
		return out
	}
	key := func(set []int) string { return fmt.Sprint(set) }
	d := &dfa{}
	start := closure([]int{f.in})
	st := newStates(d, key(start), start)
	for q := 1; q < len(st.states); q++ {
		for _, s := range st.states[q] {
			if s == f.out {
				d.accept[q] = true
			}
		}
		var to [256][]int
		for _, s := range st.states[q] {
			for _, e := range n.edges[s] {
				for c := int(e.lo); c <= int(e.hi); c++ {
					to[c] = append(to[c], e.to)
				}
			}
		}
		closed := map[string][]int{} // bytes with the same targets share a closure
		for c := range 256 {
			if len(to[c]) == 0 {
				continue
			}
			raw := key(to[c])
			cl, ok := closed[raw]
			if !ok {
				cl = closure(to[c])
				closed[raw] = cl
			}
			id, err := st.id(key(cl), cl)
			if err != nil {
				return nil, err
			}
			d.next[q][c] = id
		}
	}
	d.shortest()
	return d, nil
}

// shortest fills d.short by a backward breadth-first search from the
// accepting states, preferring the smallest byte.
func (d *dfa) shortest() {
	d.short = make([][]byte, len(d.next))
	layer := make([]int, len(d.next)) // 1 + the length of short; 0: not reached
	n := 0
	for q := 1; q < len(d.next); q++ {
		if d.accept[q] {
			d.short[q], layer[q] = []byte{}, 1
			n++
		}
	}
	for l := 1; n > 0; l++ {
		n = 0
		for q := 1; q < len(d.next); q++ {
			if layer[q] != 0 {
				continue
			}
			for c := range 256 {
				if t := d.next[q][c]; t != 0 && layer[t] == l {
					d.short[q] = append([]byte{byte(c)}, d.short[t]...)
					layer[q] = l + 1
					n++
					break
				}
			}
		}
	}
}

// live reports whether an accepting state can still be reached from q.
func (d *dfa) live(q uint32) bool { return q != 0 && d.short[q] != nil }

// intersect is the automaton of the strings both a and b accept (pairs of
// their states, at most maxDFAStates).
func intersect(a, b *dfa) (*dfa, error) {
	d := &dfa{src: a.src + " and " + b.src}
	st := newStates(d, [2]uint32{1, 1}, [2]uint32{1, 1})
	for q := 1; q < len(st.states); q++ {
		x, y := st.states[q][0], st.states[q][1]
		d.accept[q] = a.accept[x] && b.accept[y]
		for c := range 256 {
			p := [2]uint32{a.next[x][c], b.next[y][c]}
			if p[0] == 0 || p[1] == 0 {
				continue
			}
			id, err := st.id(p, p)
			if err != nil {
				return nil, err
			}
			d.next[q][c] = id
		}
	}
	d.shortest()
	return d, nil
}
