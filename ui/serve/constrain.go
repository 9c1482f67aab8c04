package serve

import (
	"encoding/json"

	"k3/engine"
	"k3/tokenizer"
	"k3/tokenizer/constrain"
	"k3/ui/openai"
)

// responseSchema reads response_format into the schema the answer is held
// to (constrain.ReadResponseFormat), refusing a strict schema outside the
// subset with 400; what a schema that is not strict could not hold goes
// into the job's warnings and the log.
func (s *Server) responseSchema(rf json.RawMessage, j *job) (*constrain.Schema, *openai.Error) {
	sch, warns, err := constrain.ReadResponseFormat(rf)
	if err != nil {
		return nil, openai.BadRequest("response_format", "%v", err)
	}
	s.schemaNotes(j, warns)
	return sch, nil
}

// toolSchemas reads the tools' argument schemas for a required call
// (constrain.ToolSchemas): a strict tool outside the subset is refused with
// 400, and what the others could not hold is warned of.
func (s *Server) toolSchemas(tools []json.RawMessage, j *job) (map[string]*constrain.Schema, *openai.Error) {
	m, warns, err := constrain.ToolSchemas(tools)
	if err != nil {
		return nil, openai.BadRequest("tools", "%v", err)
	}
	s.schemaNotes(j, warns)
	return m, nil
}

// callGoal holds the calls to the tools' schemas as toolSchemas reads
// them (a strict tool outside the subset is refused): a required call, or
// (tool_choice auto) the calls the model chooses to write, from the
// call's opening on (constrain.Goal's Auto). Under auto an answer held to
// response_format writes no call, and the calls are also checked against
// the schemas (checkCalls), for a reply that was not held.
func (s *Server) callGoal(q *openai.ChatRequest, tools []json.RawMessage, required bool, j *job) *openai.Error {
	if !required {
		j.checkCalls = constrain.CheckSchemas(tools)
		if j.goal.Answer != nil {
			return nil
		}
	}
	var err *openai.Error
	if j.goal.Call, err = s.toolSchemas(tools, j); err != nil {
		return err
	}
	j.goal.Auto, j.goal.Single = !required, q.ParallelToolCalls != nil && !*q.ParallelToolCalls
	return nil
}

func (s *Server) schemaNotes(j *job, warns []string) {
	for _, w := range warns {
		s.logf("structured output: %s", w)
	}
	j.notes = append(j.notes, warns...)
}

// constrainedSampler holds a job's turn to its schema or its tool calls;
// nil when the job has neither. The sampler keeps state (engine.Ordered,
// so drafts never ask it ahead): calls the model may open (auto) are held
// with the job's drafting (spec) on; a required structure is held with
// speculative decoding off, as before.
func constrainedSampler(tok *tokenizer.Tokenizer, j *job, base constrain.Picker, spec engine.Spec) (*constrain.Sampler, engine.Spec) {
	if j.raw {
		return nil, spec
	}
	if !j.goal.Auto {
		spec = engine.SpecOff
	}
	return j.goal.Sampler(tok, j.thinking, base, j.maxTokens), spec
}
