package synth

import (
	"fmt"
	"os"
	"path/filepath"

	"k3/assets/demo"
	"k3/storage/atomicfile"
	"k3/tokenizer"
)

// The demo model, so the whole engine and app (wizard, memory plan, chat,
// gauges) run on a machine without the 1.56 TB checkpoint. The small demo is
// the trained one (assets/demo: the K3 tensor graph at 2.1 million
// parameters with a tiny vision tower, trained on fortune cookies and
// drawings of coloured shapes, which answers in the chat format and stops by
// itself); medium and large have the K3 tensor graph with
// deterministic random weights and a byte-level tokenizer, for measuring,
// and their text is not meaningful. `k3 demo` and the app both write it with
// WriteDemo, so the same size gives the same bytes, and both recognise it
// with IsDemo.

// DemoMarker is the file that labels a folder as a demo checkpoint. WriteDemo
// writes it last: a folder that has it is complete.
const DemoMarker = demo.Marker

// DemoSizes are the sizes WriteDemo accepts: the trained small demo, then
// random weights at the small model's shapes, medium and large.
var DemoSizes = []string{"small", "random", "medium", "large"}

// DemoSpec returns the random-weights model spec of a demo size: random is
// Small (~2 MB; the small demo WriteDemo writes is the trained model
// instead), medium is Medium (~40 MB), large is Large (~600 MB, for
// measuring).
func DemoSpec(size string) (Spec, bool) {
	switch size {
	case "small", "random":
		return Small(), true
	case "medium":
		return Medium(), true
	case "large":
		return Large(), true
	}
	return Spec{}, false
}

// demoText trains the demo tokenizer's merges: any text works; this keeps
// the demo's vocabulary within its model's ids.
const demoText = "Kimi K3 runs on one machine. The demo model has random weights, so its text is not meaningful. "

const demoNotice = `This folder holds a k3 DEMO model (size %s): the Kimi K3 tensor graph at a
small size with random weights, written by 'k3 demo' or the k3 app. It
exercises every part of the engine and the app, but the text it writes is
NOT meaningful. Delete the folder at any time; 'k3 demo' or the app writes it
again when asked.
`

// WriteDemo writes the demo checkpoint of a size (one of DemoSizes) into
// dir, creating it if needed: the model (config.json, shards, index), a
// byte-level tokenizer whose ids fit the model's vocabulary (256 bytes, up
// to 200 merges learned from a fixed text, fillers, then the 256 K3 special
// tokens), and DemoMarker.
func WriteDemo(dir, size string) error {
	spec, ok := DemoSpec(size)
	if !ok {
		return fmt.Errorf("demo size %q is not one of %v", size, DemoSizes)
	}
	// A rewrite starts unlabelled, so an interrupted one is not taken for
	// a demo.
	if err := os.Remove(filepath.Join(dir, DemoMarker)); err != nil && !os.IsNotExist(err) {
		return err
	}
	if size == "small" {
		return demo.Write(dir) // the trained model, its marker last
	}
	if err := Write(dir, spec); err != nil {
		return fmt.Errorf("writing the demo model into %s: %w", dir, err)
	}
	numBase := spec.Vocab - 256 // the specials take the last 256 ids
	opt := tokenizer.ByteLevelOptions{Text: demoText, Merges: min(numBase-256, 200), NumBase: numBase}
	if err := tokenizer.WriteByteLevel(dir, opt); err != nil {
		return fmt.Errorf("writing the demo tokenizer into %s: %w", dir, err)
	}
	return atomicfile.Write(filepath.Join(dir, DemoMarker), fmt.Appendf(nil, demoNotice, size))
}

// IsDemo reports whether dir holds a demo checkpoint written by WriteDemo.
func IsDemo(dir string) bool {
	if dir == "" {
		return false
	}
	fi, err := os.Stat(filepath.Join(dir, DemoMarker))
	return err == nil && fi.Mode().IsRegular()
}

// IsTrainedDemo reports whether dir holds the trained small demo (its
// marker's text is the trained model's).
func IsTrainedDemo(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, DemoMarker))
	return err == nil && string(b) == demo.Notice
}
