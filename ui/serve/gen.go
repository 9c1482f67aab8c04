package serve

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"k3/engine"
	"k3/engine/chat"
	"k3/tokenizer"
	"k3/tokenizer/constrain"
	"k3/tokenizer/xtml"
	"k3/ui/openai"
)

// job is one generation, read from a request.
type job struct {
	ids      []int
	images   []chat.Image // the prompt's pictures, their pads expanded in ids
	thinking bool         // the prompt opened the think channel
	// noTools, when set, says why tool calls were not asked for (no tools,
	// or tool_choice "none"): the reader leaves out the ones written anyway
	noTools string
	raw     bool // a completion: every generated token is text, no channels
	// keepSpecial keeps a completion's control tokens in its text, as
	// their strings (skip_special_tokens false)
	keepSpecial bool
	maxTokens   int
	sampling    engine.Sampling
	penalties   engine.Penalties
	logprobs    bool // keep each generated token's log-probability (logprobRecorder)
	topLogprobs int
	lp          lpStream // the logprobs as they are made (with logprobs)
	stream      uint64   // PCG32 stream of the seed (as k3 chat: the turn's user-message count)
	stops       []string
	// goal is what the answer must be (response_format) or the required
	// call (tool_choice required or named): enforced by constrained decoding
	goal constrain.Goal
	// checkCalls are the tools' schemas when calls are the model's choice
	// (tool_choice auto): a call that does not fit is warned of
	checkCalls map[string]*constrain.Schema
	client     string // who asked (clientOf)
	// partition is whose prompt-cache snapshots the job may reuse
	// (Server.partition)
	partition string
	// notes are warnings of the request's own (what it asked and was not
	// done), reported before the reply reader's
	notes []string

	// streaming hooks; nil when not streaming
	onPrefill   func(done, total int)
	onReasoning func(string)
	onAnswer    func(string)
}

// result is a finished generation.
type result struct {
	ids                []int // generated
	reasoning, content string
	calls              []xtml.ToolCall
	warnings           []string
	reasoningTokens    int           // of the generated tokens, the think channel's text
	logprobs           []pickLogprob // per generated token, when asked for
	contentTokens      []int         // indexes of the generated tokens that are content (text)
	finish             string        // stop, length or tool_calls
	stopSeq            string        // the stop string that ended the reply
	prompt, reused     int
	// shown is what the reply reports as reused (cached_tokens): all of
	// it, since a job reuses only its own partition's states (no client
	// learns whether another's prompt starts like its own)
	shown int
}

// samplingOf reads the shared sampling fields into a job; maxDefault is
// the reply cap when the request gives none.
func (s *Server) samplingOf(q *openai.Sampling, j *job) *openai.Error {
	if err := s.checkModel(q.Model); err != nil {
		return err
	}
	if q.N != nil && *q.N != 1 {
		return openai.BadRequest("n", "n must be 1: the server generates one choice per request")
	}
	if err := logprobsOf(q, j); err != nil {
		return err
	}
	if q.Temperature != nil {
		if *q.Temperature < 0 || *q.Temperature > 5 {
			return openai.BadRequest("temperature", "temperature must be from 0 to 5, got %g", *q.Temperature)
		}
		j.sampling.Temperature = *q.Temperature
	}
	if q.TopP != nil {
		if *q.TopP <= 0 || *q.TopP > 1 {
			return openai.BadRequest("top_p", "top_p must be above 0 and at most 1, got %g", *q.TopP)
		}
		j.sampling.TopP = *q.TopP
	}
	if q.TopK != nil {
		switch {
		case *q.TopK == -1: // vLLM's "off"
		case *q.TopK < 0:
			return openai.BadRequest("top_k", "top_k must be 0 or more (or -1 for all), got %d", *q.TopK)
		default:
			j.sampling.TopK = *q.TopK
		}
	}
	if q.Seed != nil {
		j.sampling.Seed = uint64(*q.Seed)
	}
	if err := s.penaltiesOf(q, j); err != nil {
		return err
	}
	j.maxTokens = s.o.DefaultMaxTokens
	for _, f := range []struct {
		name string
		v    *int
	}{{"max_tokens", q.MaxTokens}, {"max_completion_tokens", q.MaxCompletionTokens}} {
		if f.v != nil {
			if *f.v < 1 {
				return openai.BadRequest(f.name, "%s must be at least 1, got %d", f.name, *f.v)
			}
			j.maxTokens = *f.v
		}
	}
	stops, err := stopStrings(q.Stop)
	if err != nil {
		return asAPIError(err)
	}
	j.stops = append(j.stops, stops...) // after an endpoint's own (Messages' stop_sequences)
	j.partition = s.partition(j.partition, q.PromptCacheKey)
	return nil
}

