package bridge

import (
	"fmt"
	"time"
)

// PrefillETA estimates how long reading the prompt still takes, from the
// rate measured since its first progress report, or, once the positions
// per pass are known (Chunk, from the prefill events), from the mean time
// of the passes read since Begin: a pass costs about the same whatever
// its length where reading the weights is the wait.
type PrefillETA struct {
	start     time.Time
	startDone int
	// Chunk is the positions read per pass (engine.Event.Chunk; 0: unknown).
	Chunk  int
	begun  time.Time
	passes int
}

// Begin starts the clock of the passes: call it when the prompt is sent.
func (p *PrefillETA) Begin(now time.Time) { p.begun, p.passes = now, 0 }

// Phase is the "reading prompt" line at done of total positions: with
// "about N left" once a chunk was read after the first report, or with the
// passes and their time left when Chunk and Begin are known.
func (p *PrefillETA) Phase(done, total int, now time.Time) string {
	s := fmt.Sprintf("reading prompt %d/%d", done, total)
	if p.Chunk > 0 && !p.begun.IsZero() {
		p.passes++
		left := (max(total-done, 0) + p.Chunk - 1) / p.Chunk
		s += fmt.Sprintf(", pass %d of %d", p.passes, p.passes+left)
		if el := now.Sub(p.begun).Seconds(); left > 0 && el > 0 {
			s += ", about " + Duration(time.Duration(el/float64(p.passes)*float64(left)*float64(time.Second))) + " left"
		}
		if left == 0 {
			p.begun = time.Time{}
		}
		return s
	}
	if p.start.IsZero() || done < p.startDone {
		p.start, p.startDone = now, done
		return s
	}
	el := now.Sub(p.start).Seconds()
	if done == p.startDone || el <= 0 || done >= total {
		return s
	}
	rate := float64(done-p.startDone) / el // positions per second
	left := time.Duration(float64(total-done) / rate * float64(time.Second))
	return s + ", about " + Duration(left) + " left"
}

// Duration is a wait in plain words, rounded as people say it: "40 s",
// "3 min", "2 h 10 min".
func Duration(d time.Duration) string {
	switch {
	case d < time.Second:
		return "under a second"
	case d < 90*time.Second:
		return fmt.Sprintf("%d s", int(d.Round(time.Second).Seconds()))
	case d < time.Hour-30*time.Second:
		return fmt.Sprintf("%d min", int(d.Round(time.Minute).Minutes()))
	}
	d = d.Round(10 * time.Minute)
	h, m := int(d.Hours()), int(d.Minutes())%60
	if m == 0 {
		return fmt.Sprintf("%d h", h)
	}
	return fmt.Sprintf("%d h %d min", h, m)
}

// Estimate is the wait a user can plan with before sending, from this
// machine's measured speed: secPerToken (the last reply's seconds per
// token) and ttft (its time to the first token). "" when replies are fast
// (under a second per token), so there is nothing to plan.
func Estimate(secPerToken, ttft float64, maxTokens int) string {
	if secPerToken < 1 {
		return ""
	}
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	s := fmt.Sprintf("At this machine's speed (%.1f s per token): the first token after about %s, then about %s per 100 tokens",
		secPerToken, Duration(sec(max(ttft, secPerToken))), Duration(sec(100*secPerToken)))
	if maxTokens > 0 {
		s += fmt.Sprintf("; a reply stops at %d tokens (at most %s)", maxTokens, Duration(sec(float64(maxTokens)*secPerToken)))
	}
	return s + "."
}
