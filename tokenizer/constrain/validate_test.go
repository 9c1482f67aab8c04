package constrain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"strings"
	"unicode/utf8"
)

// validate checks a JSON text against a schema in the subset Compile
// keeps, independently of the automaton: Go's JSON decoder (numbers as
// written), exact rationals for bounds, Go's regexp for patterns and
// formats. It returns nil when the value fits.
func validate(schema, text string) error {
	var root any
	if err := decodeExact([]byte(schema), &root); err != nil {
		return err
	}
	var v any
	if err := decodeExact([]byte(text), &v); err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	return check(root.(map[string]any), root, v, 0)
}

func decodeExact(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return fmt.Errorf("text after the value")
	}
	return nil
}

func check(root map[string]any, sch any, v any, depth int) error {
	if depth > 200 {
		return fmt.Errorf("too deep")
	}
	if b, ok := sch.(bool); ok {
		if b {
			return nil
		}
		return fmt.Errorf("false schema")
	}
	s := sch.(map[string]any)
	if r, ok := s["$ref"].(string); ok {
		t := any(root)
		if r != "#" {
			parts := strings.Split(strings.TrimPrefix(r, "#/"), "/")
			t = root[parts[0]].(map[string]any)[parts[1]]
		}
		return check(root, t, v, depth+1)
	}
	if c, ok := s["const"]; ok {
		return sameValue(c, v)
	}
	if e, ok := s["enum"].([]any); ok {
		for _, c := range e {
			if sameValue(c, v) == nil {
				return nil
			}
		}
		return fmt.Errorf("%v not in enum", v)
	}
	if alts, ok := s["anyOf"].([]any); ok {
		for _, a := range alts {
			if check(root, a, v, depth+1) == nil {
				return nil
			}
		}
		return fmt.Errorf("no anyOf alternative fits")
	}
	if alts, ok := s["oneOf"].([]any); ok { // exactly one alternative fits
		var fit []int
		for i, a := range alts {
			if check(root, a, v, depth+1) == nil {
				fit = append(fit, i)
			}
		}
		if len(fit) != 1 {
			return fmt.Errorf("oneOf: alternatives %v fit, not exactly one", fit)
		}
		return nil
	}
	if all, ok := s["allOf"].([]any); ok {
		for _, a := range all {
			if err := check(root, a, v, depth+1); err != nil {
				return err
			}
		}
	}
	types := []string{}
	switch t := s["type"].(type) {
	case string:
		types = append(types, t)
	case []any:
		for _, x := range t {
			types = append(types, x.(string))
		}
	}
	if len(types) == 0 {
		if _, ok := s["properties"]; ok {
			types = []string{"object"}
		} else {
			return nil
		}
	}
	var errs []string
	for _, t := range types {
		err := checkType(root, s, t, v, depth)
		if err == nil {
			return nil
		}
		errs = append(errs, err.Error())
	}
	return fmt.Errorf("%s", strings.Join(errs, "; "))
}

func sameValue(a, b any) error {
	x, _ := json.Marshal(canon(a))
	y, _ := json.Marshal(canon(b))
	if !bytes.Equal(x, y) {
		return fmt.Errorf("%s is not %s", y, x)
	}
	return nil
}

// canon puts numbers in one form (exact rationals) so 1.0 and 1 agree.
func canon(v any) any {
	switch x := v.(type) {
	case json.Number:
		r, _ := new(big.Rat).SetString(string(x))
		return r.RatString()
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = canon(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = canon(e)
		}
		return out
	}
	return v
}

func rat(v any) *big.Rat {
	n, ok := v.(json.Number)
	if !ok {
		return nil
	}
	r, _ := new(big.Rat).SetString(string(n))
	return r
}

