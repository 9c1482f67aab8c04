package bridge

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"k3/engine"
	"k3/engine/chat"
	"k3/engine/plan"
	"k3/tokenizer/constrain"
	"k3/tokenizer/xtml"
	"k3/ui/keys"
)

// ChatOptions are a turn's options from the settings.
func (s Settings) ChatOptions() chat.Options {
	o := s.ConvDefaults()
	o.System = strings.TrimSpace(s.SystemPrompt)
	return o
}

// Settings are what the user chooses (in the wizard and the dialogs, with
// a Save or Done): the model, the memory, the chat defaults, the backend.
// They live in the app's preferences (one key per field, see LoadSettings
// and Save). What the app notes as it goes — the wizard finished once, the
// conversation open, a download under way, the serve address — is bound
// to its own preference key by the views (the Key* names), not kept here.
type Settings struct {
	ModelDir string // checkpoint folder
	Layers   int    // > 0: a partial checkpoint (only the first N layers)
	Demo     bool   // ModelDir is the generated demo checkpoint
	TrunkDir string // packed trunk folder ("" = not packed: run resident)
	// TrunkModel is the checkpoint folder TrunkDir was packed from: a
	// trunk is offered again only for the model it belongs to.
	TrunkModel string
	// TrunkCompress: pack the trunk compressed (PackOptions.Compress).
	TrunkCompress bool

	Preset  string  // memory preset name ("auto", "laptop", ...)
	TrunkGB float64 // pinned trunk + ring budget
	CacheGB float64 // routed-expert cache budget

	// Chat defaults.
	SystemPrompt string
	Thinking     bool
	Effort       string // low, high, max
	MaxTokens    int
	// JSONAnswers: new conversations hold every answer to one JSON object
	// (chat.Options.ResponseFormat json_object)
	JSONAnswers bool
	engine.Sampling
	Threads int // 0: one per physical core
	// NoDraft turns off the draft model found beside the model (a draft/
	// folder, as k3 demo writes): speculative decoding then copies from
	// the context only. The replies are the same either way.
	NoDraft bool

	// Where the model runs: BackendLocal or BackendServer (remotechat.go).
	Backend     string
	ServerURL   string // OpenAI base URL, e.g. http://gpu-box:8000/v1
	ServerKey   string // its API key: kept in the key store (LoadServerKey), never in the preferences
	ServerModel string // model id from the server's /v1/models ("": the first)
}

// DefaultSettings are the settings of a first start.
func DefaultSettings() Settings {
	return Settings{Preset: "auto", Thinking: true, Effort: xtml.DefaultThinkingEffort, MaxTokens: chat.DefaultMaxTokens,
		Sampling: engine.Sampling{Greedy: true, Temperature: 0.6, TopP: 0.95}}
}

// Prefs is the part of the app's preferences (fyne.Preferences) the
// settings use.
type Prefs interface {
	Bool(key string) bool
	BoolWithFallback(key string, fallback bool) bool
	SetBool(key string, value bool)
	Float(key string) float64
	FloatWithFallback(key string, fallback float64) float64
	SetFloat(key string, value float64)
	Int(key string) int
	IntWithFallback(key string, fallback int) int
	SetInt(key string, value int)
	String(key string) string
	StringWithFallback(key, fallback string) string
	SetString(key string, value string)
	RemoveValue(key string)
}

// Preference keys of the app's notes, which the views bind
// (binding.BindPreference*): each is written alone when it changes.
const (
	KeyWizardDone       = "wizard.done"       // bool: the wizard finished once, start in the chat
	KeyLastConversation = "chat.last"         // string: the conversation open
	KeyServeAddr        = "serve.addr"        // string: where the app's server listens (view_serve.go)
	KeyDownloadDest     = "download.dest"     // string: a download that did not finish: its folder,
	KeyDownloadRevision = "download.revision" // string: revision
	KeyDownloadLayers   = "download.layers"   // int: and layers; the model step offers to resume it
)

// Preference keys of the settings.
const (
	kModelDir    = "model.dir"
	kLayers      = "model.layers"
	kDemo        = "model.demo"
	kTrunkDir    = "trunk.dir"
	kTrunkModel  = "trunk.model"
	kCompress    = "trunk.compress"
	kPreset      = "memory.preset"
	kTrunkGB     = "memory.trunk_gb"
	kCacheGB     = "memory.cache_gb"
	kSystem      = "chat.system"
	kThinking    = "chat.thinking"
	kEffort      = "chat.effort"
	kGreedy      = "chat.greedy"
	kTemperature = "chat.temperature"
	kTopP        = "chat.top_p"
	kTopK        = "chat.top_k"
	kSeed        = "chat.seed"
	kMaxTokens   = "chat.max_tokens"
	kJSONAnswers = "chat.json_answers"
	kThreads     = "engine.threads"
	kNoDraft     = "engine.no_draft"
	kBackend     = "backend"
	kServerURL   = "server.url"
	kServerKey   = "server.key" // only read, to move an older k3's key into the key store
	kServerModel = "server.model"
)

