package gui

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"

	"k3/doctor"
	"k3/engine"
	"k3/engine/chat"
	"k3/engine/plan"
	"k3/engine/synth"
	"k3/machine"
	"k3/storage/hub"
	"k3/storage/trunk"
	"k3/storage/verify"
	"k3/tokenizer"
	"k3/ui/bridge"
)

// uiMu serialises UI work between test goroutines and the views'
// background goroutines (the test driver runs fyne.Do inline).
var uiMu sync.Mutex

func ui(f func()) {
	uiMu.Lock()
	defer uiMu.Unlock()
	f()
}

// waitFor polls cond (under the UI lock) until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ok := false
		ui(func() { ok = cond() })
		if ok {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func f64p(x float64) *float64 { return &x }

type fakeMachine struct{ block chan struct{} }

func (f *fakeMachine) Measure(ctx context.Context, dirs []string, quick bool, progress func(float64, string)) (*doctor.Report, error) {
	progress(0.5, "measuring the disk of "+dirs[0])
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &doctor.Report{
		CPU:    doctor.CPUInfo{Model: "Test CPU", PhysicalCores: 16, LogicalCores: 32, Features: []string{"avx2", "fma"}},
		Memory: doctor.MemoryInfo{TotalBytes: 64e9, AvailableBytes: 58e9},
		Disks: []doctor.DiskResult{
			{Path: "/slow", FreeBytes: 2000e9, TotalBytes: 4000e9, ReadGBpsQD1: f64p(0.5), ReadGBpsQD8: f64p(0.55), SeqGBps: f64p(0.56)},
			{Path: "/fast", FreeBytes: 500e9, TotalBytes: 1000e9, ReadGBpsQD1: f64p(2.1), ReadGBpsQD8: f64p(5.2), SeqGBps: f64p(6.1)},
			{Path: "/full", FreeBytes: 10e9, TotalBytes: 1000e9, SeqGBps: f64p(9.9)},
		},
		Preset:  doctor.Prediction{Name: "desktop", TrunkGB: 16, CacheGB: 10, PredictedSecondsPerToken: 25.3, PredictedPeakRSSBytes: 31.9e9},
		CanRun:  true,
		Seconds: 12,
	}, nil
}

// fakeDownloader "downloads" a config.json into Dest; with gate set it
// waits for the gate (or a pause) before finishing.
type fakeDownloader struct {
	gate  chan struct{}
	calls int
	mu    sync.Mutex
}

func (f *fakeDownloader) Download(ctx context.Context, req bridge.DownloadRequest, progress func(hub.Event)) error {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	snap := hub.Snapshot{Done: 50e6, Total: 100e6, Rate: 25e6, ETA: 2 * time.Second, FilesDone: 1, FilesTotal: 2,
		Files: []hub.FileProgress{{Name: "model-00001-of-00002.safetensors", State: hub.StateDone, Done: 50e6, Total: 50e6},
			{Name: "model-00002-of-00002.safetensors", State: hub.StateDownloading, Done: 0, Total: 50e6, Rate: 25e6}}}
	progress(hub.Event{Kind: hub.EventProgress, Snap: snap})
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	snap.Done, snap.FilesDone, snap.ETA = 100e6, 2, 0
	progress(hub.Event{Kind: hub.EventDone, Snap: snap})
	if err := writeSmallModel(req.Dest); err != nil {
		return err
	}
	return unmarkDemo(req.Dest)
}

// unmarkDemo drops the note that labels a generated checkpoint as a demo,
// so it stands for a downloaded one.
func unmarkDemo(dir string) error {
	p := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return err
	}
	delete(cfg, "note")
	if raw, err = json.Marshal(cfg); err != nil {
		return err
	}
	return os.WriteFile(p, raw, 0o644)
}

// writeSmallModel writes a generated checkpoint (the K3 graph at a tiny
// size, random weights) and a byte-level tokenizer into dir.
func writeSmallModel(dir string) error {
	if err := synth.Write(dir, synth.Small()); err != nil {
		return err
	}
	return tokenizer.WriteByteLevel(dir, tokenizer.ByteLevelOptions{})
}

type fakeVerifier struct{}

