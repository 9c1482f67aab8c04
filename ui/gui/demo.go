package gui

import "k3/engine/synth"

// MakeDemoModel writes the small demo checkpoint (engine/synth.WriteDemo:
// model, tokenizer and marker, the same bytes `k3 demo` writes) into dir,
// unless a complete one is already there.
func MakeDemoModel(dir string) error {
	if synth.IsDemo(dir) {
		return nil
	}
	return synth.WriteDemo(dir, "small")
}
