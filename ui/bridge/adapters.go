package bridge

import (
	"k3/ui/keys"

	"context"

	"k3/doctor"
	"k3/engine"
	"k3/engine/plan"
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
		Demo:       DemoIn,
		Servers:    RemoteServers{},
		DataDir:    dataDir,
		Keyring:    keys.SystemKeyring(),
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

// storageVerifier checks the folder's own files (VerifyFolder).
type storageVerifier struct{}

func (storageVerifier) Verify(ctx context.Context, dir string, layers int, progress func(done, total int64)) (*verify.Report, error) {
	return VerifyFolder(ctx, dir, layers, progress)
}

// trunkPacker packs with storage/trunk (resumable: a cancelled pack keeps
// the runs it finished and the next Pack continues).
type trunkPacker struct{}

func (trunkPacker) Pack(ctx context.Context, modelDir, trunkDir string, layers int, opt PackOptions, progress func(PackProgress)) error {
	_, err := trunk.Pack(ctx, modelDir, trunkDir, trunk.Options{Force: opt.Force, Compress: opt.Compress, Progress: func(p trunk.Progress) {
		if progress != nil {
			progress(PackProgress{Checking: p.Phase == trunk.PhaseCheck, Done: p.BytesDone, Total: p.BytesTotal,
				Parts: p.RunsDone, PartsTotal: p.RunsTotal, Rate: p.BytesPerSec, ETA: p.ETA})
		}
	}})
	return err
}

func (trunkPacker) Check(modelDir, trunkDir string) TrunkCheck { return CheckTrunk(modelDir, trunkDir) }

func (trunkPacker) TrunkBytes(modelDir string, layers int) (int64, error) {
	return engine.TrunkBytes(modelDir, layers)
}

// enginePlanner makes plans from the checkpoint's metadata alone.
type enginePlanner struct{}

func (enginePlanner) Memory() (plan.Memory, error) { return doctor.ReadMemory() }

func (enginePlanner) Plan(modelDir string, o engine.Options) (*plan.Plan, error) {
	return engine.PlanFor(modelDir, o)
}
