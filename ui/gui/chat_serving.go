package gui

import (
	"fmt"
	"sync/atomic"
	"time"

	"k3/engine"
	"k3/ui/bridge"
)

// watchServer makes the window follow the app's server (G13): while it
// answers a request from another program the status line says so, with
// the request's number and where the reading of its prompt is, and the
// Engine panel shows the request's numbers (speed, first token, tokens per
// pass, expert-cache hits, reads, memory) from the engine's events as for
// a turn of the app's; the model line counts the requests answered. A
// message of the app's own sent meanwhile says at once that it waits
// (WaitingForServer), then shows its own phases.
//
// The meter takes the server's events on the server's goroutine, as they
// come, so they keep their order with the app's turn that waits for the
// engine (its numbers start when the request ends). The window is handed
// the meter's latest numbers at each phase and each sample of the
// counters (four a second while a request runs), tokens at most GaugeHz
// times a second, one hand-over at a time.
func (v *chatView) watchServer(w bridge.ServeWatcher) {
	p := v.gaugePump()
	var last atomic.Int64   // when gauges were last handed to the window
	var pending atomic.Bool // a hand-over waits to run: it shows the latest
	hand := func() {
		pending.Store(false)
		v.showMeter()
	}
	var plan atomic.Int64 // the plan's total as the meter has it
	w.WatchServer(func(ev engine.Event) {
		// the plan grows with a longer request (its KV cache), as it starts
		if b := w.PlanBytes(); b > 0 && plan.Swap(b) != b {
			p.WithMeter(func(m *bridge.Meter) { m.SetBudget(b) })
		}
		if ev.Kind != engine.EventPhase {
			show := p.Served(ev)
			now := time.Now().UnixNano()
			if (show || now-last.Load() >= int64(time.Second/bridge.GaugeHz)) && pending.CompareAndSwap(false, true) {
				last.Store(now)
				v.u.do(hand)
			}
			return
		}
		at := bridge.EventTime(ev)
		answering := ev.Text != ""
		p.WithMeter(func(m *bridge.Meter) {
			switch {
			case answering && !m.Serving():
				m.ServedStart(at, w.ServedRequests())
			case !answering:
				m.ServedEnd()
			}
		})
		v.u.do(func() { v.servedPhase(w, ev.Text) })
	})
}

// showMeter shows the meter's numbers in the Engine panel.
func (v *chatView) showMeter() {
	var g bridge.Gauges
	v.gaugePump().WithMeter(func(m *bridge.Meter) { g = m.Gauges() })
	v.Gauges.Set(g)
}

// servedPhase shows the server's phase (on the UI goroutine): in the
// status line unless the app's own turn shows its own, and kept for when
// that turn ends while the request runs (never an empty status while the
// engine works, N2).
func (v *chatView) servedPhase(w bridge.ServeWatcher, text string) {
	v.servedPh = text
	if !v.Busy {
		v.Phase.SetText(text)
	}
	v.showMeter()
	if note := servedText(w.ServedRequests(), text != ""); note != v.servedNote {
		v.servedNote = note
		if v.Picker != nil {
			v.Picker.Refresh()
		}
	}
}

// waitingPhase is the status a turn starts with: it waits when a request
// of the app's server's holds the engine (said from the moment Send is
// pressed: the message otherwise sat empty for as long as the request
// took), else the reply is starting.
func (v *chatView) waitingPhase() string {
	if w, ok := v.engine.(bridge.ServeWatcher); ok && w.Answering() {
		return bridge.WaitingForServer
	}
	return "starting the reply"
}

// servedText is the model line's note on the server's requests.
func servedText(n int64, answering bool) string {
	switch {
	case answering:
		return fmt.Sprintf("answering request %d", n)
	case n == 1:
		return "1 request answered"
	case n > 1:
		return fmt.Sprintf("%d requests answered", n)
	}
	return ""
}
