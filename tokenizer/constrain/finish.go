package constrain

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// finish resolves $refs by pointer, flattens anyOf, finds each node's
// shortest value and leaves out the choices that have none (an optional
// property or alternative that needs itself forever). A schema whose
// root has no finite value, or a $ref or anyOf cycle with no value in
// between, is refused.
func (c *compiler) finish(root *Schema) (*Schema, error) {
	resolve := func(s *Schema) (*Schema, error) {
		for n := 0; s.kind == kRef; n++ {
			if n > len(c.nodes) {
				return nil, fmt.Errorf("$ref %q refers to itself with no value in between", s.refName)
			}
			s = s.ref
		}
		return s, nil
	}
	var err error
	if root, err = resolve(root); err != nil {
		return nil, err
	}
	for _, s := range c.nodes {
		for i := range s.props {
			if s.props[i].s, err = resolve(s.props[i].s); err != nil {
				return nil, err
			}
		}
		for _, p := range []**Schema{&s.items, &s.values} {
			if *p != nil {
				if *p, err = resolve(*p); err != nil {
					return nil, err
				}
			}
		}
		for i := range s.anyOf {
			if s.anyOf[i], err = resolve(s.anyOf[i]); err != nil {
				return nil, err
			}
		}
	}
	if err := c.flatten(); err != nil {
		return nil, err
	}
	if err := c.shortest(); err != nil {
		return nil, err
	}
	if root.mini == nil {
		return nil, fmt.Errorf("no finite JSON value fits the schema (a required value needs itself forever)")
	}
	c.prune()
	return root, nil
}

// flatten replaces each anyOf's alternatives with the non-anyOf schemas
// they reach (an anyOf that is its own alternative adds nothing).
func (c *compiler) flatten() error {
	flat := map[*Schema][]*Schema{}
	total := 0
	for _, s := range c.nodes {
		if s.kind != kAnyOf {
			continue
		}
		seen := map[*Schema]bool{}
		var out []*Schema
		var walk func(*Schema)
		walk = func(a *Schema) {
			if seen[a] {
				return
			}
			seen[a] = true
			if a.kind != kAnyOf {
				out = append(out, a)
				return
			}
			for _, b := range a.anyOf {
				walk(b)
			}
		}
		walk(s)
		total += len(out)
		if total > MaxAlts {
			return fmt.Errorf("the schema is too large: its anyOf lists come to more than %d alternatives", MaxAlts)
		}
		if len(out) == 0 {
			return fmt.Errorf("an anyOf refers to itself with no value in between")
		}
		flat[s] = out
	}
	for s, out := range flat {
		s.anyOf = out
	}
	return nil
}

// shortest computes every node's shortest value, children before parents
// (nodes are made parents first), again until nothing changes: recursion
// through $ref needs more than one round.
func (c *compiler) shortest() error {
	for pass := 0; ; pass++ {
		if pass > maxPasses {
			return fmt.Errorf("the schema's recursion is too deep to compile")
		}
		changed := false
		for i := len(c.nodes) - 1; i >= 0; i-- {
			s := c.nodes[i]
			if s.kind == kRef || s.mini != nil && !s.reducible() {
				continue
			}
			v, ok := s.shortestValue()
			if len(v) > MaxMiniBytes {
				return fmt.Errorf("the shortest value the schema allows is longer than %d bytes", MaxMiniBytes)
			}
			if !ok || s.mini != nil && len(v) >= len(s.mini) {
				continue
			}
			s.mini, changed = v, true
		}
		if !changed {
			return nil
		}
	}
}

// reducible reports whether s's shortest value depends on other nodes.
func (s *Schema) reducible() bool {
	return s.kind == kObject || s.kind == kArray || s.kind == kAnyOf
}

// shortestValue is s's shortest value from its children's (false: none
// known yet).
func (s *Schema) shortestValue() ([]byte, bool) {
	switch s.kind {
	case kAny:
		return []byte("0"), true
	case kBool:
		return []byte("true"), true
	case kNull:
		return []byte("null"), true
	case kConst:
		return s.lit, true
	case kNumber, kInteger:
		if s.num == nil {
			return []byte("0"), true
		}
		return s.num.completion("")
	case kString:
		fill, ok := s.strFill(1, 0)
		if !ok {
			return nil, false
		}
		return append(append([]byte{'"'}, fill...), '"'), true
	case kArray:
		if s.minItems == 0 {
			return []byte("[]"), true
		}
		if s.items.mini == nil {
			return nil, false
		}
		if s.minItems*(len(s.items.mini)+1) > MaxMiniBytes {
			return make([]byte, MaxMiniBytes+1), false // too long: refused
		}
		out := []byte{'['}
		for i := range s.minItems {
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, s.items.mini...)
		}
		return append(out, ']'), true
	case kObject:
		out := []byte{'{'}
		first := true
		for i, p := range s.props {
			if s.required&(1<<i) == 0 {
				continue
			}
			if p.s.mini == nil {
				return nil, false
			}
			if !first {
				out = append(out, ',')
			}
			first = false
			out = appendProp(out, p)
			if len(out) > MaxMiniBytes {
				return out, false
			}
		}
		return append(out, '}'), true
	case kAnyOf:
		var best []byte
		for _, a := range s.anyOf {
			if a.mini != nil && (best == nil || len(a.mini) < len(best)) {
				best = a.mini
			}
		}
		return best, best != nil
	}
	return nil, false
}

