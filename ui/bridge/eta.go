package bridge

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"k3/doctor"
	"k3/engine"
	"k3/engine/vision"
)

// PrefillETA says where reading the prompt is, in the status line's
// words: the positions read of the transcript's, the passes through the
// model they take and the time left, as its doctor.PrefillClock measures
// them (the one estimator k3 run and k3 chat print too). A chat engine
// keeps one across turns, so the pass time measured on one prompt gives
// the next one its estimate from the start.
type PrefillETA struct {
	doctor.PrefillClock
}

// Begin starts a new prompt: the next Phase call is its first report.
func (p *PrefillETA) Begin() { p.Reset() }

// Event is the status line for a turn's or a request's event ev, and
// whether ev says where the reading is: a prefill event's Phase; after
// the vision tower's last layer on a picture (chat.PictureEvent) the
// prompt's reading starts, so its first pass is timed from then, not
// from before the tower looked (minutes at K3 size, which made the time
// left many times too long).
func (p *PrefillETA) Event(ev engine.Event) (string, bool) {
	switch {
	case ev.Kind == engine.EventPrefill:
		return p.Phase(ev.Done, ev.Total, ev.Reused, ev.Chunk, EventTime(ev)), true
	case ev.Kind == engine.EventPhase && ev.Total > 0 && ev.Done >= ev.Total:
		p.PrefillClock.Begin(EventTime(ev))
	}
	return "", false
}

// EventTime is when ev happened: its At, or now when it has none.
func EventTime(ev engine.Event) time.Time {
	if ev.At.IsZero() {
		return time.Now()
	}
	return ev.At
}

// Phase is the status line at done of total positions, reused of them
// from a kept state (a prompt cache or the conversation so far), chunk
// positions per pass (0: as before). Called with done == reused before
// anything was read, it says what the reading will take.
func (p *PrefillETA) Phase(done, total, reused, chunk int, now time.Time) string {
	st := p.Observe(done, total, reused, chunk, now)
	s := fmt.Sprintf("reading prompt %d/%d", done, total)
	if p.Chunk > 0 && done < total {
		if st.Pass > 0 {
			s += fmt.Sprintf(" (pass %d of %d)", st.Pass, st.Passes)
		} else {
			s += fmt.Sprintf(" (%d %s)", st.Passes, plural(st.Passes, "pass", "passes"))
		}
		if st.Left > 0 {
			left := Duration(time.Duration(st.Left * float64(time.Second)))
			if !strings.HasPrefix(left, "under") {
				left = "about " + left
			}
			s += ", " + left + " left"
		}
	}
	// what the prompt cache gave comes last: the app's status line is one
	// line, and at 1024x640 it cut the passes and the time left when the
	// reuse came first
	if reused > 0 {
		s += fmt.Sprintf(" · reused %d of %d cached positions", reused, total)
	}
	return s
}

func ceilDiv(a, b int) int {
	if a <= 0 || b <= 0 {
		return 0
	}
	return (a + b - 1) / b
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
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
	return ReplyCost(Cost{SecPerToken: secPerToken, FirstToken: ttft}, Prompt{}, maxTokens)
}

// Cost is what a reply costs on this machine, as measured (or, before
// anything was measured, as the doctor's cost model predicts it).
type Cost struct {
	SecPerToken float64 // one generated token
	FirstToken  float64 // the last reply's first token, its prompt included
	PassSeconds float64 // one pass of reading a prompt (0: not measured)
	Chunk       int     // positions one pass reads (0: not known)
	// Predicted: SecPerToken is the doctor's prediction for the preset,
	// nothing was measured yet
	Predicted bool
}

// Prompt is the message about to be sent: its length in positions (Exact:
// counted with the model's tokenizer, else estimated from its words).
type Prompt struct {
	Tokens int
	Exact  bool
	// Context is the positions a conversation may take (0: not known)
	Context int
	// Pictures are the pictures that go with it (PicturesCost)
	Pictures Pictures
}

// LongPrompt is the message length the box under the message speaks of
// whatever the speed: a pasted text says how long it is before it is sent.
const LongPrompt = 1000

