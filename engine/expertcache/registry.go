package expertcache

import (
	"fmt"
	"strings"
)

// The policy names: these are the only spellings, used by the engine's
// Options.CachePolicy, k3's --cache-policy and the k3 sim-cache columns.
const (
	NameLayerR = "layer+r" // LayerCycle with recency (NewLayerCycleRecency)
	NameLayer  = "layer"   // LayerCycle (NewLayerCycle)
	NameLRU    = "lru"     // LRU (NewLRU)
	NameS3FIFO = "s3fifo"  // S3-FIFO (NewS3FIFO)

	// Default is the engine's policy when none is named.
	Default = NameLayerR
)

// Constructor builds a policy with capacity slots for the dense keys
// Key(layer, expert, experts) of a model with the given layers and routed
// experts per layer (layers, experts >= 1).
type Constructor func(capacity, layers, experts int) Policy

var registry = []struct {
	name string
	new  Constructor
}{
	{NameLayerR, func(c, l, e int) Policy { return NewLayerCycleRecency(c, l, e) }},
	{NameLayer, func(c, l, e int) Policy { return NewLayerCycle(c, l, e) }},
	{NameLRU, func(c, l, e int) Policy { return NewLRU(c, l*e) }},
	{NameS3FIFO, func(c, l, e int) Policy { return NewS3FIFO(c, l*e) }},
}

// Names lists the policies, Default first.
func Names() []string {
	out := make([]string, len(registry))
	for i, r := range registry {
		out[i] = r.name
	}
	return out
}

// Lookup returns the constructor of the named policy; names match
// case-insensitively ("LRU" is "lru").
func Lookup(name string) (Constructor, bool) {
	for _, r := range registry {
		if strings.EqualFold(r.name, name) {
			return r.new, true
		}
	}
	return nil, false
}

// New builds the named policy ("" is Default); an unknown name is an error
// that lists the known ones.
func New(name string, capacity, layers, experts int) (Policy, error) {
	if name == "" {
		name = Default
	}
	c, ok := Lookup(name)
	if !ok {
		return nil, fmt.Errorf("unknown expert cache policy %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return c(capacity, layers, experts), nil
}
