package engine

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

	"k3/engine/plan"
	"k3/machine"
	"k3/storage/config"
	"k3/storage/layout"
	st "k3/storage/safetensors"
	"k3/storage/trunk"
)

// Budget is what a run may take of memory.
type Budget struct {
	TrunkBytes int64 // pinned trunk layers + the streaming ring
	Ring       int   // ring slots for streamed layers (default 2)
	CacheBytes int64 // routed-expert cache
	Ultra      bool  // embedding rows and lm_head read from the packed trunk when needed
}

// DefaultChunk is the prefill chunk: prompts go through every layer this
// many positions at a time.
const DefaultChunk = 64

// Options say how to open a model.
type Options struct {
	Config   string // config path; "" = MODEL_DIR/config.json
	Layers   int    // bind only the first N layers (0: all)
	TrunkDir string // packed trunk (k3 pack): layers that do not fit the budget stream from it
	Budget   Budget
	// CachePolicy is the expert cache's replacement policy ("" = the default).
	CachePolicy string
	// Chunk forces the prefill chunk, positions per pass (0: the plan
	// chooses the longest the memory holds, up to Positions: see
	// plan.FitChunk; DefaultChunk when Positions is 0).
	Chunk     int
	Positions int  // context the plan reserves: resumed + prompt + generated
	AllLogits bool // keep logits for every position (teacher forcing)
	// Memory to check the plan against; nil skips the check.
	Memory *plan.Memory
	// Progress is called after each layer is bound.
	Progress func(done, total int)
	// Trace, when set, receives every routed-expert request in order.
	Trace func(layer, expert int)
	// ExpertReadAt replaces the expert store's reads (fault injection in
	// tests); nil reads the shards with O_DIRECT where possible.
	ExpertReadAt func(path string, off int64, dst []byte) error
	// MaxDraft is the longest speculative draft a pass may verify (0:
	// DefaultMaxDraft; negative: none). The plan reserves its rollback
	// record, and a pass never exceeds a prefill chunk.
	MaxDraft int
	// StateCopies is how many whole copies of a State the caller keeps
	// beside the live one (chat.StateCopies); the plan reserves them.
	StateCopies int
	// Draft is a DSpark draft model's directory (docs/DSPARK.md; "":
	// none): speculative decoding then drafts with it instead of copying
	// from the context. The plan counts it; one made for another model is
	// refused (ErrDraftMismatch).
	Draft string
	// Picture is the largest picture the plan reserves room for, in prompt
	// positions (0: none; plan.DefaultPicture for a run that may be given
	// any): its working memory and the vision tower (plan.VisionFor).
	// A model without a vision tower plans none. A larger picture is
	// checked against the memory when it comes (Engine.EmbedImage).
	Picture int
	// DraftStream streams the draft model whatever the memory (tests,
	// benchmarks); otherwise the plan streams it only when it does not fit
	// resident in Memory (plan.PlaceDraft).
	DraftStream bool
}

func (o Options) chunk() int {
	if o.Chunk < 1 {
		return DefaultChunk
	}
	return o.Chunk
}

// checkChunk refuses a forced chunk that is negative or absurd.
func (o Options) checkChunk() error {
	if o.Chunk < 0 || o.Chunk > plan.MaxChunk {
		return fmt.Errorf("prefill chunk %d: give 1..%d positions per pass, or 0 to let the memory plan choose: %w", o.Chunk, plan.MaxChunk, ErrOptions)
	}
	return nil
}

// maxDraft is the longest draft a pass verifies: Options.MaxDraft, at most
// a chunk less one. At ultra without a draft model nothing is drafted, as
// in the C engine (which refuses --spec there): the plan keeps no
// verification pass's record (0.16 GB at K3 size), and a pass at ultra
// reads the whole trunk from disk whatever its length, so a drafted token
// that is rejected costs a trunk's reads of compute-bound work for nothing.
func (o Options) maxDraft() int {
	if o.Budget.Ultra && o.Draft == "" {
		return 0
	}
	n := o.MaxDraft
	if n == 0 {
		n = DefaultMaxDraft
	}
	return max(0, min(n, o.chunk()-1))
}

// PlanError is a memory plan that does not fit.
type PlanError struct {
	Plan *plan.Plan
	Err  error
}

