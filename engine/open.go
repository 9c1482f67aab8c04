package engine

import (
	"fmt"
	"path/filepath"

	"k3/engine/plan"
	"k3/storage/config"
	st "k3/storage/safetensors"
)

// OpenOptions say how to open a model.
type OpenOptions struct {
	Config   string // config path; "" = MODEL_DIR/config.json
	Layers   int    // bind only the first N layers (0: all)
	TrunkDir string // packed trunk: stream layers from it (see k3 pack)
	Budget   Budget
	// Memory to check the plan against; nil skips the check.
	Memory   *plan.Memory
	Progress func(done, total int)
}

// PlanError is a memory plan that does not fit.
type PlanError struct {
	Plan *plan.Plan
	Err  error
}

func (e *PlanError) Error() string { return e.Err.Error() + "\n" + e.Plan.String() }

// Open reads the config (cfgPath, or MODEL_DIR/config.json when empty),
// indexes the shards and binds the first `layers` layers (0: all), resident.
func Open(dir, cfgPath string, layers int, progress func(done, total int)) (*Model, *st.Set, error) {
	m, set, _, err := OpenModel(dir, OpenOptions{Config: cfgPath, Layers: layers, Progress: progress,
		Budget: Budget{CacheBytes: 1 << 62}})
	return m, set, err
}

// OpenModel reads the config, indexes the shards, makes the memory plan from
// the checkpoint's metadata, checks it against opt.Memory before anything
// large is allocated, and binds the model.
func OpenModel(dir string, opt OpenOptions) (*Model, *st.Set, *plan.Plan, error) {
	cfgPath := opt.Config
	if cfgPath == "" {
		cfgPath = filepath.Join(dir, "config.json")
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return nil, nil, nil, err
	}
	set, err := st.Open(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	layers := opt.Layers
	if layers <= 0 || layers > cfg.Layers {
		layers = cfg.Layers
	}
	opt.Budget.Streaming = opt.TrunkDir != ""
	if opt.Budget.Ultra && !opt.Budget.Streaming {
		set.Close()
		return nil, nil, nil, fmt.Errorf("ultra-low-memory mode streams the model tables from a packed trunk: give --trunk")
	}
	p := MakePlan(set, cfg, layers, opt.Budget)
	if opt.Memory != nil {
		if err := p.Check(*opt.Memory); err != nil {
			set.Close()
			return nil, nil, p, &PlanError{p, err}
		}
	}
	var m *Model
	if opt.TrunkDir != "" {
		m, err = bindStreaming(set, cfg, layers, dir, opt.TrunkDir, p, opt.Budget.Ultra, opt.Progress)
	} else {
		m, err = Bind(set, cfg, layers, opt.Progress)
	}
	if err != nil {
		set.Close()
		return nil, nil, p, err
	}
	m.Plan = p
	m.Store.SetBudget(opt.Budget.CacheBytes)
	m.Store.Policy = opt.Budget.CachePolicy
	m.Fingerprint = Fingerprint(m, set.Files())
	return m, set, p, nil
}
