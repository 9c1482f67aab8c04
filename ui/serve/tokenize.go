package serve

import (
	"net/http"

	"k3/ui/openai"
)

// POST /tokenize and /detokenize, in llama-server's shapes (content,
// tokens), with vLLM's names accepted too (prompt; count and
// max_model_len in the answer). The text is encoded as plain text:
// control-token strings in it are text, as in a chat message.

type tokenizeRequest struct {
	Model      string  `json:"model"`
	Content    *string `json:"content"`
	Prompt     *string `json:"prompt"`
	WithPieces bool    `json:"with_pieces"`
}

type tokenPiece struct {
	ID    int    `json:"id"`
	Piece string `json:"piece"`
}

func (s *Server) tokenize(w http.ResponseWriter, r *http.Request) {
	var q tokenizeRequest
	release, ok := s.decodeFor(w, r, &q, &q.Model)
	if !ok {
		return
	}
	defer release()
	text := q.Content
	if text == nil {
		text = q.Prompt
	}
	if text == nil {
		s.writeError(w, openai.BadRequest("content", "content (or prompt) is required: the text to tokenize"))
		return
	}
	ids := s.o.Tok.Encode(*text)
	out := map[string]any{"count": len(ids), "tokens": ids}
	if s.o.MaxContext > 0 {
		out["max_model_len"] = s.o.MaxContext
	}
	if q.WithPieces {
		pieces := make([]tokenPiece, len(ids))
		for i, id := range ids {
			pieces[i] = tokenPiece{id, string(s.o.Tok.TokenBytes(id))}
		}
		out["tokens"] = pieces
	}
	s.writeJSON(w, http.StatusOK, out)
}

type detokenizeRequest struct {
	Model  string `json:"model"`
	Tokens []int  `json:"tokens"`
}

func (s *Server) detokenize(w http.ResponseWriter, r *http.Request) {
	var q detokenizeRequest
	release, ok := s.decodeFor(w, r, &q, &q.Model)
	if !ok {
		return
	}
	defer release()
	n := s.o.Tok.VocabSize()
	for i, id := range q.Tokens {
		if id < 0 || id >= n {
			s.writeError(w, openai.BadRequest("tokens", "tokens[%d] is %d: ids are from 0 to %d", i, id, n-1))
			return
		}
	}
	text := string(s.o.Tok.Decode(q.Tokens))
	s.writeJSON(w, http.StatusOK, map[string]any{"content": text, "prompt": text})
}

// decodeFor reads the body into q and checks the model it names (model
// points into q); when either fails it answers with the error and says
// false.
func (s *Server) decodeFor(w http.ResponseWriter, r *http.Request, q any, model *string) (release func(), ok bool) {
	release, err := s.decode(w, r, q)
	if err != nil {
		s.writeError(w, err)
		return nil, false
	}
	if err := s.checkModel(*model); err != nil {
		s.writeError(w, err)
		release()
		return nil, false
	}
	return release, true
}
