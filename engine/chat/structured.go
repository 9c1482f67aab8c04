package chat

import (
	"k3/engine"
	"k3/tokenizer/constrain"
)

// turnSampling is the sampler and speculative mode of a turn: opt's
// sampling (stream is the turn's PCG32 stream), held to
// opt.ResponseFormat when it asks for JSON by the constrained sampler the
// server uses (constrain.Goal), which keeps state: no speculative drafts
// then. A strict schema outside the enforced subset is an error.
func (s *Session) turnSampling(opt Options, stream uint64) (engine.Sampler, engine.Spec, error) {
	sampler := opt.Sampler(stream)
	schema, err := constrain.ResponseFormat(opt.ResponseFormat)
	if err != nil {
		return nil, opt.Spec, err
	}
	var base constrain.Picker
	if sampler != nil {
		base = sampler
	}
	if cs := (constrain.Goal{Answer: schema}).Sampler(s.Tok, opt.Thinking, base, opt.MaxTokens); cs != nil {
		return cs, engine.SpecOff, nil
	}
	return sampler, opt.Spec, nil
}
