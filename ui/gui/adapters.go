package gui

import (
	"context"

	"k3/doctor"
	"k3/engine"
	"k3/engine/plan"
	"k3/storage/hub"
	"k3/storage/trunk"
	"k3/storage/verify"
)

// This file connects the views' interfaces (backends.go) to the real
// packages. Pieces that wait for a package still being written say so.

// RealBackends returns the backends of the shipping app, keeping app data
// (conversations, the demo model) under dataDir.
func RealBackends(dataDir string) Backends {
	return Backends{
		Machine:    doctorMachine{},
		Downloader: hubDownloader{},
		Verifier:   storageVerifier{},
		Packer:     trunkPacker{},
		Planner:    enginePlanner{},
		NewChat:    NewChatFor,
		MakeDemo:   MakeDemoModel,
		DataDir:    dataDir,
	}
}

// doctorMachine runs the doctor.
type doctorMachine struct{}

func (doctorMachine) Measure(ctx context.Context, dirs []string, quick bool, progress func(float64, string)) (*doctor.Report, error) {
	return doctor.Run(ctx, doctor.Options{Dirs: dirs, Quick: quick, NoDevice: true,
		Progress: func(p doctor.Progress) {
			if progress != nil {
				progress(p.Fraction, p.Message)
			}
		}})
}

// hubDownloader downloads from the Hugging Face hub (HF_ENDPOINT honoured).
type hubDownloader struct{}

func (hubDownloader) Download(ctx context.Context, req DownloadRequest, progress func(hub.Event)) error {
	c := hub.NewClient("", "")
	if req.Token != "" {
		c.Token = hub.NewToken(req.Token, "the app")
	}
	_, err := c.Download(ctx, hub.Options{Dest: req.Dest, Revision: req.Revision, Layers: req.Layers, Progress: progress})
	return err
}

// storageVerifier checks sizes (and hashes when a manifest is present).
type storageVerifier struct{}

func (storageVerifier) Verify(ctx context.Context, dir string, layers int, progress func(done, total int64)) (*verify.Report, error) {
	return verify.Check(ctx, dir, verify.Options{Layers: layers, Progress: progress})
}

// trunkPacker packs with storage/trunk (resumable: a cancelled pack keeps
// the runs it finished and the next Pack continues).
type trunkPacker struct{}

func (trunkPacker) Pack(ctx context.Context, modelDir, trunkDir string, layers int, progress func(PackProgress)) error {
	_, err := trunk.Pack(ctx, modelDir, trunkDir, trunk.Options{Progress: func(p trunk.Progress) {
		if progress != nil {
			progress(PackProgress{Done: p.BytesDone, Total: p.BytesTotal, BytesPerSec: p.BytesPerSec, ETA: p.ETA, Layer: p.RunsDone, Layers: p.RunsTotal})
		}
	}})
	return err
}

func (trunkPacker) TrunkBytes(modelDir string, layers int) (int64, error) {
	return engine.TrunkBytes(modelDir, layers)
}

// enginePlanner makes plans from the checkpoint's metadata alone.
type enginePlanner struct{}

func (enginePlanner) Memory() (plan.Memory, error) { return doctor.ReadMemory() }

func (enginePlanner) Plan(modelDir string, o engine.Options) (*plan.Plan, error) {
	return engine.PlanFor(modelDir, o)
}