// LoadSettings reads the settings, with defaults for anything never saved.
func LoadSettings(p Prefs) Settings {
	d := DefaultSettings()
	return Settings{
		ModelDir:      p.String(kModelDir),
		Layers:        p.Int(kLayers),
		Demo:          p.Bool(kDemo),
		TrunkDir:      p.String(kTrunkDir),
		TrunkModel:    p.String(kTrunkModel),
		TrunkCompress: p.Bool(kCompress),
		Preset:        p.StringWithFallback(kPreset, d.Preset),
		TrunkGB:       p.FloatWithFallback(kTrunkGB, d.TrunkGB),
		CacheGB:       p.FloatWithFallback(kCacheGB, d.CacheGB),
		SystemPrompt:  p.String(kSystem),
		Thinking:      p.BoolWithFallback(kThinking, d.Thinking),
		Effort:        p.StringWithFallback(kEffort, d.Effort),
		MaxTokens:     p.IntWithFallback(kMaxTokens, d.MaxTokens),
		JSONAnswers:   p.Bool(kJSONAnswers),
		Sampling: engine.Sampling{
			Greedy:      p.BoolWithFallback(kGreedy, d.Greedy),
			Temperature: p.FloatWithFallback(kTemperature, d.Temperature),
			TopP:        p.FloatWithFallback(kTopP, d.TopP),
			TopK:        p.IntWithFallback(kTopK, d.TopK),
			Seed:        uint64(max(p.IntWithFallback(kSeed, int(d.Seed)), 0)),
		},
		Threads:     p.IntWithFallback(kThreads, d.Threads),
		NoDraft:     p.Bool(kNoDraft),
		Backend:     p.String(kBackend),
		ServerURL:   p.String(kServerURL),
		ServerModel: p.String(kServerModel),
	}
}

// Save writes every setting (the app's notes, the Key* names, are not
// touched).
func (s Settings) Save(p Prefs) {
	p.SetString(kModelDir, s.ModelDir)
	p.SetInt(kLayers, s.Layers)
	p.SetBool(kDemo, s.Demo)
	p.SetString(kTrunkDir, s.TrunkDir)
	p.SetString(kTrunkModel, s.TrunkModel)
	p.SetBool(kCompress, s.TrunkCompress)
	p.SetString(kPreset, s.Preset)
	p.SetFloat(kTrunkGB, s.TrunkGB)
	p.SetFloat(kCacheGB, s.CacheGB)
	p.SetString(kSystem, s.SystemPrompt)
	p.SetBool(kThinking, s.Thinking)
	p.SetString(kEffort, s.Effort)
	p.SetBool(kGreedy, s.Greedy)
	p.SetFloat(kTemperature, s.Temperature)
	p.SetFloat(kTopP, s.TopP)
	p.SetInt(kTopK, s.TopK)
	p.SetInt(kSeed, int(s.Seed))
	p.SetInt(kMaxTokens, s.MaxTokens)
	p.SetBool(kJSONAnswers, s.JSONAnswers)
	p.SetInt(kThreads, s.Threads)
	p.SetBool(kNoDraft, s.NoDraft)
	p.SetString(kBackend, s.Backend)
	p.SetString(kServerURL, s.ServerURL)
	p.SetString(kServerModel, s.ServerModel)
}

// CustomPreset is the preset name of budgets set by hand: TrunkGB and
// CacheGB are used as they are, zero included (the smallest plan).
const CustomPreset = "custom"

// Budget turns the memory settings into the engine's budget: the preset
// resolved by plan.Resolve (auto included), or the GB values as they are
// with CustomPreset; ultra mode with the ultra preset (it streams the model
// tables from the packed trunk, so only with one).
func (s Settings) Budget(mem *plan.Memory) engine.Budget {
	b := PresetBudget(s.Preset, mem)
	if s.Preset == CustomPreset {
		b = plan.Budget{Preset: CustomPreset, TrunkGB: s.TrunkGB, CacheGB: s.CacheGB}
	}
	return engine.Budget{TrunkBytes: int64(b.TrunkGB * plan.GB), CacheBytes: int64(b.CacheGB * plan.GB), Ring: 2,
		Ultra: b.Ultra && s.TrunkDir != ""}
}

