package serve

import (
	"encoding/json"
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

// entries are the chat entries of the reply tokens idx (with their
// alternatives): the shape of Chat Completions' logprobs.content and of
// Responses' output_text logprobs.
func (s *Server) entries(picks []pickLogprob, idx []int) []tokenEntry {
	content := []tokenEntry{}
	for _, k := range idx {
		if k >= len(picks) {
			break
		}
		p := picks[k]
		e := s.entry(p.idLogprob)
		e.Top = []tokenEntry{}
		for _, t := range p.top {
			e.Top = append(e.Top, s.entry(t))
		}
		content = append(content, e)
	}
	return content
}

// chatLogprobs is the choice's logprobs: the tokens of the content.
func (s *Server) chatLogprobs(res *result) any {
	if res.logprobs == nil {
		return nil
	}
	return chatContent(s.entries(res.logprobs, res.contentTokens))
}

func chatContent(content []tokenEntry) any {
	return map[string]any{"content": content, "refusal": nil}
}

// legacyLogprobs is Completions' logprobs object.
type legacyLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// completionLogprobs is a completion's logprobs in the legacy shape.
func (s *Server) completionLogprobs(res *result) any {
	if res.logprobs == nil {
		return nil
	}
	out, _ := s.legacy(res.logprobs, res.contentTokens, 0)
	return out
}

// legacy is the legacy logprobs of the reply tokens idx, whose text
// starts at offset off; it also returns the offset after them.
func (s *Server) legacy(picks []pickLogprob, idx []int, off int) (legacyLogprobs, int) {
	out := legacyLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
	for _, k := range idx {
		if k >= len(picks) {
			break
		}
		p := picks[k]
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
	return out, off
}

// lpStream is a streamed job's logprobs as they are made: the recorder's
// picks and which reply tokens are content (generate fills both), and how
// many of those a stream has sent. Each content token is sent once, with
// the first text delta at or after the text it is part of (a held stop
// string's text may go later), the rest with the last chunk: all the
// chunks' entries together are the reply's, as a reply not streamed has
// them.
type lpStream struct {
	rec     *logprobRecorder
	content []int
	sent    int
	off     int // the legacy text offset of the next token
}

// fresh returns the content tokens not sent yet whose picks are recorded,
// and marks them sent (nil when the job keeps no logprobs).
func (l *lpStream) fresh() []int {
	if l == nil || l.rec == nil {
		return nil
	}
	n := l.sent
	for n < len(l.content) && l.content[n] < len(l.rec.picks) {
		n++
	}
	out := l.content[l.sent:n]
	l.sent = n
	return out
}

// chunkLogprobs is a chat chunk's logprobs: the fresh tokens (nil when
// the job keeps none).
func (s *Server) chunkLogprobs(j *job) any {
	if !j.logprobs {
		return nil
	}
	return chatContent(s.entries(j.lp.rec.picks, j.lp.fresh()))
}

// replyLogprobs is a Responses output_text's logprobs: the content
// tokens' entries (EmptyList when the job kept none).
func (s *Server) replyLogprobs(res *result) json.RawMessage {
	if res.logprobs == nil {
		return openai.EmptyList
	}
	b, _ := json.Marshal(s.entries(res.logprobs, res.contentTokens))
	return b
}

// textLogprobs is a Responses stream's output_text logprobs: the fresh
// content tokens' entries for a delta, or (all) every content token's for
// the text's done events (EmptyList when the job keeps none).
func (s *Server) textLogprobs(j *job, all bool) json.RawMessage {
	if !j.logprobs {
		return openai.EmptyList
	}
	idx := j.lp.fresh()
	if all {
		idx = j.lp.content[:j.lp.sent]
	}
	b, _ := json.Marshal(s.entries(j.lp.rec.picks, idx))
	return b
}

// legacyChunk is a completion chunk's logprobs.
func (s *Server) legacyChunk(j *job) any {
	if !j.logprobs {
		return nil
	}
	out, off := s.legacy(j.lp.rec.picks, j.lp.fresh(), j.lp.off)
	j.lp.off = off
	return out
}
