// Package engine is the Kimi K3 model and its runtime: opening a checkpoint
// (Open: the memory plan first, then the trunk resident or streamed from a
// packed trunk, and the routed-expert store), the forward pass block by block
// (KDA, gated MLA, dense and MoE MLPs with Attention Residuals), decoding
// state, and the one generation loop (Generate).
package engine

import (
	"errors"
	"fmt"

	"k3/engine/plan"
	"k3/kernels"
	"k3/machine"
	"k3/storage/config"
	st "k3/storage/safetensors"
	"k3/storage/trunk"
)

// Model is an opened checkpoint (possibly a prefix of its layers). It owns
// everything it opened — the shard set, the packed trunk, the expert store,
// the memory holding trunk runs — and Close releases all of it.
type Model struct {
	Cfg    *config.Config
	Prefix string // "language_model." in the released layout, else ""
	Bound  int    // number of layers bound (== Cfg.Layers unless Options.Layers)
	// Plan is the memory plan the model was opened with.
	Plan *plan.Plan
	// Fingerprint identifies the model for state files.
	Fingerprint uint64
	// BoundBytes counts the trunk bytes read from disk while opening.
	BoundBytes int64

	set       *st.Set
	vision    visionSlot // the vision tower, read on first use
	tables    tables
	finalNorm []float32
	outFold   []float32    // output_attn_res_norm ⊙ output_attn_res_proj
	layers    []*Layer     // nil entries are streamed from the trunk
	experts   ExpertSource // routed experts, read from the shards
	trunk     *trunk.Trunk // nil: resident
	release   []func()     // memory holding pinned trunk runs
	chunk     int          // prefill chunk
	notGo     int64        // what of the process base is not the Go runtime's (plan.NotGo)
	ring      int          // streamed layers in flight
	ringBytes int64        // the ring they are read into
	maxDraft  int          // longest speculative draft (the plan reserves its rollback record)
	// lean: at the memory floor (plan.Floor) no copy of the whole KDA state
	// is kept: a cancellable pass of up to recordCap positions is recorded
	// and replayed instead, a longer one stopped part-way is dropped at the
	// next layer and read again from its ids and the rows of the pictures
	// it fed, which the state keeps (State.stale, State.dropFedMedia)
	lean  bool
	io    *ioTracker // read time of every read the model makes
	draft *Draft     // the draft model (Options.Draft; nil: none)
}

// Experts returns the model's routed-expert source.
// HeapLimit is the Go memory limit that keeps a run of this model within
// its plan (plan.Plan.HeapLimit); a command sets it with
// runtime/debug.SetMemoryLimit once the model is open.
func (m *Model) HeapLimit() int64 { return m.Plan.HeapLimit(m.trunk != nil, m.notGo) }

// Chunk is the prefill chunk: positions read per pass through the layers
// (the plan's, or Options.Chunk when forced).
func (m *Model) Chunk() int { return m.chunk }

func (m *Model) Experts() ExpertSource { return m.experts }

// Files lists the checkpoint's shard files.
func (m *Model) Files() []st.FileInfo { return m.set.Files() }

// Tensors is the number of tensors in the checkpoint.
func (m *Model) Tensors() int {
	n := 0
	for _, f := range m.set.Files() {
		n += f.NumTensors
	}
	return n
}

// Streamed reports whether some layers are streamed from a packed trunk.
func (m *Model) Streamed() bool {
	for _, L := range m.layers {
		if L == nil {
			return true
		}
	}
	return false
}

// Layer returns bound layer i when it is resident (nil when streamed).
func (m *Model) Layer(i int) *Layer { return m.layers[i] }

// TableBytesRead is what ultra-low-memory mode (or the floor: the
// embedding rows) read of the model tables.
func (m *Model) TableBytesRead() int64 {
	embed, head := m.tables.bytesRead()
	return embed + head
}