func appendProp(out []byte, p prop) []byte {
	out = append(out, '"')
	out = append(out, p.key...)
	out = append(out, `":`...)
	return append(out, p.s.mini...)
}

// prune leaves out the choices with no finite value: anyOf alternatives,
// optional properties, array items (then the array stays empty) and the
// values of a free object (then it has no keys).
func (c *compiler) prune() {
	for _, s := range c.nodes {
		switch s.kind {
		case kAnyOf:
			alts := s.anyOf[:0]
			for _, a := range s.anyOf {
				if a.mini != nil {
					alts = append(alts, a)
				}
			}
			s.anyOf = alts
		case kObject:
			for i, p := range s.props {
				if p.s.mini != nil {
					s.live |= 1 << i
				}
			}
			if s.values != nil && s.values.mini == nil {
				s.free, s.values = false, nil
			}
		case kArray:
			if s.items.mini == nil {
				s.maxItems = 0
			}
		}
	}
}

// strFill returns the shortest content that closes a string of s from
// pattern state q with n characters written (false: none).
func (s *Schema) strFill(q uint32, n int) ([]byte, bool) {
	if s.pat == nil {
		if s.maxLen >= 0 && n > s.maxLen {
			return nil, false
		}
		return bytes.Repeat([]byte{'a'}, max(0, s.minLen-n)), true
	}
	if sh := s.pat.short[q]; sh != nil && n+chars(sh) >= s.minLen && (s.maxLen < 0 || n+chars(sh) <= s.maxLen) {
		return sh, true
	}
	return s.strSearch(q, n)
}

// maxStrSearch bounds the breadth-first search for a pattern's string
// that also fits minLength and maxLength.
const maxStrSearch = 1 << 18

type strNode struct {
	q    uint32
	n    int
	prev int
	b    byte
}

func (s *Schema) strSearch(q0 uint32, n0 int) ([]byte, bool) {
	nodes := []strNode{{q: q0, n: n0, prev: -1}}
	seen := map[[2]int]bool{{int(q0), min(n0, s.minLen)}: true}
	for i := 0; i < len(nodes) && len(nodes) < maxStrSearch; i++ {
		x := nodes[i]
		if s.pat.accept[x.q] && x.n >= s.minLen {
			var out []byte
			for j := i; nodes[j].prev >= 0; j = nodes[j].prev {
				out = append(out, nodes[j].b)
			}
			for a, b := 0, len(out)-1; a < b; a, b = a+1, b-1 {
				out[a], out[b] = out[b], out[a]
			}
			return out, true
		}
		for c := range 256 {
			t := s.pat.next[x.q][c]
			if !s.pat.live(t) {
				continue
			}
			n := x.n
			if c&0xC0 != 0x80 {
				n++
			}
			if s.maxLen >= 0 && n > s.maxLen {
				continue
			}
			k := [2]int{int(t), min(n, s.minLen)}
			if seen[k] {
				continue
			}
			seen[k] = true
			nodes = append(nodes, strNode{q: t, n: n, prev: i, b: byte(c)})
		}
	}
	return nil, false
}

// fingerprint is a hash of the compiled schema: its nodes' ids, kinds and
// contents. Two schemas with the same fingerprint are the same automaton
// (node ids included, which state keys name), so they can share masks.
func (s *Schema) fingerprint() [32]byte {
	h := sha256.New()
	var b []byte
	seen := map[*Schema]bool{}
	var walk func(*Schema)
	walk = func(n *Schema) {
		b = binary.LittleEndian.AppendUint32(b[:0], uint32(n.id))
		h.Write(b)
		if n.id < 0 || seen[n] { // a built-in node, or one written already (recursion)
			return
		}
		seen[n] = true
		b = append(b[:0], byte(n.kind))
		if n.free {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		b = binary.LittleEndian.AppendUint64(b, n.required)
		b = binary.LittleEndian.AppendUint64(b, n.live)
		for _, x := range []int{n.minItems, n.maxItems, n.minLen, n.maxLen, len(n.props), len(n.lit), len(n.anyOf)} {
			b = binary.AppendVarint(b, int64(x))
		}
		h.Write(b)
		h.Write(n.lit)
		if n.pat != nil {
			fmt.Fprintf(h, "pattern %d %s", len(n.pat.src), n.pat.src)
		}
		if r := n.num; r != nil {
			fmt.Fprintf(h, "range %t %s %t %s %t %v", r.integer, ratText(r.lo), r.loEx, ratText(r.hi), r.hiEx, r.mult)
		}
		for _, p := range n.props {
			h.Write(binary.AppendUvarint(nil, uint64(len(p.key))))
			h.Write(p.key)
			walk(p.s)
		}
		for _, a := range n.anyOf {
			walk(a)
		}
		for _, x := range []*Schema{n.items, n.values} {
			if x != nil {
				h.Write([]byte{1})
				walk(x)
			} else {
				h.Write([]byte{0})
			}
		}
	}
	walk(s)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// chars counts the UTF-8 characters of b (its bytes that are not
// continuation bytes).
func chars(b []byte) int {
	n := 0
	for _, c := range b {
		if c&0xC0 != 0x80 {
			n++
		}
	}
	return n
}
