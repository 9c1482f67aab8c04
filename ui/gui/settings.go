package gui

import (
	"strings"

	"fyne.io/fyne/v2"

	"k3/engine"
	"k3/engine/chat"
)

// ChatOptions are a turn's options from the settings.
func (s Settings) ChatOptions() chat.Options {
	return chat.Options{System: strings.TrimSpace(s.SystemPrompt), NoThink: !s.Thinking, Effort: s.Effort,
		MaxTokens: s.MaxTokens, Sampling: s.Sampling}
}

// Settings are everything the app remembers between runs. They live in the
// Fyne preferences of the app (one key per field, see Load and Save).
type Settings struct {
	WizardDone bool // the wizard finished once: start in the chat

	ModelDir string // checkpoint folder
	Layers   int    // > 0: a partial checkpoint (only the first N layers)
	Demo     bool   // ModelDir is the generated demo checkpoint
	TrunkDir string // packed trunk folder ("" = not packed: run resident)

	Preset  string  // memory preset name ("auto", "laptop", ...)
	TrunkGB float64 // pinned trunk + ring budget
	CacheGB float64 // routed-expert cache budget

	// A download that was running when the app closed; the model step
	// offers to resume it.
	DownloadDest     string
	DownloadRevision string
	DownloadLayers   int

	// Chat defaults.
	SystemPrompt string
	Thinking     bool
	Effort       string // low, high, max
	MaxTokens    int
	engine.Sampling
	Threads int // 0: one per physical core

	LastConversation string

	// Where the model runs: BackendLocal or BackendServer (remotechat.go).
	Backend     string
	ServerURL   string // OpenAI base URL, e.g. http://gpu-box:8000/v1
	ServerKey   string // its API key, kept in the app's preferences
	ServerModel string // model id from the server's /v1/models ("": the first)
	// The app's own server over the loaded model (view_serve.go).
	ServeAddr string
}

// DefaultSettings are the settings of a first start.
func DefaultSettings() Settings {
	return Settings{Preset: "auto", Thinking: true, Effort: "high", MaxTokens: 256,
		Sampling: engine.Sampling{Greedy: true, Temperature: 0.6, TopP: 0.95}, ServeAddr: DefaultServeAddr}
}

// Preference keys.
const (
	kWizardDone  = "wizard.done"
	kModelDir    = "model.dir"
	kLayers      = "model.layers"
	kDemo        = "model.demo"
	kTrunkDir    = "trunk.dir"
	kPreset      = "memory.preset"
	kTrunkGB     = "memory.trunk_gb"
	kCacheGB     = "memory.cache_gb"
	kDlDest      = "download.dest"
	kDlRev       = "download.revision"
	kDlLayers    = "download.layers"
	kSystem      = "chat.system"
	kThinking    = "chat.thinking"
	kEffort      = "chat.effort"
	kGreedy      = "chat.greedy"
	kTemperature = "chat.temperature"
	kTopP        = "chat.top_p"
	kTopK        = "chat.top_k"
	kSeed        = "chat.seed"
	kMaxTokens   = "chat.max_tokens"
	kThreads     = "engine.threads"
	kLastConv    = "chat.last"
	kBackend     = "backend"
	kServerURL   = "server.url"
	kServerKey   = "server.key"
	kServerModel = "server.model"
	kServeAddr   = "serve.addr"
)

// LoadSettings reads the settings, with defaults for anything never saved.
func LoadSettings(p fyne.Preferences) Settings {
	d := DefaultSettings()
	return Settings{
		WizardDone:       p.BoolWithFallback(kWizardDone, d.WizardDone),
		ModelDir:         p.String(kModelDir),
		Layers:           p.Int(kLayers),
		Demo:             p.Bool(kDemo),
		TrunkDir:         p.String(kTrunkDir),
		Preset:           p.StringWithFallback(kPreset, d.Preset),
		TrunkGB:          p.FloatWithFallback(kTrunkGB, d.TrunkGB),
		CacheGB:          p.FloatWithFallback(kCacheGB, d.CacheGB),
		DownloadDest:     p.String(kDlDest),
		DownloadRevision: p.String(kDlRev),
		DownloadLayers:   p.Int(kDlLayers),
		SystemPrompt:     p.String(kSystem),
		Thinking:         p.BoolWithFallback(kThinking, d.Thinking),
		Effort:           p.StringWithFallback(kEffort, d.Effort),
		MaxTokens:        p.IntWithFallback(kMaxTokens, d.MaxTokens),
		Sampling: engine.Sampling{
			Greedy:      p.BoolWithFallback(kGreedy, d.Greedy),
			Temperature: p.FloatWithFallback(kTemperature, d.Temperature),
			TopP:        p.FloatWithFallback(kTopP, d.TopP),
			TopK:        p.IntWithFallback(kTopK, d.TopK),
			Seed:        uint64(max(p.IntWithFallback(kSeed, int(d.Seed)), 0)),
		},
		Threads:          p.IntWithFallback(kThreads, d.Threads),
		LastConversation: p.String(kLastConv),
		Backend:          p.String(kBackend),
		ServerURL:        p.String(kServerURL),
		ServerKey:        p.String(kServerKey),
		ServerModel:      p.String(kServerModel),
		ServeAddr:        p.StringWithFallback(kServeAddr, d.ServeAddr),
	}
}

// Save writes every field.
func (s Settings) Save(p fyne.Preferences) {
	p.SetBool(kWizardDone, s.WizardDone)
	p.SetString(kModelDir, s.ModelDir)
	p.SetInt(kLayers, s.Layers)
	p.SetBool(kDemo, s.Demo)
	p.SetString(kTrunkDir, s.TrunkDir)
	p.SetString(kPreset, s.Preset)
	p.SetFloat(kTrunkGB, s.TrunkGB)
	p.SetFloat(kCacheGB, s.CacheGB)
	p.SetString(kDlDest, s.DownloadDest)
	p.SetString(kDlRev, s.DownloadRevision)
	p.SetInt(kDlLayers, s.DownloadLayers)
	p.SetString(kSystem, s.SystemPrompt)
	p.SetBool(kThinking, s.Thinking)
	p.SetString(kEffort, s.Effort)
	p.SetBool(kGreedy, s.Greedy)
	p.SetFloat(kTemperature, s.Temperature)
	p.SetFloat(kTopP, s.TopP)
	p.SetInt(kTopK, s.TopK)
	p.SetInt(kSeed, int(s.Seed))
	p.SetInt(kMaxTokens, s.MaxTokens)
	p.SetInt(kThreads, s.Threads)
	p.SetString(kLastConv, s.LastConversation)
	p.SetString(kBackend, s.Backend)
	p.SetString(kServerURL, s.ServerURL)
	p.SetString(kServerKey, s.ServerKey)
	p.SetString(kServerModel, s.ServerModel)
	p.SetString(kServeAddr, s.ServeAddr)
}
