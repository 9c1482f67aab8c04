package gui

import (
	"context"
	"time"

	"k3/doctor"
	"k3/engine"
	"k3/engine/chat"
	"k3/engine/plan"
	"k3/storage/hub"
	"k3/storage/verify"
)

// The app talks to the engine and the storage packages only through these
// small interfaces. adapters.go implements them with the real packages;
// tests use fakes. Every method may be slow: the views call them on
// goroutines and report back through fyne.Do.

// Machine measures this machine (the doctor).
type Machine interface {
	// Measure checks memory, CPU and each directory's disk. progress gets
	// the fraction done (0..1) and a sentence for the user.
	Measure(ctx context.Context, dirs []string, quick bool, progress func(frac float64, msg string)) (*doctor.Report, error)
}

// DownloadRequest says what to download where.
type DownloadRequest struct {
	Dest     string
	Revision string // "" = main
	Layers   int    // > 0: only the shards the first N layers need
	Token    string // hub access token ("" = none); never stored
}

// Downloader fetches the checkpoint. Download resumes whatever is already in
// Dest; cancelling ctx pauses it (the partial files stay).
type Downloader interface {
	Download(ctx context.Context, req DownloadRequest, progress func(hub.Event)) error
}

// Verifier checks a checkpoint folder file by file.
type Verifier interface {
	Verify(ctx context.Context, dir string, layers int, progress func(done, total int64)) (*verify.Report, error)
}

// PackProgress is the packer's progress.
type PackProgress struct {
	Done, Total int64         // bytes
	BytesPerSec float64       // over the last few seconds
	ETA         time.Duration // -1 when unknown
	Layer       int           // layer being written (1-based; 0 before the first)
	Layers      int
}

// Packer writes the packed trunk (storage/trunk). Pack resumes a partial
// pack in trunkDir; cancelling ctx stops it with the finished part kept.
type Packer interface {
	Pack(ctx context.Context, modelDir, trunkDir string, layers int, progress func(PackProgress)) error
	// TrunkBytes is the size the packed trunk will take (for choosing a disk).
	TrunkBytes(modelDir string, layers int) (int64, error)
}

// MemoryPlanner makes the memory plan of a model at a budget, before
// anything is loaded.
type MemoryPlanner interface {
	Memory() (plan.Memory, error)
	Plan(modelDir string, o engine.Options) (*plan.Plan, error)
}

// ModelInfo describes the loaded model for the gauges.
type ModelInfo struct {
	Name        string
	Demo        bool
	Layers      int   // bound layers
	BudgetBytes int64 // the memory plan's total
	Plan        string
}

// ChatEngine runs chat turns. Turn gets the whole conversation (the last
// message is the user's; a leading system message overrides opt.System) and
// returns the assistant message; when ctx is cancelled — while the prompt is
// read too — it returns the partial message with Cut "stopped" and no error.
// Events are the engine's: phases (Text), prefill progress, the reply's text
// by channel, tokens and statistics. Implementations keep the engine state
// between turns and reuse it when the conversation continues the previous one.
type ChatEngine interface {
	Open(ctx context.Context, on func(engine.Event)) (ModelInfo, error)
	Turn(ctx context.Context, history []chat.Message, opt chat.Options, on func(engine.Event)) (chat.Message, error)
	Close()
}

// ChatEngineFactory opens a chat engine for the current settings.
type ChatEngineFactory func(s Settings) (ChatEngine, error)

// DemoMaker writes the demo checkpoint (model and tokenizer) into dir.
type DemoMaker func(dir string) error

// Backends are everything the views need from the outside.
type Backends struct {
	Machine    Machine
	Downloader Downloader
	Verifier   Verifier
	Packer     Packer
	Planner    MemoryPlanner
	NewChat    ChatEngineFactory
	MakeDemo   DemoMaker
	// DataDir holds conversations and the demo model.
	DataDir string
}
