package doctor

import (
	_ "embed"
	"runtime"

	"k3/engine/plan"
	"k3/storage/config"
	"k3/storage/direct"
)

// releasedConfig is the released checkpoint's config.json (a copy of
// testdata/kimi-k3/released-config.json; a test keeps them equal), so the
// doctor can predict before anything is downloaded.
//
//go:embed k3-config.json
var releasedConfig []byte

// K3 is the released Kimi K3 model, as the cost model sees it.
var K3 = withVision(mustModel(config.Parse("k3-config.json", releasedConfig)))

// withVision gives K3 its vision tower's sizes (picturecost.go).
func withVision(m Model) Model {
	m.Vision = VisionSizesOf(K3Vision)
	return m
}

func mustModel(c *config.Config, err error) Model {
	if err != nil {
		panic("doctor: the embedded released config: " + err.Error())
	}
	return ModelOf(c)
}

// The run the doctor plans for, in the terms of engine.Budget: what k3 run,
// k3 chat and the app use by default.
const (
	// PlanPositions is the context reserved in the KV cache: a 4K-position
	// context, what a new k3 chat plans (its 4096-token turn cap; it plans
	// again as the conversation grows) and what k3 run plans for a prompt
	// and --gen of that length. 55 KB a position at K3 size: each 4096
	// more add 0.23 GB (more with a chat's state copies).
	PlanPositions = plan.ContextPositions
	// PlanRing and PlanChunk are the CLI's --trunk-ring and --chunk
	// defaults, and the app's.
	PlanRing  = 2
	PlanChunk = 64
	// CLIBaselineBytes is what a k3 CLI process (k3 run, k3 chat) holds
	// before a plan's parts are allocated, besides the checkpoint's tensor
	// index: the Go runtime, the binary and the tokenizer of K3's
	// vocabulary (51-54 MB measured). A bound held by TestCLIBaseline (in
	// the repository's root package: a child process loads a tokenizer of
	// K3's size through k3 tokenize and samples engine.ProcessBase, the
	// base the engine's own plan counts).
	CLIBaselineBytes = 62e6
	// AppBaselineBytes is the app's instead: the CLI's and the window
	// toolkit (Fyne, its GL driver, fonts and images), assumed as before
	// (not measured here). The doctor's plans are the CLI's;
	// Prediction.AppPeakRSSBytes gives the app's beside them.
	AppBaselineBytes = 300e6
	// TensorIndexBytes is what a process holds per tensor of the opened
	// checkpoint (its safetensors entries: name, shape, place), a bound
	// held by TestTensorIndexBytes (295-297 bytes measured). After Open it
	// is held for the trunk's and the tables' tensors only.
	TensorIndexBytes = 320
	// ExpertIndexBytes is what stays per routed-expert tensor once the
	// engine has recorded where each expert lies (six offsets and file
	// indexes, 88 bytes an expert: 14.7 a tensor) and the set has
	// forgotten their entries, a bound held by TestTensorIndexBytes
	// (21-23 bytes measured, the runtime's share included). The released
	// checkpoint has 494,592 routed-expert tensors (92 MoE layers x 896
	// experts x 6): 0.013 GB of every run's base, where the full index
	// held 0.15 GB.
	ExpertIndexBytes = 26
)

// Model is what the memory plan and the cost per token need of a model,
// derived from its config alone (no checkpoint): the size of every tensor
// the engine binds, at the dtypes of the released checkpoint (bf16 trunk
// matrices and norms; f32 KDA convolutions, A_log, dt_bias, o_norm and
// router bias; MXFP4 routed experts). On a real checkpoint these are the
// sizes the engine adds up from a checkpoint (a test holds them
// equal on testdata/models/tiny-release).
type Model struct {
	Cfg             *config.Config
	LayerBytes      []int64 // trunk bytes of each layer (routed experts excluded)
	GlobalBytes     int64   // embeddings, lm_head, final norms
	EmbedBytes      int64
	LMHeadBytes     int64 // 0 with tied embeddings (lm_head is then the embedding table)
	TrunkBytes      int64 // all layers: what every token runs through
	ExpertBytes     int64 // one routed expert (its six MXFP4 tensors)
	ExpertsPerToken int   // top-k in every MoE layer
	MoELayers       int
	ExpertPoolBytes int64 // every routed expert of every MoE layer
	// Vision is the vision tower's sizes (zero: none); a plan counts it
	// only with a picture (plan.Run.Picture: PicturePlan).
	Vision plan.VisionSizes
}

// ExpertBytesPerToken is what one token's routed experts weigh.
func (m Model) ExpertBytesPerToken() int64 { return m.ExpertBytes * int64(m.ExpertsPerToken) }

