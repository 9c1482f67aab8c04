package openai

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Error is an error in OpenAI's shape with its HTTP status.
type Error struct {
	Status  int    `json:"-"`
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   any    `json:"param"`
	Code    any    `json:"code"`
}

func (e *Error) Error() string { return e.Message }

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// BadRequest is a 400 invalid_request_error about param ("" for none).
func BadRequest(param, format string, args ...any) *Error {
	var p any
	if param != "" {
		p = param
	}
	return &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...), Type: "invalid_request_error", Param: p}
}

// ErrorBody is how an error travels: {"error": {...}}, as a response body
// or as one event of a stream.
type ErrorBody struct {
	Error *Error `json:"error"`
}

// WriteError answers with e.
func WriteError(w http.ResponseWriter, e *Error) {
	WriteJSON(w, e.Status, ErrorBody{e})
}

// WriteJSON answers with v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