func (e *PlanError) Error() string { return e.Err.Error() + "\n" + e.Plan.String() }

// checkpoint is a config and its shard set, opened for reading metadata.
type checkpoint struct {
	cfg     *config.Config
	cfgPath string
	set     *st.Set
	prefix  string
	layers  int
}

func openCheckpoint(dir string, o Options) (*checkpoint, error) {
	cfgPath := o.Config
	if cfgPath == "" {
		cfgPath = filepath.Join(dir, "config.json")
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return nil, err
	}
	set, err := st.OpenPartial(dir)
	if err != nil {
		return nil, err
	}
	if err := trunk.CheckPartial(set, o.Layers); err != nil {
		set.Close()
		return nil, err
	}
	prefix, err := layout.DetectPrefix(func(n string) bool { return has(set, n) })
	if err != nil {
		set.Close()
		return nil, &BindError{[]string{err.Error()}}
	}
	if n := layout.Layers(set.Names(), prefix); n > cfg.Layers {
		set.Close()
		return nil, &BindError{[]string{fmt.Sprintf("the checkpoint has weights for %d layers (%smodel.layers.0 to .%d) but %s says num_hidden_layers = %d: the layers past it would be ignored; fix the config", n, prefix, n-1, cfgPath, cfg.Layers)}}
	}
	layers := o.Layers
	if layers < 0 || layers > cfg.Layers {
		set.Close()
		return nil, fmt.Errorf("%d layers asked for, the model has %d (0 binds them all): %w", layers, cfg.Layers, ErrOptions)
	}
	if layers == 0 {
		layers = cfg.Layers
	}
	return &checkpoint{cfg: cfg, cfgPath: cfgPath, set: set, prefix: prefix, layers: layers}, nil
}

// ErrOptions is wrapped by Open's errors for options that do not fit the
// model (a layer count it does not have).
var ErrOptions = errors.New("the options do not fit this model")

// ErrUltraNeedsTrunk refuses ultra-low-memory mode without a packed trunk.
var ErrUltraNeedsTrunk = errors.New("ultra-low-memory mode streams the model tables from a packed trunk: give a packed trunk (k3 pack)")

// Open reads the config, indexes the shards, makes the memory plan from the
// checkpoint's metadata, checks it against o.Memory before anything large is
// allocated, and binds the model: resident, or from the packed trunk in
// o.TrunkDir with the layers the plan does not pin streamed.
func Open(dir string, o Options) (*Model, error) {
	if o.Budget.Ultra && o.TrunkDir == "" {
		return nil, ErrUltraNeedsTrunk
	}
	if err := o.checkChunk(); err != nil {
		return nil, err
	}
	ck, tr, draft, p, err := openParts(dir, o)
	if err != nil {
		return nil, err
	}
	m := &Model{Cfg: ck.cfg, Prefix: ck.prefix, Bound: ck.layers, Plan: p, set: ck.set, trunk: tr, chunk: p.Chunk, notGo: plan.NotGo(machine.RSS()),
		maxDraft: o.maxDraft(), io: &ioTracker{}, lean: o.floor()}
	m.vision.configPath = o.Config
	if m.vision.configPath == "" {
		m.vision.configPath = filepath.Join(dir, "config.json")
	}
	store := newExpertStore(ck.set, ck.cfg, ck.layers, o.Budget.CacheBytes, o.CachePolicy)
	store.trace, store.io = o.Trace, m.io
	if o.ExpertReadAt != nil {
		store.readAt = o.ExpertReadAt
	}
	m.experts = store
	weights, err := locateExperts(ck, store)
	if err == nil && tr != nil {
		err = m.bindTrunk(o.Budget.Ultra, o.Progress)
	} else if err == nil {
		err = m.bindResident(o.Progress)
	}
	if err == nil && draft != nil {
		m.draft = draft
		err = draft.bind(p.DraftStreamed, m.io)
	}
	if err != nil {
		if m.draft == nil {
			draft.Close()
		}
		m.Close()
		return nil, err
	}
	m.Fingerprint = Fingerprint(m, ck.set.Files(), weights)
	return m, nil
}

