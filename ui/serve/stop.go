package serve

import (
	"strings"
	"unicode/utf8"
)

// stopFilter passes answer text through until one of the stop strings
// appears. It holds back the tail that could still become a stop string,
// so a stop string never reaches the client, streamed or not.
type stopFilter struct {
	stops   []string
	hold    int // longest stop string minus one byte
	pending string
	out     strings.Builder // everything passed
	hit     bool
	matched string       // the stop string that hit
	emit    func(string) // hears what passes, as it passes
}

func newStopFilter(stops []string, emit func(string)) *stopFilter {
	f := &stopFilter{stops: stops, emit: emit}
	for _, s := range stops {
		f.hold = max(f.hold, len(s)-1)
	}
	return f
}

func (f *stopFilter) pass(s string) {
	if s == "" {
		return
	}
	f.out.WriteString(s)
	if f.emit != nil {
		f.emit(s)
	}
}

// add takes more text; after a hit it drops everything.
func (f *stopFilter) add(text string) {
	if f.hit {
		return
	}
	f.pending += text
	at := -1
	for _, s := range f.stops {
		if i := strings.Index(f.pending, s); i >= 0 && (at < 0 || i < at) {
			at, f.matched = i, s
		}
	}
	if at >= 0 {
		f.pass(f.pending[:at])
		f.pending, f.hit = "", true
		return
	}
	cut := len(f.pending) - f.hold
	for cut > 0 && cut < len(f.pending) && !utf8.RuneStart(f.pending[cut]) {
		cut--
	}
	if cut > 0 {
		f.pass(f.pending[:cut])
		f.pending = f.pending[cut:]
	}
}

// flush passes what was held back (the reply ended without a hit).
func (f *stopFilter) flush() {
	if !f.hit {
		f.pass(f.pending)
		f.pending = ""
	}
}
