package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k3/engine/vision"
)

// visionSlot holds the model's vision tower once an image needs it.
type visionSlot struct {
	configPath string
	once       sync.Once
	tower      *vision.Tower
	err        error
}

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
// on first use (about 0.9 GB for K3) and keeps them.
func (m *Model) Vision() (*vision.Tower, error) {
	m.vision.once.Do(func() {
		c, err := m.VisionConfig()
		if err != nil {
			m.vision.err = err
			return
		}
		if _, ok := m.set.Get(vision.TensorNames(c.Layers)[0]); !ok {
			m.vision.err = fmt.Errorf("%w (its shards hold no vision_tower tensors)", ErrNoVision)
			return
		}
		m.vision.tower, m.vision.err = vision.Bind(c, m.set)
	})
	return m.vision.tower, m.vision.err
}

// EmbedImage runs the vision tower on a prepared image with the engine's
// threads: Tokens rows of the model's hidden size, the input embeddings of
// the image's pad positions.
func (e *Engine) EmbedImage(ctx context.Context, p *vision.Prepared) ([]float32, error) {
	t, err := e.m.Vision()
	if err != nil {
		return nil, err
	}
	return t.Embed(ctx, e.pool, p.Patches(t.Cfg.Patch), p.Resize.Grid)
}
