package constrain

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nodes counts the distinct nodes reachable from s.
func nodes(s *Schema) int {
	seen := map[*Schema]bool{}
	var walk func(*Schema)
	walk = func(n *Schema) {
		if n == nil || seen[n] {
			return
		}
		seen[n] = true
		for _, p := range n.props {
			walk(p.s)
		}
		for _, a := range n.anyOf {
			walk(a)
		}
		walk(n.items)
		walk(n.values)
	}
	walk(s)
	return len(seen)
}

// nestedTypeList is the fault audit's J13/J14 schema: levels of
// {"type":["object","object"],"properties":{"a":...},"required":["a"]}.
func nestedTypeList(levels int, types string) string {
	s := `{"type":"string"}`
	for range levels {
		s = fmt.Sprintf(`{"type":%s,"properties":{"a":%s},"required":["a"]}`, types, s)
	}
	return s
}

// Compiling is linear in the schema: a type list's entries share their
// sub-schemas (once compiled, each is used by pointer), so 60 levels of a
// two-entry type list are about two nodes a level, where the old
// compiler's work doubled per level.
func TestCompileLinear(t *testing.T) {
	for _, c := range []struct {
		types    string
		perLevel int
	}{{`["object","object"]`, 1}, {`["object","array"]`, 4}, {`["object","null"]`, 3}} {
		for _, levels := range []int{16, 17, 60} {
			s, err := Compile(json.RawMessage(nestedTypeList(levels, c.types)))
			require.NoError(t, err, "%s %d", c.types, levels)
			assert.LessOrEqual(t, nodes(s), c.perLevel*levels+2, "%s %d levels", c.types, levels)
			fp := s.fingerprint()
			assert.Len(t, fp, 32, "a fixed-size fingerprint")
		}
	}
	// a value of the 60-level schema is accepted, and one level short is not
	s, err := Compile(json.RawMessage(nestedTypeList(60, `["object","array"]`)))
	require.NoError(t, err)
	whole := strings.Repeat(`{"a":`, 60) + `"x"` + strings.Repeat(`}`, 60)
	alive, complete := feed(s, whole)
	assert.True(t, alive && complete)
	alive, _ = feed(s, strings.Repeat(`{"a":`, 59)+`"x"}`)
	assert.False(t, alive)
	// the readings stay few: the type list's duplicates are one reading
	st := Start(s)
	require.True(t, st.Feed([]byte(strings.Repeat(`{"a":`, 30))))
	assert.LessOrEqual(t, len(st.ms), MaxReadings)
}

// A schema that needs more nodes than the budget is refused with a clear
// error, before it costs more than that.
func TestCompileBudget(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := range 64 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"p%d":{"type":"object","properties":{`, i)
		for j := range 64 {
			if j > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"q%d":{"type":"array","items":{"enum":[%d,true]}}`, j, i*64+j)
		}
		b.WriteString(`}}`)
	}
	b.WriteString(`}}`)
	_, err := Compile(json.RawMessage(b.String()))
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("more than %d nodes", MaxNodes))

	// the shortest value is bounded too: nested minItems multiply
	deep := `{"type":"string","minLength":100}`
	for range 4 {
		deep = fmt.Sprintf(`{"type":"array","items":%s,"minItems":100}`, deep)
	}
	_, err = Compile(json.RawMessage(deep))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "longer than")
}