// fit checks the prompt against the context cap and lowers the reply cap.
func (s *Server) fit(j *job) *openai.Error {
	if len(j.ids) == 0 {
		return openai.BadRequest("", "the prompt is empty")
	}
	if c := s.o.MaxContext; c > 0 {
		if len(j.ids) >= c {
			return &openai.Error{Status: 400, Message: fmt.Sprintf("the prompt has %d positions; this server's context is %d", len(j.ids), c),
				Type: "invalid_request_error", Param: "messages", Code: "context_length_exceeded"}
		}
		j.maxTokens = min(j.maxTokens, c-len(j.ids))
	}
	return nil
}

// generateAt generates j in the queue place p, which it leaves when done
// (before the reply goes out: the client's next request finds the place
// free); a failure the client did not cause by leaving is told with fail.
func (s *Server) generateAt(ctx context.Context, p *place, j *job, fail func(*openai.Error)) (*result, error) {
	res, err := s.generate(ctx, j)
	p.leave()
	if err != nil && ctx.Err() == nil {
		fail(asAPIError(err))
	}
	return res, err
}

// sseFail ends a chat or completions stream with the error as its last
// data, then [DONE].
func sseFail(e *openai.SSE) func(*openai.Error) {
	return func(ae *openai.Error) {
		e.Data(openai.ErrorBody{Error: ae})
		e.Done()
	}
}

// generate runs a job on the kept session (the caller holds a queue turn).
func (s *Server) generate(ctx context.Context, j *job) (*result, error) {
	if s.o.Lock != nil {
		s.o.Lock.Lock()
		defer s.o.Lock.Unlock()
	}
	if s.o.Grow != nil {
		if err := s.o.Grow(len(j.ids) + j.maxTokens); err != nil {
			return nil, &openai.Error{Status: 400, Message: fmt.Sprintf("the prompt has %d positions and the reply may take %d more: %v", len(j.ids), j.maxTokens, err),
				Type: "invalid_request_error", Param: "messages", Code: "context_length_exceeded"}
		}
	}
	s.generations.Add(1)
	t := &turn{s: s, j: j, filter: newStopFilter(j.stops, j.onAnswer), dec: s.o.Tok.NewStreamDecoder(), stopIDs: s.o.Tok.StopIDs()}
	sampler, spec := s.sampler(j)
	on := t.on
	if obs := s.o.Observe; obs != nil {
		on = func(ev engine.Event) { t.on(ev); obs(ev) }
	}
	rep, err := s.sess.Generate(ctx, j.ids, chat.PromptOptions{Thinking: j.thinking, MaxTokens: j.maxTokens,
		Sampler: sampler, Spec: spec, Stop: func() bool { return t.filter.hit },
		NoTools: j.noTools != "", NoToolsWhy: j.noTools, Partition: j.partition, Images: j.images}, on)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			s.cancelled.Add(1)
		}
		return nil, err
	}
	s.count(rep, t.first)
	return t.result(rep), nil
}

// turn is one generation's reading of the engine's events: the stop
// filter the answer streams through, the raw text decoder, the tokens
// the logprobs' content is still waiting on.
type turn struct {
	s       *Server
	j       *job
	filter  *stopFilter
	dec     *tokenizer.StreamDecoder
	stopIDs []int
	first   time.Time // when the first reply token came
	pending []int
	n       int // reply tokens so far
}

