package bridge

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/chat"
)

// N2: from the moment a turn starts the status says what it does:
// "reading prompt 0/N" before the first pass ends (it said "ready" for
// 25 s), never "ready"; the second turn says what it reused, and the
// passes and time left at the pass time the first one measured.
func TestTurnSaysWhatItDoesFromTheStart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	require.NoError(t, MakeDemoModel(dir))
	s := DefaultSettings()
	s.ModelDir, s.Demo, s.MaxTokens = dir, true, 24
	c := NewEngineChat(s).(*engineChat)
	t.Cleanup(c.Close)
	type seen struct {
		phase   string
		prefill engine.Event
	}
	turn := func(h []chat.Message) ([]seen, Reply) {
		var evs []seen
		r, err := c.Turn(t.Context(), h, s.ConvDefaults(), func(ev engine.Event) {
			switch ev.Kind {
			case engine.EventPhase:
				evs = append(evs, seen{phase: ev.Text})
			case engine.EventPrefill:
				evs = append(evs, seen{prefill: ev})
			}
		})
		require.NoError(t, err)
		return evs, r
	}
	h := []chat.Message{{Role: "user", Content: "Tell me a saying about time."}}
	evs, r := turn(h)
	var phases []string
	first := -1
	for i, e := range evs {
		if e.phase != "" {
			phases = append(phases, e.phase)
		} else if first < 0 {
			first = i
		}
	}
	require.GreaterOrEqual(t, first, 0, "no prefill event")
	total := evs[first].prefill.Total
	assert.NotContains(t, phases, "ready")
	assert.Contains(t, phases, "loading the model")
	require.Greater(t, first, 1)
	// the phase just before the first pass's event is that pass's own line
	assert.Equal(t, "reading prompt 0/"+strconv.Itoa(total), evs[first-2].phase, "the status before the first pass ended")
	chunk0 := evs[first].prefill.Chunk
	assert.Positive(t, chunk0, "prefill events say the positions per pass")
	assert.Contains(t, phases, "writing")

	// the second turn reuses the first's state and says so from the start,
	// with the passes it takes and the time a pass took
	h = append(h, r.Message, chat.Message{Role: "user", Content: "And one about work."})
	evs, _ = turn(h)
	require.NotEmpty(t, evs)
	require.NotEmpty(t, evs[0].phase)
	assert.Regexp(t, `^reading prompt \d+/\d+ \(1 pass\), (about .+|under a second) left · reused \d+ of \d+ cached positions$`, evs[0].phase)
	pass, chunk := c.PromptRate()
	assert.Positive(t, pass)
	assert.Equal(t, chunk0, chunk)
	n, ok := c.CountTokens("Tell me a saying about time.")
	assert.True(t, ok)
	assert.Equal(t, len(c.tok.Encode("Tell me a saying about time.")), n)
}

// N1: the draft box says what drafting does on this model and plan: on
// the demo, all in memory, the controller never drafts ("not used"); on
// the demo streamed from its packed trunk it drafts where it pays.
// Turning it off keeps the model loaded and the replies the same.
func TestDraftSaysWhatItDoesAndSwitchesWithoutReloading(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	require.NoError(t, MakeDemoModel(dir))
	s := DefaultSettings()
	s.ModelDir, s.Demo, s.MaxTokens = dir, true, 30
	c := NewEngineChat(s).(*engineChat)
	t.Cleanup(c.Close)
	info, err := c.Open(t.Context(), func(engine.Event) {})
	require.NoError(t, err)
	assert.Equal(t, DraftNotFaster, info.Draft)
	h := []chat.Message{{Role: "user", Content: "Tell me a saying about time."}}
	on, err := c.Turn(t.Context(), h, s.ConvDefaults(), func(engine.Event) {})
	require.NoError(t, err)
	m := c.m
	c.SetDraft(false)
	before := c.e.Snapshot()
	off, err := c.Turn(t.Context(), h, s.ConvDefaults(), func(engine.Event) {})
	require.NoError(t, err)
	assert.Same(t, m, c.m, "turning the draft model off loaded the model again")
	assert.Equal(t, on.Content, off.Content)
	assert.Equal(t, before.SpecDrafted, c.e.Snapshot().SpecDrafted, "drafted while off")

	packed := filepath.Join(t.TempDir(), "trunk")
	require.NoError(t, trunkPacker{}.Pack(t.Context(), dir, packed, 0, PackOptions{}, nil))
	st := s
	st.TrunkDir, st.Preset, st.TrunkGB, st.CacheGB = packed, CustomPreset, 0, 0.001
	c2 := NewEngineChat(st).(*engineChat)
	t.Cleanup(c2.Close)
	info, err = c2.Open(t.Context(), func(engine.Event) {})
	require.NoError(t, err)
	require.True(t, c2.m.Streamed())
	assert.Equal(t, DraftWhenFaster, info.Draft)

	none := NewEngineChat(Settings{ModelDir: dir, Demo: true, NoDraft: true, MaxTokens: 8}).(*engineChat)
	t.Cleanup(none.Close)
	_, err = none.Open(t.Context(), func(engine.Event) {})
	require.NoError(t, err)
	assert.NotNil(t, none.m.DraftModel(), "unticked, the draft model is still loaded: ticking it needs no reload")
}

// N2: before sending, the box under the message says what the reply will
// cost, with the message's length: a pasted 5,000-word text says so and
// what reading it takes at the measured pass time; a short message on a
// fast machine says nothing.
func TestReplyCostSaysTheMessageLength(t *testing.T) {
	words := strings.Repeat("word ", 5000)
	n := ApproxTokens(words)
	assert.Equal(t, 6667, n)
	assert.Equal(t, "", ReplyCost(Cost{SecPerToken: 0.05}, Prompt{Tokens: 12}, 4096))
	assert.Equal(t, "Your message is about 6,667 tokens long.", ReplyCost(Cost{SecPerToken: 0.05}, Prompt{Tokens: n}, 4096))
	assert.Equal(t, "Your message is 6,512 tokens long: reading it takes about 3 min (51 passes). "+
		"At this machine's speed (20.0 s per token): the first token after about 3 min, then about 33 min per 100 tokens; "+
		"a reply stops at 4096 tokens (at most 22 h 50 min).",
		ReplyCost(Cost{SecPerToken: 20, FirstToken: 60, PassSeconds: 3.5, Chunk: 128}, Prompt{Tokens: 6512, Exact: true}, 4096))
	assert.Equal(t, "Your message is about 9,000 tokens long: more than the 8,192 positions a conversation may take, so it will not fit.",
		ReplyCost(Cost{}, Prompt{Tokens: 9000, Context: 8192}, 4096))
	assert.Contains(t, ReplyCost(Cost{SecPerToken: 20, Predicted: true}, Prompt{Tokens: 10}, 0), "At the speed expected for this memory preset (20.0 s per token)")
}