func (fakeVerifier) Verify(ctx context.Context, dir string, layers int, progress func(done, total int64)) (*verify.Report, error) {
	progress(1, 2)
	return &verify.Report{Dir: dir, Required: 2, OK: 1, Missing: 1, Files: []verify.FileResult{
		{Name: "model-00001-of-00002.safetensors", Status: verify.StatusOK, Size: 50e6, Want: 50e6},
		{Name: "model-00002-of-00002.safetensors", Status: verify.StatusMissing, Size: -1, Want: 50e6},
	}}, nil
}

// fakePacker remembers which model it packed into which folder, and how;
// like storage/trunk it refuses to pack over another model's trunk or over
// a trunk or an interrupted pack of the other kind unless forced.
type fakePacker struct {
	mu         sync.Mutex
	packed     string            // the last folder packed
	into       map[string]string // trunk folder -> model packed there
	compressed map[string]bool   // trunk folder -> packed compressed
	partial    map[string]bool   // trunk folder -> an interrupted pack of its model there (compressed or not)
	forced     bool
	opt        bridge.PackOptions // of the last Pack
}

func (f *fakePacker) Pack(ctx context.Context, modelDir, trunkDir string, layers int, opt bridge.PackOptions, progress func(bridge.PackProgress)) error {
	progress(bridge.PackProgress{Done: 50, Total: 100, Parts: 1, PartsTotal: 2, Rate: 25e6, ETA: 2 * time.Second})
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opt = opt
	m, ok := f.into[trunkDir]
	if ok && m != modelDir && !opt.Force {
		return fmt.Errorf("%w: %s", trunk.ErrSourceMismatch, trunkDir)
	}
	c, part := f.partial[trunkDir]
	if !part {
		c = f.compressed[trunkDir]
	}
	if (ok || part) && c != opt.Compress && !opt.Force {
		return fmt.Errorf("%w: %s holds a trunk of the other kind", trunk.ErrRefused, trunkDir)
	}
	if f.into == nil {
		f.into = map[string]string{}
	}
	if f.compressed == nil {
		f.compressed = map[string]bool{}
	}
	delete(f.partial, trunkDir)
	f.into[trunkDir], f.compressed[trunkDir], f.packed, f.forced = modelDir, opt.Compress, trunkDir, opt.Force
	return nil
}

func (f *fakePacker) Check(modelDir, trunkDir string) bridge.TrunkCheck {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.partial[trunkDir]; ok {
		return bridge.TrunkCheck{Status: bridge.TrunkPartial, Done: 1, Total: 3, Compressed: c}
	}
	switch m, ok := f.into[trunkDir]; {
	case !ok:
		return bridge.TrunkCheck{Status: bridge.TrunkNone}
	case m == modelDir:
		return bridge.TrunkCheck{Status: bridge.TrunkPacked, Compressed: f.compressed[trunkDir]}
	}
	return bridge.TrunkCheck{Status: bridge.TrunkOther, Why: "model-00001-of-00002.safetensors was 100 bytes, this checkpoint's is 200"}
}

func (f *fakePacker) TrunkBytes(modelDir string, layers int) (int64, error) { return 109e9, nil }

// fakePlanner: 16 GB usable; the plan is the two budgets plus 2 GB.
type fakePlanner struct{}

func (fakePlanner) Memory() (plan.Memory, error) {
	return plan.Memory{TotalBytes: 32e9, AvailableBytes: 16e9}, nil
}

func (fakePlanner) Plan(dir string, o engine.Options) (*plan.Plan, error) {
	b := o.Budget
	return &plan.Plan{PinnedBytes: b.TrunkBytes, CacheBytes: b.CacheBytes, Globals: 2e9, Total: b.TrunkBytes + b.CacheBytes + 2e9}, nil
}

// fakeChat streams a scripted reply one piece per gate receive (or freely
// when gate is nil).
type fakeChat struct {
	gate chan struct{}
	// ownRSS: the counters carry this process's resident size, as the
	// real engine's do (else a made-up 1 GB: the real window's check
	// showed "492 MB above the plan" from it)
	ownRSS  bool
	openErr error
	reply   []string
	turns   int
	mu      sync.Mutex
	last    []chat.Message
	lastOpt chat.Options
}

