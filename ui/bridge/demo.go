package bridge

import "k3/engine/synth"

// MakeDemoModel writes the small demo checkpoint (engine/synth.WriteDemo:
// model, tokenizer and marker, the same bytes `k3 demo` writes) into dir,
// unless this version's is already there: an older demo (one without the
// vision tower, whose marker says so) is written again.
func MakeDemoModel(dir string) error {
	if synth.IsTrainedDemo(dir) {
		return nil
	}
	return synth.WriteDemo(dir, "small")
}

// DemoIn says whether dir holds a demo model k3 generated (engine/synth's
// marker), and whether it is the trained one.
func DemoIn(dir string) (demo, trained bool) {
	return synth.IsDemo(dir), synth.IsTrainedDemo(dir)
}
