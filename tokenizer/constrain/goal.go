package constrain

import (
	"encoding/json"
	"fmt"
	"sync"

	"k3/tokenizer"
)

// Goal is what a turn is held to: an answer that is JSON of Answer
// (response_format), or a call of one of Call's tools whose arguments fit
// its schema (tool_choice required or named). The zero Goal holds nothing.
// The server and the local chat build their samplers from it alike.
type Goal struct {
	Answer *Schema
	Call   map[string]*Schema // tool name -> argument schema
}

// Empty reports whether g holds the turn to nothing.
func (g Goal) Empty() bool { return g.Answer == nil && g.Call == nil }

// ResponseFormat reads an OpenAI response_format object into the schema
// an answer is held to: nil for text (or none), any JSON object for
// json_object, the json_schema's schema when it is in the subset the
// constraint keeps. A schema outside it is an error when strict, else nil
// (only in the prompt).
func ResponseFormat(rf json.RawMessage) (*Schema, error) {
	if len(rf) == 0 {
		return nil, nil
	}
	var f struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Schema json.RawMessage `json:"schema"`
			Strict *bool           `json:"strict"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(rf, &f); err != nil {
		return nil, fmt.Errorf("response_format: %v", err)
	}
	switch f.Type {
	case "json_object":
		return AnyObject(), nil
	case "json_schema":
		if f.JSONSchema == nil || len(f.JSONSchema.Schema) == 0 {
			return AnyObject(), nil
		}
		s, err := Compile(f.JSONSchema.Schema)
		if err != nil {
			if f.JSONSchema.Strict != nil && *f.JSONSchema.Strict {
				return nil, fmt.Errorf("response_format.json_schema.schema cannot be enforced: %v", err)
			}
			return nil, nil // not strict: the schema is only in the prompt
		}
		return s, nil
	}
	return nil, nil
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
// schemas, for a required call (an argument schema outside the subset is
// held to any JSON object).
func ToolSchemas(tools []json.RawMessage) map[string]*Schema {
	out := map[string]*Schema{}
	for _, t := range tools {
		var decl struct {
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if json.Unmarshal(t, &decl) != nil || decl.Function.Name == "" {
			continue
		}
		s, err := Compile(decl.Function.Parameters)
		if err != nil {
			s = AnyObject()
		}
		out[decl.Function.Name] = s
	}
	return out
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
	if g.Call != nil {
		plan = t.ToolCall(g.Call, thinking)
	}
	return NewSampler(t, plan, base, budget)
}