// locateExperts records where every routed expert lies, fingerprints the
// weights (sampling experts too) and then has the set forget the routed
// experts' entries, before the binding allocates anything large: from here
// the index holds the trunk's tensors only.
func locateExperts(ck *checkpoint, store *ExpertStore) ([32]byte, error) {
	if err := store.locateAll(ck.prefix); err != nil {
		return [32]byte{}, err
	}
	weights, err := weightsDigest(ck.set)
	if err != nil {
		return [32]byte{}, fmt.Errorf("fingerprint the weights: %w", err)
	}
	store.forgetLocated(ck.prefix)
	return weights, nil
}

// openParts opens the checkpoint, the trunk and the draft model the
// options name and makes the plan (checked against o.Memory when given);
// on an error, what it opened is closed.
func openParts(dir string, o Options) (*checkpoint, *trunk.Trunk, *Draft, *plan.Plan, error) {
	ck, err := openCheckpoint(dir, o)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	var tr *trunk.Trunk
	var draft *Draft
	fail := func(err error) (*checkpoint, *trunk.Trunk, *Draft, *plan.Plan, error) {
		if tr != nil {
			tr.Close()
		}
		ck.set.Close()
		draft.Close()
		return nil, nil, nil, nil, err
	}
	if o.TrunkDir != "" {
		if tr, err = ck.openTrunk(o.TrunkDir); err != nil {
			tr = nil
			return fail(err)
		}
	}
	if o.Draft != "" {
		if draft, err = prepareDraft(o.Draft, ck.cfg, ck.layers); err != nil {
			draft = nil
			return fail(err)
		}
	}
	p, err := ck.plan(o, manifestOf(tr), draft)
	if err == nil && o.Memory != nil {
		if cerr := p.Check(*o.Memory); cerr != nil {
			err = &PlanError{p, cerr}
		}
	}
	if err != nil {
		return fail(err)
	}
	return ck, tr, draft, p, nil
}

// PlanFor makes the memory plan of opening dir with o, from metadata alone
// (no tensor data is read): the checkpoint's, and trunk.json's when
// o.TrunkDir holds a trunk packed from this checkpoint (a compressed one's
// sizes are its stored sizes, and its layers' bf16 sizes decide whether
// the pinned layers are expanded: plan.Make). Without one the sizes are
// the checkpoint's, which an uncompressed pack keeps.
func PlanFor(dir string, o Options) (*plan.Plan, error) {
	ck, err := openCheckpoint(dir, o)
	if err != nil {
		return nil, err
	}
	defer ck.set.Close()
	var tm *trunk.Manifest
	if o.TrunkDir != "" {
		if tr, err := ck.openTrunk(o.TrunkDir); err == nil {
			defer tr.Close()
			tm = tr.Manifest()
		}
	}
	var draft *Draft
	if o.Draft != "" {
		if draft, err = prepareDraft(o.Draft, ck.cfg, ck.layers); err != nil {
			return nil, err
		}
		defer draft.Close()
	}
	p, err := ck.plan(o, tm, draft)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// openTrunk opens the packed trunk in dir and checks that it was packed
// from this checkpoint and holds its layers.
func (ck *checkpoint) openTrunk(dir string) (*trunk.Trunk, error) {
	tr, err := trunk.Open(dir)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*trunk.Trunk, error) {
		tr.Close()
		return nil, err
	}
	if err := tr.CheckSet(ck.set); err != nil {
		return fail(err)
	}
	if tr.Layers() < ck.layers {
		return fail(fmt.Errorf("trunk %s has %d layers, the model needs %d", dir, tr.Layers(), ck.layers))
	}
	if p := tr.Manifest().Source.Prefix; p != ck.prefix {
		return fail(fmt.Errorf("trunk %s was packed from a checkpoint with tensor prefix %q, this one has %q", dir, p, ck.prefix))
	}
	return tr, nil
}

func manifestOf(tr *trunk.Trunk) *trunk.Manifest {
	if tr == nil {
		return nil
	}
	return tr.Manifest()
}

