// Package bridge is everything the desktop app does that is not drawing:
// the interfaces the views reach the engine, the storage packages and
// servers through (Backends, with the real implementations in adapters.go
// and tests' fakes), the chat engines (over chat.Session in enginechat.go,
// over a server in remotechat.go) and the app's own server (appserver.go),
// the open conversation (Conversation, kept in a chat.Store), the pump
// that turns engine events into a few UI updates a second, background
// jobs and the settings (settings.go). It imports no Fyne: views hand it a
// do func(func()) (fyne.Do) to run their callbacks on the UI goroutine.
package bridge

import (
	"context"
	"path/filepath"
	"time"

	"k3/doctor"
	"k3/engine"
	"k3/engine/chat"
	"k3/engine/plan"
	"k3/engine/vision"
	"k3/storage/hub"
	"k3/storage/verify"
	"k3/ui/keys"
)

// The app talks to the engine and the storage packages only through these
// small interfaces. adapters.go implements them with the real packages;
// tests use fakes. Every method may be slow: the views call them in jobs
// (StartJob) and see the results through do.

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
	Checking    bool  // re-checking the parts an interrupted pack finished
	Done, Total int64 // bytes (of those to re-check while Checking)
	Parts       int   // parts (layers, embeddings, head) finished
	PartsTotal  int
	Rate        float64       // bytes per second so far
	ETA         time.Duration // < 0: unknown
}

// PackOptions are how a trunk is packed.
type PackOptions struct {
	// Force replaces whatever the trunk folder holds (another model's
	// trunk, a broken one, or one packed the other way).
	Force bool
	// Compress stores the weights losslessly compressed (k3 pack
	// --compress): the same answers from a smaller file that takes longer
	// to pack. A folder holding a trunk or an interrupted pack of the other
	// kind is refused unless Force, as by k3 pack.
	Compress bool
}

// Packer writes the packed trunk (storage/trunk). Pack resumes a partial
// pack in trunkDir; cancelling ctx stops it with the finished part kept.
// Check says what trunkDir holds for modelDir.
type Packer interface {
	Pack(ctx context.Context, modelDir, trunkDir string, layers int, opt PackOptions, progress func(PackProgress)) error
	Check(modelDir, trunkDir string) TrunkCheck
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
	Name     string
	Demo     bool
	DemoNote string // what the demo model is, in a sentence (with Demo)
	Layers   int    // bound layers
	// BudgetBytes is the memory plan's total and the Go heap's swing above
	// it (plan.RuntimeOverhead: the Go runtime's, which the plan does not count)
	BudgetBytes int64
	Plan        string
	Context     int  // positions the plan reserves for a conversation
	Remote      bool // the model runs on a server: this machine's memory and disk gauges do not apply
	// Draft says what the draft model beside the model folder does on
	// this model and memory plan ("" when there is none): DraftNotFaster,
	// DraftWhenFaster or DraftNoRoom
	Draft string
	// Vision is the model's vision tower (nil: it takes no pictures, or
	// runs elsewhere): what a picture costs (PicturesCost)
	Vision *vision.Config
}

// What the draft model does (ModelInfo.Draft), as the draft box says it.
const (
	// DraftNotFaster: everything is in memory, so a pass costs its
	// compute, which grows with the positions it reads: the engine's
	// controller never drafts (engine/spec.go, chooseDraft)
	DraftNotFaster = "not used: this model is small enough that drafting would not be faster"
	// DraftWhenFaster: the model reads from disk every pass, so a pass of
	// several positions costs about one: the engine drafts where it pays
	DraftWhenFaster = "used where it makes replies faster (same answer): the Engine panel shows its tokens per pass"
	// DraftNoRoom: the draft model did not fit in the memory plan
	DraftNoRoom = "not used: it does not fit in this memory plan"
	// DraftOff: the box is unticked
	DraftOff = "off: every token takes one pass (same answer)"
)

// PromptMeter is a chat engine that knows what reading a message costs
// before it is sent: the measured time of a pass over the prompt and the
// positions a pass reads (0, 0: not measured yet), and a text's exact
// length in positions (ok false while the tokenizer is not loaded, or the
// engine is busy).
type PromptMeter interface {
	PromptRate() (passSeconds float64, chunk int)
	CountTokens(text string) (n int, ok bool)
}

// DraftSwitch is a chat engine that turns its draft model on and off
// between turns without loading the model again (N1: unticking the box
// unloaded the model).
type DraftSwitch interface {
	SetDraft(on bool)
}

// Reply is a finished (or cut) turn: the assistant message, its numbers
// as the chat engine measured them (Stats: nil when no token came) and
// how much of the context the conversation now takes.
type Reply struct {
	chat.Message
	Positions int // positions the conversation takes after the turn (0: unknown)
}

// ChatEngine runs chat turns. Turn gets the whole conversation (the last
// message is the user's; a leading system message overrides opt.System) and
// returns the assistant message; when ctx is cancelled — while the prompt is
// read too — it returns the partial message with Cut "stopped" and no error.
// Events are the engine's: phases (Text), prefill progress, the reply's text
// by channel, tokens and statistics, delivered one at a time (on need not
// be safe for concurrent calls). Implementations keep the engine state
// between turns and reuse it when the conversation continues the previous one.
type ChatEngine interface {
	Open(ctx context.Context, on func(engine.Event)) (ModelInfo, error)
	Turn(ctx context.Context, history []chat.Message, opt chat.Options, on func(engine.Event)) (Reply, error)
	Close()
}

// ChatEngineFactory opens a chat engine for the current settings.
type ChatEngineFactory func(s Settings) (ChatEngine, error)

// DemoMaker writes the demo checkpoint (model and tokenizer) into dir.
type DemoMaker func(dir string) error

// DemoCheck says whether dir holds the generated demo model, and whether
// it is the trained one (DemoIn).
type DemoCheck func(dir string) (demo, trained bool)

// ServerLister asks an OpenAI-compatible server (its base URL, as
// ServerBaseURL makes it) which models it serves.
type ServerLister interface {
	Models(ctx context.Context, baseURL, key string) ([]string, error)
}

// Backends are everything the views need from the outside.
type Backends struct {
	Machine    Machine
	Downloader Downloader
	Verifier   Verifier
	Packer     Packer
	Planner    MemoryPlanner
	NewChat    ChatEngineFactory
	MakeDemo   DemoMaker
	// Demo tells the demo model's folder (nil: DemoIn).
	Demo DemoCheck
	// Servers lists a server's models (nil: RemoteServers).
	Servers ServerLister
	// DataDir holds conversations and the demo model.
	DataDir string
	// Keyring is the system keychain for the server's API key (nil: the
	// key is kept in a file only the user can read, under DataDir).
	Keyring keys.Keyring
}

// IsDemo says whether dir holds the demo model, and whether the trained one.
func (b Backends) IsDemo(dir string) (demo, trained bool) {
	if b.Demo == nil {
		return DemoIn(dir)
	}
	return b.Demo(dir)
}

// ServerModels asks the server at baseURL which models it serves.
func (b Backends) ServerModels(ctx context.Context, baseURL, key string) ([]string, error) {
	if b.Servers == nil {
		return RemoteServers{}.Models(ctx, baseURL, key)
	}
	return b.Servers.Models(ctx, baseURL, key)
}

// KeyStore is where the app keeps secrets.
func (b Backends) KeyStore() keys.Store {
	return keys.Store{Keyring: b.Keyring, Dir: filepath.Join(b.DataDir, "secrets")}
}
