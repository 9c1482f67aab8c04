package gui

import (
	"fmt"
	"hash/fnv"

	"k3/engine/chat"
	"k3/ui/bridge"
)

// The context count under the message box ("context: 209 of 4096
// positions") is the shown branch's: each reply notes it for the history
// it ended, and switching versions shows the count of the branch shown, or
// none when that branch was not measured here (it stayed at the old
// branch's value, G22).

// branchKey identifies a history by its messages.
func branchKey(h []chat.Message) uint64 {
	f := fnv.New64a()
	for _, m := range h {
		fmt.Fprintf(f, "%s\x00%d\x00%s\x00%s\x00", m.Role, len(m.Content), m.Content, m.ReasoningContent)
	}
	return f.Sum64()
}

// noteContext records that the history shown takes positions positions
// and shows it.
func (v *chatView) noteContext(positions int) {
	if v.Info == nil || positions <= 0 || v.Info.Context <= 0 {
		return
	}
	if v.contexts == nil {
		v.contexts = map[uint64]int{}
	}
	v.contexts[branchKey(v.History)] = positions
	v.showContext()
}

// showContext shows the count of the history shown, when known.
func (v *chatView) showContext() {
	n, ok := v.contexts[branchKey(v.History)]
	if !ok || v.Info == nil || v.Info.Context <= 0 {
		v.ContextLb.SetText("")
		return
	}
	v.ContextLb.SetText(fmt.Sprintf("context: %d of %d positions", n, v.Info.Context))
}

// modelClosed drops the numbers of the model let go from the panel and
// the context count (another model counts positions its own way).
func (v *chatView) modelClosed() {
	var g bridge.Gauges
	v.gaugePump().WithMeter(func(m *bridge.Meter) {
		m.ModelClosed()
		g = m.Gauges()
	})
	v.Gauges.Set(g)
	v.contexts = nil
	v.ContextLb.SetText("")
}

// idleModel is what the Engine panel says of the model before a message
// opened it: nothing for this machine's model (it loads with the first
// message); a server's model is asked, not loaded, and this machine's
// memory and disk are not its (the panel said "No model loaded yet: it
// loads with the first message" beside this machine's gauges for a server
// that had just refused the connection).
func (v *chatView) idleModel() bridge.ModelInfo {
	s := v.u.S
	if s.Backend != bridge.BackendServer || s.ServerURL == "" {
		return bridge.ModelInfo{}
	}
	name := s.ServerModel
	if name == "" {
		name = "the server's model"
	}
	state := stateAsked
	if v.serverDown[s.ServerURL] {
		state = stateDown
	}
	return bridge.ModelInfo{Name: name + " on " + serverHost(bridge.KnownServer{URL: s.ServerURL}) + ": " + state, Remote: true}
}
