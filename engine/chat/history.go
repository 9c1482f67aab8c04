package chat

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strings"

	"k3/engine"
	"k3/storage/regfile"
	"k3/storage/strictjson"
	"k3/tokenizer/xtml"
)

// Message is one line of a history file.
type Message struct {
	Role             string `json:"role"`
	Content          string `json:"content"`
	ReasoningContent string `json:"reasoning_content,omitempty"`
	// Images are pictures (their files' bytes: PNG, JPEG, GIF or WebP)
	// that come before a user message's text; kept in the history so the
	// conversation reads the same when it is continued.
	Images [][]byte `json:"images,omitempty"`
	// Parts are the content's text parts, in order, when it came as
	// several (an API request's content array): Content is then their
	// concatenation, and each part is rendered and tokenized as its own
	// segment, as Moonshot's encoder does (build_chat_segments), so a
	// later turn renders the message exactly as the first did.
	Parts []string `json:"parts,omitempty"`
	// Cut marks an assistant reply that did not finish. It is kept, never
	// dropped.
	Cut Cut `json:"cut,omitempty"`
	// Written is an assistant reply as the model wrote it, in ids: the
	// next prompt feeds them instead of encoding the text again.
	Written *Written `json:"written,omitempty"`
	// Stats are how an assistant reply was generated (the app shows them
	// under the reply). Optional: nothing reads them to continue a chat.
	Stats *ReplyStats `json:"stats,omitempty"`
	// Versions are the conversation's other versions from this message on:
	// the replies a Regenerate replaced, the message an edit replaced and
	// what followed it. The transcript is the shown version only.
	Versions *Versions `json:"versions,omitempty"`
}

// Rendered is the message as the chat format renders it, its pictures
// aside (a session puts them before the text): the role, the content (its
// text parts each its own segment when it has Parts) and the reasoning.
func (m Message) Rendered() xtml.Message {
	xm := xtml.Message{Role: m.Role, Content: m.Content, ReasoningContent: m.ReasoningContent}
	if strings.Join(m.Parts, "") != m.Content {
		return xm // the content was changed (an edit) without its parts: the content is the message
	}
	for _, p := range m.Parts {
		xm.Parts = append(xm.Parts, xtml.Part{Text: p})
	}
	return xm
}

// ReplyStats are the numbers of one generated reply.
type ReplyStats struct {
	Tokens            int     `json:"tokens"`                // tokens generated
	FirstTokenSeconds float64 `json:"first_token_s"`         // from sending to the first token (the prompt's reading included)
	SecondsPerToken   float64 `json:"s_per_token,omitempty"` // the mean over the tokens after the first
	ThoughtSeconds    float64 `json:"thought_s,omitempty"`   // from sending to the end of the thinking
}

// Versions are the other versions of a conversation from one message on.
// In order, the versions are Others[:Shown], the one in the file, then
// Others[Shown:]. Each other version is the whole rest of that conversation
// (its messages may have versions of their own).
type Versions struct {
	Shown  int         `json:"shown"`
	Others [][]Message `json:"others"`
}

// Count is the number of versions, the one shown included.
func (v *Versions) Count() int {
	if v == nil {
		return 1
	}
	return len(v.Others) + 1
}

// Cut is why an assistant reply did not finish, as history files store it.
type Cut string

// Cuts.
const (
	CutStopped Cut = "stopped"  // the user stopped it
	CutTurnCap Cut = "turn cap" // it reached the reply cap
)

// cutOf maps a generation's stop reason to the history's mark.
func cutOf(r engine.StopReason) Cut {
	switch r {
	case engine.StopCancelled:
		return CutStopped
	case engine.StopLength:
		return CutTurnCap
	}
	return ""
}

var roles = map[string]bool{"system": true, "user": true, "assistant": true, "tool": true}

// ParseHistory validates JSONL history strictly: one object per non-empty
// line with a known role, a string content, an optional reasoning_content
// (assistant only) and cut; unknown fields are refused. Errors name the line.
func ParseHistory(data []byte) ([]Message, error) {
	var out []Message
	var lineOf []int
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1<<16), 1<<30)
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		// what encoding/json would silently change (invalid UTF-8, a
		// duplicate key) would be rewritten differently after the next turn
		if err := strictjson.Check(line); err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		msg, err := parseMessage(line, 0)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		out = append(out, msg)
		lineOf = append(lineOf, n)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %v", n+1, err)
	}
	// a conversation the chat format cannot render (a tool result without
	// its call) would fail at the next turn, losing the typed message: refuse
	// it now, naming the first line that breaks it
	if k, why := unrenderable(nil, out); k >= 0 {
		return nil, fmt.Errorf("line %d: %s", lineOf[k], why)
	}
	return out, nil
}

// maxVersionDepth bounds versions inside versions (a file is refused past
// it rather than walked without end).
const maxVersionDepth = 64

