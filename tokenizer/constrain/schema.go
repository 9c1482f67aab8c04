// Package constrain keeps a generated answer a valid prefix of JSON: any
// JSON object (response_format json_object) or a value matching a JSON
// schema (json_schema) in the subset described at Compile. It reads bytes,
// so it works over any byte-level vocabulary; Mask says which tokens keep
// the output valid, and Sampler applies that to a turn in the K3 chat
// format. It imports no engine or ui code.
package constrain

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

type kind uint8

const (
	kAny kind = iota
	kObject
	kArray
	kString
	kNumber
	kInteger
	kBool
	kNull
	kConst // one literal (an enum member)
	kAnyOf
	kRef // a $ref until it is resolved (never in a compiled schema)
)

// Schema is a compiled JSON schema node.
type Schema struct {
	id       int
	kind     kind
	props    []prop // object: the declared properties (no others)
	required uint64 // object: bit i: props[i] is required
	live     uint64 // object: bit i: props[i] has a finite value (may be written)
	free     bool   // object with no properties declared: any keys
	untyped  bool   // object read from properties with no "type" (a validator takes other types too)
	values   *Schema
	items    *Schema
	minItems int
	maxItems int // -1: no bound
	minLen   int // string, in characters
	maxLen   int // -1: no bound
	pat      *dfa
	num      *numRange
	lit      []byte    // const: the literal's JSON
	anyOf    []*Schema // anyOf (also enum, oneOf and type lists): no anyOf among them
	ref      *Schema   // kRef: the definition
	refName  string
	mini     []byte // the shortest value (nil: no finite value fits)
}

type prop struct {
	name string
	key  []byte // the name as JSON string content (escaped, no quotes)
	s    *Schema
}

// AnyObject is the schema of response_format json_object: any JSON object.
func AnyObject() *Schema { return anyObject }

// The compiler's budget: a schema that needs more is refused with a
// clear error, so no request can make compiling or holding it costly.
const (
	MaxNodes     = 10000   // compiled nodes (each distinct sub-schema once)
	MaxAlts      = 40000   // anyOf alternatives after flattening, all nodes together
	MaxMiniBytes = 1 << 20 // the shortest value a node allows
	maxCount     = 1 << 16 // minLength, maxLength, minItems, maxItems
	maxPasses    = 256     // rounds of the shortest-value computation
)

type compiler struct {
	defs   map[string]json.RawMessage
	refs   map[string]*Schema
	memo   map[[32]byte]*Schema
	nodes  []*Schema
	oneOfs []oneOfAt // checked for exclusivity once compiled
	strict bool
	warns  []string
}

// Compile reads a JSON schema and refuses any keyword it cannot hold
// (strict mode). The subset: type (a name or a list), object (properties,
// required, additionalProperties false or a schema for any keys), array
// (items, minItems, maxItems), string (minLength, maxLength, pattern, and
// format date-time, date, time, uuid, email, ipv4, uri), number and
// integer (minimum, maximum, exclusiveMinimum, exclusiveMaximum; integers
// also multipleOf), boolean, null, enum and const (exact, numbers of any
// size), anyOf, oneOf whose alternatives no value can fit two of
// (exclusive.go: told apart by type, const or enum, or a required key;
// another oneOf is refused, or held as anyOf with a warning when lenient),
// allOf of one schema, and $ref into $defs or definitions, or "#". Work is linear in the schema's size:
// each distinct sub-schema is compiled once.
func Compile(raw json.RawMessage) (*Schema, error) {
	s, _, err := compile(raw, true)
	return s, err
}

// CompileLenient is Compile for a schema that is not strict: a keyword
// outside the subset is left out (the value is held to the rest), and
// each one left out is described in the warnings.
func CompileLenient(raw json.RawMessage) (*Schema, []string, error) {
	return compile(raw, false)
}

