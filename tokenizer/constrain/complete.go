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
			out = minimal(out, f.s, 0)
		case fLit:
			out = append(out, f.s.lit[f.pos:]...)
		case fStr:
			switch f.st {
			case sEscape:
				out = append(out, 'n')
			case sHex:
				for range 4 - f.seen {
					out = append(out, '0')
				}
			}
			for range f.utf {
				out = append(out, 0x80)
			}
			out = append(out, '"')
		case fNum:
			if !numAccepts(f.st) {
				out = append(out, '0')
			}
		case fArr:
			out = append(out, ']')
		case fObj:
			out = objCompletion(out, f)
		}
	}
	return out
}

func objCompletion(out []byte, f frame) []byte {
	s := f.s
	if s.free {
		switch f.st {
		case oColon:
			out = append(out, ":0"...)
		case oNeedKey:
			out = append(out, `"":0`...)
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
		out = minimal(out, s.props[pick].s, 0)
		seen |= 1 << pick
		comma = true
	case oColon:
		out = append(out, ':')
		out = minimal(out, s.props[f.cur].s, 0)
		seen |= 1 << f.cur
		comma = true
	case oNeedKey:
		if s.required&^seen == 0 { // a key must follow the comma
			for i := range s.props {
				if seen&(1<<i) == 0 {
					out = prop1(out, s.props[i])
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
			out = prop1(out, s.props[i])
			comma = true
		}
	}
	return append(out, '}')
}

func prop1(out []byte, p prop) []byte {
	out = append(out, '"')
	out = append(out, p.key...)
	out = append(out, `":`...)
	return minimal(out, p.s, 0)
}

// minimal appends the shortest value of s.
func minimal(out []byte, s *Schema, depth int) []byte {
	if depth > 64 {
		return append(out, "null"...) // a schema that needs itself forever
	}
	switch s.kind {
	case kAny, kNumber, kInteger:
		return append(out, '0')
	case kString:
		return append(out, `""`...)
	case kBool:
		return append(out, "true"...)
	case kNull:
		return append(out, "null"...)
	case kConst:
		return append(out, s.lit...)
	case kArray:
		return append(out, "[]"...)
	case kAnyOf:
		var best []byte
		for i, a := range s.anyOf {
			if b := minimal(nil, a, depth+1); i == 0 || len(b) < len(best) {
				best = b
			}
		}
		return append(out, best...)
	case kObject:
		out = append(out, '{')
		first := true
		for i, p := range s.props {
			if s.required&(1<<i) != 0 {
				if !first {
					out = append(out, ',')
				}
				first = false
				out = append(out, '"')
				out = append(out, p.key...)
				out = append(out, `":`...)
				out = minimal(out, p.s, depth+1)
			}
		}
		return append(out, '}')
	}
	return out
}
