package chat

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/tokenizer"
	"k3/tokenizer/xtml"
)

// TestGenerateMatchesTurn: Generate over the transcript Turn would render
// gives Turn's reply, and a second call that extends the first reuses the
// state.
func TestGenerateMatchesTurn(t *testing.T) {
	e, tok := demo(t)
	opt := Options{Thinking: true, MaxTokens: 6, Sampling: engine.Sampling{Greedy: true}}
	s := NewSession(e, tok)
	r1, err := s.Turn(context.Background(), "Hello there", opt, nil)
	require.NoError(t, err)
	r2, err := s.Turn(context.Background(), "And again?", opt, nil)
	require.NoError(t, err)

	g := NewSession(e, tok)
	ids1, err := g.Prompt("Hello there", opt)
	require.NoError(t, err)
	var streamed strings.Builder
	a, err := g.Generate(context.Background(), ids1, PromptOptions{Thinking: true, MaxTokens: 6}, func(ev engine.Event) {
		if ev.Kind == engine.EventReasoning || ev.Kind == engine.EventAnswer {
			streamed.WriteString(ev.Text)
		}
	})
	require.NoError(t, err)
	assert.Equal(t, r1.IDs, a.IDs)
	assert.Equal(t, 0, a.Reused)
	assert.Equal(t, streamed.String(), a.Reasoning+a.Content)
	assert.Empty(t, g.History(), "Generate leaves the history alone")

	g.SetHistory(s.History()[:2])
	ids2, err := g.Prompt("And again?", opt)
	require.NoError(t, err)
	b, err := g.Generate(context.Background(), ids2, PromptOptions{Thinking: true, MaxTokens: 6}, nil)
	require.NoError(t, err)
	assert.Equal(t, r2.IDs, b.IDs)
	assert.Equal(t, r2.Reused, b.Reused)
	assert.Positive(t, b.Reused)
}

// TestGenerateStop: Stop ends the reply after the token it saw.
func TestGenerateStop(t *testing.T) {
	e, tok := demo(t)
	g := NewSession(e, tok)
	ids, err := g.Prompt("Hi", Options{Thinking: true})
	require.NoError(t, err)
	n := 0
	r, err := g.Generate(context.Background(), ids, PromptOptions{Thinking: true, MaxTokens: 10, Stop: func() bool { n++; return n == 3 }}, nil)
	require.NoError(t, err)
	assert.Len(t, r.IDs, 3)
	assert.Equal(t, engine.StopCaller, r.Stop)
}

// TestStreamerNamelessTag: <|open|> followed by <|sep|> used to index an
// empty field list.
func TestStreamerNamelessTag(t *testing.T) {
	tok := byteTok(t)
	var got []string
	sm := newStreamer(tok, xtml.ReplyOptions{Thinking: true}, func(ev engine.Event) { got = append(got, ev.Text) })
	for _, id := range tok.EncodeSpecial("a<|open|><|sep|>b<|close|> <|sep|>c") {
		sm.add(id)
	}
	r := sm.finish()
	assert.Equal(t, "abc", strings.Join(got, ""))
	assert.Equal(t, "abc", r.Reasoning)
}

func byteTok(t testing.TB) *tokenizer.Tokenizer {
	dir := filepath.Join(t.TempDir(), "tok")
	require.NoError(t, tokenizer.WriteByteLevel(dir, tokenizer.ByteLevelOptions{}))
	tok, err := tokenizer.Load(dir)
	require.NoError(t, err)
	return tok
}

// FuzzStreamer feeds arbitrary token sequences (two bytes per id over a
// 512-id vocabulary) to the reply streamer: it never panics and what it
// streams is what the reply holds.
func FuzzStreamer(f *testing.F) {
	tok := byteTok(f)
	for _, s := range []string{"<|open|><|sep|>", "x<|close|>think<|sep|><|open|>response<|sep|>y<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"f\"<|sep|>"} {
		ids := tok.EncodeSpecial(s)
		b := make([]byte, 2*len(ids))
		for i, id := range ids {
			binary.LittleEndian.PutUint16(b[2*i:], uint16(id))
		}
		f.Add(b, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, thinking bool) {
		var reasoning, answer strings.Builder
		sm := newStreamer(tok, xtml.ReplyOptions{Thinking: thinking}, func(ev engine.Event) {
			switch ev.Kind {
			case engine.EventReasoning:
				reasoning.WriteString(ev.Text)
			case engine.EventAnswer:
				answer.WriteString(ev.Text)
			}
		})
		for i := 0; i+1 < len(data); i += 2 {
			sm.add(int(binary.LittleEndian.Uint16(data[i:])) % tok.VocabSize())
		}
		r := sm.finish()
		if reasoning.String() != r.Reasoning || answer.String() != r.Content {
			t.Fatal("streamed text differs from the kept text")
		}
	})
}

// TestReplayEvents: Replay passes the reader's events on as engine events
// (a finished call as EventTool "name arguments") and returns its reply.
func TestReplayEvents(t *testing.T) {
	tok := byteTok(t)
	gen := tok.EncodeSpecial(`hm<|close|>think<|sep|><|open|>response<|sep|>ok<|close|>response<|sep|><|open|>tools<|sep|>` +
		`<|open|>call tool="f" index="1"<|sep|><|open|>argument key="a" type="number"<|sep|>2<|close|>argument<|sep|><|close|>call<|sep|>`)
	var kinds []engine.EventKind
	var texts []string
	r := Replay(tok, gen, xtml.ReplyOptions{Thinking: true}, func(ev engine.Event) {
		kinds = append(kinds, ev.Kind)
		texts = append(texts, ev.Text)
	})
	assert.Equal(t, "hm", r.Reasoning)
	assert.Equal(t, "ok", r.Content)
	require.Len(t, r.ToolCalls, 1)
	assert.Equal(t, []string{"the output ends inside the tools section; its complete calls were kept"}, r.Warnings)
	require.NotEmpty(t, kinds)
	assert.Equal(t, engine.EventTool, kinds[len(kinds)-1])
	assert.Equal(t, `f {"a": 2}`, texts[len(texts)-1])
	assert.Equal(t, "hm", strings.Join(texts[:slices.Index(kinds, engine.EventAnswer)], ""))
}
