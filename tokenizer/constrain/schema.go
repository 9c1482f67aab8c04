// Package constrain keeps a generated answer a valid prefix of JSON: any
// JSON object (response_format json_object) or a value matching a JSON
// schema in the subset OpenAI's strict mode allows (json_schema). It reads
// bytes, so it works over any byte-level vocabulary; Mask says which
// tokens keep the output valid, and Sampler applies that to a turn in the
// K3 chat format. It imports no engine or ui code.
package constrain

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
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
)

// Schema is a compiled JSON schema node.
type Schema struct {
	id       int
	kind     kind
	props    []prop // object: the declared properties (additionalProperties false)
	required uint64 // object: bit i: props[i] is required
	free     bool   // object with no properties declared: any keys and values
	items    *Schema
	lit      []byte    // const: the literal's canonical JSON
	anyOf    []*Schema // anyOf (also enum and type lists)
}

type prop struct {
	name string
	key  []byte // the name as JSON string content (escaped, no quotes)
	s    *Schema
}

// AnyObject is the schema of response_format json_object: any JSON object.
func AnyObject() *Schema { return anyObject }

type compiler struct {
	defs map[string]json.RawMessage
	refs map[string]*Schema
	n    int
}

// Compile reads a JSON schema in the subset OpenAI's strict mode allows:
// type object (properties, required, additionalProperties false), string,
// number, integer, boolean, null, array (items), enum, const, anyOf, type
// lists, and $ref into $defs or definitions. Keywords that only narrow
// values (pattern, format, minimum, minItems...) are refused: the
// constraint could not keep them.
func Compile(raw json.RawMessage) (*Schema, error) {
	var root map[string]json.RawMessage
	if err := json.Unmarshal(raw, &root); err != nil {
		return nil, fmt.Errorf("the schema is not a JSON object: %v", err)
	}
	c := &compiler{defs: map[string]json.RawMessage{}, refs: map[string]*Schema{}}
	for _, k := range []string{"$defs", "definitions"} {
		if d, ok := root[k]; ok {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(d, &m); err != nil {
				return nil, fmt.Errorf("%s: %v", k, err)
			}
			for n, v := range m {
				c.defs["#/"+k+"/"+n] = v
			}
		}
	}
	s, err := c.node(raw, 0)
	if err != nil {
		return nil, err
	}
	return s, nil
}

var ignored = map[string]bool{"description": true, "title": true, "$defs": true, "definitions": true,
	"$schema": true, "$id": true, "examples": true, "default": true, "strict": true, "$comment": true}

func (c *compiler) new(k kind) *Schema { c.n++; return &Schema{id: c.n, kind: k} }

func (c *compiler) node(raw json.RawMessage, depth int) (*Schema, error) {
	if depth > 64 {
		return nil, fmt.Errorf("the schema nests deeper than 64 levels")
	}
	if t := strings.TrimSpace(string(raw)); t == "true" || t == "{}" {
		return c.new(kAny), nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("a schema is not a JSON object: %s", raw)
	}
	if r, ok := m["$ref"]; ok {
		var ref string
		if err := json.Unmarshal(r, &ref); err != nil {
			return nil, fmt.Errorf("$ref is not a string")
		}
		if s, ok := c.refs[ref]; ok {
			return s, nil
		}
		d, ok := c.defs[ref]
		if !ok {
			return nil, fmt.Errorf("$ref %q: only #/$defs/NAME and #/definitions/NAME are supported", ref)
		}
		s := c.new(kAny)
		c.refs[ref] = s // recursion goes through this node
		t, err := c.node(d, depth+1)
		if err != nil {
			return nil, err
		}
		id := s.id
		*s = *t
		s.id = id
		return s, nil
	}
	for k := range m {
		switch k {
		case "type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf":
		default:
			if !ignored[k] {
				return nil, fmt.Errorf("schema keyword %q is not supported", k)
			}
		}
	}
	if v, ok := m["const"]; ok {
		return c.literal(v)
	}
	if v, ok := m["enum"]; ok {
		var vals []json.RawMessage
		if err := json.Unmarshal(v, &vals); err != nil || len(vals) == 0 {
			return nil, fmt.Errorf("enum must be a non-empty array")
		}
		s := c.new(kAnyOf)
		for _, v := range vals {
			l, err := c.literal(v)
			if err != nil {
				return nil, err
			}
			s.anyOf = append(s.anyOf, l)
		}
		return s, nil
	}
	if v, ok := m["anyOf"]; ok {
		var alts []json.RawMessage
		if err := json.Unmarshal(v, &alts); err != nil || len(alts) == 0 {
			return nil, fmt.Errorf("anyOf must be a non-empty array")
		}
		s := c.new(kAnyOf)
		for _, a := range alts {
			b, err := c.node(a, depth+1)
			if err != nil {
				return nil, err
			}
			s.anyOf = append(s.anyOf, b)
		}
		return s, nil
	}
	tv, ok := m["type"]
	if !ok {
		return c.new(kAny), nil
	}
	var types []string
	if err := json.Unmarshal(tv, &types); err != nil {
		var one string
		if err := json.Unmarshal(tv, &one); err != nil {
			return nil, fmt.Errorf("type must be a string or an array of strings")
		}
		types = []string{one}
	}
	if len(types) > 1 {
		s := c.new(kAnyOf)
		for _, t := range types {
			one := map[string]json.RawMessage{}
			for k, v := range m {
				one[k] = v
			}
			one["type"], _ = json.Marshal(t)
			b, _ := json.Marshal(one)
			alt, err := c.node(b, depth+1)
			if err != nil {
				return nil, err
			}
			s.anyOf = append(s.anyOf, alt)
		}
		return s, nil
	}
	switch types[0] {
	case "string":
		return c.new(kString), nil
	case "number":
		return c.new(kNumber), nil
	case "integer":
		return c.new(kInteger), nil
	case "boolean":
		return c.new(kBool), nil
	case "null":
		return c.new(kNull), nil
	case "array":
		s := c.new(kArray)
		if it, ok := m["items"]; ok {
			var err error
			if s.items, err = c.node(it, depth+1); err != nil {
				return nil, err
			}
		} else {
			s.items = c.new(kAny)
		}
		return s, nil
	case "object":
		return c.object(m, depth)
	}
	return nil, fmt.Errorf("type %q is not supported", types[0])
}