// TrunkBytes is the size of the packed trunk of dir's first `layers` layers
// (0: all): every tensor but the routed experts, at the checkpoint's sizes
// (an uncompressed pack; a compressed one is smaller by a ratio known only
// once it is packed).
func TrunkBytes(dir string, layers int) (int64, error) {
	ck, err := openCheckpoint(dir, Options{Layers: layers})
	if err != nil {
		return 0, err
	}
	defer ck.set.Close()
	per, globals := ck.trunkSizes()
	for _, b := range per {
		globals += b
	}
	return globals, nil
}

// trunkSizes adds up, from the checkpoint's metadata alone, the trunk bytes
// of each bound layer and of the model tables (embeddings, lm_head, final
// norms). Routed experts are not trunk.
func (ck *checkpoint) trunkSizes() (perLayer []int64, globals int64) {
	perLayer = make([]int64, ck.layers)
	for _, name := range ck.set.Names() {
		t, _ := ck.set.Get(name)
		n := strings.TrimPrefix(name, ck.prefix)
		if li, _, ok := layout.LayerOf(n); ok {
			if li < ck.layers && !layout.IsRoutedExpert(n) {
				perLayer[li] += t.Size
			}
			continue
		}
		if layout.IsModelTable(n) {
			globals += t.Size
		}
	}
	return perLayer, globals
}

// sizes are the trunk bytes of each bound layer, of the globals and of the
// model tables (embedding and lm_head) as the model reads them: the
// checkpoint's (trunkSizes), with every tensor a compressed trunk tm
// (nil: none) stores BF16C at its stored size, and then the layers'
// checkpoint (bf16) sizes as LogicalLayerBytes too. SlotBytes is not set.
func (ck *checkpoint) sizes(tm *trunk.Manifest) plan.Sizes {
	perLayer, globals := ck.trunkSizes()
	s := plan.Sizes{LayerBytes: perLayer, GlobalBytes: globals}
	for _, n := range []string{"model.embed_tokens.weight", "lm_head.weight"} {
		if t, ok := ck.set.Get(ck.prefix + n); ok {
			s.TableBytes += t.Size
		}
	}
	if _, head := ck.set.Get(ck.prefix + "lm_head.weight"); head && !ck.cfg.TieEmbeddings {
		if t, ok := ck.set.Get(ck.prefix + "model.embed_tokens.weight"); ok {
			s.EmbedBytes = t.Size // lm_head is a table of its own: the floor streams the embedding
		}
	}
	if tm == nil || !tm.Compressed() {
		return s
	}
	s.LogicalLayerBytes = slices.Clone(perLayer)
	for i := range tm.Runs {
		r := &tm.Runs[i]
		for j := range r.Tensors {
			t := &r.Tensors[j]
			if !t.Compressed() {
				continue
			}
			d := t.Size - t.LogicalSize()
			switch n := strings.TrimPrefix(t.Name, ck.prefix); {
			case r.Layer >= 0:
				if r.Layer < ck.layers {
					s.LayerBytes[r.Layer] += d
				}
			case n == "model.embed_tokens.weight" || n == "lm_head.weight":
				s.GlobalBytes += d
				s.TableBytes += d
				if n == "model.embed_tokens.weight" && s.EmbedBytes > 0 {
					s.EmbedBytes += d
				}
			default:
				s.GlobalBytes += d
			}
		}
	}
	return s
}

// plan adds up every part of a run's memory before anything is allocated;
// tm is the packed trunk's manifest (nil: none). Without a forced chunk
// (Options.Chunk) it chooses the longest the memory holds (plan.FitChunk),
// and fails with a *PlanError when not even plan.MinChunk positions fit.
func (ck *checkpoint) plan(o Options, tm *trunk.Manifest, d *Draft) (*plan.Plan, error) {
	c, b := ck.cfg, o.Budget
	s := ck.sizes(tm)
	s.SlotBytes = slotSizeFor(c.ExpertBytes())
	if o.Picture > 0 {
		s.Vision = visionSizes(ck.cfgPath, ck.set, c.Hidden)
	}
	r := plan.Run{Streaming: o.TrunkDir != "", TrunkBudget: b.TrunkBytes, Ring: b.Ring, CacheBudget: b.CacheBytes, Ultra: b.Ultra,
		Positions: o.Positions, Chunk: o.Chunk, Workers: runtime.NumCPU(), AllLogits: o.AllLogits, SpecPositions: specPositions(o),
		StateCopies: o.StateCopies, BaselineRSS: planBaseline(),
		Floor: o.floor(), Picture: o.Picture}
	limit := o.planLimit()
	if d != nil {
		r.DraftBytes, r.DraftPerPos, r.DraftStream, r.DraftRead = d.Bytes, d.CacheBytesPerPos(), d.StreamBytes, d.ReadBytes
		r.DraftStreamed = o.DraftStream || limit > 0 // the chunk is chosen with it streamed
	}
	in := plan.ForModel(c, ck.layers, s, r)
	if o.Memory != nil {
		plan.FitTower(&in, s.Vision, limit)
	}
	var p *plan.Plan
	if o.Chunk > 0 {
		in.ChunkWhy = plan.ChunkForced
		p = plan.Make(in)
	} else if ap, err := autoChunk(in, o); err != nil {
		return nil, err
	} else {
		p = ap
	}
	if d == nil || o.DraftStream || limit <= 0 {
		return p, nil
	}
	in.Chunk, in.ChunkWhy = p.Chunk, p.ChunkWhy
	return plan.Make(plan.PlaceDraft(in, limit)), nil
}