func compile(raw json.RawMessage, strict bool) (*Schema, []string, error) {
	var root map[string]json.RawMessage
	if err := json.Unmarshal(raw, &root); err != nil {
		return nil, nil, fmt.Errorf("the schema is not a JSON object: %v", err)
	}
	c := &compiler{defs: map[string]json.RawMessage{"#": raw}, refs: map[string]*Schema{},
		memo: map[[32]byte]*Schema{}, strict: strict}
	for _, k := range []string{"$defs", "definitions"} {
		if d, ok := root[k]; ok {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(d, &m); err != nil {
				return nil, nil, fmt.Errorf("%s: %v", k, err)
			}
			for n, v := range m {
				c.defs["#/"+k+"/"+n] = v
			}
		}
	}
	s, err := c.node(raw, 0, "")
	if err == nil {
		s, err = c.finish(s)
	}
	if err == nil {
		err = c.exclusive()
	}
	if err != nil {
		return nil, nil, err
	}
	return s, c.warns, nil
}

var ignored = map[string]bool{"description": true, "title": true, "$defs": true, "definitions": true,
	"$schema": true, "$id": true, "examples": true, "default": true, "strict": true, "$comment": true,
	"readOnly": true, "writeOnly": true, "deprecated": true, "$anchor": true}

var known = map[string]bool{"type": true, "properties": true, "required": true, "additionalProperties": true,
	"items": true, "enum": true, "const": true, "anyOf": true, "oneOf": true, "allOf": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true, "multipleOf": true,
	"minLength": true, "maxLength": true, "format": true, "pattern": true, "minItems": true, "maxItems": true}

func (c *compiler) new(k kind) (*Schema, error) {
	if len(c.nodes) >= MaxNodes {
		return nil, fmt.Errorf("the schema is too large: it needs more than %d nodes", MaxNodes)
	}
	s := &Schema{id: len(c.nodes) + 1, kind: k, maxItems: -1, maxLen: -1}
	c.nodes = append(c.nodes, s)
	return s, nil
}

// unsupported refuses keyword k at the path at (strict), or leaves it out
// with a warning.
func (c *compiler) unsupported(at, k, why string) error {
	msg := fmt.Sprintf("schema keyword %q is not supported", k)
	if why != "" {
		msg = fmt.Sprintf("schema keyword %q: %s", k, why)
	}
	if at != "" {
		msg = at + ": " + msg
	}
	if c.strict {
		return fmt.Errorf("%s", msg)
	}
	c.warns = append(c.warns, msg+"; it was not enforced")
	return nil
}

func (c *compiler) node(raw json.RawMessage, depth int, at string) (*Schema, error) {
	if depth > 64 {
		return nil, fmt.Errorf("the schema nests deeper than 64 levels")
	}
	t := bytes.TrimSpace(raw)
	key := sha256.Sum256(t)
	if s, ok := c.memo[key]; ok {
		return s, nil
	}
	s, err := c.fresh(t, depth, at)
	if err == nil {
		c.memo[key] = s
	}
	return s, err
}

func (c *compiler) fresh(raw json.RawMessage, depth int, at string) (*Schema, error) {
	switch string(raw) {
	case "true", "{}":
		return c.new(kAny)
	case "false":
		return nil, fmt.Errorf("%sthe schema false allows no value", prefix(at))
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%sa schema is not a JSON object: %.80s", prefix(at), raw)
	}
	if r, ok := m["$ref"]; ok {
		return c.ref(r, m, depth, at)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !known[k] && !ignored[k] {
			if err := c.unsupported(at, k, ""); err != nil {
				return nil, err
			}
		}
	}
	if v, ok := m["const"]; ok {
		return c.literal(v)
	}
	if v, ok := m["enum"]; ok {
		return c.enum(v, at)
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if v, ok := m[k]; ok {
			return c.alts(k, v, depth, at)
		}
	}
	if v, ok := m["allOf"]; ok {
		var all []json.RawMessage
		if err := json.Unmarshal(v, &all); err != nil || len(all) == 0 {
			return nil, fmt.Errorf("%sallOf must be a non-empty array", prefix(at))
		}
		if len(all) == 1 {
			return c.node(all[0], depth+1, at)
		}
		if err := c.unsupported(at, "allOf", "more than one schema"); err != nil {
			return nil, err
		}
	}
	return c.typed(m, depth, at)
}

func prefix(at string) string {
	if at == "" {
		return ""
	}
	return at + ": "
}

