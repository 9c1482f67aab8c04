package trunk

import (
	"fmt"
	"strings"

	"k3/storage/layout"
	"k3/storage/safetensors"
)

// CheckPartial checks that a set opened with safetensors.OpenPartial holds
// every tensor the model tables and the first `layers` layers (0: all)
// need. Otherwise the error names the first missing shard in the index's
// order, the tensor and the layer that needs it, and how many layers the
// present shards do cover.
func CheckPartial(set *safetensors.Set, layers int) error {
	absent := set.Absent()
	if len(absent) == 0 {
		return nil
	}
	prefix := ""
	if strings.HasPrefix(absent[0].Name, ReleasePrefix) {
		prefix = ReleasePrefix
	}
	covered := -1 // the first layer with an absent tensor: what --layers can reach
	var global *safetensors.AbsentTensor
	for i := range absent {
		a := &absent[i]
		if l, ok := layerOf(prefix, a.Name); ok {
			if covered < 0 || l < covered {
				covered = l
			}
		} else if global == nil {
			global = a
		}
	}
	if global != nil {
		return fmt.Errorf("shard %s is missing: it holds %s, which every run needs (download it again)", global.Shard, global.Name)
	}
	if layers > 0 && layers <= covered {
		return nil
	}
	for _, a := range absent {
		if l, _ := layerOf(prefix, a.Name); l == covered {
			want := "all layers"
			if layers > 0 {
				want = fmt.Sprintf("--layers %d", layers)
			}
			return fmt.Errorf("shard %s is missing: layer %d needs %s (%s asked; the shards present cover --layers %d)", a.Shard, l, a.Name, want, covered)
		}
	}
	return nil
}

// layerOf is the decoder layer of a tensor named under prefix.
func layerOf(prefix, name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	l, tail, ok := layout.LayerOf(rest)
	return l, ok && tail != "" && !strings.HasPrefix(rest, layout.ReleasePrefix)
}
