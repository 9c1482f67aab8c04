package constrain

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const person = `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},
 "tags":{"type":"array","items":{"type":"string"}},"kind":{"enum":["a","bc"]},
 "pet":{"anyOf":[{"type":"null"},{"$ref":"#/$defs/pet"}]}},
 "required":["name","age"],"additionalProperties":false,
 "$defs":{"pet":{"type":"object","properties":{"legs":{"type":"number"}},"required":["legs"],"additionalProperties":false}}}`

// feed reads text byte by byte and reports whether every byte was
// accepted, and whether the end is a complete value.
func feed(s *Schema, text string) (alive, complete bool) {
	st := Start(s)
	for i := range len(text) {
		if !st.Feed([]byte{text[i]}) {
			return false, false
		}
	}
	return true, st.Complete()
}

func TestRecognizer(t *testing.T) {
	p, err := Compile(json.RawMessage(person))
	require.NoError(t, err)
	for _, c := range []struct {
		s               *Schema
		text            string
		alive, complete bool
	}{
		{AnyObject(), `{}`, true, true},
		{AnyObject(), `{ "a" : [1, -2.5e+3, true, null, {"b":"\u00e9\n"}] }`, true, true},
		{AnyObject(), ` {}`, false, false}, // the answer starts with the value
		{AnyObject(), `{} `, false, false}, // and ends with it
		{p, `{"na me":`, false, false},
		{AnyObject(), `{"a":`, true, false},
		{AnyObject(), `[1]`, false, false},
		{AnyObject(), `"x"`, false, false},
		{AnyObject(), `{"a":01}`, false, false},
		{AnyObject(), `{"a":1,}`, false, false},
		{AnyObject(), `{"a" 1}`, false, false},
		{AnyObject(), "{\"a\":\"\x01\"}", false, false},
		{AnyObject(), `{"a":tru}`, false, false},
		{AnyObject(), `{"a":"\q"}`, false, false},
		{AnyObject(), "{\"a\":\"\xc3\xa9\"}", true, true},
		{AnyObject(), "{\"a\":\"\xc3\"}", false, false},
		{AnyObject(), `{}x`, false, false},
		{AnyObject(), "{" + strings.Repeat(" ", MaxSpace) + "}", true, true},
		{AnyObject(), "{" + strings.Repeat(" ", MaxSpace+1) + "}", false, false},
		{p, `{"name":"Al","age":3}`, true, true},
		{p, `{"age":3,"name":"Al","kind":"bc","tags":["x"],"pet":{"legs":4.5}}`, true, true},
		{p, `{"age":3,"name":"Al","pet":null}`, true, true},
		{p, `{"name":"Al"}`, false, false},           // age is required
		{p, `{"name":"Al","age":3.5}`, false, false}, // integer
		{p, `{"name":"Al","age":3,"x":1}`, false, false},
		{p, `{"name":"Al","name":"B","age":1}`, false, false},
		{p, `{"name":"Al","age":3,"kind":"b"}`, false, false},
		{p, `{"name":"Al","age":3,"kind":"b`, true, false},
		{p, `{"name":"Al","age":3,"pet":{}}`, false, false},
		{p, `{"name":1}`, false, false},
		{p, `{"na`, true, false},
		{p, `{"nam":`, false, false},
	} {
		alive, complete := feed(c.s, c.text)
		assert.Equal(t, c.alive, alive, "%s alive", c.text)
		assert.Equal(t, c.complete, complete, "%s complete", c.text)
		if c.alive && c.complete {
			assert.True(t, json.Valid([]byte(c.text)), c.text)
		}
	}
}

// The shortest completion of every valid prefix makes a whole value that
// parses.
func TestCompletion(t *testing.T) {
	p, err := Compile(json.RawMessage(person))
	require.NoError(t, err)
	for _, c := range []struct {
		s    *Schema
		text string
	}{
		{p, `{"age":3,"name":"Al","kind":"bc","tags":["x"],"pet":{"legs":4.5}}`},
		{AnyObject(), `{"a":[1,{"b":"c\u00e9\"","d":-1.5e-3},[],true],"e":null}`},
	} {
		for i := range len(c.text) + 1 {
			st := Start(c.s)
			require.True(t, st.Feed([]byte(c.text[:i])))
			whole := c.text[:i] + string(st.Completion())
			require.True(t, st.Feed(st.Completion()), whole)
			require.True(t, st.Complete(), whole)
			var v any
			require.NoError(t, json.Unmarshal([]byte(whole), &v), whole)
		}
	}
	assert.Equal(t, `"age":0,"name":""}`, func() string { st := Start(p); st.Feed([]byte(`{`)); return string(st.Completion()) }())
}

func TestCompileRefuses(t *testing.T) {
	for _, s := range []string{
		`{"type":"string","pattern":"(?=a)b"}`,
		`{"type":"string","uniqueItems":true}`,
		`{"type":"number","multipleOf":0.5}`,
		`{"type":"string","format":"hostname"}`,
		`{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":true}`,
		`{"$ref":"http://x"}`,
		`{"type":"object","properties":{"a":{}},"required":["b"]}`,
		`[1]`,
	} {
		_, err := Compile(json.RawMessage(s))
		assert.Error(t, err, s)
	}
}