func (c *compiler) literal(v json.RawMessage) (*Schema, error) {
	var x any
	if err := json.Unmarshal(v, &x); err != nil {
		return nil, err
	}
	b, err := json.Marshal(x) // canonical: compact, keys sorted
	if err != nil {
		return nil, err
	}
	s := c.new(kConst)
	s.lit = b
	return s, nil
}

func (c *compiler) object(m map[string]json.RawMessage, depth int) (*Schema, error) {
	s := c.new(kObject)
	var props map[string]json.RawMessage
	if p, ok := m["properties"]; ok {
		if err := json.Unmarshal(p, &props); err != nil {
			return nil, fmt.Errorf("properties must be an object")
		}
	}
	if len(props) == 0 {
		s.free = true
		return s, nil
	}
	if ap, ok := m["additionalProperties"]; ok && strings.TrimSpace(string(ap)) != "false" {
		return nil, fmt.Errorf("additionalProperties must be false when properties are declared")
	}
	if len(props) > 64 {
		return nil, fmt.Errorf("an object declares %d properties; at most 64 are supported", len(props))
	}
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ps, err := c.node(props[n], depth+1)
		if err != nil {
			return nil, fmt.Errorf("property %q: %v", n, err)
		}
		k, _ := json.Marshal(n)
		s.props = append(s.props, prop{name: n, key: k[1 : len(k)-1], s: ps})
	}
	if r, ok := m["required"]; ok {
		var req []string
		if err := json.Unmarshal(r, &req); err != nil {
			return nil, fmt.Errorf("required must be an array of strings")
		}
		for _, n := range req {
			i := sort.SearchStrings(names, n)
			if i == len(names) || names[i] != n {
				return nil, fmt.Errorf("required names %q, which is not among the properties", n)
			}
			s.required |= 1 << i
		}
	}
	return s, nil
}

// fingerprint is a deterministic encoding of the compiled schema: its
// nodes' ids, kinds and contents. Two schemas with the same fingerprint
// are the same automaton (node ids included, which state keys name), so
// they can share masks.
func (s *Schema) fingerprint() string {
	var b []byte
	seen := map[*Schema]bool{}
	var walk func(*Schema)
	walk = func(n *Schema) {
		b = binary.LittleEndian.AppendUint32(b, uint32(n.id))
		if n.id < 0 || seen[n] { // a built-in node, or one written already (recursion)
			return
		}
		seen[n] = true
		b = append(b, byte(n.kind))
		if n.free {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		b = binary.LittleEndian.AppendUint64(b, n.required)
		b = binary.AppendUvarint(b, uint64(len(n.props)))
		for _, p := range n.props {
			b = binary.AppendUvarint(b, uint64(len(p.key)))
			b = append(b, p.key...)
			walk(p.s)
		}
		b = binary.AppendUvarint(b, uint64(len(n.lit)))
		b = append(b, n.lit...)
		b = binary.AppendUvarint(b, uint64(len(n.anyOf)))
		for _, a := range n.anyOf {
			walk(a)
		}
		if n.items != nil {
			b = append(b, 1)
			walk(n.items)
		} else {
			b = append(b, 0)
		}
	}
	walk(s)
	return string(b)
}
