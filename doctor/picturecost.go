package doctor

import (
	"encoding/json"

	"k3/engine/plan"
	"k3/engine/vision"
)

// The cost of a picture at a preset: the vision tower (MoonViT3d and its
// projector, engine/vision) turns it into prompt positions, which are then
// read like any prompt (PredictPrefill).
//
//	positions = vision's resize rule (1,369 for a 1024x1024 photo)
//	tower s   = its FLOPs (vision.Config.CostOf: 9.45 TFLOP at 1024x1024)
//	            / (TowerPeakFraction x this machine's float64 FMA peak)
//	          + (streamed tower ? its weights / the trunk disk's speed : 0)
//	prompt s  = PredictPrefill of those positions at the preset
//
// The plan with a picture (Model.PicturePlan) holds the tower resident
// above the memory floor and streams it at the floor (plan.VisionFor);
// the picture's working memory shares the prompt reading's part.

// TowerPeakFraction is the share of the float64 FMA peak the tower's
// matrix products and attention reach, as `k3 bench vision` measured it on
// the development machine (2 threads, AVX-512: 0.34-0.54 on 112x112 and
// 224x224 pictures, 0.18 on 448x448 while the machine was shared by other
// work; docs/BENCHMARKS.md). 0.3 is the middle of those.
const TowerPeakFraction = 0.3

// DefaultFMAGFlops is the float64 FMA peak per core assumed when it was
// not measured (the development machine measured 20.5 per thread).
const DefaultFMAGFlops = 8.0

// PictureSide is the picture the doctor prices: a 1024x1024 photo.
const PictureSide = 1024

// K3Vision is the released vision tower's config (vision_config of the
// embedded released config).
var K3Vision = mustVision(releasedConfig)

func mustVision(b []byte) *vision.Config {
	var top struct {
		Vision map[string]json.RawMessage `json:"vision_config"`
	}
	if err := json.Unmarshal(b, &top); err != nil {
		panic("doctor: the embedded released config: " + err.Error())
	}
	c, err := vision.ParseConfig(top.Vision)
	if err != nil {
		panic("doctor: the embedded released vision_config: " + err.Error())
	}
	return c
}

// VisionSizesOf are the plan's sizes of a vision tower.
func VisionSizesOf(c *vision.Config) plan.VisionSizes {
	return plan.VisionSizes{Weights: c.WeightBytes(), Streamed: c.StreamedBytes(), PerPos: c.WorkPerPos(), Row: 4 * int64(c.TextHidden)}
}

// PictureCost is what a picture costs at a preset.
type PictureCost struct {
	Name          string  `json:"name"`
	Width         int     `json:"width"`
	Height        int     `json:"height"`
	Positions     int     `json:"positions"`      // prompt positions the picture takes
	TowerBytes    int64   `json:"tower_bytes"`    // the tower as the plan holds it
	TowerStreamed bool    `json:"tower_streamed"` // read layer by layer for each picture
	PeakRSSBytes  int64   `json:"peak_rss_bytes"` // the preset's plan with the picture
	Fits          bool    `json:"fits"`           // that plan fits 95% of the usable memory
	TowerSeconds  float64 `json:"tower_seconds"`  // looking at it
	PromptSeconds float64 `json:"prompt_seconds"` // reading its positions (0: not predicted)
	Seconds       float64 `json:"seconds"`
}

// PicturePlan is the plan at budget b (as Plan) with room for a picture of
// picture positions.
func (m Model) PicturePlan(b plan.Budget, picture int) *plan.Plan {
	r := m.run(b, PlanPositions)
	r.Picture = picture
	return plan.Make(m.inputs(r))
}

// PictureSeconds is the tower's time on a picture of grid g at a machine
// with an FMA peak of fma GFLOP/s, reading a streamed tower's weights at
// diskGBps.
func PictureSeconds(c *vision.Config, g vision.Grid, fma float64, streamed bool, diskGBps float64) float64 {
	s := c.CostOf(g).Flops / (TowerPeakFraction * fma * 1e9)
	if streamed && diskGBps > 0 {
		s += float64(c.WeightBytes()) / (diskGBps * 1e9)
	}
	return s
}

// PictureGrid is the patch grid of the PictureSide x PictureSide photo.
func PictureGrid() vision.Grid {
	return vision.NavitResize(PictureSide, PictureSide, K3Vision.Patch, K3Vision.MergeH, vision.InPatchLimit, vision.SideLimit).Grid
}

// PredictPicture prices a PictureSide x PictureSide photo at preset p on a
// machine with speeds s and memory mem.
func PredictPicture(p plan.Preset, s Speeds, mem plan.Memory) PictureCost {
	c := K3Vision
	rz := vision.NavitResize(PictureSide, PictureSide, c.Patch, c.MergeH, vision.InPatchLimit, vision.SideLimit)
	pl := K3.PicturePlan(p.Budget(), rz.Tokens)
	fma := s.FMAGFlops
	if fma <= 0 {
		fma = DefaultFMAGFlops
	}
	out := PictureCost{Name: p.Name, Width: PictureSide, Height: PictureSide, Positions: rz.Tokens,
		TowerBytes: pl.Tower, TowerStreamed: pl.TowerStreamed, PeakRSSBytes: pl.Total,
		TowerSeconds: round2(PictureSeconds(c, rz.Grid, fma, pl.TowerStreamed, s.TrunkDiskGBps))}
	if u := mem.Usable(); u > 0 {
		out.Fits = pl.Check(mem) == nil
		if f := PredictPrefill(p, s, rz.Tokens, u, 0, 0); f.Chunk > 0 {
			out.PromptSeconds = round2(f.Seconds)
		}
	}
	out.Seconds = round2(out.TowerSeconds + out.PromptSeconds)
	return out
}
