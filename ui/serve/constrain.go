package serve

import (
	"encoding/json"
	"sync"

	"k3/tokenizer"
	"k3/tokenizer/constrain"
	"k3/ui/openai"
)

// responseSchema reads response_format into the schema the answer is held
// to: nil for text (or none), any JSON object for json_object, the
// json_schema's schema when it is in the subset the constraint keeps
// (refused when strict, else only prompted).
func responseSchema(rf json.RawMessage) (*constrain.Schema, *openai.Error) {
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
		return nil, openai.BadRequest("response_format", "response_format: %v", err)
	}
	switch f.Type {
	case "json_object":
		return constrain.AnyObject(), nil
	case "json_schema":
		if f.JSONSchema == nil || len(f.JSONSchema.Schema) == 0 {
			return constrain.AnyObject(), nil
		}
		s, err := constrain.Compile(f.JSONSchema.Schema)
		if err != nil {
			if f.JSONSchema.Strict != nil && *f.JSONSchema.Strict {
				return nil, openai.BadRequest("response_format", "response_format.json_schema.schema cannot be enforced: %v", err)
			}
			return nil, nil // not strict: the schema is only in the prompt
		}
		return s, nil
	}
	return nil, nil
}

// toolSchemas reads the declared tools' names and argument schemas, for a
// required call (an argument schema outside the subset is held to any
// JSON object).
func toolSchemas(tools []json.RawMessage) map[string]*constrain.Schema {
	out := map[string]*constrain.Schema{}
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
		s, err := constrain.Compile(decl.Function.Parameters)
		if err != nil {
			s = constrain.AnyObject()
		}
		out[decl.Function.Name] = s
	}
	return out
}

// turns keeps each tokenizer's constraint vocabulary (built once: it
// copies every token's bytes).
var turns sync.Map // *tokenizer.Tokenizer -> *constrain.Turn

// constrainedSampler holds a job's turn to its schema or required tool
// call; nil when the job has neither. The sampler keeps state, so
// speculative decoding is off for the job (engine.SpecOff).
func constrainedSampler(tok *tokenizer.Tokenizer, j *job, base constrain.Picker) *constrain.Sampler {
	if j.raw || j.schema == nil && j.callTools == nil {
		return nil
	}
	tn, ok := turns.Load(tok)
	if !ok {
		tn, _ = turns.LoadOrStore(tok, constrain.ForTokenizer(tok))
	}
	t := tn.(*constrain.Turn)
	plan := t.Answer(j.schema, j.thinking)
	if j.callTools != nil {
		plan = t.ToolCall(j.callTools, j.thinking)
	}
	return constrain.NewSampler(t, plan, base, j.maxTokens)
}