// $ref cycles with no value in between are refused; $ref aliases resolve
// by pointer (the audit's J8: a property that must be an object took any
// value).
func TestCompileRefCycles(t *testing.T) {
	for _, c := range []struct{ schema, err string }{
		{`{"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}}}`, "refers to itself"},
		{`{"$ref":"#/$defs/a","$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"}]}}}`, "refers to itself"},
		// J8 as the audit sent it: x is required, and is a again: no finite value
		{`{"$ref":"#/$defs/a","$defs":{"a":{"type":"object","properties":{"x":{"$ref":"#/$defs/b"}},"required":["x"]},"b":{"$ref":"#/$defs/a"}}}`, "no finite JSON value"},
		// J7: n requires c: n
		{`{"type":"object","properties":{"c":{"$ref":"#"}},"required":["c"]}`, "no finite JSON value"},
	} {
		_, err := Compile(json.RawMessage(c.schema))
		require.Error(t, err, c.schema)
		assert.Contains(t, err.Error(), c.err, c.schema)
	}
	// the alias with x optional: x must be an object of the same schema
	s, err := Compile(json.RawMessage(`{"$ref":"#/$defs/a","$defs":{"a":{"type":"object","properties":{"x":{"$ref":"#/$defs/b"}}},"b":{"$ref":"#/$defs/a"}}}`))
	require.NoError(t, err)
	for text, ok := range map[string]bool{`{"x":5}`: false, `{"x":"str"}`: false, `{"x":{}}`: true, `{"x":{"x":{}}}`: true, `{}`: true} {
		alive, complete := feed(s, text)
		assert.Equal(t, ok, alive && complete, text)
	}
	// a left-recursive anyOf with a way out is its way out
	s, err = Compile(json.RawMessage(`{"$ref":"#/$defs/a","$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"integer"}]}}}`))
	require.NoError(t, err)
	alive, complete := feed(s, `12`)
	assert.True(t, alive && complete)
	// an optional property that needs itself forever is left out
	s, err = Compile(json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"},"loop":{"$ref":"#/$defs/l"}},"$defs":{"l":{"type":"object","properties":{"l":{"$ref":"#/$defs/l"}},"required":["l"]}}}`))
	require.NoError(t, err)
	alive, _ = feed(s, `{"l`)
	assert.False(t, alive)
}

// enum and const values are exact (the audit's J10: through float64,
// 9007199254740993 was written 9007199254740992).
func TestCompileExactLiterals(t *testing.T) {
	for _, c := range []struct{ schema, want, wrong string }{
		{`{"enum":[9007199254740993]}`, `9007199254740993`, `9007199254740992`},
		{`{"const":12345678901234567890}`, `12345678901234567890`, `12345678901234567000`},
		{`{"const":{"b":1e400,"a":"<&>"}}`, `{"a":"<&>","b":1e400}`, `{"a":"\u003c&>","b":1e400}`},
	} {
		s, err := Compile(json.RawMessage(c.schema))
		require.NoError(t, err)
		assert.Equal(t, c.want, string(Start(s).Completion()), c.schema)
		alive, complete := feed(s, c.want)
		assert.True(t, alive && complete, c.want)
		alive, complete = feed(s, c.wrong)
		assert.False(t, alive && complete, c.wrong)
	}
}

// Literals and keys of 65,536 bytes and more are read whole (the audit's
// J15: a 16-bit position wrapped).
func TestCompileLongLiterals(t *testing.T) {
	long := strings.Repeat("x", 70000)
	s, err := Compile(json.RawMessage(`{"const":"` + long + `"}`))
	require.NoError(t, err)
	alive, complete := feed(s, `"`+long+`"`)
	assert.True(t, alive && complete)
	alive, _ = feed(s, `"`+long[:65536]+`"`)
	assert.False(t, alive)
	alive, _ = feed(s, `"`+long+`x`)
	assert.False(t, alive)

	s, err = Compile(json.RawMessage(`{"type":"object","properties":{"` + long + `":{"type":"integer"}},"required":["` + long + `"]}`))
	require.NoError(t, err)
	alive, complete = feed(s, `{"`+long+`":1}`)
	assert.True(t, alive && complete)
	alive, _ = feed(s, `{"`+long[:65538]+`":`)
	assert.False(t, alive)
}

// zod 4 writes z.number().int() as an integer bounded by ±(2^53-1): held
// digit by digit, exactly.
func TestNumericBounds(t *testing.T) {
	for _, c := range []struct {
		schema string
		ok     []string
		bad    []string // not whole values of the schema (rejected on some byte, or not complete)
	}{
		{`{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991}`,
			[]string{`0`, `-9007199254740991`, `9007199254740991`, `42`},
			[]string{`9007199254740992`, `-9007199254740992`, `90071992547409910`, `1.5`, `1e3`}},
		{`{"type":"integer","exclusiveMinimum":0,"maximum":100}`,
			[]string{`1`, `100`, `57`}, []string{`0`, `-1`, `101`, `1000`, `-0`}},
		{`{"type":"integer","minimum":3,"maximum":12,"multipleOf":5}`,
			[]string{`5`, `10`}, []string{`0`, `3`, `15`, `12`, `6`}},
		{`{"type":"number","minimum":1.5,"exclusiveMaximum":2.25}`,
			[]string{`1.5`, `2`, `2.2`, `2.249`, `1.75`}, []string{`1`, `1.4`, `2.25`, `2.3`, `3`, `1.5e0`, `-2`}},
		{`{"type":"number","exclusiveMinimum":0.25,"exclusiveMaximum":0.26}`,
			[]string{`0.251`, `0.2599`}, []string{`0.25`, `0.26`, `0.2`, `0`}},
		{`{"type":"integer","minimum":1000000000000000000000000000000}`,
			[]string{`1000000000000000000000000000000`, `99999999999999999999999999999999`}, []string{`999999999999999999999999999999`, `-5`}},
		{`{"type":"number","maximum":-0.5}`,
			[]string{`-0.5`, `-1`, `-1000.25`}, []string{`0`, `-0.4`, `-0`, `1`}},
		{`{"type":"integer","minimum":5,"exclusiveMinimum":true}`, // draft 4
			[]string{`6`}, []string{`5`}},
	} {
		s, err := Compile(json.RawMessage(c.schema))
		require.NoError(t, err, c.schema)
		for _, v := range c.ok {
			alive, complete := feed(s, v)
			assert.True(t, alive && complete, "%s: %s", c.schema, v)
		}
		for _, v := range c.bad {
			alive, complete := feed(s, v)
			assert.False(t, alive && complete, "%s: %s", c.schema, v)
		}
		// the shortest completion of every prefix of a good value fits
		for _, v := range append([]string{""}, c.ok...) {
			for i := range len(v) + 1 {
				st := Start(s)
				require.True(t, st.Feed([]byte(v[:i])))
				whole := v[:i] + string(st.Completion())
				require.NoError(t, validate(c.schema, whole), "%s: %s", c.schema, whole)
			}
		}
	}
	_, err := Compile(json.RawMessage(`{"type":"integer","minimum":5,"maximum":4}`))
	assert.ErrorContains(t, err, "no number fits")
	_, err = Compile(json.RawMessage(`{"type":"integer","minimum":1.2,"maximum":1.8}`))
	assert.ErrorContains(t, err, "no number fits")
	// bounds whose exact value would be huge are refused before any arithmetic
	_, err = Compile(json.RawMessage(`{"type":"integer","minimum":1e999999999}`))
	assert.ErrorContains(t, err, "bounds beyond ±1e40 are not supported")
	_, err = Compile(json.RawMessage(`{"type":"number","maximum":1` + strings.Repeat("0", 400) + `}`))
	assert.ErrorContains(t, err, "digits")
	s, warns, err := CompileLenient(json.RawMessage(`{"type":"number","minimum":0,"maximum":1.7976931348623157e308}`))
	require.NoError(t, err)
	assert.Len(t, warns, 1, "the huge bound is left out, the other held")
	alive, _ := feed(s, `-1`)
	assert.False(t, alive)
	s, err = Compile(json.RawMessage(`{"type":"number","minimum":1e40}`))
	require.NoError(t, err)
	assert.Len(t, Start(s).Completion(), 41, "1 and 40 zeros")
}

func TestStringsAndArrays(t *testing.T) {
	for _, c := range []struct {
		schema string
		ok     []string
		bad    []string
	}{
		{`{"type":"string","minLength":2,"maxLength":3}`, []string{`"ab"`, `"abc"`, `"é\n"`, `"壽é"`},
			// a character above U+FFFF is one code point but two UTF-16 units (JavaScript's length): left out
			[]string{`""`, `"a"`, `"abcd"`, `"a😀"`, `"a\ud83d\ude00"`}},
		{`{"type":"string"}`, []string{`"😀"`, "\"\xed\x9f\xbf\""},
			// well-formed UTF-8 only: no overlong forms, no surrogates, nothing above U+10FFFF
			[]string{"\"\xe0\x80\x80\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "\"\xc0\x80\""}},
		{`{"type":"string","format":"date"}`, []string{`"2024-02-29"`, `"1999-12-31"`}, []string{`"2024-13-01"`, `"2024-1-01"`, `"x"`, `"2024-02-29 "`}},
		{`{"type":"string","format":"date-time"}`, []string{`"2024-02-29T23:59:60Z"`, `"2024-02-29T01:02:03.5+05:30"`}, []string{`"2024-02-29T24:00:00Z"`, `"2024-02-29"`}},
		{`{"type":"string","format":"time"}`, []string{`"12:00:00Z"`}, []string{`"12:00"`}},
		{`{"type":"string","format":"uuid"}`, []string{`"123e4567-e89b-12d3-a456-426614174000"`}, []string{`"123e4567e89b12d3a456426614174000"`}},
		{`{"type":"string","format":"email"}`, []string{`"a.b@example.com"`}, []string{`"a@b"`, `"@x.com"`, `"a b@x.com"`}},
		{`{"type":"string","pattern":"^[a-z]+-[0-9]{2,3}$"}`, []string{`"ab-12"`, `"x-999"`}, []string{`"ab-1"`, `"AB-12"`, `"ab-1234"`}},
		// zod 4's z.iso.date(): a format and a pattern, both held
		{`{"type":"string","format":"date","pattern":"^(?:(?:\\d\\d[2468][048]|\\d\\d[13579][26]|\\d\\d0[48]|[02468][048]00|[13579][26]00)-02-29|\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|(?:02)-(?:0[1-9]|1\\d|2[0-8])))$"}`,
			[]string{`"2024-02-29"`, `"2023-04-30"`}, []string{`"2023-02-29"`, `"2023-04-31"`, `"2023-4-30"`}},
		{`{"type":"string","pattern":"cat"}`, []string{`"cat"`, `"a cat!"`}, []string{`"dog"`, `"c\u0061t"`}},
		{`{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3}`, []string{`[1,2]`, `[1,2,3]`}, []string{`[]`, `[1]`, `[1,2,3,4]`}},
		{`{"type":"array","maxItems":0}`, []string{`[]`}, []string{`[1]`}},
		{`{"type":"object","additionalProperties":{"type":"integer","minimum":0}}`, []string{`{}`, `{"a":1,"b":2}`}, []string{`{"a":-1}`, `{"a":"x"}`}},
		{`{"oneOf":[{"type":"object","properties":{"k":{"const":"a"},"n":{"type":"integer"}},"required":["k","n"]},{"type":"object","properties":{"k":{"const":"b"},"s":{"type":"string"}},"required":["k","s"]}]}`,
			[]string{`{"k":"a","n":1}`, `{"k":"b","s":"x"}`}, []string{`{"k":"a","s":"x"}`, `{"k":"b"}`}},
	} {
		s, err := Compile(json.RawMessage(c.schema))
		require.NoError(t, err, c.schema)
		for _, v := range c.ok {
			alive, complete := feed(s, v)
			assert.True(t, alive && complete, "%s: %s", c.schema, v)
			require.NoError(t, validate(c.schema, v), "the validator agrees: %s", v)
		}
		for _, v := range c.bad {
			alive, complete := feed(s, v)
			assert.False(t, alive && complete, "%s: %s", c.schema, v)
		}
		for _, v := range append([]string{""}, c.ok...) {
			for i := range len(v) + 1 {
				st := Start(s)
				require.True(t, st.Feed([]byte(v[:i])), v[:i])
				whole := v[:i] + string(st.Completion())
				require.NoError(t, validate(c.schema, whole), "%s: %s", c.schema, whole)
			}
		}
	}
}

// Not strict: what the subset cannot hold is left out and said; the rest
// is held. Strict: refused, naming the keyword.
func TestCompileLenient(t *testing.T) {
	const schema = `{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"},"uniqueItems":true},
	 "n":{"type":"number","multipleOf":0.5},"u":{"type":"string","format":"hostname"}},"required":["tags","n"],"additionalProperties":false}`
	_, err := Compile(json.RawMessage(schema))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"multipleOf"`)
	s, warns, err := CompileLenient(json.RawMessage(schema))
	require.NoError(t, err)
	require.Len(t, warns, 3)
	assert.Contains(t, strings.Join(warns, "\n"), `property "tags": schema keyword "uniqueItems" is not supported; it was not enforced`)
	assert.Contains(t, strings.Join(warns, "\n"), `property "n": schema keyword "multipleOf"`)
	assert.Contains(t, strings.Join(warns, "\n"), `property "u": schema keyword "format": "hostname"`)
	alive, complete := feed(s, `{"tags":["a","a"],"n":0.3}`)
	assert.True(t, alive && complete)
	alive, _ = feed(s, `{"n":1}`)
	assert.False(t, alive && complete, "required still held")
	alive, _ = feed(s, `{"x":1`)
	assert.False(t, alive, "unknown keys still refused")
}

// oneOf is held when no value can fit two of its alternatives (told apart
// by type, by a const or enum, or by a required key the other never
// writes); otherwise strict refuses it naming oneOf, and lenient holds it
// as anyOf with a warning.
func TestOneOfExclusive(t *testing.T) {
	held := []string{
		`{"oneOf":[{"type":"string"},{"type":"integer"},{"type":["null","boolean"]}]}`,
		`{"oneOf":[{"enum":[1,2,"a"]},{"enum":[3,"b"]},{"const":{"a":1}}]}`,
		`{"oneOf":[{"type":"object","properties":{"kind":{"const":"circle"},"r":{"type":"number"}},"required":["kind","r"]},
		           {"type":"object","properties":{"kind":{"enum":["square","box"]},"side":{"type":"number"}},"required":["kind"]}]}`,
		`{"oneOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false},
		           {"type":"object","properties":{"b":{"type":"string"}},"required":["b"],"additionalProperties":false}]}`,
		`{"$defs":{"c":{"type":"object","properties":{"t":{"const":1}},"required":["t"]}},
		  "oneOf":[{"$ref":"#/$defs/c"},{"type":"object","properties":{"t":{"const":2}},"required":["t"]},{"type":"array"}]}`,
	}
	for _, s := range held {
		_, err := Compile(json.RawMessage(s))
		require.NoError(t, err, s)
		_, warns, err := CompileLenient(json.RawMessage(s))
		require.NoError(t, err, s)
		assert.Empty(t, warns, s)
	}
	overlap := []string{
		`{"oneOf":[{"type":"string"},{"type":"string","minLength":2}]}`,
		`{"oneOf":[{"type":"integer"},{"type":"number"}]}`,
		`{"oneOf":[{"enum":[1,2]},{"enum":[2.0,3]}]}`,
		`{"oneOf":[{"enum":["a"]},{"const":"\u0061"}]}`,
		// properties with no type: a validator takes a string too
		`{"oneOf":[{"properties":{"a":{"type":"string"}}},{"type":"string"}]}`,
		// the other does not require the key: {"a":""} fits both
		`{"oneOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false},
		           {"type":"object","properties":{"b":{"type":"string"}}}]}`,
		`{"oneOf":[{"type":"object","properties":{"k":{"const":"x"}},"required":["k"]},{"type":"object","properties":{"k":{"type":"string"}},"required":["k"]}]}`,
		`{"type":"object","properties":{"p":{"oneOf":[{}, {"type":"null"}]}}}`,
	}
	for _, s := range overlap {
		_, err := Compile(json.RawMessage(s))
		require.Error(t, err, s)
		assert.Contains(t, err.Error(), `schema keyword "oneOf": alternatives`, s)
		c, warns, err := CompileLenient(json.RawMessage(s))
		require.NoError(t, err, s)
		require.Len(t, warns, 1, s)
		assert.Contains(t, warns[0], `"oneOf"`)
		assert.Contains(t, warns[0], "held as anyOf")
		assert.NotNil(t, c)
	}
	_, err := Compile(json.RawMessage(overlap[len(overlap)-1]))
	assert.Contains(t, err.Error(), `property "p": schema keyword "oneOf": alternatives 0 and 1 may both fit one value`)
}

// A count above the limit is refused when strict; not strict, it is left
// out with a warning and the rest is held (Claude Code's Workflow tool has
// maxLength 524288).
func TestBigCountLenient(t *testing.T) {
	const schema = `{"type":"object","properties":{"script":{"type":"string","maxLength":524288},"n":{"type":"integer","minimum":0}},"required":["script"],"additionalProperties":false}`
	_, err := Compile(json.RawMessage(schema))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `property "script": maxLength is 524288; at most 65536 is supported`)
	s, warns, err := CompileLenient(json.RawMessage(schema))
	require.NoError(t, err)
	require.Len(t, warns, 1)
	assert.Contains(t, warns[0], `property "script": schema keyword "maxLength": maxLength above 65536; it was not enforced`)
	alive, complete := feed(s, `{"script":"x","n":3}`)
	assert.True(t, alive && complete)
	alive, _ = feed(s, `{"n":-1`)
	assert.False(t, alive, "the rest still held")
}