// ref compiles a $ref: a placeholder node, resolved once every node is
// compiled (Compile's finish), so recursion and aliases go by pointer.
func (c *compiler) ref(r json.RawMessage, m map[string]json.RawMessage, depth int, at string) (*Schema, error) {
	var name string
	if err := json.Unmarshal(r, &name); err != nil {
		return nil, fmt.Errorf("%s$ref is not a string", prefix(at))
	}
	for k := range m {
		if k != "$ref" && !ignored[k] {
			if err := c.unsupported(at, k, "beside $ref"); err != nil {
				return nil, err
			}
		}
	}
	if s, ok := c.refs[name]; ok {
		return s, nil
	}
	d, ok := c.defs[name]
	if !ok {
		return nil, fmt.Errorf("%s$ref %q: only #, #/$defs/NAME and #/definitions/NAME are supported", prefix(at), name)
	}
	s, err := c.new(kRef)
	if err != nil {
		return nil, err
	}
	s.refName = name
	c.refs[name] = s
	if s.ref, err = c.node(d, depth+1, at); err != nil {
		return nil, err
	}
	return s, nil
}

func (c *compiler) enum(v json.RawMessage, at string) (*Schema, error) {
	var vals []json.RawMessage
	if err := json.Unmarshal(v, &vals); err != nil || len(vals) == 0 {
		return nil, fmt.Errorf("%senum must be a non-empty array", prefix(at))
	}
	s, err := c.new(kAnyOf)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, v := range vals {
		l, err := c.literal(v)
		if err != nil {
			return nil, err
		}
		if !seen[string(l.lit)] {
			seen[string(l.lit)] = true
			s.anyOf = append(s.anyOf, l)
		}
	}
	return s, nil
}

func (c *compiler) alts(k string, v json.RawMessage, depth int, at string) (*Schema, error) {
	var alts []json.RawMessage
	if err := json.Unmarshal(v, &alts); err != nil || len(alts) == 0 {
		return nil, fmt.Errorf("%s%s must be a non-empty array", prefix(at), k)
	}
	s, err := c.new(kAnyOf)
	if err != nil {
		return nil, err
	}
	for i, a := range alts {
		b, err := c.node(a, depth+1, fmt.Sprintf("%s%s[%d]", dot(at), k, i))
		if err != nil {
			return nil, err
		}
		s.anyOf = append(s.anyOf, b)
	}
	if k == "oneOf" && len(alts) > 1 {
		c.oneOfs = append(c.oneOfs, oneOfAt{at: at, alts: slices.Clone(s.anyOf)})
	}
	return s, nil
}

func dot(at string) string {
	if at == "" {
		return ""
	}
	return at + "."
}

// typed compiles a schema by its type (a type list: one alternative per
// distinct type).
func (c *compiler) typed(m map[string]json.RawMessage, depth int, at string) (*Schema, error) {
	tv, ok := m["type"]
	if !ok {
		if _, ok := m["properties"]; ok {
			s, err := c.object(m, depth, at)
			if s != nil {
				s.untyped = true
			}
			return s, err
		}
		return c.new(kAny)
	}
	var types []string
	if err := json.Unmarshal(tv, &types); err != nil {
		var one string
		if err := json.Unmarshal(tv, &one); err != nil {
			return nil, fmt.Errorf("%stype must be a string or an array of strings", prefix(at))
		}
		types = []string{one}
	}
	sort.Strings(types)
	types = compactStrings(types)
	if len(types) == 0 {
		return nil, fmt.Errorf("%stype is an empty list", prefix(at))
	}
	if len(types) == 1 {
		return c.one(m, types[0], depth, at)
	}
	s, err := c.new(kAnyOf)
	if err != nil {
		return nil, err
	}
	for _, t := range types {
		alt, err := c.one(m, t, depth, at)
		if err != nil {
			return nil, err
		}
		s.anyOf = append(s.anyOf, alt)
	}
	return s, nil
}

