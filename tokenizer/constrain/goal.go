package constrain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"k3/tokenizer"
)

// Goal is what a turn is held to: an answer that is JSON of Answer
// (response_format), or a call of one of Call's tools whose arguments fit
// its schema (tool_choice required or named), or, with Auto (tool_choice
// auto), the calls the model chooses to write, each held from its opening
// on (Turn.AutoCall). The zero Goal holds nothing.
// The server and the local chat build their samplers from it alike.
type Goal struct {
	Answer *Schema
	Call   map[string]*Schema // tool name -> argument schema
	Single bool               // one call only (parallel_tool_calls false)
	Auto   bool               // calls are the model's choice: held once it opens one
}

// Empty reports whether g holds the turn to nothing.
func (g Goal) Empty() bool { return g.Answer == nil && g.Call == nil }

// ResponseFormat reads an OpenAI response_format object into the schema
// an answer is held to (ReadResponseFormat, without its warnings).
func ResponseFormat(rf json.RawMessage) (*Schema, error) {
	s, _, err := ReadResponseFormat(rf)
	return s, err
}

// ReadResponseFormat reads an OpenAI response_format object into the
// schema an answer is held to: nil for text (or none), any JSON object for
// json_object, the json_schema's schema for json_schema. A strict schema
// outside the subset Compile holds is an error naming the keyword; a
// schema that is not strict is held as far as it can be
// (CompileLenient), and the warnings say what was not.
func ReadResponseFormat(rf json.RawMessage) (*Schema, []string, error) {
	if len(rf) == 0 {
		return nil, nil, nil
	}
	var f struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Schema json.RawMessage `json:"schema"`
			Strict *bool           `json:"strict"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(rf, &f); err != nil {
		return nil, nil, fmt.Errorf("response_format: %v", err)
	}
	switch f.Type {
	case "json_object":
		return AnyObject(), nil, nil
	case "json_schema":
		if f.JSONSchema == nil || len(f.JSONSchema.Schema) == 0 {
			return AnyObject(), nil, nil
		}
		strict := f.JSONSchema.Strict != nil && *f.JSONSchema.Strict
		return holdSchema(f.JSONSchema.Schema, strict, "response_format.json_schema.schema")
	}
	return nil, nil, nil
}

// holdSchema compiles a schema strictly (an error names what cannot be
// held) or leniently (warnings say what is not held; a schema that cannot
// be compiled at all is held to nothing, and a warning says so).
func holdSchema(raw json.RawMessage, strict bool, what string) (*Schema, []string, error) {
	if strict {
		s, err := Compile(raw)
		if err != nil {
			return nil, nil, fmt.Errorf("%s cannot be enforced: %v", what, err)
		}
		return s, nil, nil
	}
	s, warns, err := CompileLenient(raw)
	if err != nil {
		return nil, []string{fmt.Sprintf("%s was not enforced (the reply is only asked for it): %v", what, err)}, nil
	}
	for i, w := range warns {
		warns[i] = what + ": " + w
	}
	return s, warns, nil
}

// SchemaFormat is the response_format of a strict json_schema named name:
// what `k3 chat --json-schema` sends (locally and to a server).
func SchemaFormat(name string, schema json.RawMessage) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"type": "json_schema",
		"json_schema": map[string]any{"name": name, "strict": true, "schema": schema}})
	return b
}

// ObjectFormat is the response_format json_object.
var ObjectFormat = json.RawMessage(`{"type":"json_object"}`)

// ToolSchemas reads declared OpenAI function tools' names and argument
// schemas, for a required call. A tool with "strict": true whose schema
// is outside the subset is an error; otherwise its schema is held as far
// as it can be and the warnings say what is not (a schema that cannot be
// compiled at all holds the arguments to any JSON object).
func ToolSchemas(tools []json.RawMessage) (map[string]*Schema, []string, error) {
	out := map[string]*Schema{}
	var warns []string
	for _, t := range tools {
		var decl struct {
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
				Strict     *bool           `json:"strict"`
			} `json:"function"`
		}
		if json.Unmarshal(t, &decl) != nil || decl.Function.Name == "" {
			continue
		}
		f := decl.Function
		if p := strings.TrimSpace(string(f.Parameters)); p == "" || p == "null" {
			out[f.Name] = AnyObject()
			continue
		}
		strict := f.Strict != nil && *f.Strict
		s, w, err := holdSchema(f.Parameters, strict, fmt.Sprintf("tool %q parameters", f.Name))
		if err != nil {
			return nil, nil, err
		}
		if s == nil {
			s = AnyObject()
		}
		out[f.Name], warns = s, append(warns, w...)
	}
	return out, warns, nil
}

// turns keeps each tokenizer's Turn (built once: it copies every token's
// bytes, and its masks are shared by the turns that use it).
var turns sync.Map // *tokenizer.Tokenizer -> *Turn

// Shared returns tok's Turn, built on first use and kept.
func Shared(tok *tokenizer.Tokenizer) *Turn {
	if tn, ok := turns.Load(tok); ok {
		return tn.(*Turn)
	}
	tn, _ := turns.LoadOrStore(tok, ForTokenizer(tok))
	return tn.(*Turn)
}

// Sampler returns the sampler that holds a turn over tok to g: thinking
// is whether the generation prompt opened the think channel, base picks
// among the allowed tokens (nil: the argmax), budget is the turn's token
// cap. It is nil when g is empty. The sampler keeps state, so speculative
// decoding must be off while it is used.
func (g Goal) Sampler(tok *tokenizer.Tokenizer, thinking bool, base Picker, budget int) *Sampler {
	if g.Empty() {
		return nil
	}
	t := Shared(tok)
	plan := t.Answer(g.Answer, thinking)
	switch {
	case g.Call != nil && g.Auto:
		plan = t.AutoCall(g.Call, thinking, g.Single)
	case g.Call != nil:
		plan = t.ToolCall(g.Call, thinking, g.Single)
	}
	return NewSampler(t, plan, base, budget)
}

// CheckSchemas compiles the declared tools' argument schemas leniently,
// to check calls the model wrote on its own (Fits); a tool whose schema
// cannot be compiled is left out.
func CheckSchemas(tools []json.RawMessage) map[string]*Schema {
	out := map[string]*Schema{}
	for _, t := range tools {
		var decl struct {
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if json.Unmarshal(t, &decl) != nil || decl.Function.Name == "" || len(decl.Function.Parameters) == 0 {
			continue
		}
		if s, _, err := CompileLenient(decl.Function.Parameters); err == nil {
			out[decl.Function.Name] = s
		}
	}
	return out
}

// Fits reports whether text (blanks around it aside) is a whole value of s.
func Fits(s *Schema, text []byte) bool {
	st := Start(s)
	return st.Feed(bytes.TrimSpace(text)) && st.Complete()
}