// parseMessage decodes one message strictly; depth counts the versions it
// is inside.
func parseMessage(raw []byte, depth int) (Message, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var m struct {
		Role             *string         `json:"role"`
		Content          *string         `json:"content"`
		ReasoningContent *string         `json:"reasoning_content"`
		Cut              *string         `json:"cut"`
		Stats            *ReplyStats     `json:"stats"`
		Versions         json.RawMessage `json:"versions"`
		Images           [][]byte        `json:"images"`
		Parts            []string        `json:"parts"`
		Written          *Written        `json:"written"`
	}
	if err := dec.Decode(&m); err != nil {
		return Message{}, err
	}
	if dec.More() {
		return Message{}, errors.New("more than one JSON value")
	}
	switch {
	case m.Role == nil:
		return Message{}, errors.New("no role")
	case !roles[*m.Role]:
		return Message{}, fmt.Errorf("unknown role %q (system, user, assistant or tool)", *m.Role)
	case m.Content == nil:
		return Message{}, errors.New("no content")
	case m.ReasoningContent != nil && *m.Role != "assistant":
		return Message{}, fmt.Errorf("reasoning_content on a %s message", *m.Role)
	case m.Cut != nil && (*m.Role != "assistant" || (Cut(*m.Cut) != CutStopped && Cut(*m.Cut) != CutTurnCap)):
		return Message{}, errors.New("cut must be \"stopped\" or \"turn cap\" on an assistant message")
	case m.Images != nil && *m.Role != "user":
		return Message{}, fmt.Errorf("images on a %s message", *m.Role)
	case m.Written != nil && *m.Role != "assistant":
		return Message{}, fmt.Errorf("written ids on a %s message", *m.Role)
	case m.Stats != nil && *m.Role != "assistant":
		return Message{}, fmt.Errorf("stats on a %s message", *m.Role)
	case m.Stats != nil && (m.Stats.Tokens < 0 || m.Stats.FirstTokenSeconds < 0 || m.Stats.SecondsPerToken < 0 || m.Stats.ThoughtSeconds < 0):
		return Message{}, errors.New("stats cannot be negative")
	}
	if m.Parts != nil && (len(m.Parts) == 0 || strings.Join(m.Parts, "") != *m.Content) {
		return Message{}, errors.New("parts must be the content's text parts: at least one, joined equal to content")
	}
	msg := Message{Role: *m.Role, Content: *m.Content, Stats: m.Stats, Images: m.Images, Parts: m.Parts, Written: m.Written}
	if m.ReasoningContent != nil {
		msg.ReasoningContent = *m.ReasoningContent
	}
	if m.Cut != nil {
		msg.Cut = Cut(*m.Cut)
	}
	if m.Versions != nil {
		v, err := parseVersions(m.Versions, depth+1)
		if err != nil {
			return Message{}, fmt.Errorf("versions: %v", err)
		}
		msg.Versions = v
	}
	return msg, nil
}

func parseVersions(raw []byte, depth int) (*Versions, error) {
	if depth > maxVersionDepth {
		return nil, fmt.Errorf("more than %d levels of versions", maxVersionDepth)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var v struct {
		Shown  *int                `json:"shown"`
		Others [][]json.RawMessage `json:"others"`
	}
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if v.Shown == nil || len(v.Others) == 0 || *v.Shown < 0 || *v.Shown > len(v.Others) {
		return nil, errors.New("need \"others\" (at least one version) and \"shown\" (0 to their number)")
	}
	out := &Versions{Shown: *v.Shown, Others: make([][]Message, len(v.Others))}
	for i, tail := range v.Others {
		if len(tail) == 0 {
			return nil, fmt.Errorf("version %d is empty", i+1)
		}
		for _, raw := range tail {
			m, err := parseMessage(raw, depth)
			if err != nil {
				return nil, fmt.Errorf("version %d: %v", i+1, err)
			}
			out.Others[i] = append(out.Others[i], m)
		}
	}
	return out, nil
}

// unrenderable finds the first message of h (after prefix) that the chat
// format cannot render, in h or in any version it holds (which becomes the
// transcript when shown): its index in h and why; -1 when every version
// renders.
func unrenderable(prefix, h []Message) (int, string) {
	all := append(slices.Clip(prefix), h...)
	if _, err := renderHistory(all); err != nil {
		// the first prefix that fails names the message (the whole fails)
		k := sort.Search(len(all), func(k int) bool { _, e := renderHistory(all[:k+1]); return e != nil })
		_, err = renderHistory(all[:k+1])
		why := err.Error()
		if w, ok := strings.CutPrefix(why, fmt.Sprintf("message %d: ", k)); ok {
			why = w
		}
		return max(k-len(prefix), 0), why
	}
	for i, m := range h {
		if m.Versions == nil {
			continue
		}
		for j, tail := range m.Versions.Others {
			if k, why := unrenderable(all[:len(prefix)+i], tail); k >= 0 {
				return i, fmt.Sprintf("version %d, message %d: %s", j+1, k+1, why)
			}
		}
	}
	return -1, ""
}

func renderHistory(h []Message) ([]xtml.Segment, error) {
	msgs := make([]xtml.Message, len(h))
	for i, m := range h {
		msgs[i] = m.Rendered()
	}
	return xtml.Render(msgs, nil, xtml.RenderOptions{NoThink: true})
}

// LoadHistory reads a history file; a missing file is an empty history.
// The content read is remembered (per process): SaveHistory refuses to
// overwrite the file if something else changed it in the meantime.
func LoadHistory(path string) ([]Message, error) {
	if err := regfile.Check(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		files.remember(path, nil, false)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	h, err := ParseHistory(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (the file was not changed)", path, err)
	}
	files.remember(path, data, true)
	return h, nil
}

// EncodeHistory renders a history as SaveHistory writes it.
func EncodeHistory(h []Message) ([]byte, error) {
	var b bytes.Buffer
	for _, m := range h {
		line, err := strictjson.Marshal(m)
		if err != nil {
			return nil, err
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// SaveHistory writes the history atomically (temporary file, then rename).
// It never overwrites turns it did not read: when another k3 holds the
// file (LockHistory) or the file changed since this process last read or
// wrote it, the history is written next to it instead (NAME.conflict-N.jsonl)
// and a *ConflictError says where.
func SaveHistory(path string, h []Message) error {
	data, err := EncodeHistory(h)
	if err != nil {
		return err
	}
	return files.save(path, data)
}