func compactStrings(s []string) []string {
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// one compiles m as a value of the single type t.
func (c *compiler) one(m map[string]json.RawMessage, t string, depth int, at string) (*Schema, error) {
	switch t {
	case "string":
		return c.str(m, at)
	case "number", "integer":
		k := kNumber
		if t == "integer" {
			k = kInteger
		}
		s, err := c.new(k)
		if err != nil {
			return nil, err
		}
		if _, ok := m["multipleOf"]; ok && k == kNumber {
			if err := c.unsupported(at, "multipleOf", "supported on integers only"); err != nil {
				return nil, err
			}
			m = without(m, "multipleOf")
		}
		for _, b := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
			if v, ok := m[b]; ok {
				if _, err := boundRat(b, strings.TrimSpace(string(v))); errors.Is(err, errBigBound) {
					if err := c.unsupported(at, b, err.Error()); err != nil {
						return nil, err
					}
					m = without(m, b)
				}
			}
		}
		if s.num, err = readRange(m, k == kInteger); err != nil {
			return nil, fmt.Errorf("%s%v", prefix(at), err)
		}
		return s, nil
	case "boolean":
		return c.new(kBool)
	case "null":
		return c.new(kNull)
	case "array":
		return c.array(m, depth, at)
	case "object":
		return c.object(m, depth, at)
	}
	return nil, fmt.Errorf("%stype %q is not supported", prefix(at), t)
}

func without(m map[string]json.RawMessage, k string) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(m))
	for x, v := range m {
		if x != k {
			out[x] = v
		}
	}
	return out
}

// count reads a non-negative count keyword (def when absent).
func count(m map[string]json.RawMessage, k string, def int, at string) (int, error) {
	v, ok := m[k]
	if !ok {
		return def, nil
	}
	var n json.Number
	if err := json.Unmarshal(v, &n); err != nil {
		return 0, fmt.Errorf("%s%s must be a number", prefix(at), k)
	}
	i, err := n.Int64()
	if err != nil || i < 0 {
		return 0, fmt.Errorf("%s%s must be a non-negative integer", prefix(at), k)
	}
	if i > maxCount {
		return 0, bigCount(fmt.Sprintf("%s%s is %d; at most %d is supported", prefix(at), k, i, maxCount))
	}
	return int(i), nil
}

// bigCount is a count keyword above maxCount.
type bigCount string

func (e bigCount) Error() string { return string(e) }

// count is count, except that not strict a count above the limit is left
// out (def) with a warning: the rest of the schema is still held.
func (c *compiler) count(m map[string]json.RawMessage, k string, def int, at string) (int, error) {
	n, err := count(m, k, def, at)
	var big bigCount
	if errors.As(err, &big) && !c.strict {
		return def, c.unsupported(at, k, fmt.Sprintf("%s above %d", k, maxCount))
	}
	return n, err
}

func (c *compiler) str(m map[string]json.RawMessage, at string) (*Schema, error) {
	s, err := c.new(kString)
	if err != nil {
		return nil, err
	}
	if s.minLen, err = c.count(m, "minLength", 0, at); err != nil {
		return nil, err
	}
	if s.maxLen, err = c.count(m, "maxLength", -1, at); err != nil {
		return nil, err
	}
	if s.maxLen >= 0 && s.maxLen < s.minLen {
		return nil, fmt.Errorf("%sno string fits: minLength %d is above maxLength %d", prefix(at), s.minLen, s.maxLen)
	}
	var pats []*dfa
	if v, ok := m["format"]; ok {
		var f string
		_ = json.Unmarshal(v, &f)
		if p, ok := formats[f]; ok {
			d, err := formatPattern(p)
			if err != nil {
				return nil, err
			}
			pats = append(pats, d)
		} else if err := c.unsupported(at, "format", fmt.Sprintf("%q is not one of date-time, date, time, uuid, email, ipv4, uri", f)); err != nil {
			return nil, err
		}
	}
	if v, ok := m["pattern"]; ok {
		var p string
		_ = json.Unmarshal(v, &p)
		d, err := compilePattern(p)
		if err != nil {
			if err := c.unsupported(at, "pattern", err.Error()); err != nil {
				return nil, err
			}
		} else {
			pats = append(pats, d)
		}
	}
	if len(pats) == 2 { // a format and a pattern: both hold
		d, err := intersect(pats[0], pats[1])
		if err != nil {
			return nil, fmt.Errorf("%sformat and pattern together: %v", prefix(at), err)
		}
		pats = []*dfa{d}
	}
	if len(pats) == 1 {
		if pats[0].short[1] == nil {
			return nil, fmt.Errorf("%sno string fits the pattern %q", prefix(at), pats[0].src)
		}
		s.pat = pats[0]
	}
	return s, nil
}

