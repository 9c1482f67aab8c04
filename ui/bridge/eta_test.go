package bridge

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/chat"
)

// N2: where reading the prompt is: positions, passes (Chunk positions
// each) and the time left at the measured time of a pass, which the next
// prompt starts from.
func TestPrefillETA(t *testing.T) {
	var p PrefillETA
	t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	p.Begin()
	assert.Equal(t, "reading prompt 0/4979", p.Phase(0, 4979, 0, 0, t0), "before the engine said its pass size")
	// one pass of 512 in 20 s: 9 more passes
	assert.Equal(t, "reading prompt 512/4979 (pass 1 of 10), about 3 min left", p.Phase(512, 4979, 0, 512, t0.Add(20*time.Second)))
	assert.Equal(t, "reading prompt 4979/4979", p.Phase(4979, 4979, 0, 512, t0.Add(190*time.Second)))
	// a new prompt starts from the measured pass time (170 s / 9 passes)
	p.Begin()
	// the reuse last: the app's one-line status cut the time left at
	// 1024x640 when it came first
	assert.Equal(t, "reading prompt 300/1324 (2 passes), about 38 s left · reused 300 of 1324 cached positions",
		p.Phase(300, 1324, 300, 0, t0.Add(200*time.Second)))
	assert.Equal(t, "reading prompt 812/1324 (pass 1 of 2), about 10 s left · reused 300 of 1324 cached positions",
		p.Phase(812, 1324, 300, 512, t0.Add(210*time.Second)))
	assert.Equal(t, "reading prompt 1324/1324 · reused 300 of 1324 cached positions", p.Phase(1324, 1324, 300, 512, t0.Add(215*time.Second)))
}

// Item 2: before sending on a slow machine, the wait to plan with.
func TestEstimate(t *testing.T) {
	assert.Equal(t, "", Estimate(0.2, 1, 4096), "fast replies need no estimate")
	assert.Equal(t, "At this machine's speed (36.0 s per token): the first token after about 2 min, then about 1 h per 100 tokens; "+
		"a reply stops at 4096 tokens (at most 41 h).", Estimate(36, 120, 4096))
	assert.Equal(t, "2 h 10 min", Duration(2*time.Hour+7*time.Minute))
	assert.Equal(t, "45 s", Duration(45*time.Second))
}

// The prompt's reading starts once the vision tower has looked at the
// pictures (minutes at K3 size): the first pass is timed from the tower's
// last layer, not from the request's start, in the app's turns and in the
// requests its server answers (the same PrefillETA.Event).
func TestPrefillETAAfterAPicture(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 23, 0, 0, 0, time.UTC)
	looked := t0.Add(13 * time.Minute)
	opening := engine.Event{Kind: engine.EventPrefill, Done: 0, Total: 1400, Chunk: 64, At: t0}
	tower := []engine.Event{chat.PictureEvent(1, 1, 1, 27), chat.PictureEvent(1, 1, 27, 27)}
	tower[0].At, tower[1].At = t0.Add(30*time.Second), looked
	first := engine.Event{Kind: engine.EventPrefill, Done: 64, Total: 1400, Chunk: 64, At: looked.Add(time.Minute)}

	var p PrefillETA
	p.Begin()
	line, ok := p.Event(opening)
	require.True(t, ok)
	assert.Equal(t, "reading prompt 0/1400 (22 passes)", line)
	for _, ev := range tower {
		_, ok := p.Event(ev)
		assert.False(t, ok, "the tower's events are not the reading's")
	}
	line, _ = p.Event(first)
	assert.Equal(t, "reading prompt 64/1400 (pass 1 of 22), about 21 min left", line, "a pass is a minute, not 14")

	// the same through the app's server
	var phases []string
	l := &serveLock{n: 1, on: func(ev engine.Event) {
		if ev.Kind == engine.EventPhase {
			phases = append(phases, ev.Text)
		}
	}}
	for _, ev := range append(append([]engine.Event{opening}, tower...), first) {
		l.event(ev)
	}
	assert.Equal(t, []string{ServedReadingPhase(1, "reading prompt 0/1400 (22 passes)"),
		ServedReadingPhase(1, "looking at the picture 1/1 (3%)"), ServedReadingPhase(1, "looking at the picture 1/1 (100%)"),
		ServedReadingPhase(1, "reading prompt 64/1400 (pass 1 of 22), about 21 min left")}, phases)
}
