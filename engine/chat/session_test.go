package chat

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k3/engine"
	"k3/engine/synth"
	"k3/tokenizer"
)

// demo writes a small synthetic model with a byte-level tokenizer.
func demo(t *testing.T) (*engine.Engine, *tokenizer.Tokenizer) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "m")
	if err := synth.Write(dir, synth.Small()); err != nil {
		t.Fatal(err)
	}
	if err := tokenizer.WriteByteLevel(dir, tokenizer.ByteLevelOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, set, err := engine.Open(dir, "", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := engine.NewEngine(m, 2)
	e.Chunk = 16
	t.Cleanup(func() { e.Close(); m.Store.Close(); set.Close() })
	return e, tok
}

// TestResumedTurnEqualsFreshRun: the second turn, reusing the state of the
// first, produces exactly what a fresh session over the same history does.
func TestResumedTurnEqualsFreshRun(t *testing.T) {
	e, tok := demo(t)
	opt := Options{MaxTokens: 10, Greedy: true}
	s := NewSession(e, tok)
	r1, err := s.Turn(context.Background(), "Hello there", opt, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r1.Reused != 0 || r1.Tokens != 10 || r1.Cut != "turn cap" {
		t.Fatalf("turn 1: %+v", r1)
	}
	var streamed strings.Builder
	r2, err := s.Turn(context.Background(), "And again?", opt, func(ev Event) {
		if ev.Kind == EventReasoning || ev.Kind == EventAnswer {
			streamed.WriteString(ev.Text)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if r2.Reused == 0 {
		t.Fatal("turn 2 reused no positions")
	}
	fresh := NewSession(e, tok)
	fresh.History = slices.Clone(s.History[:2])
	r3, err := fresh.Turn(context.Background(), "And again?", opt, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r3.Reused != 0 || !slices.Equal(r3.IDs, r2.IDs) {
		t.Fatalf("resumed %v (reused %d), fresh %v", r2.IDs, r2.Reused, r3.IDs)
	}
	if streamed.String() != r2.Reasoning+r2.Content {
		t.Fatalf("streamed %q, reply %q + %q", streamed.String(), r2.Reasoning, r2.Content)
	}
	// the fresh run equals a plain greedy generation over the rendered prompt
	prompt, _ := NewSession(e, tok).withHistory(s.History[:2]).Prompt("And again?", opt)
	res, err := e.Generate(context.Background(), nil, prompt, engine.GenOptions{Gen: 10})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Generated, r2.IDs) {
		t.Fatalf("generate %v, session %v", res.Generated, r2.IDs)
	}
}

func (s *Session) withHistory(h []Message) *Session { s.History = slices.Clone(h); return s }

// TestSampledTurnsReproducible: a fixed seed replays the same reply; the
// second turn draws from its own stream.
func TestSampledTurnsReproducible(t *testing.T) {
	e, tok := demo(t)
	opt := Options{MaxTokens: 8, Temperature: 0.9, TopP: 0.95, Seed: 42}
	run := func() [][]int {
		s := NewSession(e, tok)
		var out [][]int
		for _, u := range []string{"one", "two"} {
			r, err := s.Turn(context.Background(), u, opt, nil)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, r.IDs)
		}
		return out
	}
	a, b := run(), run()
	for i := range a {
		if !slices.Equal(a[i], b[i]) {
			t.Fatalf("turn %d differs: %v vs %v", i, a[i], b[i])
		}
	}
	greedy := NewSession(e, tok)
	g, _ := greedy.Turn(context.Background(), "one", Options{MaxTokens: 8, Greedy: true}, nil)
	if slices.Equal(g.IDs, a[0]) {
		t.Fatalf("sampling at temperature 0.9 gave the greedy reply %v", g.IDs)
	}
}

// TestStopKeepsPartial: cancelling keeps the partial reply, marked, and the
// history file is written.
func TestStopKeepsPartial(t *testing.T) {
	e, tok := demo(t)
	s := NewSession(e, tok)
	s.HistoryPath = filepath.Join(t.TempDir(), "h.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	r, err := s.Turn(ctx, "stop me", Options{MaxTokens: 50, Greedy: true}, func(ev Event) {
		if ev.Kind == EventToken {
			n++
			if n == 3 {
				cancel()
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Cut != "stopped" || r.Tokens != 3 {
		t.Fatalf("reply %+v", r)
	}
	h, err := LoadHistory(s.HistoryPath)
	if err != nil || len(h) != 2 || h[1].Cut != "stopped" || h[0].Content != "stop me" {
		t.Fatalf("history %+v %v", h, err)
	}
}

func TestHistoryValidation(t *testing.T) {
	good := `{"role":"user","content":"hi"}` + "\n" + `{"role":"assistant","content":"yo","reasoning_content":"hmm","cut":"turn cap"}` + "\n"
	h, err := ParseHistory([]byte(good))
	if err != nil || len(h) != 2 || h[1].ReasoningContent != "hmm" || h[1].Cut != "turn cap" {
		t.Fatalf("%+v %v", h, err)
	}
	for bad, want := range map[string]string{
		`{"role":"user","content":"hi"}` + "\n" + `{"role":"robot","content":"x"}`: "line 2: unknown role",
		`{"role":"user"}`:                                       "line 1: no content",
		`{"role":"user","content":"a","extra":1}`:               "line 1: json: unknown field",
		`{"role":"user","content":"a","reasoning_content":"b"}`: "line 1: reasoning_content on a user",
		"\n\n{not json":                                         "line 3:",
		`{"role":"user","content":5}`:                           "line 1:",
	} {
		if _, err := ParseHistory([]byte(bad)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v (want %q)", bad, err, want)
		}
	}
	// a corrupt file is reported and left untouched
	path := filepath.Join(t.TempDir(), "h.jsonl")
	os.WriteFile(path, []byte(`{"role":"user","content":"a"}`+"\nbroken\n"), 0o644)
	if _, err := LoadHistory(path); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("corrupt history: %v", err)
	}
	raw, _ := os.ReadFile(path)
	if !strings.Contains(string(raw), "broken") {
		t.Fatal("corrupt history was overwritten")
	}
}

func FuzzParseHistory(f *testing.F) {
	f.Add([]byte(`{"role":"user","content":"hi"}` + "\n"))
	f.Add([]byte(`{"role":"assistant","content":"","reasoning_content":"x","cut":"stopped"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHistory(b)
		if err != nil {
			return
		}
		// what parses, saves and parses again to the same messages
		path := filepath.Join(t.TempDir(), "h")
		if err := SaveHistory(path, h); err != nil {
			t.Fatal(err)
		}
		h2, err := LoadHistory(path)
		if err != nil || len(h2) != len(h) {
			t.Fatalf("round trip: %v", err)
		}
		for i := range h {
			if h[i] != h2[i] {
				t.Fatalf("line %d: %+v vs %+v", i, h[i], h2[i])
			}
		}
	})
}