// on takes one event: the prompt's progress, a raw token's text, the
// thinking and the answer as the session's reader read them.
func (t *turn) on(ev engine.Event) {
	j, tok := t.j, t.s.o.Tok
	if j.logprobs {
		j.lp.content, t.pending, t.n = contentToken(tok, j, ev, j.lp.content, t.pending, t.n)
	}
	switch ev.Kind {
	case engine.EventPrefill:
		if j.onPrefill != nil {
			j.onPrefill(ev.Done, ev.Total)
		}
	case engine.EventToken:
		if t.first.IsZero() {
			t.first = time.Now()
		}
		if j.raw && !slices.Contains(t.stopIDs, ev.Token) && (j.keepSpecial || !tok.IsSpecial(ev.Token)) {
			t.filter.add(t.dec.Add(ev.Token))
		}
	case engine.EventReasoning:
		if !j.raw && j.onReasoning != nil {
			j.onReasoning(ev.Text)
		}
	case engine.EventAnswer:
		if !j.raw {
			t.filter.add(ev.Text)
		}
	}
}

// sampler is the job's sampler, with the speculative decoding it allows:
// its sampling, then the schema's constraint, the penalties and the
// logprobs' recorder (j.lp.rec) around it.
func (s *Server) sampler(j *job) (engine.Sampler, engine.Spec) {
	sampler, spec := j.sampling.Sampler(j.stream), engine.SpecAuto
	var base constrain.Picker
	if sampler != nil {
		base = sampler
	}
	if cs, sp := constrainedSampler(s.o.Tok, j, base, spec); cs != nil {
		sampler, spec = cs, sp
	}
	if !j.penalties.IsZero() {
		// outermost: it sees every position's pick (forced markup too)
		sampler, spec = j.penalties.Sampler(sampler, j.ids), engine.SpecOff
	}
	if j.logprobs {
		j.lp.rec = &logprobRecorder{inner: sampler, top: j.topLogprobs}
		sampler, spec = j.lp.rec, engine.SpecOff
	}
	return sampler, spec
}

// count adds a reply to the server's counters.
func (s *Server) count(rep *chat.Reply, first time.Time) {
	s.reused.Add(int64(rep.Reused))
	s.prefilled.Add(int64(rep.Prefilled))
	s.tokens.Add(int64(len(rep.IDs)))
	if n := len(rep.IDs); n > 1 && !first.IsZero() {
		// the steps after the first token, which came with the prompt's read
		s.secsPerToken.Store(math.Float64bits(time.Since(first).Seconds() / float64(n-1)))
	}
}

// result is the reply as the job answers it: the ids, the finish reason,
// the text through the stop filter, the tool calls (each checked against
// its schema when it was not held to it) and the logprobs.
func (t *turn) result(rep *chat.Reply) *result {
	j, filter := t.j, t.filter
	// the reuse came from the job's own partition (the session's kept
	// states and the prompt cache never cross partitions): it may see it
	res := &result{ids: rep.IDs, prompt: len(j.ids), reused: rep.Reused, shown: rep.Reused, finish: "length"}
	if rec := j.lp.rec; rec != nil {
		res.logprobs, res.contentTokens = rec.picks, j.lp.content
	}
	if rep.Stop == engine.StopToken {
		res.finish = "stop"
	}
	if j.raw {
		filter.add(t.dec.Flush())
	} else {
		// the reply as the session's reader read it: what streamed, plus
		// the tool calls and what it read loosely
		res.reasoning, res.calls = rep.Reasoning, rep.ToolCalls
		res.warnings = append(slices.Clip(j.notes), rep.Warnings...)
		res.reasoningTokens = rep.ReasoningTokens
	}
	filter.flush()
	if filter.hit {
		res.finish, res.calls = "stop", nil
	} else if len(res.calls) > 0 {
		res.finish = "tool_calls"
		for _, c := range res.calls {
			if sch, ok := j.checkCalls[c.Function.Name]; ok && !constrain.Fits(sch, []byte(c.Function.Arguments)) {
				res.warnings = append(res.warnings, fmt.Sprintf("the call of %q has arguments that do not fit its schema (they were not held to it)", c.Function.Name))
			}
		}
	}
	res.content, res.stopSeq = filter.out.String(), filter.matched
	return res
}