// ModelOf derives a Model from a config.
func ModelOf(c *config.Config) Model {
	const bf, f32 = 2, 4
	H := int64(c.Hidden)
	KH, D := int64(c.KDAHeads), int64(c.KDAHeadDim)
	P := KH * D
	m := Model{Cfg: c}
	for i := 0; i < c.Layers; i++ {
		// input and post-attention norms; attention- and MLP-residual norm and projection
		n := int64(bf * 6 * H)
		if c.IsMLA(i) {
			nh, ql, kvl := int64(c.Heads), int64(c.QLoraRank), int64(c.KVLoraRank)
			nope, rope, vh := int64(c.QKNope), int64(c.QKRope), int64(c.VHead)
			n += bf * (ql*H + ql + nh*(nope+rope)*ql + (kvl+rope)*H + kvl + nh*(nope+vh)*kvl + H*nh*vh)
			if c.OutputGate {
				n += bf * nh * vh * H
			}
		} else {
			// q, k, v, g, o, f_a, f_b, b projections; q/k/v convolutions,
			// A_log (stored padded to the head dim), dt_bias, o_norm
			n += bf*(5*P*H+D*H+P*D+KH*H) + f32*(3*P*int64(c.ConvK)+max(KH, D)+P+D)
		}
		if c.IsDense(i) {
			n += bf * 3 * int64(c.Intermediate) * H
		} else {
			E, lat := int64(c.Experts), int64(c.Latent)
			n += bf*(E*H+2*lat*H) + f32*E // router, latent down/up projections, router bias
			if c.LatentNorm {
				n += bf * lat
			}
			n += bf * 3 * int64(c.SharedExperts*c.MoEInter) * H
			m.MoELayers++
		}
		m.LayerBytes = append(m.LayerBytes, n)
		m.TrunkBytes += n
	}
	m.EmbedBytes = bf * int64(c.VocabSize) * H
	if !c.TieEmbeddings {
		m.LMHeadBytes = m.EmbedBytes
	}
	m.GlobalBytes = m.EmbedBytes + m.LMHeadBytes + bf*3*H // + final norm, output residual norm and projection
	m.ExpertBytes = c.ExpertBytes()
	m.ExpertsPerToken = c.TopK * m.MoELayers
	m.ExpertPoolBytes = m.ExpertBytes * int64(c.Experts) * int64(m.MoELayers)
	return m
}

// Inputs are the plan inputs of a streamed run at budget b with a KV cache
// for positions: plan.ForModel over this model's sizes, as the engine plans
// (ring PlanRing, prefill chunk PlanChunk, drafts of plan.DefaultMaxDraft
// but none at ultra, process base Baseline, and the state copies a chat session keeps at
// that budget, as the app and k3 chat reserve them).
func (m Model) Inputs(b plan.Budget, positions int) plan.Inputs {
	return m.inputs(m.run(b, positions))
}

func (m Model) run(b plan.Budget, positions int) plan.Run {
	return plan.Run{Streaming: true, TrunkBudget: int64(b.TrunkGB * plan.GB), Ring: PlanRing, CacheBudget: int64(b.CacheGB * plan.GB),
		Ultra: b.Ultra, Positions: positions, Chunk: PlanChunk, Workers: runtime.NumCPU(), SpecPositions: specPositions(b),
		StateCopies: plan.ChatStateCopies(int64(b.TrunkGB*plan.GB), b.Ultra), BaselineRSS: m.Baseline(),
		Floor: plan.Floor(int64(b.TrunkGB*plan.GB), b.Ultra)}
}

// Baseline is the process base the doctor's plans of this model count: a
// CLI process's (CLIBaselineBytes) and its checkpoint's tensor index.
func (m Model) Baseline() int64 { return CLIBaselineBytes + m.IndexBytes() }

// IndexBytes is the checkpoint's tensor index as a run holds it: the
// routed experts' places (ExpertIndexBytes for each of their six tensors)
// and the set's entries of the trunk and the tables (TensorIndexBytes for
// each, at most 32 per layer).
func (m Model) IndexBytes() int64 {
	experts := int64(m.MoELayers*m.Cfg.Experts*6) * ExpertIndexBytes
	return experts + int64(32*(m.Cfg.Layers+1))*TensorIndexBytes
}

// AppBytes is a plan's total for the app: its process base instead of the
// CLI's.
func AppBytes(total int64) int64 { return total - CLIBaselineBytes + AppBaselineBytes }

// specPositions is the longest verification pass the doctor plans at
// budget b: a draft of plan.DefaultMaxDraft and the token before it, none
// at ultra (the engine drafts nothing there without a draft model).
func specPositions(b plan.Budget) int {
	if b.Ultra {
		return 0
	}
	return min(plan.DefaultMaxDraft, PlanChunk-1) + 1
}

func (m Model) inputs(r plan.Run) plan.Inputs {
	return plan.ForModel(m.Cfg, m.Cfg.Layers,
		plan.Sizes{LayerBytes: m.LayerBytes, GlobalBytes: m.GlobalBytes, TableBytes: m.EmbedBytes + m.LMHeadBytes, EmbedBytes: m.streamableEmbed(),
			SlotBytes: direct.AlignUp(m.ExpertBytes) + direct.Align, Vision: m.Vision}, r)
}

// streamableEmbed is the embedding's bytes when lm_head is a table of its
// own (plan.Sizes.EmbedBytes), else 0.
func (m Model) streamableEmbed() int64 {
	if m.LMHeadBytes == 0 {
		return 0
	}
	return m.EmbedBytes
}

// DraftPlan is Plan with a draft model of draftBytes weights and perPos
// context-row bytes per position beside it, resident or (streamed) keeping
// kept bytes and reading read per drafting cycle, as the engine plans a
// --draft run.
func (m Model) DraftPlan(b plan.Budget, draftBytes, perPos, kept, read int64, streamed bool) *plan.Plan {
	r := m.run(b, PlanPositions)
	r.DraftBytes, r.DraftPerPos, r.DraftStream, r.DraftRead, r.DraftStreamed = draftBytes, perPos, kept, read, streamed
	r.SpecPositions = min(plan.DefaultMaxDraft, PlanChunk-1) + 1 // a draft model drafts at ultra too
	return plan.Make(m.inputs(r))
}

// Plan is the memory plan of a run of the model at budget b, at the context
// the doctor plans for (PlanPositions).
func (m Model) Plan(b plan.Budget) *plan.Plan { return plan.Make(m.Inputs(b, PlanPositions)) }

// Need is the released model's planned memory at budget b: what
// plan.Resolve's "auto" (and so Choose, --preset auto and the app) fits
// into the available memory.
func Need(b plan.Budget) int64 { return K3.Plan(b).Total }