func checkType(root, s map[string]any, t string, v any, depth int) error {
	switch t {
	case "null":
		if v != nil {
			return fmt.Errorf("not null")
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("not a boolean")
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			return fmt.Errorf("not a string")
		}
		return checkString(s, str)
	case "number", "integer":
		return checkNumber(s, t, v)
	case "array":
		a, ok := v.([]any)
		if !ok {
			return fmt.Errorf("not an array")
		}
		if n := rat(s["minItems"]); n != nil && big.NewRat(int64(len(a)), 1).Cmp(n) < 0 {
			return fmt.Errorf("fewer than minItems")
		}
		if n := rat(s["maxItems"]); n != nil && big.NewRat(int64(len(a)), 1).Cmp(n) > 0 {
			return fmt.Errorf("more than maxItems")
		}
		if it, ok := s["items"]; ok {
			for _, e := range a {
				if err := check(root, it, e, depth+1); err != nil {
					return fmt.Errorf("item: %v", err)
				}
			}
		}
	case "object":
		return checkObject(root, s, v, depth)
	}
	return nil
}

func checkString(s map[string]any, str string) error {
	n := utf8.RuneCountInString(str)
	if m := rat(s["minLength"]); m != nil && big.NewRat(int64(n), 1).Cmp(m) < 0 {
		return fmt.Errorf("shorter than minLength")
	}
	if m := rat(s["maxLength"]); m != nil && big.NewRat(int64(n), 1).Cmp(m) > 0 {
		return fmt.Errorf("longer than maxLength")
	}
	pat, _ := s["pattern"].(string)
	if f, ok := s["format"].(string); ok {
		pat = formats[f]
	}
	if pat != "" && !regexp.MustCompile(pat).MatchString(str) {
		return fmt.Errorf("%q does not match %s", str, pat)
	}
	return nil
}

func checkNumber(s map[string]any, t string, v any) error {
	if _, ok := v.(json.Number); ok && t == "number" && !hasAny(s, "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf") {
		return nil // no bounds: any number (big.Rat refuses huge exponents)
	}
	x := rat(v)
	if x == nil {
		return fmt.Errorf("not a number")
	}
	if t == "integer" && !x.IsInt() {
		return fmt.Errorf("not an integer")
	}
	if b := rat(s["minimum"]); b != nil && x.Cmp(b) < 0 {
		return fmt.Errorf("below minimum")
	}
	if b := rat(s["maximum"]); b != nil && x.Cmp(b) > 0 {
		return fmt.Errorf("above maximum")
	}
	if b := rat(s["exclusiveMinimum"]); b != nil && x.Cmp(b) <= 0 {
		return fmt.Errorf("not above exclusiveMinimum")
	}
	if b := rat(s["exclusiveMaximum"]); b != nil && x.Cmp(b) >= 0 {
		return fmt.Errorf("not below exclusiveMaximum")
	}
	if m := rat(s["multipleOf"]); m != nil && !new(big.Rat).Quo(x, m).IsInt() {
		return fmt.Errorf("not a multiple")
	}
	return nil
}

func checkObject(root, s map[string]any, v any, depth int) error {
	o, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("not an object")
	}
	props, _ := s["properties"].(map[string]any)
	for _, r := range asList(s["required"]) {
		if _, ok := o[r.(string)]; !ok {
			return fmt.Errorf("required %q missing", r)
		}
	}
	for k, e := range o {
		if ps, ok := props[k]; ok {
			if err := check(root, ps, e, depth+1); err != nil {
				return fmt.Errorf("%s: %v", k, err)
			}
			continue
		}
		switch ap := s["additionalProperties"].(type) {
		case bool:
			if !ap {
				return fmt.Errorf("key %q not allowed", k)
			}
		case map[string]any:
			if err := check(root, ap, e, depth+1); err != nil {
				return fmt.Errorf("%s: %v", k, err)
			}
		}
	}
	return nil
}

func asList(v any) []any { l, _ := v.([]any); return l }

func hasAny(s map[string]any, keys ...string) bool {
	for _, k := range keys {
		if _, ok := s[k]; ok {
			return true
		}
	}
	return false
}
