package chat

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	m, err := engine.Open(dir, engine.Options{Budget: engine.Budget{CacheBytes: 1 << 62}, Chunk: 16})
	require.NoError(t, err)
	e := m.NewEngine(2)
	t.Cleanup(func() { e.Close(); m.Close() })
	return e, tok
}

// TestResumedTurnEqualsFreshRun: the second turn, reusing the state of the
// first, produces exactly what a fresh session over the same history does.
func TestResumedTurnEqualsFreshRun(t *testing.T) {
	e, tok := demo(t)
	opt := Options{Thinking: true, MaxTokens: 10, Sampling: engine.Sampling{Greedy: true}}
	s := NewSession(e, tok)
	r1, err := s.Turn(context.Background(), "Hello there", opt, nil)
	require.NoError(t, err)
	assert.Equal(t, 0, r1.Reused)
	assert.Len(t, r1.IDs, 10)
	assert.Equal(t, CutTurnCap, r1.Cut())
	var streamed strings.Builder
	r2, err := s.Turn(context.Background(), "And again?", opt, func(ev engine.Event) {
		if ev.Kind == engine.EventReasoning || ev.Kind == engine.EventAnswer {
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
	fresh.SetHistory(slices.Clone(s.History()[:2]))
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
	prompt, _ := NewSession(e, tok).withHistory(s.History()[:2]).Prompt("And again?", opt)
	res, err := e.Generate(context.Background(), nil, prompt, engine.GenOptions{MaxTokens: 10})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Generated, r2.IDs) {
		t.Fatalf("generate %v, session %v", res.Generated, r2.IDs)
	}
}

func (s *Session) withHistory(h []Message) *Session { s.SetHistory(h); return s }

// TestSampledTurnsReproducible: a fixed seed replays the same reply; the
// second turn draws from its own stream.
func TestSampledTurnsReproducible(t *testing.T) {
	e, tok := demo(t)
	opt := Options{Thinking: true, MaxTokens: 8, Sampling: engine.Sampling{Temperature: 0.9, TopP: 0.95, Seed: 42}}
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
	// speculative decoding off or forced: the same replies
	for _, spec := range []engine.Spec{engine.SpecOff, 5} {
		opt.Spec = spec
		assert.Equal(t, a, run(), "spec %v", spec)
	}
	opt.Spec = engine.SpecAuto
	greedy := NewSession(e, tok)
	g, _ := greedy.Turn(context.Background(), "one", Options{Thinking: true, MaxTokens: 8, Sampling: engine.Sampling{Greedy: true}}, nil)
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
	r, err := s.Turn(ctx, "stop me", Options{Thinking: true, MaxTokens: 50, Sampling: engine.Sampling{Greedy: true}}, func(ev engine.Event) {
		if ev.Kind == engine.EventToken {
			n++
			if n == 3 {
				cancel()
			}
		}
	})
	require.NoError(t, err)
	assert.Equal(t, CutStopped, r.Cut())
	assert.Len(t, r.IDs, 3)
	h, err := LoadHistory(s.HistoryPath)
	require.NoError(t, err)
	require.Len(t, h, 2)
	assert.Equal(t, CutStopped, h[1].Cut)
	assert.Equal(t, "stop me", h[0].Content)
}

// TestStopDuringPrompt: cancelling while the prompt is read ends the turn
// before any token, keeps the user's message and an empty reply marked
// stopped, and the next turn reuses the whole chunks already read.
func TestStopDuringPrompt(t *testing.T) {
	e, tok := demo(t)
	s := NewSession(e, tok)
	ctx, cancel := context.WithCancel(context.Background())
	long := strings.Repeat("a long prompt that takes several chunks to read ", 8)
	var prefill []engine.Event
	tokens := 0
	r, err := s.Turn(ctx, long, Options{Thinking: true, MaxTokens: 5}, func(ev engine.Event) {
		switch ev.Kind {
		case engine.EventPrefill:
			prefill = append(prefill, ev)
			if len(prefill) == 3 {
				cancel()
			}
		case engine.EventToken:
			tokens++
		}
	})
	require.NoError(t, err)
	assert.Equal(t, CutStopped, r.Cut())
	assert.Zero(t, tokens)
	assert.Empty(t, r.IDs)
	require.Len(t, prefill, 3, "no prefill progress after the stop")
	assert.Equal(t, 0, prefill[0].Done, "the reply's first event, before anything is read (Opening)")
	assert.Equal(t, prefill[2].Total, prefill[0].Total)
	assert.Equal(t, 32, prefill[2].Done)
	assert.Greater(t, prefill[2].Total, 64)
	require.Len(t, s.History(), 2)
	assert.Equal(t, long, s.History()[0].Content)
	assert.Equal(t, CutStopped, s.History()[1].Cut)
	// the 32 positions read stay usable
	r2, err := s.Turn(context.Background(), "again", Options{Thinking: true, MaxTokens: 3}, nil)
	require.NoError(t, err)
	assert.Equal(t, 32, r2.Reused)
}

func TestHistoryValidation(t *testing.T) {
	good := `{"role":"user","content":"hi"}` + "\n" + `{"role":"assistant","content":"yo","reasoning_content":"hmm","cut":"turn cap"}` + "\n"
	h, err := ParseHistory([]byte(good))
	if err != nil || len(h) != 2 || h[1].ReasoningContent != "hmm" || h[1].Cut != CutTurnCap {
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
	f.Add([]byte(`{"role":"user","content":"q"}` + "\n" + `{"role":"assistant","content":"a","stats":{"tokens":3,"first_token_s":0.5},` +
		`"versions":{"shown":1,"others":[[{"role":"assistant","content":"b","versions":{"shown":0,"others":[[{"role":"assistant","content":"c"}]]}}]]}}`))
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
			if !reflect.DeepEqual(h[i], h2[i]) {
				t.Fatalf("line %d: %+v vs %+v", i, h[i], h2[i])
			}
		}
	})
}

