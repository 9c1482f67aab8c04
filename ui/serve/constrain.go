package serve

import (
	"encoding/json"

	"k3/tokenizer"
	"k3/tokenizer/constrain"
	"k3/ui/openai"
)

// responseSchema reads response_format into the schema the answer is held
// to (constrain.ResponseFormat), refusing a strict schema outside the
// subset with 400.
func responseSchema(rf json.RawMessage) (*constrain.Schema, *openai.Error) {
	s, err := constrain.ResponseFormat(rf)
	if err != nil {
		return nil, openai.BadRequest("response_format", "%v", err)
	}
	return s, nil
}

// constrainedSampler holds a job's turn to its schema or required tool
// call; nil when the job has neither. The sampler keeps state, so
// speculative decoding is off for the job (engine.SpecOff).
func constrainedSampler(tok *tokenizer.Tokenizer, j *job, base constrain.Picker) *constrain.Sampler {
	if j.raw {
		return nil
	}
	return j.goal.Sampler(tok, j.thinking, base, j.maxTokens)
}
