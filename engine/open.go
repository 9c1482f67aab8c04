package engine

import (
	"path/filepath"

	"k3/storage/config"
	st "k3/storage/safetensors"
)

// Open reads the config (cfgPath, or MODEL_DIR/config.json when empty),
// indexes the shards and binds the first `layers` layers (0: all).
func Open(dir, cfgPath string, layers int, progress func(done, total int)) (*Model, *st.Set, error) {
	if cfgPath == "" {
		cfgPath = filepath.Join(dir, "config.json")
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return nil, nil, err
	}
	set, err := st.Open(dir)
	if err != nil {
		return nil, nil, err
	}
	m, err := Bind(set, cfg, layers, progress)
	if err != nil {
		set.Close()
		return nil, nil, err
	}
	m.Fingerprint = Fingerprint(m, set.Files())
	return m, set, nil
}