// Editing an earlier message and sending it again reads only the edited
// message and what follows: the state from just before it was kept as a
// checkpoint. The reply is the one a session reading the whole transcript
// from scratch gives, token for token, greedy and sampled.
func TestEditReusesTheCheckpoint(t *testing.T) {
	e, tok := demo(t)
	ctx := context.Background()
	questions := []string{"First question", "Second question", "Third question"}
	for _, sampling := range []engine.Sampling{{Greedy: true}, {Temperature: 1, TopP: 0.9, Seed: 7}} {
		opt := Options{Thinking: true, MaxTokens: 8, Sampling: sampling, System: "Be brief."}
		s, plain := NewSession(e, tok), NewSession(e, tok)
		plain.Checkpoints = 0
		for _, q := range questions {
			a, err := s.Turn(ctx, q, opt, nil)
			require.NoError(t, err)
			b, err := plain.Turn(ctx, q, opt, nil)
			require.NoError(t, err)
			assert.Equal(t, b.IDs, a.IDs, "feeding in two parts changes nothing")
		}
		require.Len(t, s.marks, DefaultCheckpoints, "only the last ones are kept")
		assert.Equal(t, s.marks[0].Bytes()+s.marks[1].Bytes(), s.CheckpointBytes())
		assert.Zero(t, plain.CheckpointBytes())

		// edit the second question: the conversation is cut before it
		before := slices.Clone(s.History()[:2])
		start, _, err := (&Session{Tok: tok}).render(before, opt, true)
		require.NoError(t, err)
		s.SetHistory(slices.Clone(before))
		var prefill []engine.Event
		r, err := s.Turn(ctx, "Second question, edited", opt, func(ev engine.Event) {
			if ev.Kind == engine.EventPrefill {
				prefill = append(prefill, ev)
			}
		})
		require.NoError(t, err)

		fresh := NewSession(e, tok)
		fresh.SetHistory(slices.Clone(before))
		f, err := fresh.Turn(ctx, "Second question, edited", opt, nil)
		require.NoError(t, err)
		assert.Equal(t, f.IDs, r.IDs, "the same tokens as reading it all")
		assert.Equal(t, f.Content, r.Content)
		assert.Equal(t, f.Reasoning, r.Reasoning)
		assert.Zero(t, f.Reused)
		assert.Equal(t, len(start), r.Reused, "everything before the edited message is reused")
		assert.Equal(t, f.Prefilled-len(start), r.Prefilled)
		require.NotEmpty(t, prefill)
		last := prefill[len(prefill)-1]
		assert.Equal(t, len(start), last.Reused)
		assert.Equal(t, f.Prefilled, last.Total, "progress counts the whole transcript")
		assert.Equal(t, last.Total, last.Done)

		// the first question's checkpoint was dropped (two are kept): an edit
		// there reads the transcript again, and still gives the same reply
		s.SetHistory(slices.Clone(before[:0]))
		r, err = s.Turn(ctx, "First question, edited", opt, nil)
		require.NoError(t, err)
		assert.Zero(t, r.Reused)
		fresh = NewSession(e, tok)
		f, err = fresh.Turn(ctx, "First question, edited", opt, nil)
		require.NoError(t, err)
		assert.Equal(t, f.IDs, r.IDs)
	}
}

