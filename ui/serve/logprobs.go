package serve

import (
	"math"
	"sort"
	"strconv"

	"k3/engine"
	"k3/ui/openai"
)

// logprobs: the log-probability of each generated token under the
// model's own distribution (log-softmax of the logits as the model wrote
// them, before penalties, masks and temperature, as vLLM reports by
// default), and the top alternatives. Computed in float64 in a fixed
// order, so they are the same on every machine.

// maxTopLogprobs is the most alternatives a token may list.
const maxTopLogprobs = 20

type idLogprob struct {
	id int
	lp float64
}

// pickLogprob is one position's pick and its alternatives.
type pickLogprob struct {
	pos int
	idLogprob
	top []idLogprob
}

// logprobRecorder wraps the job's sampler (outermost: it sees the model's
// logits) and keeps each position's log-probabilities. One Pick per
// position, in order: speculative decoding is off while it is used.
type logprobRecorder struct {
	inner engine.Sampler
	top   int
	picks []pickLogprob
}

func (r *logprobRecorder) Pick(pos int, logits []float32) int {
	var id int
	if r.inner != nil {
		id = r.inner.Pick(pos, logits)
	} else {
		for i := range logits {
			if logits[i] > logits[id] {
				id = i
			}
		}
	}
	if n := len(r.picks); n > 0 && r.picks[n-1].pos == pos {
		return r.picks[n-1].id // a second pick at a position is the first
	}
	mx := math.Inf(-1)
	for _, l := range logits {
		mx = math.Max(mx, float64(l))
	}
	z := 0.0
	for _, l := range logits {
		z += math.Exp(float64(l) - mx)
	}
	lz := mx + math.Log(z)
	p := pickLogprob{pos: pos, idLogprob: idLogprob{id, float64(logits[id]) - lz}}
	if r.top > 0 {
		idx := make([]int, len(logits))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return logits[idx[a]] > logits[idx[b]] })
		for _, i := range idx[:min(r.top, len(idx))] {
			p.top = append(p.top, idLogprob{i, float64(logits[i]) - lz})
		}
	}
	r.picks = append(r.picks, p)
	return id
}

// logprobsOf reads logprobs (chat: true; completions: the number of
// alternatives) and top_logprobs into the job.
func logprobsOf(q *openai.Sampling, j *job) *openai.Error {
	switch l := string(q.Logprobs); l {
	case "", "null", "false", "0":
		if q.TopLogprobs != nil && *q.TopLogprobs > 0 {
			return openai.BadRequest("top_logprobs", "top_logprobs needs logprobs")
		}
		return nil
	case "true":
		j.logprobs = true
		if q.TopLogprobs != nil {
			j.topLogprobs = *q.TopLogprobs
		}
	default:
		n, err := strconv.Atoi(l)
		if err != nil {
			return openai.BadRequest("logprobs", "logprobs must be true or false (chat) or a number of alternatives (completions), got %s", l)
		}
		j.logprobs, j.topLogprobs = true, n
	}
	if j.topLogprobs < 0 || j.topLogprobs > maxTopLogprobs {
		return openai.BadRequest("top_logprobs", "top_logprobs must be from 0 to %d, got %d", maxTopLogprobs, j.topLogprobs)
	}
	if q.Stream {
		return openai.BadRequest("logprobs", "logprobs are given on replies that are not streamed; set stream false")
	}
	return nil
}

// tokenEntry is Chat Completions' logprobs.content item.
type tokenEntry struct {
	Token   string       `json:"token"`
	Logprob float64      `json:"logprob"`
	Bytes   []int        `json:"bytes"`
	Top     []tokenEntry `json:"top_logprobs,omitempty"`
}

func (s *Server) entry(p idLogprob) tokenEntry {
	b := s.o.Tok.TokenBytes(p.id)
	if s.o.Tok.IsSpecial(p.id) {
		b = []byte(s.o.Tok.SpecialName(p.id))
	}
	ints := make([]int, len(b))
	for i, c := range b {
		ints[i] = int(c)
	}
	return tokenEntry{Token: string(b), Logprob: p.lp, Bytes: ints}
}

// chatLogprobs is the choice's logprobs: the tokens of the content.
func (s *Server) chatLogprobs(res *result) any {
	if res.logprobs == nil {
		return nil
	}
	content := []tokenEntry{}
	for _, k := range res.contentTokens {
		if k >= len(res.logprobs) {
			break
		}
		p := res.logprobs[k]
		e := s.entry(p.idLogprob)
		e.Top = []tokenEntry{}
		for _, t := range p.top {
			e.Top = append(e.Top, s.entry(t))
		}
		content = append(content, e)
	}
	return map[string]any{"content": content, "refusal": nil}
}

// completionLogprobs is a completion's logprobs in the legacy shape.
func (s *Server) completionLogprobs(res *result) any {
	if res.logprobs == nil {
		return nil
	}
	out := struct {
		Tokens        []string             `json:"tokens"`
		TokenLogprobs []float64            `json:"token_logprobs"`
		TopLogprobs   []map[string]float64 `json:"top_logprobs"`
		TextOffset    []int                `json:"text_offset"`
	}{Tokens: []string{}, TokenLogprobs: []float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
	off := 0
	for _, k := range res.contentTokens {
		if k >= len(res.logprobs) {
			break
		}
		p := res.logprobs[k]
		e := s.entry(p.idLogprob)
		out.Tokens = append(out.Tokens, e.Token)
		out.TokenLogprobs = append(out.TokenLogprobs, p.lp)
		top := map[string]float64{}
		for _, t := range p.top {
			top[s.entry(t).Token] = t.lp
		}
		out.TopLogprobs = append(out.TopLogprobs, top)
		out.TextOffset = append(out.TextOffset, off)
		off += len(e.Token)
	}
	return out
}
