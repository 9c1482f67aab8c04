package gui

import (
	"context"
	"errors"
	"path/filepath"
	"strings"

	"k3/ui/bridge"
)

// applyFolder makes the form's model folder the one this machine runs
// (G20: "Model location…" changes the folder without the wizard). A folder
// the engine cannot open is refused with the reason; a folder used before
// comes back with its trunk and layer count; another one runs without a
// packed trunk until the wizard's step 3 packs one.
func (f *BackendForm) applyFolder(s *bridge.Settings) error {
	dir := strings.TrimSpace(f.Folder.Text)
	if dir == "" {
		s.Backend = bridge.BackendLocal // the wizard asks for the folder
		return nil
	}
	dir = filepath.Clean(dir)
	if s.ModelDir != "" && filepath.Clean(s.ModelDir) == dir {
		s.Backend = bridge.BackendLocal
		return nil
	}
	if c := bridge.CheckFolder(context.Background(), dir, 0); !c.OK() {
		msg := bridge.Explain(c.Err())
		return errors.New(fullStop(strings.ToUpper(msg[:1]) + msg[1:]))
	}
	k := bridge.KnownModel{Dir: dir, Demo: f.DemoDir != "" && filepath.Clean(f.DemoDir) == dir}
	for _, o := range f.Known {
		if filepath.Clean(o.Dir) == dir {
			k = o
			break
		}
	}
	s.Use(k)
	f.Note = ""
	if k.TrunkDir == "" && !k.Demo {
		f.Note = "The model folder " + filepath.Base(dir) + " has no packed trunk yet: it runs with every layer held in memory. " +
			"The setup wizard's step 3 packs one."
	}
	return nil
}
