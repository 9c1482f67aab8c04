package openai

import (
	"bytes"
	"encoding/json"

	"k3/tokenizer/xtml"
)

// ContentPart is one part of an array content, in order: its text. (The
// vision work adds image parts to it.)
type ContentPart struct {
	Text string
}

// UnmarshalJSON reads a message. An array content also fills Parts, one
// per part: Moonshot's encoder (build_chat_segments) tokenizes each text
// part as its own segment, so "first part " + "second part" is not the
// same ids as the two joined. Content then holds the parts joined, for the
// length checks and for what is shown.
func (m *Message) UnmarshalJSON(data []byte) error {
	type plain Message
	var w struct {
		plain
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*m = Message(w.plain)
	raw := bytes.TrimSpace(w.Content)
	if len(raw) == 0 {
		raw = []byte("null")
	}
	if err := m.Content.UnmarshalJSON(raw); err != nil || raw[0] != '[' {
		return err
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return err
	}
	m.Parts = make([]ContentPart, len(parts))
	for i, p := range parts {
		m.Parts[i] = ContentPart{Text: p.Text}
	}
	return nil
}

// XTMLParts are parts as the renderer takes them (nil for nil: a string
// content, rendered as one text).
func XTMLParts(parts []ContentPart) []xtml.Part {
	if parts == nil {
		return nil
	}
	out := make([]xtml.Part, len(parts))
	for i, p := range parts {
		out[i] = xtml.Part{Text: p.Text}
	}
	return out
}
