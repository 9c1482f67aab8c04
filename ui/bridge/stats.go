package bridge

import (
	"time"

	"k3/engine"
	"k3/engine/chat"
)

// thinkClock times a turn's thinking for its ReplyStats: from the turn's
// start to its first answer text after reasoning.
type thinkClock struct {
	start, end time.Time
	reasoned   bool
}

// newThinkClock starts the clock and makes *on pass each event by it.
func newThinkClock(on *func(engine.Event)) *thinkClock {
	c := &thinkClock{start: time.Now()}
	next := *on
	*on = func(ev engine.Event) {
		switch {
		case ev.Kind == engine.EventReasoning && ev.Text != "":
			c.reasoned = true
		case ev.Kind == engine.EventAnswer && ev.Text != "" && c.reasoned && c.end.IsZero():
			c.end = time.Now()
		}
		next(ev)
	}
	return c
}

// stats are a reply's numbers as the chat engine measured them (nil when
// no token came).
func (c *thinkClock) stats(tokens int, firstTokenSeconds, secondsPerToken float64) *chat.ReplyStats {
	if tokens == 0 {
		return nil
	}
	st := &chat.ReplyStats{Tokens: tokens, FirstTokenSeconds: firstTokenSeconds}
	if tokens > 1 {
		st.SecondsPerToken = secondsPerToken
	}
	if !c.end.IsZero() {
		st.ThoughtSeconds = c.end.Sub(c.start).Seconds()
	}
	return st
}