// planBaseline is the process base a plan counts: ProcessBase (tests pin
// it).
var planBaseline = ProcessBase

// ProcessBase is what the process holds before a plan's parts are
// allocated: its resident size once the garbage of what ran before (the
// tokenizer's parse, the checkpoint's headers) is collected and given back
// to the system, so the base is what stays live (a collection of the
// small heap before the model loads: milliseconds, once a plan). The
// doctor's doctor.CLIBaselineBytes is held to it (TestCLIBaseline).
func ProcessBase() int64 {
	debug.FreeOSMemory()
	return machine.RSS()
}

// planLimit is the most a plan may take: 95% of o.Memory's usable bytes
// (Plan.Check's test); 0 when unknown.
func (o Options) planLimit() int64 {
	if o.Memory == nil || o.Memory.Usable() <= 0 {
		return 0
	}
	return int64(0.95 * float64(o.Memory.Usable()))
}

// autoChunk plans the longest prefill chunk that fits o.Memory (95% of
// its usable bytes, Plan.Check's test), at most the context; with the
// memory unknown, the whole context (DefaultChunk when that is unknown).
func autoChunk(in plan.Inputs, o Options) (*plan.Plan, error) {
	most, limit := DefaultChunk, o.planLimit()
	in.ChunkWhy = plan.ChunkContext
	if o.Positions > 0 {
		most = o.Positions
	}
	if limit > 0 {
		in.ChunkWhy = plan.ChunkMemory
	}
	n, err := plan.FitChunk(in, limit, most)
	if err != nil {
		in.Chunk = min(most, plan.MinChunk)
		return nil, &PlanError{plan.Make(in), err}
	}
	if n == most && limit > 0 {
		in.ChunkWhy = plan.ChunkContext
	}
	in.Chunk = n
	return plan.Make(in), nil
}

// Floor reports whether o runs at the memory floor (plan.FloorFor):
// streamed, at a trunk budget no larger than laptop's that does not hold
// the packed trunk's layers (ultra: always). A budget that holds them
// streams nothing: a small model there keeps its copies.
func (o Options) Floor() bool {
	return o.TrunkDir != "" && plan.FloorFor(o.Budget.TrunkBytes, packedLayerBytes(o.TrunkDir, o.Layers), o.Budget.Ultra)
}

func (o Options) floor() bool { return o.Floor() }

// packedLayerBytes are the bytes of the first layers (0: all) of the packed
// trunk in dir, from its trunk.json (0 when it cannot be read).
func packedLayerBytes(dir string, layers int) int64 {
	m, err := trunk.ReadManifest(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, r := range m.Runs {
		if r.Layer >= 0 && (layers <= 0 || r.Layer < layers) {
			n += r.DataBytes
		}
	}
	return n
}

// recordCap is the longest pass recorded rather than copied at the floor:
// a verification pass, or one position.
func (m *Model) recordCap() int { return max(m.maxDraft+1, 1) }

// specPositions is the most positions a verification pass of o runs (0:
// no speculation).
func specPositions(o Options) int {
	if d := o.maxDraft(); d > 0 {
		return d + 1
	}
	return 0
}
