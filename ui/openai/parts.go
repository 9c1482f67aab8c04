package openai

import (
	"bytes"
	"encoding/json"
)

// ContentPart is one part of an array content holding a picture: text, or
// an image given by URL (a data: URL; k3 fetches nothing, the server
// refuses http(s) URLs by name).
type ContentPart struct {
	Text     string
	ImageURL string
	Image    bool
	Param    string // where the picture is in the request, for errors ("" : messages[i].content[k].image_url)
}

// UnmarshalJSON reads a message; an array content also fills Parts, text
// and image_url parts in order (Content then holds the text parts joined,
// for the length checks): Moonshot's encoder tokenizes each text part as
// its own segment, so "first part " + "second part" is not the same ids as
// the two joined.
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
	if len(raw) == 0 || raw[0] != '[' {
		return m.Content.UnmarshalJSON(orNull(raw))
	}
	parts, images, err := contentParts(raw)
	if err != nil {
		return err
	}
	if images == 0 {
		if err := m.Content.UnmarshalJSON(raw); err != nil {
			return err
		}
	}
	// each text part its own segment, as Moonshot's encoder
	// (build_chat_segments) tokenizes them: Parts also for text only
	m.Parts = parts
	m.Content = ""
	for _, p := range parts {
		m.Content += Content(p.Text)
	}
	return nil
}

func orNull(b []byte) []byte {
	if len(b) == 0 {
		return []byte("null")
	}
	return b
}

// contentParts reads text and image_url parts ({"url": ...} or a string).
func contentParts(raw []byte) ([]ContentPart, int, error) {
	var ps []struct {
		Type     string          `json:"type"`
		Text     *string         `json:"text"`
		ImageURL json.RawMessage `json:"image_url"`
	}
	if err := json.Unmarshal(raw, &ps); err != nil {
		return nil, 0, err
	}
	var out []ContentPart
	images := 0
	for i, p := range ps {
		switch p.Type {
		case "text":
			if p.Text == nil {
				return nil, 0, errorf("content part %d has no text", i)
			}
			out = append(out, ContentPart{Text: *p.Text})
		case "image_url":
			url, err := imageURL(p.ImageURL)
			if err != nil {
				return nil, 0, errorf("content part %d: %v", i, err)
			}
			out = append(out, ContentPart{ImageURL: url, Image: true})
			images++
		default:
			return nil, 0, errorf("content part %d is of type %q: k3 takes text and image_url parts", i, p.Type)
		}
	}
	return out, images, nil
}

func imageURL(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil && s != "" {
		return s, nil
	}
	var o struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal(raw, &o); err != nil || o.URL == "" {
		return "", errorf(`an image_url part needs image_url.url (a data: URL such as "data:image/png;base64,...")`)
	}
	return o.URL, nil
}

// MarshalJSON writes a message; with Parts, its content is the array of
// text and image_url parts (what vLLM and SGLang take).
func (m Message) MarshalJSON() ([]byte, error) {
	type plain Message
	if m.Parts == nil {
		return json.Marshal(plain(m))
	}
	type part struct {
		Type     string  `json:"type"`
		Text     *string `json:"text,omitempty"`
		ImageURL *struct {
			URL string `json:"url"`
		} `json:"image_url,omitempty"`
	}
	parts := make([]part, len(m.Parts))
	for i, p := range m.Parts {
		if p.Image {
			parts[i] = part{Type: "image_url", ImageURL: &struct {
				URL string `json:"url"`
			}{p.ImageURL}}
		} else {
			t := p.Text
			parts[i] = part{Type: "text", Text: &t}
		}
	}
	content, err := json.Marshal(parts)
	if err != nil {
		return nil, err
	}
	return json.Marshal(struct {
		plain
		Content json.RawMessage `json:"content"`
	}{plain(m), content})
}