// TestFitBudgetAtTheFloor: at the laptop preset's budget a session keeps
// no state copies (the plan reserves none there), and a regenerated turn,
// which then reads its prompt again, gives what a session with copies gives.
func TestFitBudgetAtTheFloor(t *testing.T) {
	e, tok := demo(t)
	opt := Options{Thinking: true, MaxTokens: 6, Sampling: engine.Sampling{Greedy: true}}
	floor, roomy := NewSession(e, tok), NewSession(e, tok)
	floor.FitBudget(engine.Options{TrunkDir: "t", Budget: engine.Budget{TrunkBytes: 3e9}})
	roomy.FitBudget(engine.Options{TrunkDir: "t", Budget: engine.Budget{TrunkBytes: 16e9}})
	assert.Equal(t, 0, floor.Checkpoints)
	assert.Equal(t, DefaultCheckpoints, roomy.Checkpoints)
	assert.Equal(t, 0, StateCopies(engine.Options{TrunkDir: "t", Budget: engine.Budget{TrunkBytes: 3e9}}))
	assert.Equal(t, 0, StateCopies(engine.Options{TrunkDir: "t", Budget: engine.Budget{TrunkBytes: 16e9, Ultra: true}}))
	assert.Equal(t, 1+DefaultCheckpoints, StateCopies(engine.Options{TrunkDir: "t", Budget: engine.Budget{TrunkBytes: 16e9}}))
	// without a packed trunk everything is in memory: the copies are kept
	assert.Equal(t, 1+DefaultCheckpoints, StateCopies(engine.Options{Budget: engine.Budget{TrunkBytes: 3e9}}))
	var first [2]*Reply
	for i, s := range []*Session{floor, roomy} {
		r, err := s.Turn(context.Background(), "Hello there", opt, nil)
		require.NoError(t, err)
		first[i] = r
	}
	assert.Nil(t, floor.snap)
	assert.Empty(t, floor.marks)
	assert.Zero(t, floor.CheckpointBytes())
	assert.NotNil(t, roomy.snap)
	assert.Equal(t, first[0].IDs, first[1].IDs)
	// regenerate: the reply and its question go, the question is sent again
	for i, s := range []*Session{floor, roomy} {
		s.SetHistory(s.History()[:len(s.History())-2])
		r, err := s.Turn(context.Background(), "Hello there", opt, nil)
		require.NoError(t, err)
		assert.Equal(t, first[i].IDs, r.IDs)
	}
}

// Reply takes the transcript and leaves it as it was: the same reply as a
// Turn over the same conversation, and a leading system message is the
// system prompt (opt.System is not sent besides it).
func TestReplyTakesTheTranscript(t *testing.T) {
	e, tok := demo(t)
	opt := Options{Thinking: true, MaxTokens: 6, Sampling: engine.Sampling{Greedy: true}}
	h := []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hello there"}}
	keep := slices.Clone(h)
	s := NewSession(e, tok)
	r, err := s.Reply(context.Background(), h, opt, nil)
	require.NoError(t, err)
	assert.Equal(t, keep, h, "the transcript is not changed")
	assert.Empty(t, s.History(), "nor kept")
	assert.Equal(t, Message{Role: "assistant", Content: r.Content, ReasoningContent: r.Reasoning, Cut: r.Cut(), Written: &Written{Reasoning: r.IDs}}, r.Message())

	other := opt
	other.System = "Be long."
	turn := NewSession(e, tok)
	turn.SetHistory(h[:1])
	r2, err := turn.Turn(context.Background(), "Hello there", other, nil)
	require.NoError(t, err)
	assert.Equal(t, r.IDs, r2.IDs, "the history's system prompt wins over opt.System")
	assert.Equal(t, append(keep, r.Message()), turn.History())

	_, err = s.Reply(context.Background(), h[:1], opt, nil)
	assert.EqualError(t, err, "the conversation must end with the user's message")
}