func (f *fakeChat) Open(ctx context.Context, on func(engine.Event)) (bridge.ModelInfo, error) {
	if f.openErr != nil {
		return bridge.ModelInfo{}, f.openErr
	}
	for i := 1; i <= 3; i++ {
		on(engine.Event{Kind: engine.EventPhase, Text: "loading layer " + string(rune('0'+i)) + "/3"})
	}
	return bridge.ModelInfo{Name: "fake", Layers: 3, BudgetBytes: 4e9, Context: 12288}, nil
}

func (f *fakeChat) Turn(ctx context.Context, h []chat.Message, opt chat.Options, on func(engine.Event)) (bridge.Reply, error) {
	f.mu.Lock()
	f.turns++
	n := f.turns
	f.last, f.lastOpt = h, opt
	f.mu.Unlock()
	on(engine.Event{Kind: engine.EventPhase, Text: "thinking"})
	on(engine.Event{Kind: engine.EventReasoning, Text: "Let me think."})
	var ans strings.Builder
	reply := f.reply
	if len(reply) == 0 {
		reply = []string{"Hello", " world", ", this", " is", " reply"}
	}
	on(engine.Event{Kind: engine.EventPhase, Text: "answering"})
	for i, piece := range reply {
		if f.gate != nil {
			select {
			case <-f.gate:
			case <-ctx.Done():
				return bridge.Reply{Message: chat.Message{Role: "assistant", Content: ans.String(), ReasoningContent: "Let me think.", Cut: chat.CutStopped,
					Stats: fakeStats(i, 0.5, 0.5)}}, nil
			}
		}
		if i == len(reply)-1 {
			piece += " " + string(rune('0'+n))
		}
		ans.WriteString(piece)
		on(engine.Event{Kind: engine.EventAnswer, Text: piece})
		on(engine.Event{Kind: engine.EventToken, Seconds: 0.5})
		rss := int64(1e9 + i*1e6)
		if f.ownRSS {
			rss = machine.RSS()
		}
		on(engine.Event{Kind: engine.EventStats, Stats: engine.Stats{RSSBytes: rss}})
	}
	return bridge.Reply{Message: chat.Message{Role: "assistant", Content: ans.String(), ReasoningContent: "Let me think.",
		Stats: fakeStats(len(reply), 0.5, 0.5)}, Positions: 40 + len(h)}, nil
}

// fakeStats are the numbers a chat engine measured for n tokens of step
// seconds each, after thinking for thought seconds (nil for no token).
func fakeStats(n int, step, thought float64) *chat.ReplyStats {
	if n == 0 {
		return nil
	}
	return &chat.ReplyStats{Tokens: n, FirstTokenSeconds: step, SecondsPerToken: step, ThoughtSeconds: thought}
}

func (f *fakeChat) Close() {}

// newTestUI builds the app on fakes with a 1280x800 test window.
func newTestUI(t *testing.T, fc *fakeChat) (*appUI, fyne.App) {
	t.Helper()
	a := test.NewTempApp(t)
	return newTestUIOn(t, a, fc), a
}

func newTestUIOn(t *testing.T, a fyne.App, fc *fakeChat) *appUI {
	t.Helper()
	w := test.NewTempWindow(t, nil)
	w.Resize(fyne.NewSize(1280, 800))
	b := bridge.Backends{Machine: &fakeMachine{}, Downloader: &fakeDownloader{}, Verifier: fakeVerifier{}, Packer: &fakePacker{},
		Planner: fakePlanner{}, DataDir: t.TempDir(),
		NewChat:  func(bridge.Settings) (bridge.ChatEngine, error) { return fc, nil },
		MakeDemo: bridge.MakeDemoModel}
	u := newAppUI(a, w, b)
	// what a background job hands the UI runs under the UI lock, and not
	// at all once the test ended (a measurement still running would
	// otherwise lay out widgets beside the next test: make race found it)
	ended := false
	u.do = func(f func()) {
		ui(func() {
			if !ended {
				f()
			}
		})
	}
	t.Cleanup(func() { ui(func() { ended = true }) })
	u.later = (&manualClock{}).After // no timer outlives the test
	return u
}
