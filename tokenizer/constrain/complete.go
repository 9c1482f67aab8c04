package constrain

// Completion returns the shortest bytes that make the output so far a
// whole value (nil when the state is dead). A sampler out of budget writes
// only these.
func (st *State) Completion() []byte {
	var best []byte
	found := false
	for _, m := range st.ms {
		c := m.completion()
		if !found || len(c) < len(best) {
			best, found = c, true
		}
	}
	return best
}

func (m machine) completion() []byte {
	var out []byte
	for i := len(m.fr) - 1; i >= 0; i-- {
		f := m.fr[i]
		switch f.k {
		case fValue:
			out = append(out, f.s.mini...)
		case fLit:
			out = append(out, f.s.lit[f.pos:]...)
		case fStr:
			out = strCompletion(out, f)
		case fNum:
			if f.s.num != nil {
				c, _ := f.s.num.completion(f.num)
				out = append(out, c...)
			} else if !numAccepts(f.st) {
				out = append(out, '0')
			}
		case fArr:
			for n := int(f.cnt); n < f.s.minItems; n++ {
				if n > 0 {
					out = append(out, ',')
				}
				out = append(out, f.s.items.mini...)
			}
			out = append(out, ']')
		case fObj:
			out = objCompletion(out, f)
		}
	}
	return out
}

// strCompletion finishes an escape or a UTF-8 sequence, then the
// characters minLength or the pattern still need, and the quote.
func strCompletion(out []byte, f frame) []byte {
	switch f.st {
	case sEscape:
		out = append(out, 'n')
	case sHex:
		for range 4 - f.seen {
			out = append(out, '0')
		}
	}
	q := f.pst
	for i := range f.utf {
		c := byte(0x80)
		if i == 0 {
			c = f.ulo
		}
		out = append(out, c)
		if f.s.pat != nil {
			q = f.s.pat.next[q][c]
		}
	}
	fill, _ := f.s.strFill(q, int(f.cnt))
	out = append(out, fill...)
	return append(out, '"')
}

func objCompletion(out []byte, f frame) []byte {
	s := f.s
	if s.free {
		switch f.st {
		case oColon:
			out = append(out, ':')
			out = append(out, freeValue(s)...)
		case oNeedKey:
			out = append(out, `"":`...)
			out = append(out, freeValue(s)...)
		}
		return append(out, '}')
	}
	seen := f.seen
	comma := f.st == oAfterVal
	switch f.st {
	case oKey: // finish the key: a matching property, required ones first
		pick := -1
		for i := range s.props {
			if f.cand&(1<<i) != 0 && (pick < 0 || s.required&(1<<i) != 0 && s.required&(1<<pick) == 0) {
				pick = i
			}
		}
		out = append(out, s.props[pick].key[f.pos:]...)
		out = append(out, `":`...)
		out = append(out, s.props[pick].s.mini...)
		seen |= 1 << pick
		comma = true
	case oColon:
		out = append(out, ':')
		out = append(out, s.props[f.cur].s.mini...)
		seen |= 1 << f.cur
		comma = true
	case oNeedKey:
		if s.required&^seen == 0 { // a key must follow the comma
			for i := range s.props {
				if seen&(1<<i) == 0 && s.live&(1<<i) != 0 {
					out = appendProp(out, s.props[i])
					break
				}
			}
		}
	}
	for i := range s.props {
		if s.required&^seen&(1<<i) != 0 {
			if comma {
				out = append(out, ',')
			}
			out = appendProp(out, s.props[i])
			comma = true
		}
	}
	return append(out, '}')
}

func freeValue(s *Schema) []byte {
	if s.values != nil {
		return s.values.mini
	}
	return []byte("0")
}