// NewEngine returns an engine over the model with a pool of the given
// threads (0: one per physical core). Layers the plan did not pin are
// streamed through a ring of slots; the engine owns the ring and its reader.
func (m *Model) NewEngine(threads int) *Engine {
	if threads <= 0 {
		threads = machine.DefaultThreads()
	}
	e := &Engine{m: m, pool: kernels.NewPool(threads)}
	if m.Streamed() {
		e.layers = newTrunkStream(m, m.trunk, m.ring, m.ringBytes)
	} else {
		e.layers = residentLayers(m.layers)
	}
	return e
}

// Close releases the model's expert store, trunk file, tables, shards and
// run memory. Engines made from the model must be closed first.
func (m *Model) Close() {
	m.draft.Close()
	m.draft = nil
	if m.experts != nil {
		m.experts.Close()
		m.experts = nil
	}
	if m.tables != nil {
		m.tables.close()
		m.tables = nil
	}
	if m.trunk != nil {
		m.trunk.Close()
		m.trunk = nil
	}
	for _, r := range m.release {
		r()
	}
	m.release = nil
	if m.set != nil {
		m.set.Close()
		m.set = nil
	}
}

// IONotes says where reads could not use O_DIRECT and fell back to buffered
// I/O (tmpfs and some filesystems refuse it); empty when every read bypassed
// the page cache.
func (m *Model) IONotes() []string {
	var notes []string
	if m.trunk != nil && !m.trunk.Direct() {
		notes = append(notes, "packed trunk: O_DIRECT refused by the filesystem, buffered reads")
	}
	if m.experts != nil {
		notes = append(notes, m.experts.IONotes()...)
	}
	return notes
}

// bindResident reads every bound layer's trunk weights from the shards.
func (m *Model) bindResident(progress func(done, total int)) error {
	b := &binder{src: setSource{m.set}, cfg: m.Cfg, prefix: m.Prefix}
	var tb *residentTables
	tb, m.finalNorm, m.outFold = b.tables()
	m.tables = tb
	m.layers = make([]*Layer, m.Bound)
	for i := range m.layers {
		m.layers[i] = b.layer(i)
		if progress != nil {
			progress(i+1, m.Bound)
		}
		if len(b.errs) > 200 {
			break
		}
	}
	m.BoundBytes = b.bytes
	return b.err()
}

// bindTrunk binds from the packed trunk (m.trunk, checked against the
// checkpoint by openTrunk): the model tables (unless ultra) and the layers
// the plan pins are read and CRC-checked now; the other layers are
// streamed while decoding. When the plan expands the pinned layers, each
// is decoded to bf16 (expandRun) right after it is read, and the buffer
// it was read into is freed before the next one is read.
func (m *Model) bindTrunk(ultra bool, progress func(done, total int)) error {
	errs, err := m.bindTrunkTables(ultra)
	if err != nil {
		return err
	}
	b, err := m.loadRun(trunk.RunFinal)
	if err != nil {
		return err
	}
	H := m.Cfg.Hidden
	m.finalNorm = b.vec("model.norm.weight", []int{H}, 0)
	m.outFold = b.fold("model.output_attn_res_norm.weight", "model.output_attn_res_proj.weight", H)
	errs = append(errs, b.errs...)
	m.layers = make([]*Layer, m.Bound)
	for i := range m.layers {
		if m.Plan.Pinned[i] {
			b, err := m.loadLayerRun(i)
			var be *BindError
			switch {
			case errors.As(err, &be): // corrupt BF16C tensors: list them with the other layers' problems
				errs = append(errs, be.Problems...)
			case err != nil:
				return err
			default:
				m.layers[i] = b.layer(i)
				errs = append(errs, b.errs...)
			}
		}
		if progress != nil {
			progress(i+1, m.Bound)
		}
	}
	m.ring, m.ringBytes = m.Plan.RingSlots, m.Plan.RingBytes
	if len(errs) > 0 {
		return &BindError{errs}
	}
	return nil
}

