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
	Plan(modelDir string, layers int, b engine.Budget) (*plan.Plan, error)
}

// TurnOptions are one chat turn's settings.
type TurnOptions struct {
	System      string
	Thinking    bool
	Effort      string // low, high, max
	Greedy      bool
	Temperature float64
	TopP        float64
	TopK        int
	Seed        int
	MaxTokens   int
}

// Chat event kinds.
const (
	EvPhase     = "phase"     // Phase says what the engine is doing
	EvReasoning = "reasoning" // Text is more of the thinking section
	EvAnswer    = "answer"    // Text is more of the reply
	EvStats     = "stats"     // Stats (and Seconds for a token) are fresh
	EvToken     = "token"     // a token was generated in Seconds
)

// ChatEvent is one streamed update of a turn.
type ChatEvent struct {
	Kind    string
	Phase   string // e.g. "loading layer 37/93", "reading prompt 120/400", "thinking", "answering"
	Text    string
	Seconds float64 // EvToken: the step's wall time
	Stats   engine.Stats
	At      time.Time
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
// message is the user's) and returns the assistant message; when ctx is
// cancelled it returns the partial message with Cut "stopped" and no error.
// Implementations keep the engine state between turns and reuse it when
// the conversation continues the previous one.
type ChatEngine interface {
	Open(ctx context.Context, on func(ChatEvent)) (ModelInfo, error)
	Turn(ctx context.Context, history []chat.Message, opt TurnOptions, on func(ChatEvent)) (chat.Message, error)
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
