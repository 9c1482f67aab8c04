package bridge

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
)

// KnownModel is a model folder of this machine the app ran or set up
// before, with its trunk and partial-layer count: the model picker offers
// it again without the wizard (issue 27, item 3).
type KnownModel struct {
	Dir        string `json:"dir"`
	Layers     int    `json:"layers,omitempty"`
	Demo       bool   `json:"demo,omitempty"`
	TrunkDir   string `json:"trunk,omitempty"`
	TrunkModel string `json:"trunk_model,omitempty"`
}

// kKnownModels keeps the known models, newest first, as one JSON list.
const kKnownModels = "models.known"

// maxKnownModels is how many model folders the app remembers.
const maxKnownModels = 8

// Known returns the settings' local model as a KnownModel (ok false when
// the settings name none).
func (s Settings) Known() (KnownModel, bool) {
	if s.ModelDir == "" {
		return KnownModel{}, false
	}
	k := KnownModel{Dir: s.ModelDir, Layers: s.Layers, Demo: s.Demo}
	if s.TrunkDir != "" && (s.TrunkModel == "" || sameFolder(s.TrunkModel, s.ModelDir)) {
		k.TrunkDir, k.TrunkModel = s.TrunkDir, s.TrunkModel
	}
	return k, true
}

// Use makes k the settings' local model (the memory preset and budgets
// stay: they belong to the machine).
func (s *Settings) Use(k KnownModel) {
	s.ModelDir, s.Layers, s.Demo = k.Dir, k.Layers, k.Demo
	s.TrunkDir, s.TrunkModel = k.TrunkDir, k.TrunkModel
	s.Backend = BackendLocal
}

// LoadKnownModels returns the model folders remembered, newest first,
// without those that are gone from the disk (an unreadable list is an
// empty one: it only saves the user a trip through the wizard).
func LoadKnownModels(p Prefs) []KnownModel {
	var all []KnownModel
	if err := json.Unmarshal([]byte(p.String(kKnownModels)), &all); err != nil {
		return nil
	}
	out := all[:0]
	for _, k := range all {
		if k.Dir == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(k.Dir, "config.json")); err != nil {
			continue
		}
		if k.TrunkDir != "" {
			if _, err := os.Stat(k.TrunkDir); err != nil {
				k.TrunkDir, k.TrunkModel = "", ""
			}
		}
		out = append(out, k)
	}
	return out
}

// RememberModel puts the settings' local model first in the known models
// (replacing what was known of the same folder).
func RememberModel(p Prefs, s Settings) {
	k, ok := s.Known()
	if !ok {
		return
	}
	var all []KnownModel
	_ = json.Unmarshal([]byte(p.String(kKnownModels)), &all) // a damaged list starts again
	list := []KnownModel{k}
	for _, o := range all {
		if !sameFolder(o.Dir, k.Dir) && len(list) < maxKnownModels {
			list = append(list, o)
		}
	}
	raw, err := json.Marshal(list)
	if err != nil {
		return
	}
	p.SetString(kKnownModels, string(raw))
}

func sameFolder(a, b string) bool { return filepath.Clean(a) == filepath.Clean(b) }

// KnownServer is a server the app used, with the model it asked for: the
// model picker offers it again without the wizard. Its API key is not
// here: it is in the key store under ServerKeyFor(URL).
type KnownServer struct {
	URL   string `json:"url"`
	Model string `json:"model,omitempty"`
}

// kKnownServers keeps the known servers, newest first, as one JSON list.
const kKnownServers = "servers.known"

// maxKnownServers is how many servers the app remembers.
const maxKnownServers = 8

// KnownServer returns the settings' server as a KnownServer (ok false
// when the settings name none).
func (s Settings) KnownServer() (KnownServer, bool) {
	if s.ServerURL == "" {
		return KnownServer{}, false
	}
	return KnownServer{URL: s.ServerURL, Model: s.ServerModel}, true
}

// UseServer makes k, with its API key, where the model runs.
func (s *Settings) UseServer(k KnownServer, key string) {
	s.Backend, s.ServerURL, s.ServerModel, s.ServerKey = BackendServer, k.URL, k.Model, key
}

// LoadKnownServers returns the servers remembered, newest first (an
// unreadable list is an empty one). Nothing is asked of the network.
func LoadKnownServers(p Prefs) []KnownServer {
	var all []KnownServer
	if err := json.Unmarshal([]byte(p.String(kKnownServers)), &all); err != nil {
		return nil
	}
	return slices.DeleteFunc(all, func(k KnownServer) bool { return k.URL == "" })
}

// RememberServer puts the settings' server first in the known servers when
// the model runs there, and returns the addresses no longer remembered (the
// list is full): their keys may go.
func RememberServer(p Prefs, s Settings) (forgotten []string) {
	k, ok := s.KnownServer()
	if !ok || s.Backend != BackendServer {
		return nil
	}
	list := []KnownServer{k}
	for _, o := range LoadKnownServers(p) {
		switch {
		case o == k:
		case len(list) < maxKnownServers:
			list = append(list, o)
		default:
			forgotten = append(forgotten, o.URL)
		}
	}
	forgotten = slices.DeleteFunc(forgotten, func(url string) bool {
		return slices.ContainsFunc(list, func(o KnownServer) bool { return o.URL == url })
	})
	raw, err := json.Marshal(list)
	if err != nil {
		return nil
	}
	p.SetString(kKnownServers, string(raw))
	return forgotten
}