// chatUsage is a chat reply's usage: openai.NewUsage (with the reuse this
// client may see) and the reasoning tokens the reply reader counted.
func (r *result) chatUsage() *openai.Usage {
	u := openai.NewUsage(r.prompt, len(r.ids), r.shown)
	u.CompletionTokensDetails = &openai.CompletionTokensDetails{ReasoningTokens: r.reasoningTokens}
	return u
}

// newID returns prefix + 24 random hex digits.
func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// penaltiesOf reads frequency_penalty, presence_penalty,
// repetition_penalty and logit_bias (keys: token ids) into the job; they
// are applied exactly (engine.Penalties), or the request is refused.
func (s *Server) penaltiesOf(q *openai.Sampling, j *job) *openai.Error {
	p := &j.penalties
	for _, f := range []struct {
		v   *float64
		dst *float64
	}{{q.FrequencyPenalty, &p.Frequency}, {q.PresencePenalty, &p.Presence}, {q.RepetitionPenalty, &p.Repetition}} {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	if q.RepetitionPenalty != nil && *q.RepetitionPenalty <= 0 {
		return openai.BadRequest("repetition_penalty", "repetition_penalty must be above 0 (1: none), got %g", *q.RepetitionPenalty)
	}
	for k, v := range q.LogitBias {
		id, err := strconv.Atoi(k)
		if err != nil {
			return openai.BadRequest("logit_bias", "logit_bias keys must be token ids, got %q", k)
		}
		if p.Bias == nil {
			p.Bias = map[int]float64{}
		}
		p.Bias[id] = v
	}
	if err := p.Check(s.o.Tok.VocabSize()); err != nil {
		param := "logit_bias"
		for _, n := range []string{"frequency_penalty", "presence_penalty", "repetition_penalty"} {
			if strings.HasPrefix(err.Error(), n) {
				param = n
			}
		}
		return openai.BadRequest(param, "%v", err)
	}
	return nil
}

// contentToken follows which reply tokens are text of the content (for
// logprobs): a completion's text tokens; in a chat, the tokens whose text
// the reader gave to the answer (a token whose bytes end in a later one's
// text counts with it).
func contentToken(tok *tokenizer.Tokenizer, j *job, ev engine.Event, content, pending []int, n int) ([]int, []int, int) {
	switch ev.Kind {
	case engine.EventToken:
		n++
		special := tok.IsSpecial(ev.Token)
		switch {
		case j.raw && (!special || j.keepSpecial) && !slices.Contains(tok.StopIDs(), ev.Token):
			content = append(content, n-1)
		case special:
			pending = pending[:0]
		default:
			pending = append(pending, n-1)
		}
	case engine.EventAnswer:
		content, pending = append(content, pending...), pending[:0]
	case engine.EventReasoning:
		pending = pending[:0]
	}
	return content, pending, n
}

// keyPartition is the partition of the API key a request presents; on a
// server without a key (which listens on loopback only: one user's), of
// the client's address, so a client on another loopback address shares
// nothing ("" with SharedCache). Only a digest of the key is kept.
func (s *Server) keyPartition(r *http.Request) string {
	switch {
	case s.o.SharedCache:
		return ""
	case s.o.APIKey == "":
		return "addr:" + clientOf(r)
	}
	key := r.Header.Get("x-api-key")
	if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		key = strings.TrimSpace(b)
	}
	return "key:" + digest(key)
}

// partition adds a request's prompt_cache_key to its key's partition.
func (s *Server) partition(key, cacheKey string) string {
	if s.o.SharedCache || cacheKey == "" {
		return key
	}
	return key + "|pck:" + digest(cacheKey)
}

// digest is a short hex digest of a secret (never kept or logged itself).
func digest(v string) string {
	h := sha256.Sum256([]byte(v))
	return hex.EncodeToString(h[:12])
}
