package serve

import (
	"encoding/json"
	"sync"

	"k3/tokenizer"
	"k3/tokenizer/constrain"
)

// responseSchema reads response_format into the schema the answer is held
// to: nil for text (or none), any JSON object for json_object, the
// json_schema's schema when it is in the subset the constraint keeps
// (refused when strict, else only prompted).
func responseSchema(rf json.RawMessage) (*constrain.Schema, *apiError) {
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
		return nil, badRequest("response_format", "response_format: %v", err)
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
				return nil, badRequest("response_format", "response_format.json_schema.schema cannot be enforced: %v", err)
			}
			return nil, nil // not strict: the schema is only in the prompt
		}
		return s, nil
	}
	return nil, nil
}

// vocabs keeps each tokenizer's constraint vocabulary (built once: it
// copies every token's bytes).
var vocabs sync.Map // *tokenizer.Tokenizer -> *constrained

type constrained struct {
	v  *constrain.Vocab
	mk constrain.Markup
}

// constrainedSampler holds a job's answer to its schema. The sampler keeps
// state, so speculative decoding is off for the job (engine.SpecOff).
func constrainedSampler(tok *tokenizer.Tokenizer, j *job, base constrain.Picker) *constrain.Sampler {
	c, ok := vocabs.Load(tok)
	if !ok {
		v, mk := constrain.ForTokenizer(tok)
		c, _ = vocabs.LoadOrStore(tok, &constrained{v, mk})
	}
	cv := c.(*constrained)
	return constrain.NewSampler(constrain.New(cv.v, j.schema), base, cv.mk, j.thinking, j.maxTokens)
}