// bindTrunkTables binds the model tables from the packed trunk: streamed
// both (ultra), the embedding streamed and lm_head resident (the floor:
// Plan.EmbedStreamed), or both resident (one table when they are tied).
// errs are the tensors' problems.
func (m *Model) bindTrunkTables(ultra bool) (errs []string, err error) {
	c, H := m.Cfg, m.Cfg.Hidden
	var st *streamedTables
	if ultra || m.Plan.EmbedStreamed {
		if st, err = openStreamedTables(m.trunk, m.Prefix, H, c.VocabSize, c.TieEmbeddings); err != nil {
			return nil, err
		}
		st.io = m.io
		if ultra {
			m.tables = st
			return nil, nil
		}
	}
	rt := &residentTables{}
	if st == nil {
		b, err := m.loadRun(trunk.RunEmbed)
		if err != nil {
			return nil, err
		}
		rt.embedding = b.mat("model.embed_tokens.weight", c.VocabSize, H)
		errs = append(errs, b.errs...)
	}
	if c.TieEmbeddings {
		rt.lmHead = rt.embedding
		m.tables = rt
		return errs, nil
	}
	b, err := m.loadRun(trunk.RunHead)
	if err != nil {
		if st != nil {
			st.close()
		}
		return nil, err
	}
	rt.lmHead = b.mat("lm_head.weight", c.VocabSize, H)
	errs = append(errs, b.errs...)
	m.tables = rt
	if st != nil {
		m.tables = &headTables{rows: st, lmHead: rt.lmHead}
	}
	return errs, nil
}

// readRun reads the trunk run r (named name) into a new buffer and checks
// its CRCs; release frees the buffer.
func (m *Model) readRun(name string, r *trunk.Run) (mem []byte, release func(), err error) {
	if r == nil {
		return nil, nil, fmt.Errorf("trunk %s has no %q run", m.trunk.Dir(), name)
	}
	mem, release = runBuffer(r.Length)
	if err := m.trunk.VerifyRun(r, mem); err != nil {
		release()
		return nil, nil, err
	}
	m.BoundBytes += r.Length
	return mem, release, nil
}

// loadRun reads the trunk run of that name and keeps it for the model's
// life.
func (m *Model) loadRun(name string) (*binder, error) {
	r, _ := m.trunk.Run(name)
	return m.keepRun(name, r)
}

func (m *Model) keepRun(name string, r *trunk.Run) (*binder, error) {
	mem, release, err := m.readRun(name, r)
	if err != nil {
		return nil, err
	}
	m.release = append(m.release, release)
	return &binder{src: wholeRun(r, mem), cfg: m.Cfg, prefix: m.Prefix}, nil
}

// loadLayerRun reads layer i's run and keeps it, decoded to bf16 (and the
// buffer it was read into freed) when the plan expands the pinned layers.
func (m *Model) loadLayerRun(i int) (*binder, error) {
	r, _ := m.trunk.LayerRun(i)
	name := fmt.Sprintf("layer %d", i)
	if !m.Plan.Expanded {
		return m.keepRun(name, r)
	}
	mem, release, err := m.readRun(name, r)
	if err != nil {
		return nil, err
	}
	defer release()
	ex, img, free, err := expandRun(r, mem)
	if err != nil {
		return nil, err
	}
	m.release = append(m.release, free)
	return &binder{src: wholeRun(ex, img), cfg: m.Cfg, prefix: m.Prefix}, nil
}

// TrunkLayerBytes is each bound layer's trunk size as the model reads it
// (routed experts excluded): a compressed packed trunk's stored sizes.
func (m *Model) TrunkLayerBytes() []int64 {
	return (&checkpoint{cfg: m.Cfg, set: m.set, prefix: m.Prefix, layers: m.Bound}).sizes(manifestOf(m.trunk)).LayerBytes
}

// TrunkCompression describes the packed trunk the model reads: its
// compression ("" uncompressed, trunk.BF16C), trunk.bin's size and the
// size it has uncompressed (all zero when the model is resident).
func (m *Model) TrunkCompression() (kind string, bytes, uncompressed int64) {
	if m.trunk == nil {
		return "", 0, 0
	}
	tm := m.trunk.Manifest()
	return tm.Compression, tm.TotalBytes, tm.UncompressedBytes()
}