// OpenOptions are the engine options the settings give: with the draft
// model beside the model folder when there is one, NoDraft or not (the
// turns leave it out while NoDraft is set, so turning it on and off never
// loads the model again).
func (s Settings) OpenOptions(mem *plan.Memory) engine.Options {
	o := engine.Options{Layers: s.Layers, TrunkDir: s.TrunkDir, Budget: s.Budget(mem), Positions: s.Positions(), Memory: mem,
		Picture: plan.DefaultPicture}
	o.Draft = DraftBeside(s.ModelDir)
	if o.StateCopies = chat.StateCopies(o); o.StateCopies > 0 {
		o.StateCopies++ // the snapshot of the server's session, when the app serves
	}
	return o
}

// Positions is the context a conversation is planned for: ContextPositions
// (the doctor's), or the reply cap when that is longer.
func (s Settings) Positions() int {
	n := s.MaxTokens
	if n <= 0 {
		n = chat.DefaultMaxTokens
	}
	return max(ContextPositions, n)
}

// CanChat reports whether the settings name something to chat with: a
// model folder, or a server.
func (s Settings) CanChat() bool {
	if s.Backend == BackendServer {
		return s.ServerURL != ""
	}
	return s.ModelDir != ""
}

// ConvDefaults are the settings a new conversation starts with.
func (s Settings) ConvDefaults() chat.Options {
	o := chat.Options{Thinking: s.Thinking, Effort: s.Effort, MaxTokens: s.MaxTokens, Sampling: s.Sampling}
	if s.JSONAnswers {
		o.ResponseFormat = slices.Clone(constrain.ObjectFormat)
	}
	return o
}

// SetServer makes the server at addr (ServerBaseURL) with key and model
// ("": the first it serves) where the model runs, or says why addr is not
// a server address.
func (s *Settings) SetServer(addr, key, model string) error {
	base, err := ServerBaseURL(addr)
	if err != nil {
		return err
	}
	s.Backend, s.ServerURL, s.ServerKey, s.ServerModel = BackendServer, base, strings.TrimSpace(key), strings.TrimSpace(model)
	return nil
}

// Setup is the part of the settings the setup wizard decides: which model,
// which trunk, how much memory. The wizard edits a copy and applies it on
// Done, so a half-finished change never replaces the working model.
type Setup struct {
	ModelDir   string
	Layers     int
	Demo       bool
	TrunkDir   string
	TrunkModel string
	// TrunkCompress is part of the setup: packing again the other way
	// changes the trunk in TrunkDir, so the chat must open it again.
	TrunkCompress bool
	Preset        string
	TrunkGB       float64
	CacheGB       float64
}

// Setup returns the wizard's part of the settings.
func (s Settings) Setup() Setup {
	return Setup{s.ModelDir, s.Layers, s.Demo, s.TrunkDir, s.TrunkModel, s.TrunkCompress, s.Preset, s.TrunkGB, s.CacheGB}
}

// SetSetup replaces the wizard's part of the settings.
func (s *Settings) SetSetup(x Setup) {
	s.ModelDir, s.Layers, s.Demo, s.TrunkDir, s.TrunkModel = x.ModelDir, x.Layers, x.Demo, x.TrunkDir, x.TrunkModel
	s.TrunkCompress, s.Preset, s.TrunkGB, s.CacheGB = x.TrunkCompress, x.Preset, x.TrunkGB, x.CacheGB
}

// ServerKeyName is the name a server's API key had in the key store when
// the app knew one server only; LoadServerKey moves it to ServerKeyFor.
const ServerKeyName = "server-api-key"

// ServerKeyFor is the name of the API key of the server at url in the key
// store: each server the app knows keeps its own key.
func ServerKeyFor(url string) string {
	sum := sha256.Sum256([]byte(url))
	return ServerKeyName + "-" + hex.EncodeToString(sum[:8])
}

// LoadServerKey returns the API key of the server at url from ks. A key an
// older k3 kept in plain text in the preferences, or under the one name of
// the app that knew one server, is the key of the server in use then: it
// is moved to url's name first (and removed from where it was).
func LoadServerKey(p Prefs, ks keys.Store, url string) (string, error) {
	if old := p.String(kServerKey); old != "" {
		if err := ks.Set(ServerKeyFor(url), old); err != nil {
			return old, err // kept where it was until it can be moved
		}
		p.RemoveValue(kServerKey)
		return old, nil
	}
	key, err := ks.Get(ServerKeyFor(url))
	if key != "" || err != nil {
		return key, err
	}
	old, err := ks.Get(ServerKeyName)
	if old == "" || err != nil {
		return old, err
	}
	if err := ks.Set(ServerKeyFor(url), old); err != nil {
		return old, err
	}
	return old, ks.Delete(ServerKeyName)
}

// SaveServerKey keeps the API key of the server at url in ks ("" removes
// it).
func SaveServerKey(ks keys.Store, url, key string) error { return ks.Set(ServerKeyFor(url), key) }
