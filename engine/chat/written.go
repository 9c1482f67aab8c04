package chat

import (
	"slices"
	"strings"
	"unicode/utf8"

	"k3/tokenizer"
	"k3/tokenizer/xtml"
)

// Written is what the model wrote for an assistant reply, as ids: the
// think channel's text and the answer's. The next prompt feeds them as
// they are, so the conversation reads back exactly as it was written:
// text with invalid UTF-8 (a reply stopped mid-character, random weights)
// is kept in the history with U+FFFD in place of each bad byte, and
// encoding that text again gives other, many more ids.
type Written struct {
	Reasoning []int `json:"reasoning,omitempty"`
	Content   []int `json:"content,omitempty"`
}

// writtenIDs splits a reply's generated ids into its channels' text ids.
// It keeps only a reply written plainly (think, then response, no tool
// calls, no text outside a channel): nil otherwise, and the history's
// text is encoded as before.
func writtenIDs(tok *tokenizer.Tokenizer, gen []int, thinking bool) *Written {
	var w Written
	mode := "response"
	if thinking {
		mode = "think"
	}
	for i := 0; i < len(gen); i++ {
		id := gen[i]
		if !tok.IsSpecial(id) {
			switch mode {
			case "think":
				w.Reasoning = append(w.Reasoning, id)
			case "response":
				w.Content = append(w.Content, id)
			default:
				return nil // text outside a channel
			}
			continue
		}
		name := tok.SpecialName(id)
		if slices.Contains(tok.StopIDs(), id) {
			break
		}
		if name != tokenizer.Open && name != tokenizer.Close {
			return nil
		}
		// a tag: its name's ids up to <|sep|>
		j := i + 1
		for j < len(gen) && !tok.IsSpecial(gen[j]) {
			j++
		}
		tag := string(tok.Decode(gen[i+1 : j]))
		if j < len(gen) && tok.SpecialName(gen[j]) != tokenizer.Sep {
			return nil
		}
		switch {
		case name == tokenizer.Close && tag == mode:
			mode = "after " + mode
		case name == tokenizer.Open && tag == "response" && (mode == "after think" || mode == "think"):
			mode = "response"
		case name == tokenizer.Close && tag == "message" && strings.HasPrefix(mode, "after "):
			mode = "done"
		default:
			return nil
		}
		i = j
	}
	if w.Reasoning == nil && w.Content == nil {
		return nil
	}
	return &w
}

// asSaved is text as a history file keeps it: each byte that is not
// part of valid UTF-8 becomes U+FFFD (as encoding/json writes it).
func asSaved(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r)
	}
	return b.String()
}

// useWritten gives an assistant message's xtml form the ids the model
// wrote, each only when they still read as the message's text (an edited
// text is encoded again).
func useWritten(tok *tokenizer.Tokenizer, m Message, xm *xtml.Message) {
	if m.Written == nil || m.Role != "assistant" {
		return
	}
	same := func(ids []int, text string) bool {
		for _, id := range ids {
			if id < 0 || id >= tok.VocabSize() || tok.IsSpecial(id) {
				return false
			}
		}
		return len(ids) > 0 && asSaved(string(tok.Decode(ids))) == asSaved(text)
	}
	if same(m.Written.Reasoning, m.ReasoningContent) {
		xm.ReasoningIDs = m.Written.Reasoning
	}
	if same(m.Written.Content, m.Content) {
		xm.ContentIDs = m.Written.Content
	}
}
