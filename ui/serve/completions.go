package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// completionPrompt reads "prompt": a string (control-token strings such as
// <|open|> are control tokens, so a caller can write XTML by hand), an
// array of one string, an array of token ids, or an array of one such
// array.
func (s *Server) completionPrompt(raw json.RawMessage, j *job) *apiError {
	raw = bytes.TrimSpace(raw)
	var text string
	if json.Unmarshal(raw, &text) == nil {
		j.ids = s.o.Tok.EncodeSpecial(text)
		return nil
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil {
		if len(texts) != 1 {
			return badRequest("prompt", "prompt must be one string (got %d): the server generates one choice per request", len(texts))
		}
		j.ids = s.o.Tok.EncodeSpecial(texts[0])
		return nil
	}
	var ids []int
	if json.Unmarshal(raw, &ids) != nil {
		var many [][]int
		if json.Unmarshal(raw, &many) != nil || len(many) != 1 {
			return badRequest("prompt", "prompt must be a string, an array of one string, or token ids")
		}
		ids = many[0]
	}
	for _, id := range ids {
		if id < 0 || id >= s.o.Tok.VocabSize() {
			return badRequest("prompt", "token id %d is outside the vocabulary (0..%d)", id, s.o.Tok.VocabSize()-1)
		}
	}
	j.ids = ids
	return nil
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	t0 := time.Now()
	var q completionRequest
	if err := decode(r, &q); err != nil {
		writeError(w, err)
		return
	}
	j := &job{raw: true}
	id, created := newID("cmpl-"), time.Now().Unix()
	s.handle(w, r, "POST /v1/completions", q.Stream, j, t0, []func() *apiError{
		func() *apiError { return s.samplingOf(&q.sampling, j) },
		func() *apiError {
			if q.Echo {
				return badRequest("echo", "echo is not supported")
			}
			return s.completionPrompt(q.Prompt, j)
		},
		func() *apiError { return s.fit(j) },
	}, func(p *place) (*result, error) {
		return s.streamCompletion(r.Context(), w, p, j, &q, id, created)
	}, func(res *result) {
		out := completionResponse{ID: id, Object: "text_completion", Created: created, Model: s.o.ModelID,
			Choices: []completionChoice{{Text: res.content, FinishReason: &res.finish}},
			Usage:   newUsage(res.prompt, len(res.ids), res.reused)}
		if q.ReturnTokenIDs {
			out.PromptTokenIDs, out.Choices[0].TokenIDs = j.ids, res.ids
		}
		w.Header().Set("X-K3-Reused-Positions", strconv.Itoa(res.reused))
		writeJSON(w, http.StatusOK, out)
	})
}

func (s *Server) streamCompletion(ctx context.Context, w http.ResponseWriter, p *place, j *job, q *completionRequest, id string, created int64) (*result, error) {
	e := startSSE(w, s.o.KeepAlive)
	defer e.quiet()
	if err := p.wait(ctx); err != nil {
		return nil, err
	}
	chunk := func(text string, finish *string) completionResponse {
		return completionResponse{ID: id, Object: "text_completion", Created: created, Model: s.o.ModelID,
			Choices: []completionChoice{{Text: text, FinishReason: finish}}}
	}
	j.onPrefill = func(done, total int) { e.comment(fmt.Sprintf("prefill %d/%d", done, total)) }
	j.onAnswer = func(t string) { e.data(chunk(t, nil)) }
	res, err := s.generate(ctx, j)
	p.leave()
	if err != nil {
		if ctx.Err() == nil {
			e.data(struct {
				Error *apiError `json:"error"`
			}{asAPIError(err)})
			e.done()
		}
		return nil, err
	}
	e.data(chunk("", &res.finish))
	if q.StreamOptions != nil && q.StreamOptions.IncludeUsage {
		u := completionResponse{ID: id, Object: "text_completion", Created: created, Model: s.o.ModelID,
			Choices: []completionChoice{}, Usage: newUsage(res.prompt, len(res.ids), res.reused)}
		e.data(u)
	}
	e.done()
	return res, nil
}
