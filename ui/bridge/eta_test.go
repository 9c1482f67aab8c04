package bridge

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Item 2: an ETA while the prompt is read, from the rate measured so far.
func TestPrefillETA(t *testing.T) {
	var p PrefillETA
	t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	assert.Equal(t, "reading prompt 512/4979", p.Phase(512, 4979, t0))
	// 512 positions in 20 s: 25.6/s, 3955 left: 154 s
	assert.Equal(t, "reading prompt 1024/4979, about 3 min left", p.Phase(1024, 4979, t0.Add(20*time.Second)))
	assert.Equal(t, "reading prompt 4979/4979", p.Phase(4979, 4979, t0.Add(190*time.Second)))
	// a new prompt starts over
	assert.Equal(t, "reading prompt 10/100", p.Phase(10, 100, t0.Add(200*time.Second)))
	assert.Equal(t, "reading prompt 60/100, about 8 s left", p.Phase(60, 100, t0.Add(210*time.Second)))
}

// Issue 37: with the positions per pass known, the line counts passes and
// estimates the time left from the mean pass since the prompt was sent.
func TestPrefillETAPasses(t *testing.T) {
	var p PrefillETA
	t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	p.Begin(t0)
	p.Chunk = 1024
	// 4979 positions at 1024 a pass: 5 passes; the first took 150 s
	assert.Equal(t, "reading prompt 1024/4979, pass 1 of 5, about 10 min left", p.Phase(1024, 4979, t0.Add(150*time.Second)))
	assert.Equal(t, "reading prompt 2048/4979, pass 2 of 5, about 8 min left", p.Phase(2048, 4979, t0.Add(320*time.Second)))
	p.Phase(3072, 4979, t0.Add(480*time.Second))
	p.Phase(4096, 4979, t0.Add(640*time.Second))
	assert.Equal(t, "reading prompt 4979/4979, pass 5 of 5", p.Phase(4979, 4979, t0.Add(800*time.Second)))
}

// Item 2: before sending on a slow machine, the wait to plan with.
func TestEstimate(t *testing.T) {
	assert.Equal(t, "", Estimate(0.2, 1, 4096), "fast replies need no estimate")
	assert.Equal(t, "At this machine's speed (36.0 s per token): the first token after about 2 min, then about 1 h per 100 tokens; "+
		"a reply stops at 4096 tokens (at most 41 h).", Estimate(36, 120, 4096))
	assert.Equal(t, "2 h 10 min", Duration(2*time.Hour+7*time.Minute))
	assert.Equal(t, "45 s", Duration(45*time.Second))
}
