package gui

import (
	"fmt"
	"time"

	"k3/engine"
	"k3/ui/bridge"
)

// watchServer makes the window follow the app's server (G13): while it
// answers a request from another program the status line says so, with
// the request's number, and the Engine panel's gauges move with the
// engine's counters; the model line counts the requests answered. A
// message of the app's own sent meanwhile says it waits (WaitingForServer)
// and then shows its own phases.
func (v *chatView) watchServer(w bridge.ServeWatcher) {
	w.WatchServer(func(ev engine.Event) {
		v.u.do(func() { v.serverEvent(w, ev) })
	})
}

// serverEvent shows one event of the server's (on the UI goroutine).
func (v *chatView) serverEvent(w bridge.ServeWatcher, ev engine.Event) {
	p := v.gaugePump()
	switch ev.Kind {
	case engine.EventStats:
		at := ev.At
		if at.IsZero() {
			at = time.Now()
		}
		var g bridge.Gauges
		p.WithMeter(func(m *bridge.Meter) {
			m.Stats(at, ev.Stats)
			g = m.Gauges()
		})
		v.Gauges.Set(g)
	case engine.EventPhase:
		answering := ev.Text != ""
		if !v.Busy { // the app's own turn shows its own phases
			var g bridge.Gauges
			p.WithMeter(func(m *bridge.Meter) {
				if answering {
					m.StartTurn(time.Now())
				} else {
					m.EndTurn()
				}
				g = m.Gauges()
			})
			v.Gauges.Set(g)
			v.Phase.SetText(ev.Text)
		}
		v.servedNote = servedText(w.ServedRequests(), answering)
		if v.Picker != nil {
			v.Picker.Refresh()
		}
	}
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