func (c *compiler) array(m map[string]json.RawMessage, depth int, at string) (*Schema, error) {
	s, err := c.new(kArray)
	if err != nil {
		return nil, err
	}
	if s.minItems, err = c.count(m, "minItems", 0, at); err != nil {
		return nil, err
	}
	if s.maxItems, err = c.count(m, "maxItems", -1, at); err != nil {
		return nil, err
	}
	if s.maxItems >= 0 && s.maxItems < s.minItems {
		return nil, fmt.Errorf("%sno array fits: minItems %d is above maxItems %d", prefix(at), s.minItems, s.maxItems)
	}
	if it, ok := m["items"]; ok {
		if s.items, err = c.node(it, depth+1, dot(at)+"items"); err != nil {
			return nil, err
		}
	} else if s.items, err = c.new(kAny); err != nil {
		return nil, err
	}
	return s, nil
}

func (c *compiler) object(m map[string]json.RawMessage, depth int, at string) (*Schema, error) {
	s, err := c.new(kObject)
	if err != nil {
		return nil, err
	}
	var props map[string]json.RawMessage
	if p, ok := m["properties"]; ok {
		if err := json.Unmarshal(p, &props); err != nil {
			return nil, fmt.Errorf("%sproperties must be an object", prefix(at))
		}
	}
	ap, hasAP := m["additionalProperties"]
	apText := strings.TrimSpace(string(ap))
	if len(props) == 0 {
		s.free = true
		if hasAP && apText != "true" && apText != "{}" {
			if apText == "false" {
				s.free = false // no keys at all
			} else if s.values, err = c.node(ap, depth+1, dot(at)+"additionalProperties"); err != nil {
				return nil, err
			}
		}
		return s, c.required(s, m, nil, at)
	}
	if hasAP && apText != "false" {
		if err := c.unsupported(at, "additionalProperties", "only false is supported beside properties"); err != nil {
			return nil, err
		}
	}
	if len(props) > 64 {
		return nil, fmt.Errorf("%san object declares %d properties; at most 64 are supported", prefix(at), len(props))
	}
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		pat := fmt.Sprintf("%sproperty %q", dot(at), n)
		if at == "" {
			pat = fmt.Sprintf("property %q", n)
		}
		ps, err := c.node(props[n], depth+1, pat)
		if err != nil {
			return nil, err
		}
		k, _ := json.Marshal(n)
		s.props = append(s.props, prop{name: n, key: k[1 : len(k)-1], s: ps})
	}
	return s, c.required(s, m, names, at)
}

func (c *compiler) required(s *Schema, m map[string]json.RawMessage, names []string, at string) error {
	r, ok := m["required"]
	if !ok {
		return nil
	}
	var req []string
	if err := json.Unmarshal(r, &req); err != nil {
		return fmt.Errorf("%srequired must be an array of strings", prefix(at))
	}
	for _, n := range req {
		i := sort.SearchStrings(names, n)
		if i == len(names) || names[i] != n {
			if s.free && len(names) == 0 {
				return c.unsupported(at, "required", "on an object without properties")
			}
			return fmt.Errorf("%srequired names %q, which is not among the properties", prefix(at), n)
		}
		s.required |= 1 << i
	}
	return nil
}

// literal compiles a const: the value as written (numbers exact, not
// through float64), compact, object keys sorted.
func (c *compiler) literal(v json.RawMessage) (*Schema, error) {
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	var x any
	if err := d.Decode(&x); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(x); err != nil {
		return nil, err
	}
	s, err := c.new(kConst)
	if err != nil {
		return nil, err
	}
	s.lit = bytes.TrimSpace(buf.Bytes())
	return s, nil
}