// ReplyCost says, before sending, what the reply will cost: reading the
// message (its passes at the measured pass time), the first token, then
// each 100 tokens and the reply cap. "" when replies are fast and the
// message short: there is nothing to plan.
func ReplyCost(c Cost, p Prompt, maxTokens int) string {
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	read := 0.0
	passes := 0
	var b strings.Builder
	b.WriteString(picturesSentence(p))
	p.Tokens += p.Pictures.Positions
	if c.PassSeconds > 0 && c.Chunk > 0 && p.Tokens > 0 {
		passes = ceilDiv(p.Tokens, c.Chunk)
		read = float64(passes) * c.PassSeconds
	}
	if p.Tokens >= LongPrompt || read >= 10 {
		about := "about "
		if p.Exact {
			about = ""
		}
		fmt.Fprintf(&b, "Your message is %s%s tokens long", about, thousands(p.Tokens))
		switch {
		case p.Context > 0 && p.Tokens > p.Context:
			fmt.Fprintf(&b, ": more than the %s positions a conversation may take, so it will not fit. ", thousands(p.Context))
		case passes > 0:
			fmt.Fprintf(&b, ": reading it takes about %s (%d %s). ", Duration(sec(read)), passes, plural(passes, "pass", "passes"))
		default:
			b.WriteString(". ")
		}
	}
	if c.SecPerToken < 1 {
		return strings.TrimSpace(b.String())
	}
	first := max(c.FirstToken, c.SecPerToken)
	if read > 0 {
		first = read + c.SecPerToken
	}
	speed := "At this machine's speed"
	if c.Predicted {
		speed = "At the speed expected for this memory preset"
	}
	fmt.Fprintf(&b, "%s (%.1f s per token): the first token after about %s, then about %s per 100 tokens",
		speed, c.SecPerToken, Duration(sec(first)), Duration(sec(100*c.SecPerToken)))
	if maxTokens > 0 {
		fmt.Fprintf(&b, "; a reply stops at %d tokens (at most %s)", maxTokens, Duration(sec(float64(maxTokens)*c.SecPerToken)))
	}
	return b.String() + "."
}

// picturesSentence starts the cost with what the pictures add: their
// prompt positions and the time the vision tower takes looking at them
// (the message's length then counts their positions).
func picturesSentence(p Prompt) string {
	var b strings.Builder
	pc := p.Pictures
	if pc.N == 0 {
		return ""
	}
	what := "Your picture adds"
	if pc.N > 1 {
		what = fmt.Sprintf("Your %d pictures add", pc.N)
	}
	fmt.Fprintf(&b, "%s %s positions to the message", what, thousands(pc.Positions))
	if pc.Seconds >= 1 {
		fmt.Fprintf(&b, "; looking at %s takes about %s", plural(pc.N, "it", "them"), Duration(time.Duration(pc.Seconds*float64(time.Second))))
	}
	b.WriteString(". ")
	return b.String()
}

// Pictures is what the pictures about to be sent cost (Prompt.Pictures).
type Pictures struct {
	N         int
	Positions int     // the prompt positions they take
	Seconds   float64 // the vision tower looking at them (0: not known)
}

// PicturesCost is what pics cost a model whose vision tower is c (nil: it
// takes none: nothing) on a machine whose float64 FMA peak is fma GFLOP/s
// (0: the seconds are not known): the positions by the tower's resize rule
// and the seconds by the doctor's cost model (doctor.PictureSeconds, the
// tower's FLOPs at the share of the peak `k3 bench vision` measured; a
// streamed tower's reads left out). Pictures that cannot be read are
// skipped (attaching refused them).
func PicturesCost(c *vision.Config, pics [][]byte, fma float64) Pictures {
	var out Pictures
	if c == nil {
		return out
	}
	for _, data := range pics {
		w, h, err := vision.Size(data)
		if err != nil {
			continue
		}
		rz := vision.NavitResize(w, h, c.Patch, c.MergeH, vision.InPatchLimit, vision.SideLimit)
		out.N++
		out.Positions += rz.Tokens
		if fma > 0 {
			out.Seconds += doctor.PictureSeconds(c, rz.Grid, fma, false, 0)
		}
	}
	return out
}

// ApproxTokens estimates the positions text takes, from its words and
// characters (English runs about 4 characters and 3/4 of a word a token),
// for when the model's tokenizer is not loaded yet.
func ApproxTokens(text string) int {
	words := len(strings.Fields(text))
	return max((words*4+2)/3, (utf8.RuneCountInString(text)+3)/4)
}

// thousands writes n with thousands separators: 6,512.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
