package plan

import (
	"fmt"

	"k3/storage/units"
)

// VisionSizes are a vision tower's sizes as the plan needs them (from
// engine/vision's Config: WeightBytes, StreamedBytes and the working
// memory per position of a picture).
type VisionSizes struct {
	Weights  int64 // the whole tower and projector, as held
	Streamed int64 // what a streamed tower holds: all but the layers, and one layer
	// PerPos is a picture's working memory per prompt position it takes:
	// its patches' activations in the tower (a position is MergeH x MergeW
	// patches) and its projected row, held until the prompt reads it.
	PerPos int64
	// Row is one projected row (the text model's width of floats): what a
	// picture's position keeps once fed at the memory floor (VisionCost.Kept).
	Row int64
}

// DefaultPicture is the picture a run that may be given pictures plans
// for when it does not know them: a 1024x1024 photo, 1,369 positions.
const DefaultPicture = 1369

// VisionCost is the vision tower's part of a plan (Inputs.Vision).
type VisionCost struct {
	Bytes     int64 // the tower as held: Weights, or Streamed when Streamed
	Streamed  bool
	Work      int64 // the largest planned picture's working memory
	Positions int   // that picture's prompt positions (0: no picture planned)
	// Kept is, at the memory floor, the rows of the pictures fed before
	// the one the tower looks at: a state there keeps the rows of every
	// picture it has fed, so that a prompt chunk stopped part-way can be
	// read again (engine: State.dropFedMedia). They are at most the rest of
	// the context's positions, one row each (0 above the floor, where fed
	// rows are let go).
	Kept int64
}

// VisionFor is the tower's part of a run planning a picture of up to
// positions (0: none; the tower is then not counted: a run given no
// pictures never reads it). Above the memory floor the tower is
// resident, read on the first picture and kept (0.92 GB at K3); at the
// floor it is streamed: each picture loads the tables and the projector,
// reads the 27 layers one at a time into one layer's buffers, and
// releases them, so the floor is not raised by the weights a text run
// never uses. context is the run's context in positions (0: not known):
// at the floor the rows of the pictures fed before this one are kept
// within it (Kept).
func VisionFor(v VisionSizes, positions, context int, floor bool) VisionCost {
	if v.Weights <= 0 || positions <= 0 {
		return VisionCost{}
	}
	c := VisionCost{Bytes: v.Weights, Streamed: floor, Work: v.PerPos * int64(positions), Positions: positions}
	if floor {
		c.Bytes = v.Streamed
		c.Kept = v.Row * int64(max(0, context-positions))
	}
	return c
}

// transient is the larger of what reading a prompt chunk holds and what a
// picture holds while the tower runs (with a streamed tower's layers, and
// at the floor the rows of the pictures fed before it). While a prompt is
// read the kept rows fit the picture's share: the chunk and every
// picture's rows are at most the prompt chunk and the context's rows,
// less than a picture's work and tower at K3 (0.21 against 0.52 GB).
func (p *Plan) transient() int64 {
	pic := p.Picture + p.PictureKept
	if p.TowerStreamed {
		pic += p.Tower
	}
	return max(p.Prefill, pic)
}

// resident is the tower's share held for the whole run.
func (p *Plan) residentTower() int64 {
	if p.TowerStreamed {
		return 0
	}
	return p.Tower
}

// visionLines renders the tower's part.
func (p *Plan) visionLines() string {
	if p.Tower <= 0 {
		return ""
	}
	how := "resident, read on the first picture"
	if p.TowerStreamed {
		how = "streamed: read layer by layer for each picture, released after"
	}
	lines := fmt.Sprintf("  vision tower   %10s  (%s)\n  a picture      %10s  (up to %d positions; the larger of it and prompt reading is counted)\n",
		units.Bytes(p.Tower), how, units.Bytes(p.Picture), p.PicturePos)
	if p.PictureKept > 0 {
		lines += fmt.Sprintf("  pictures fed   %10s  (their rows, kept at the floor to read a stopped chunk again; counted with the picture)\n", units.Bytes(p.PictureKept))
	}
	return lines
}

// FitTower streams the vision tower of in (sizes v) when the plan with it
// resident needs more than limit bytes (0: no limit): resident when it
// fits, else streamed.
func FitTower(in *Inputs, v VisionSizes, limit int64) {
	if limit <= 0 || in.Vision.Bytes <= 0 || in.Vision.Streamed || Make(*in).Total <= limit {
		return
	}
	in.Vision = VisionFor(v, in.Vision.Positions, in.Positions, true)
}
