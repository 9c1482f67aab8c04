// Package strictjson finds what encoding/json accepts silently but changes
// on a round trip: invalid UTF-8 (decoded as U+FFFD), escaped lone
// surrogates (likewise) and duplicate object keys (the last one wins). The
// parsers of k3's own files run it before decoding so that such input is
// refused instead of rewritten with different content.
package strictjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Check returns nil when data is one or more JSON values with valid UTF-8,
// no lone surrogate escapes and no object with the same key twice (at any
// depth). Otherwise the error names the byte offset or the key's path
// (e.g. "text_config.hidden_size"). Syntax errors are reported as
// encoding/json does.
func Check(data []byte) error {
	if !utf8.Valid(data) {
		return fmt.Errorf("invalid UTF-8 at byte %d", badUTF8(data))
	}
	if off, ok := loneSurrogate(data); ok {
		return fmt.Errorf("a lone UTF-16 surrogate escape at byte %d (not a character)", off)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		keys   map[string]bool // nil for an array
		path   string
		expect bool // object: the next string token is a key
		key    string
	}
	var stack []*frame
	path := func(k string) string {
		if len(stack) == 0 || stack[len(stack)-1].path == "" {
			return k
		}
		return stack[len(stack)-1].path + "." + k
	}
	// after a value inside an object the next string is a key again
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].keys != nil {
			stack[n-1].expect = true
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		top := (*frame)(nil)
		if n := len(stack); n > 0 {
			top = stack[n-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				p := ""
				if top != nil {
					if top.keys != nil {
						p = path(top.key)
					} else {
						p = top.path
					}
				}
				f := &frame{path: p}
				if v == '{' {
					f.keys, f.expect = map[string]bool{}, true
				}
				stack = append(stack, f)
			case '}', ']':
				stack = stack[:len(stack)-1]
				valueDone()
			}
		case string:
			if top != nil && top.keys != nil && top.expect {
				if top.keys[v] {
					return fmt.Errorf("duplicate key %s", strconv.Quote(path(v)))
				}
				top.keys[v] = true
				top.key, top.expect = v, false
				continue
			}
			valueDone()
		default:
			valueDone()
		}
	}
}

func badUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// loneSurrogate finds a \uD800-\uDFFF escape inside a string that is not
// part of a high+low pair.
func loneSurrogate(b []byte) (int, bool) {
	if !bytes.Contains(b, []byte(`\u`)) && !bytes.Contains(b, []byte(`\U`)) {
		return 0, false
	}
	inStr := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !inStr {
			if c == '"' {
				inStr = true
			}
			continue
		}
		switch c {
		case '"':
			inStr = false
		case '\\':
			if i+1 < len(b) && b[i+1] == 'u' {
				r, ok := hex4(b, i+2)
				if ok && r >= 0xD800 && r <= 0xDFFF {
					if r >= 0xDC00 {
						return i, true
					}
					lo, ok := rune(0), false
					if i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
						lo, ok = hex4(b, i+8)
					}
					if !ok || lo < 0xDC00 || lo > 0xDFFF {
						return i, true
					}
					i += 6 // the pair's second half
				}
				i += 5
				continue
			}
			i++ // the escaped character
		}
	}
	return 0, false
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[i:i+4]), 16, 32)
	if err != nil || strings.ContainsAny(string(b[i:i+4]), "+-") {
		return 0, false
	}
	return rune(v), true
}

// Marshal is json.Marshal without HTML escaping: <, > and & are written as
// they are (a chat transcript's <|…|> markers stay greppable), still valid
// JSON. No trailing newline.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