// TestKeptStatesTakeNoPass: a turn reads its transcript in the forward
// passes of one feed (whole chunks from the state it reuses), whether the
// session keeps the snapshot (above the memory floor) and edit checkpoints
// or not: they are taken inside the passes that read the transcript
// (engine.GenOptions.KeepPrefix, Checkpoint), not by passes of their own.
// The snapshot is the transcript's state before its last position and the
// checkpoint the state where the user's message starts, byte for byte as
// feeding those positions alone; a regenerated turn from the snapshot
// reads one position and gives the same reply.
func TestKeptStatesTakeNoPass(t *testing.T) {
	e, tok := demo(t)
	opt := Options{Thinking: true, MaxTokens: 6, Sampling: engine.Sampling{Greedy: true}, Spec: engine.SpecOff}
	floor, roomy := NewSession(e, tok), NewSession(e, tok)
	floor.FitBudget(engine.Options{TrunkDir: "t", Budget: engine.Budget{TrunkBytes: 3e9}})
	roomy.FitBudget(engine.Options{TrunkDir: "t", Budget: engine.Budget{TrunkBytes: 16e9}})
	m := e.Model()
	const chunk = 16 // demo's
	sameAsAlone := func(what string, st *engine.State) {
		t.Helper()
		alone := m.NewState()
		_, err := e.Feed(context.Background(), alone, st.IDs, false)
		require.NoError(t, err)
		want, err := m.EncodeState(alone)
		require.NoError(t, err)
		got, err := m.EncodeState(st)
		require.NoError(t, err)
		require.Equal(t, want, got, "%s is the state of feeding its positions alone", what)
	}
	for _, user := range []string{"Hello there", "And a second, longer question to read?"} {
		var ids [2][]int
		for i, s := range []*Session{floor, roomy} {
			before := e.Snapshot().ForwardPasses
			r, err := s.Turn(context.Background(), user, opt, nil)
			require.NoError(t, err)
			ids[i] = r.IDs
			want := int64((r.Prefilled+chunk-1)/chunk + len(r.IDs) - 1) // the transcript's chunks, then a step per later token
			assert.Equal(t, want, e.Snapshot().ForwardPasses-before, "%q, session %d: one feed of %d positions", user, i, r.Prefilled)
		}
		assert.Equal(t, ids[0], ids[1], user)
		h := roomy.History()
		prompt, _, err := roomy.render(h[:len(h)-1], opt, false) // the turn's transcript
		require.NoError(t, err)
		require.NotNil(t, roomy.snap)
		require.Equal(t, prompt[:len(prompt)-1], roomy.snap.IDs, "%q: the transcript but its last position", user)
		sameAsAlone("the snapshot", roomy.snap)
		start, _, err := roomy.render(h[:len(h)-2], opt, true) // before the user's message
		require.NoError(t, err)
		mark := roomy.marks[len(roomy.marks)-1]
		require.Equal(t, start, mark.IDs, "%q: the checkpoint where the user's message starts", user)
		sameAsAlone("the checkpoint", mark)
	}
	assert.Nil(t, floor.snap)
	// regenerate the last reply: from the snapshot, one position to read
	roomy.SetHistory(roomy.History()[:len(roomy.History())-2])
	floor.SetHistory(floor.History()[:len(floor.History())-2])
	a, err := roomy.Turn(context.Background(), "And a second, longer question to read?", opt, nil)
	require.NoError(t, err)
	b, err := floor.Turn(context.Background(), "And a second, longer question to read?", opt, nil)
	require.NoError(t, err)
	assert.Equal(t, b.IDs, a.IDs)
	assert.Equal(t, 1, a.Prefilled, "read from the snapshot")
}

// TestLiveStateNotHeldBeside: a reply whose transcript the live state does
// not fit (another conversation) reads into a fresh state, and the old live
// state is let go as the reply starts, not held beside it until the reply
// ends (a whole state: at the memory floor the plan holds one).
func TestLiveStateNotHeldBeside(t *testing.T) {
	e, tok := demo(t)
	s := NewSession(e, tok)
	_, err := s.Reply(context.Background(), []Message{{Role: "user", Content: "the first conversation"}}, Options{MaxTokens: 2}, nil)
	require.NoError(t, err)
	require.NotNil(t, s.live)
	heldDuring := true
	_, err = s.Reply(context.Background(), []Message{{Role: "user", Content: "another conversation altogether"}}, Options{MaxTokens: 2}, func(ev engine.Event) {
		if ev.Kind == engine.EventPrefill && ev.Done == ev.Total {
			heldDuring = s.live != nil
		}
	})
	require.NoError(t, err)
	assert.False(t, heldDuring, "the old live state was held while the new transcript was read")
	assert.NotNil(t, s.live, "the reply's state is the live one after it")
}
