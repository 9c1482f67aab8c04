package constrain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
)

// oneOf: a value must fit exactly one alternative. The constraint holds a
// oneOf as anyOf (a value fits when some alternative fits), which is the
// same only when no value can fit two alternatives. exclusive proves that
// for every oneOf, pair by pair, or the schema is refused (strict) or
// warned of (lenient: held as anyOf).
//
// What it proves, for held outputs of alternative a against what a
// validator of alternative b accepts (excl), both ways:
//   - their JSON types differ (integer counts as number; an object schema
//     with properties but no "type" accepts every type);
//   - two consts (or enum members) are different values;
//   - objects: b requires a key that a never writes (a declares it not),
//     or a requires a key that b declares with a value schema that no
//     value of a's fits (a discriminator: "kind": {"const": "circle"}).
// Alternatives of enums and type lists are taken one by one. Nothing else
// is compared (string patterns, number ranges): such a oneOf is refused.

// oneOfAt is a compiled oneOf: where it is and its alternatives.
type oneOfAt struct {
	at   string
	alts []*Schema
}

// JSON types as bits.
const (
	tObject = 1 << iota
	tArray
	tString
	tNumber
	tBool
	tNull
	tAll = tObject | tArray | tString | tNumber | tBool | tNull
)

// maxExclSteps bounds the comparisons of one schema's oneOfs; a oneOf
// that needs more is not proved exclusive.
const maxExclSteps = 200000

type exclusivity struct {
	steps int
	canon map[*Schema]string // a const's value in one form
}

// exclusive checks every oneOf of the schema (after finish: $refs resolved).
func (c *compiler) exclusive() error {
	x := &exclusivity{canon: map[*Schema]string{}}
	for _, o := range c.oneOfs {
	pairs:
		for i := range o.alts {
			for j := i + 1; j < len(o.alts); j++ {
				if x.excl(o.alts[i], o.alts[j], 0) && x.excl(o.alts[j], o.alts[i], 0) {
					continue
				}
				why := fmt.Sprintf("alternatives %d and %d may both fit one value, and only one may "+
					"(k3 holds a oneOf whose alternatives differ in type, in a const or enum, or in a required key; "+
					"not strict, it is held as anyOf)", i, j)
				if err := c.unsupported(o.at, "oneOf", why); err != nil {
					return err
				}
				break pairs // one warning per oneOf
			}
		}
	}
	return nil
}

func deref(s *Schema) *Schema {
	for n := 0; s != nil && s.kind == kRef && n < MaxNodes; n++ {
		s = s.ref
	}
	return s
}

// excl reports whether no value the constraint lets a write fits b.
func (x *exclusivity) excl(a, b *Schema, depth int) bool {
	a, b = deref(a), deref(b)
	x.steps++
	if a == nil || b == nil || depth > 32 || x.steps > maxExclSteps {
		return false
	}
	if a.kind == kAnyOf {
		for _, y := range a.anyOf {
			if !x.excl(y, b, depth+1) {
				return false
			}
		}
		return true
	}
	if b.kind == kAnyOf {
		for _, y := range b.anyOf {
			if !x.excl(a, y, depth+1) {
				return false
			}
		}
		return true
	}
	if writes(a)&accepts(b) == 0 {
		return true
	}
	switch {
	case a.kind == kConst && b.kind == kConst:
		return x.value(a) != x.value(b)
	case a.kind == kObject && b.kind == kObject && !a.free:
		return x.objectsExcl(a, b, depth)
	}
	return false
}

func (x *exclusivity) objectsExcl(a, b *Schema, depth int) bool {
	for j, p := range b.props {
		if b.required&(1<<j) != 0 && !a.writesKey(p.name) {
			return true
		}
	}
	for i, p := range a.props {
		if a.required&(1<<i) == 0 {
			continue
		}
		for _, q := range b.props {
			if q.name == p.name && x.excl(p.s, q.s, depth+1) {
				return true
			}
		}
	}
	return false
}

// writesKey reports whether the (declared, not free) object a may write key.
func (a *Schema) writesKey(key string) bool {
	for _, p := range a.props {
		if p.name == key {
			return p.s.mini != nil
		}
	}
	return false
}

// writes is the types of the values the constraint lets s write.
func writes(s *Schema) int {
	switch s.kind {
	case kObject:
		return tObject
	case kConst:
		return litType(s.lit)
	}
	return accepts(s)
}

// accepts is the types a validator of s takes (kAnyOf: not asked).
func accepts(s *Schema) int {
	switch s.kind {
	case kObject:
		if s.untyped {
			return tAll
		}
		return tObject
	case kArray:
		return tArray
	case kString:
		return tString
	case kNumber, kInteger:
		return tNumber
	case kBool:
		return tBool
	case kNull:
		return tNull
	case kConst:
		return litType(s.lit)
	}
	return tAll
}

func litType(lit []byte) int {
	if len(lit) == 0 {
		return tAll
	}
	switch lit[0] {
	case '{':
		return tObject
	case '[':
		return tArray
	case '"':
		return tString
	case 't', 'f':
		return tBool
	case 'n':
		return tNull
	}
	return tNumber
}

// value is a const's value in one form (numbers as exact rationals, keys
// sorted), so 1 and 1.0, or "a" and "\u0061", compare equal.
func (x *exclusivity) value(s *Schema) string {
	if v, ok := x.canon[s]; ok {
		return v
	}
	d := json.NewDecoder(bytes.NewReader(s.lit))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return string(s.lit)
	}
	b, _ := json.Marshal(oneForm(v))
	x.canon[s] = string(b)
	return string(b)
}

func oneForm(v any) any {
	switch t := v.(type) {
	case json.Number:
		if r, ok := new(big.Rat).SetString(string(t)); ok {
			return map[string]string{"#n": r.RatString()}
		}
	case map[string]any:
		for k, e := range t {
			t[k] = oneForm(e)
		}
	case []any:
		for i, e := range t {
			t[i] = oneForm(e)
		}
	}
	return v
}
