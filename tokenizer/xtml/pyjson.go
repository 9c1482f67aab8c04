package xtml

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"k3/tokenizer"
	"sort"
	"strconv"
	"strings"
)

// A small JSON model that reproduces what the reference renderer writes
// with Python's json module: json.dumps(deep_sorted(value),
// ensure_ascii=False, separators=(",", ":")). Numbers keep Python's
// reading: integer literals stay exact integers, anything with a fraction
// or exponent becomes a float printed with repr (1e2 -> 100.0).

type jsonMember struct {
	key string
	val any
}

// jsonObject keeps members in input order, one per key (a repeated key
// keeps its first position and its last value, like a Python dict).
type jsonObject []jsonMember

func parseJSONValue(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := readJSON(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after JSON value")
	}
	return v, nil
}

func readJSON(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch x := tok.(type) {
	case json.Delim:
		switch x {
		case '{':
			var obj jsonObject
			pos := map[string]int{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				v, err := readJSON(dec)
				if err != nil {
					return nil, err
				}
				if i, ok := pos[k]; ok {
					obj[i].val = v
				} else {
					pos[k] = len(obj)
					obj = append(obj, jsonMember{k, v})
				}
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			if obj == nil {
				obj = jsonObject{}
			}
			return obj, nil
		case '[':
			arr := []any{}
			for dec.More() {
				v, err := readJSON(dec)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return arr, nil
		}
		return nil, fmt.Errorf("unexpected %v", x)
	default:
		return tok, nil // string, json.Number, bool, nil
	}
}

func deepSort(v any) any {
	switch x := v.(type) {
	case jsonObject:
		out := make(jsonObject, len(x))
		for i, m := range x {
			out[i] = jsonMember{m.key, deepSort(m.val)}
		}
		sort.SliceStable(out, func(i, j int) bool { return out[i].key < out[j].key })
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepSort(e)
		}
		return out
	}
	return v
}

func pyCompact(v any) (string, error) {
	var b strings.Builder
	if err := writePy(&b, v); err != nil {
		return "", err
	}
	return b.String(), nil
}

func writePy(b *strings.Builder, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case string:
		writePyString(b, x)
	case json.Number:
		s, err := pyNumber(string(x))
		if err != nil {
			return err
		}
		b.WriteString(s)
	case jsonObject:
		b.WriteByte('{')
		for i, m := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writePyString(b, m.key)
			b.WriteByte(':')
			if err := writePy(b, m.val); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writePy(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	default:
		return fmt.Errorf("unsupported JSON value %T", v)
	}
	return nil
}

func writePyString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if c < 0x20 {
				fmt.Fprintf(b, `\u%04x`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
}

// pyNumber prints a JSON number literal the way Python's json round trip
// does: integers exactly, floats with repr.
func pyNumber(lit string) (string, error) {
	if !strings.ContainsAny(lit, ".eE") {
		neg := strings.HasPrefix(lit, "-")
		d := strings.TrimLeft(strings.TrimPrefix(lit, "-"), "0")
		if d == "" {
			return "0", nil
		}
		if neg {
			return "-" + d, nil
		}
		return d, nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return "", fmt.Errorf("number %s: %v", lit, err)
	}
	return pyFloatRepr(f), nil
}

// pyFloatRepr formats f like Python's repr(float): shortest round-trip
// digits, fixed notation when the exponent is in [-4, 16), else scientific
// with a signed two-digit-minimum exponent.
func pyFloatRepr(f float64) string {
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	at := strings.IndexByte(e, 'e')
	exp, _ := strconv.Atoi(e[at+1:])
	if exp >= -4 && exp < 16 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	return e
}

// jsonArgs is one parsed tool-call argument: its key, its XTML type and
// the text rendered for it (a string's value, otherwise the raw JSON
// spelling as written in the arguments).
type jsonArg struct {
	key, typ, text string
}

// parseToolArguments reads a tool call's arguments JSON object, keeping
// member order and each value's raw spelling. ok is false when the text is
// not valid JSON; a valid non-object is an error.
func parseToolArguments(s string) (args []jsonArg, ok bool, err error) {
	if tokenizer.PyIsBlank(s) {
		return nil, true, nil
	}
	if !json.Valid([]byte(s)) {
		return nil, false, nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	tok, _ := dec.Token()
	if tok != json.Delim('{') {
		return nil, true, errors.New("tool call arguments are JSON but not an object")
	}
	pos := map[string]int{}
	for dec.More() {
		kt, _ := dec.Token()
		key := kt.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, true, err
		}
		a := jsonArg{key: key, text: string(raw)}
		switch raw[0] {
		case '"':
			var str string
			_ = json.Unmarshal(raw, &str)
			a.typ, a.text = "string", str
		case '{':
			a.typ = "object"
		case '[':
			a.typ = "array"
		case 't', 'f':
			a.typ = "boolean"
		case 'n':
			a.typ = "null"
		default:
			a.typ = "number"
		}
		if i, dup := pos[key]; dup {
			args[i] = a
		} else {
			pos[key] = len(args)
			args = append(args, a)
		}
	}
	return args, true, nil
}
