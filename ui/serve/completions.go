package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"k3/ui/openai"
)

// completionPrompt reads "prompt": a string (control-token strings such as
// <|open|> are control tokens, so a caller can write XTML by hand), an
// array of one string, an array of token ids, or an array of one such
// array.
func (s *Server) completionPrompt(raw json.RawMessage, j *job) *openai.Error {
	raw = bytes.TrimSpace(raw)
	var text string
	if json.Unmarshal(raw, &text) == nil {
		if err := s.fitsText(len(text), "prompt"); err != nil {
			return err
		}
		j.ids = s.o.Tok.EncodeSpecial(text)
		return nil
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil {
		if len(texts) != 1 {
			return openai.BadRequest("prompt", "prompt must be one string (got %d): the server generates one choice per request", len(texts))
		}
		if err := s.fitsText(len(texts[0]), "prompt"); err != nil {
			return err
		}
		j.ids = s.o.Tok.EncodeSpecial(texts[0])
		return nil
	}
	var ids []int
	if json.Unmarshal(raw, &ids) != nil {
		var many [][]int
		if json.Unmarshal(raw, &many) != nil || len(many) != 1 {
			return openai.BadRequest("prompt", "prompt must be a string, an array of one string, or token ids")
		}
		ids = many[0]
	}
	for _, id := range ids {
		if id < 0 || id >= s.o.Tok.VocabSize() {
			return openai.BadRequest("prompt", "token id %d is outside the vocabulary (0..%d)", id, s.o.Tok.VocabSize()-1)
		}
	}
	j.ids = ids
	return nil
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	var q openai.CompletionRequest
	j := &job{raw: true}
	id, created := newID("cmpl-"), time.Now().Unix()
	s.handle(w, r, endpoint{name: "POST /v1/completions", body: &q, j: j, stream: &q.Stream, checks: []func() *openai.Error{
		func() *openai.Error {
			j.keepSpecial = q.SkipSpecialTokens != nil && !*q.SkipSpecialTokens
			return s.samplingOf(&q.Sampling, j)
		},
		func() *openai.Error {
			if q.Echo {
				return openai.BadRequest("echo", "echo is not supported")
			}
			return s.completionPrompt(q.Prompt, j)
		},
		func() *openai.Error { return s.fit(j) },
	}, streamed: func(ctx context.Context, cancel context.CancelFunc, p *place) (*result, error) {
		return s.streamCompletion(ctx, cancel, w, p, j, &q, id, created)
	}, reply: func(res *result) any {
		out := openai.CompletionResponse{ID: id, Object: "text_completion", Created: created, Model: s.o.ModelID,
			Choices: []openai.CompletionChoice{{Text: res.content, FinishReason: &res.finish, Logprobs: s.completionLogprobs(res)}},
			Usage:   openai.NewUsage(res.prompt, len(res.ids), res.shown)}
		if q.ReturnTokenIDs {
			out.PromptTokenIDs, out.Choices[0].TokenIDs = j.ids, res.ids
		}
		return out
	}})
}

func (s *Server) streamCompletion(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, p *place, j *job, q *openai.CompletionRequest, id string, created int64) (*result, error) {
	e := openai.StartSSE(w, s.o.KeepAlive, s.o.WriteTimeout, func(error) { cancel() })
	defer e.Quiet()
	if err := p.wait(ctx); err != nil {
		return nil, err
	}
	chunk := func(text string, finish *string) openai.CompletionResponse {
		return openai.CompletionResponse{ID: id, Object: "text_completion", Created: created, Model: s.o.ModelID,
			Choices: []openai.CompletionChoice{{Text: text, FinishReason: finish, Logprobs: s.legacyChunk(j)}}}
	}
	j.onPrefill = func(done, total int) { e.Comment(fmt.Sprintf("prefill %d/%d", done, total)) }
	j.onAnswer = func(t string) { e.Data(chunk(t, nil)) }
	res, err := s.generateAt(ctx, p, j, sseFail(e))
	if err != nil {
		return nil, err
	}
	e.Data(chunk("", &res.finish))
	if q.StreamOptions != nil && q.StreamOptions.IncludeUsage {
		u := openai.CompletionResponse{ID: id, Object: "text_completion", Created: created, Model: s.o.ModelID,
			Choices: []openai.CompletionChoice{}, Usage: openai.NewUsage(res.prompt, len(res.ids), res.shown)}
		e.Data(u)
	}
	e.Done()
	return res, nil
}
