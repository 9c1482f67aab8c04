package chat

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"k3/engine"
	"k3/storage/regfile"
	"k3/storage/strictjson"
)

// Message is one line of a history file.
type Message struct {
	Role             string `json:"role"`
	Content          string `json:"content"`
	ReasoningContent string `json:"reasoning_content,omitempty"`
	// Cut marks an assistant reply that did not finish. It is kept, never
	// dropped.
	Cut Cut `json:"cut,omitempty"`
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
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		var m struct {
			Role             *string `json:"role"`
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Cut              *string `json:"cut"`
		}
		if err := dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("line %d: more than one JSON value", n)
		}
		switch {
		case m.Role == nil:
			return nil, fmt.Errorf("line %d: no role", n)
		case !roles[*m.Role]:
			return nil, fmt.Errorf("line %d: unknown role %q (system, user, assistant or tool)", n, *m.Role)
		case m.Content == nil:
			return nil, fmt.Errorf("line %d: no content", n)
		case m.ReasoningContent != nil && *m.Role != "assistant":
			return nil, fmt.Errorf("line %d: reasoning_content on a %s message", n, *m.Role)
		case m.Cut != nil && (*m.Role != "assistant" || (Cut(*m.Cut) != CutStopped && Cut(*m.Cut) != CutTurnCap)):
			return nil, fmt.Errorf("line %d: cut must be \"stopped\" or \"turn cap\" on an assistant message", n)
		}
		msg := Message{Role: *m.Role, Content: *m.Content}
		if m.ReasoningContent != nil {
			msg.ReasoningContent = *m.ReasoningContent
		}
		if m.Cut != nil {
			msg.Cut = Cut(*m.Cut)
		}
		out = append(out, msg)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %v", n+1, err)
	}
	return out, nil
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
		line, err := json.Marshal(m)
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
