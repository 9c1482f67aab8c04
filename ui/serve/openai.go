package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"k3/ui/openai"
)

// Fields k3 does not implement are refused by name when they would change
// the output (n > 1, logprobs, echo), and ignored when they would not.

// asAPIError maps any error to an OpenAI error (500 unless it is one).
func asAPIError(err error) *openai.Error {
	var ae *openai.Error
	if errors.As(err, &ae) {
		return ae
	}
	if errors.Is(err, errBusy) {
		return &openai.Error{Status: http.StatusTooManyRequests, Message: err.Error(), Type: "rate_limit_error", Code: "server_busy"}
	}
	return &openai.Error{Status: http.StatusInternalServerError, Message: err.Error(), Type: "server_error"}
}

// stopStrings reads "stop": a string or an array of up to 4 strings.
func stopStrings(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, openai.BadRequest("stop", "stop must be a string or an array of strings")
	}
	if len(many) > 4 {
		return nil, openai.BadRequest("stop", "stop takes at most 4 strings, got %d", len(many))
	}
	out := many[:0]
	for _, s := range many {
		if s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}
