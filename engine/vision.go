package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"k3/engine/plan"
	"k3/engine/vision"
	"k3/machine"
	st "k3/storage/safetensors"
	"k3/storage/units"
)

// visionSlot holds the model's vision tower once an image needs it.
type visionSlot struct {
	configPath string
	once       sync.Once
	tower      *vision.Tower
	err        error
	held       atomic.Bool  // the resident tower has been read
	seen       atomic.Int64 // pictures the tower has started on
}

// PicturesSeen is how many pictures the tower has started to look at.
func (m *Model) PicturesSeen() int64 { return m.vision.seen.Load() }

// ErrNoVision is wrapped by Vision for a model folder without a vision
// tower (no vision_config, or its tensors absent).
var ErrNoVision = errors.New("this model takes no images: its folder has no vision tower")

// VisionConfig is the model's vision_config, or an error wrapping
// ErrNoVision. It reads no weights.
func (m *Model) VisionConfig() (*vision.Config, error) {
	c, err := vision.ReadConfigFile(m.vision.configPath)
	if errors.Is(err, vision.ErrNoVision) {
		return nil, fmt.Errorf("%w (config.json has no vision_config)", ErrNoVision)
	}
	if err != nil {
		return nil, err
	}
	if c.TextHidden != m.Cfg.Hidden {
		return nil, fmt.Errorf("vision_config: text_hidden_size %d differs from the model's hidden size %d", c.TextHidden, m.Cfg.Hidden)
	}
	return c, nil
}

// Vision reads the vision tower and projector from the checkpoint's shards
// on first use (about 0.9 GB for K3) and keeps them. A plan that streams
// the tower (plan.Plan.TowerStreamed) gets a streamed tower each call
// instead (vision.BindStreamed: the tables, the projector and one layer's
// buffers), for one picture, released when the caller lets it go.
func (m *Model) Vision() (*vision.Tower, error) {
	if m.Plan != nil && m.Plan.TowerStreamed {
		c, err := m.visionChecked()
		if err != nil {
			return nil, err
		}
		return vision.BindStreamed(c, m.set)
	}
	m.vision.once.Do(func() {
		c, err := m.visionChecked()
		if err != nil {
			m.vision.err = err
			return
		}
		m.vision.tower, m.vision.err = vision.Bind(c, m.set)
		m.vision.held.Store(m.vision.err == nil)
	})
	return m.vision.tower, m.vision.err
}

// VisionChecked is the model's vision_config once the shards are known to
// hold the tower's tensors (their first one): what a picture needs to be
// prepared, without reading any weight.
func (m *Model) VisionChecked() (*vision.Config, error) { return m.visionChecked() }

func (m *Model) visionChecked() (*vision.Config, error) {
	c, err := m.VisionConfig()
	if err != nil {
		return nil, err
	}
	if _, ok := m.set.Get(vision.TensorNames(c.Layers)[0]); !ok {
		return nil, fmt.Errorf("%w (its shards hold no vision_tower tensors)", ErrNoVision)
	}
	return c, nil
}

// visionSizes are the plan's sizes of the vision tower in the checkpoint
// whose config is at cfgPath (zero without one, or without its tensors, or
// for another width).
func visionSizes(cfgPath string, set *st.Set, hidden int) plan.VisionSizes {
	c, err := vision.ReadConfigFile(cfgPath)
	if err != nil || c.TextHidden != hidden {
		return plan.VisionSizes{}
	}
	if _, ok := set.Get(vision.TensorNames(c.Layers)[0]); !ok {
		return plan.VisionSizes{}
	}
	return plan.VisionSizes{Weights: c.WeightBytes(), Streamed: c.StreamedBytes(), PerPos: c.WorkPerPos(), Row: 4 * int64(c.TextHidden)}
}

// ImageProgress is called while the tower looks at a picture: done of
// layers layers have run.
type ImageProgress func(done, layers int)

// EmbedImage runs the vision tower on a prepared image with the engine's
// threads: Tokens rows of the model's hidden size, the input embeddings of
// the image's pad positions. A cancelled ctx stops it before the next
// layer. A picture larger than the plan reserved (Plan.PicturePos) is
// checked against the memory available now and refused when it does not
// fit, before any work.
func (e *Engine) EmbedImage(ctx context.Context, p *vision.Prepared) ([]float32, error) {
	return e.EmbedImageProgress(ctx, p, nil)
}

// EmbedImageProgress is EmbedImage calling progress after each layer.
func (e *Engine) EmbedImageProgress(ctx context.Context, p *vision.Prepared, progress ImageProgress) ([]float32, error) {
	c, err := e.m.visionChecked()
	if err != nil {
		return nil, err
	}
	if err := e.m.pictureFits(c, p.Resize.Tokens); err != nil {
		return nil, err
	}
	t, err := e.m.Vision()
	if err != nil {
		return nil, err
	}
	e.m.vision.seen.Add(1)
	return t.EmbedProgress(ctx, e.pool, p.Patches(t.Cfg.Patch), p.Resize.Grid, progress)
}

// readMemory reads the machine's memory (tests replace it).
var readMemory = machine.ReadMemory

// ErrPictureMemory is wrapped by EmbedImage's refusal of a picture the
// memory cannot hold.
var ErrPictureMemory = errors.New("not enough memory for this picture")

// pictureFits checks a picture of tokens positions beyond what the plan
// reserved against the memory available now (what the model holds is no
// longer counted in it).
func (m *Model) pictureFits(c *vision.Config, tokens int) error {
	var more int64
	if m.Plan != nil && tokens > m.Plan.PicturePos {
		more = c.WorkPerPos() * int64(tokens-m.Plan.PicturePos)
		if m.Plan.Tower == 0 && !m.vision.held.Load() {
			more += c.WeightBytes() // a tower the plan did not count
		}
	}
	if more == 0 {
		return nil
	}
	mem, err := readMemory()
	if err != nil || mem.AvailableBytes <= 0 {
		return nil // unknown: nothing to check against
	}
	usable := mem.AvailableBytes
	if mem.Cgroup.Limit > 0 && mem.Cgroup.UsageKnown {
		usable = min(usable, mem.Cgroup.Limit-mem.Cgroup.Usage)
	}
	if float64(more) > 0.95*float64(usable) {
		return fmt.Errorf("%w: its %d prompt positions need %s more than the memory plan reserved, but only %s is available",
			ErrPictureMemory, tokens, units.Bytes(more), units.Bytes(usable))
	}
	return nil
}
