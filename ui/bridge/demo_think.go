package bridge

import "k3/engine/synth"

// ThinksFirstAlways reports whether the model the settings run is the
// trained demo, which learned only replies that think first: its training
// conversations (tools/demo/prep) are all rendered with thinking on, so
// with thinking off — the prompt opening the response channel, as the
// reference template does — it still writes its thought, closes a think
// channel that was never opened and opens the response channel again. The
// reply reader leaves the two stray markers out (with a warning), so the
// thought stands at the start of the answer (issue 27, G28).
func ThinksFirstAlways(s Settings) bool {
	return s.Backend != BackendServer && s.ModelDir != "" && synth.IsTrainedDemo(s.ModelDir)
}

// ThinksFirstNote is what the chat says when thinking is turned off on
// such a model.
const ThinksFirstNote = "The DEMO model only learned replies that think first: with Thinking off, " +
	"its thought still comes, at the start of the answer. Tick Thinking to see it apart."
