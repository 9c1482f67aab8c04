package gui

import (
	"strings"

	"k3/ui/bridge"
)

// thinkingNote says, when Thinking is turned off on the trained demo, that
// its thought still comes at the start of the answer (G28: the model's
// training, not the app), and takes the note back when Thinking is on.
func (v *chatView) thinkingNote() {
	has := strings.Contains(v.Notice.Text, bridge.ThinksFirstNote)
	switch {
	case !v.Opts.Thinking && bridge.ThinksFirstAlways(v.u.S) && !has:
		v.Notice.SetText(strings.TrimSpace(v.Notice.Text + " " + bridge.ThinksFirstNote))
	case v.Opts.Thinking && has:
		v.Notice.SetText(strings.TrimSpace(strings.Replace(v.Notice.Text, bridge.ThinksFirstNote, "", 1)))
	}
}
