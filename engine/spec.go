package engine

import (
	"context"
	"fmt"
	"k3/engine/plan"
	"math"
	"strconv"
	"time"
)

// Speculative decoding, exact by construction. A pass feeds the token just
// chosen plus a draft of the tokens that may follow it, proposed from the
// context itself (the longest recent suffix match in the prompt and the
// generated text proposes what followed it). One forward over those k+1
// positions gives the logits after each of them; the sampler then picks
// each next token as plain decoding would, and the drafts are accepted up
// to the first one that differs from what was picked. The positions after
// it are rolled back (rewind), so the state, every logit and every token
// are those of decoding one token at a time: the forward pass gives each
// position the same bits whatever the number of positions fed together
// (kernels/doc.go), and the sampler draws each position's number from its
// own stream (Sampling.Sampler).

// Spec is a generation's speculative-decoding setting: SpecAuto, SpecOff,
// or a positive number of draft tokens per pass to force.
type Spec int

const (
	// SpecAuto lets the engine choose the draft length of every pass from
	// what a pass costs and the acceptance it measures (the default).
	SpecAuto Spec = 0
	// SpecOff never drafts: one forward per generated token.
	SpecOff Spec = -1
)

// DefaultMaxDraft is the longest draft a pass verifies unless
// Options.MaxDraft says otherwise; the memory plan reserves the rollback
// record for it.
const DefaultMaxDraft = plan.DefaultMaxDraft

// ParseSpec reads "auto", "off" or a draft length ("0" is off).
func ParseSpec(s string) (Spec, error) {
	switch s {
	case "auto", "":
		return SpecAuto, nil
	case "off":
		return SpecOff, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 64 {
		return SpecAuto, fmt.Errorf("speculation %q is not auto, off or a draft length 0..64", s)
	}
	if n == 0 {
		return SpecOff, nil
	}
	return Spec(n), nil
}

func (s Spec) String() string {
	switch {
	case s == SpecAuto:
		return "auto"
	case s < 0:
		return "off"
	}
	return strconv.Itoa(int(s))
}

// draftNgram is the longest context suffix the drafter matches,
// draftWindow how far back it looks, and draftPerMatch how many tokens a
// match of one token may propose: a longer match is likelier to go on, so
// it may propose more (k3 bench spec measures the trade).
const (
	draftNgram    = 8
	draftWindow   = 1 << 16
	draftPerMatch = 2
)

// matchSuffix finds the most recent earlier occurrence of the longest
// suffix of ids (at most draftNgram tokens, at least one): it returns where
// that occurrence ends and its length, or -1, 0 when the last token never
// occurred before.
func matchSuffix(ids []int) (at, n int) {
	last := len(ids) - 1
	at = -1
	for i := last - 1; i >= max(0, last-draftWindow) && n < draftNgram; i-- {
		l := 0
		for l < draftNgram && l <= i && ids[i-l] == ids[last-l] {
			l++
		}
		if l > n {
			n, at = l, i
		}
	}
	return at, n
}

// proposeDraft returns up to k tokens that followed the match of
// matchSuffix, no more than draftPerMatch per matched token; nil without
// a match. The copy may run into the tokens it proposes (like an LZ77
// match), so a repeating stretch is proposed as repeating on.
func proposeDraft(ids []int, k int) []int {
	at, n := matchSuffix(ids)
	if at < 0 || k <= 0 {
		return nil
	}
	draft := make([]int, min(k, draftPerMatch*n))
	for j := range draft {
		if src := at + 1 + j; src < len(ids) {
			draft[j] = ids[src]
		} else {
			draft[j] = draft[src-len(ids)]
		}
	}
	return draft
}

// verify feeds ids (the chosen token and its draft) in one forward pass
// with the logits of every position, recording what rewind needs to drop
// the positions that will not be kept.
func (e *Engine) verify(ctx context.Context, s *State, ids []int) ([]float32, error) {
	if s.damaged {
		return nil, errDamaged
	}
	s.recording, s.recBase, s.recN = true, s.Pos, len(ids)
	defer func() { s.recording = false }()
	return e.forward(ctx, s, ids, true, true)
}

// rewind keeps the first n positions of the verification pass just run and
// drops the others: the MLA rows past them are cut; every KDA layer's state
// is restored from its copy from before the pass and the n recorded
// positions are replayed through the same delta-rule updates and
// convolution history shifts, so the state equals, bit for bit, the state
// of feeding the n positions alone. No weight is read again.
func (e *Engine) rewind(s *State, n int) {
	if n >= s.recN {
		return
	}
	c := e.m.Cfg
	nh, d := c.KDAHeads, c.KDAHeadDim
	P := nh * d
	keep := s.recBase + n
	var kdaLayers []int
	for li := range s.kda {
		if m := s.mla[li]; m != nil {
			m.rows = m.rows[:keep*m.width]
			continue
		}
		if s.backupPos[li] != s.recBase {
			s.damaged = true // cannot happen: verify keeps every layer
			continue
		}
		k, b := s.kda[li], s.backup[li]
		copy(k.S, b.S)
		for j := range k.conv {
			copy(k.conv[j], b.conv[j])
		}
		kdaLayers = append(kdaLayers, li)
	}
	e.pool.Each(len(kdaLayers)*nh, func(w int) {
		li, h := kdaLayers[w/nh], w%nh
		r, S := s.rec[li], s.kda[li].S[h*d*d:(h+1)*d*d]
		u := make([]float64, d)
		delta := make([]float32, d)
		for t := 0; t < n; t++ {
			o := t*P + h*d
			kdaUpdate(S, r.k[o:o+d], r.v[o:o+d], r.a[o:o+d], float64(r.beta[t*nh+h]), u, delta)
		}
	})
	K := c.ConvK
	e.pool.Each(len(kdaLayers)*3, func(w int) {
		li, j := kdaLayers[w/3], w%3
		hist, raw := s.kda[li].conv[j], s.rec[li].raw[j]
		for cc := 0; cc < P; cc++ {
			hh := hist[cc*(K-1) : (cc+1)*(K-1)]
			for t := 0; t < n; t++ {
				convPush(hh, raw[t*P+cc])
			}
		}
	})
	s.Pos, s.IDs, s.recN = keep, s.IDs[:keep], n
}

// specCosts model what a decode pass of T positions costs, about
// max(read, compute): read = (the streamed trunk and tables, read once per
// pass, + the expert misses of each position) / disk speed; compute =
// c0 + c1·T. The bytes and the disk speed are measured per decode pass, c0
// and c1 from passes of one and of several positions. Until a pass of
// several positions has run, every position is assumed to cost a whole
// pass (compute-bound), so a model that reads nothing never drafts on its
// own. The engine keeps them across generations.
type specCosts struct {
	trunkBytes  float64 // streamed trunk and table bytes per pass
	expertBytes float64 // expert bytes read per position
	diskBps     float64 // bytes per second of read time
	compute1    float64 // compute seconds of a one-position pass
	slope       float64 // compute seconds per extra position
	slopeKnown  bool
}

// specForget is the weight of the past in the acceptance and cost averages.
const specForget = 0.9

// passCost is the modelled cost, in seconds, of a pass of T positions.
func (c *specCosts) passCost(T int) float64 {
	read := 0.0
	if c.diskBps > 0 {
		read = (c.trunkBytes + float64(T)*c.expertBytes) / c.diskBps
	}
	slope, base := c.compute1, 0.0
	if c.slopeKnown {
		slope, base = c.slope, c.compute1-c.slope
	}
	return math.Max(read, base+float64(T)*slope)
}

// measure folds in a decode pass of T positions: its wall seconds, the
// seconds it waited for reads, the read time (disk busy) and the trunk and
// expert bytes it read.
func (c *specCosts) measure(T int, wall, wait, busy float64, trunk, expert int64) {
	avg := func(old, x float64) float64 {
		if old == 0 {
			return x
		}
		return specForget*old + (1-specForget)*x
	}
	c.trunkBytes = avg(c.trunkBytes, float64(trunk))
	c.expertBytes = avg(c.expertBytes, float64(expert)/float64(T))
	if busy > 0 && trunk+expert > 0 {
		c.diskBps = avg(c.diskBps, float64(trunk+expert)/busy)
	}
	comp := max(wall-wait, 0)
	if T == 1 {
		c.compute1 = avg(c.compute1, comp)
		return
	}
	if c.compute1 > 0 {
		s := max((comp-c.compute1)/float64(T-1), 0)
		if c.slopeKnown {
			c.slope = avg(c.slope, s)
		} else {
			c.slope, c.slopeKnown = s, true
		}
	}
}

// specControl chooses the draft length of each pass of one generation:
// with a per-token acceptance a, a pass with k drafts yields 1 + a + ... +
// a^k tokens; the length with the most tokens per second of modelled cost
// wins, 0 unless it beats plain decoding by specGain. The acceptance is
// measured per match length (1, 2, 3, 4 or more tokens matched: a longer
// match is likelier to go on), on every verified draft and, while not
// drafting, on the draft that would have been verified (checked against the
// tokens that came, at no cost). Short matches start at 0 (specPrior):
// they are drafted once the text has shown that they come true, so a text
// that never repeats itself is not drafted.
type specControl struct {
	max    int                 // longest draft
	forced bool                // always draft max tokens (GenOptions.Spec > 0)
	cost   func(T int) float64 // modelled seconds of a pass of T positions
	// propose drafts up to k tokens after ids (proposeDraft)
	propose func(ids []int, k int) []int
	// accepted drafts and rejections per match-length class, exponentially
	// forgotten; class is the one of the draft being verified
	acc, rej [specClasses]float64
	class    int
	// shadow is the draft that would have been verified while not
	// drafting, of class shadowClass; its first shadowAt tokens came
	shadow      []int
	shadowAt    int
	shadowClass int
}

// specClasses are the match lengths acceptance is measured for: 1, 2, 3,
// and 4 or more.
const specClasses = 4

// specPrior are the accepted drafts each class starts with (against one
// rejection): a match of one or two tokens drafts only once it has been
// seen to come true, of three at acceptance 1/2, of four or more at 3/4
// (k3 bench spec measures the trade).
var specPrior = [specClasses]float64{0, 0, 1, 3}

func matchClass(n int) int { return min(n, specClasses) - 1 }

// specGain is how many times the tokens per second of plain decoding a
// draft must promise.
const specGain = 1.05

func newSpecControl(maxDraft int, cost func(T int) float64) *specControl {
	c := &specControl{max: maxDraft, cost: cost, propose: proposeDraft}
	c.acc, c.rej = specPrior, [specClasses]float64{1, 1, 1, 1}
	return c
}

// newSpec returns the draft controller of a generation, nil when it will
// not draft: speculation off, the recompute check, or a prefill chunk of
// one position (a pass never feeds more than a chunk: the plan's buffers
// are sized for one).
func (e *Engine) newSpec(opt GenOptions) *specControl {
	kmax := min(e.m.maxDraft, e.m.chunk-1)
	if opt.Spec > 0 {
		kmax = min(kmax, int(opt.Spec))
	}
	if opt.Spec == SpecOff || opt.Recompute || kmax < 1 {
		return nil
	}
	c := newSpecControl(kmax, e.spec.passCost)
	c.forced = opt.Spec > 0
	if opt.propose != nil {
		c.propose = opt.propose
	}
	return c
}

// draft returns the draft of the next pass after ids, with room for at
// most remaining more tokens (nil: a plain step).
func (c *specControl) draft(ids []int, remaining int) []int {
	if c == nil {
		return nil
	}
	_, n := matchSuffix(ids)
	class := matchClass(max(n, 1))
	k := c.max
	if !c.forced {
		k = chooseDraft(c.acceptance(class), min(c.max, draftPerMatch*n), c.cost)
	}
	if k = min(k, remaining-1); k > 0 {
		c.class = class
		return c.propose(ids, k)
	}
	if !c.forced && c.shadowAt >= len(c.shadow) {
		c.shadow, c.shadowAt, c.shadowClass = c.propose(ids, c.max), 0, class
	}
	return nil
}

// acceptance is the measured per-token acceptance of drafts of a class.
func (c *specControl) acceptance(class int) float64 {
	return c.acc[class] / (c.acc[class] + c.rej[class])
}

// observe records the verified draft: accepted of drafted matched.
func (c *specControl) observe(drafted, accepted int) {
	if c != nil {
		c.record(c.class, drafted, accepted)
	}
}

func (c *specControl) record(class, drafted, accepted int) {
	c.acc[class] = c.acc[class]*specForget + float64(accepted)
	c.rej[class] *= specForget
	if accepted < drafted {
		c.rej[class]++
	}
}

// observeToken checks the shadow draft against the token that came.
func (c *specControl) observeToken(id int) {
	if c == nil || c.shadowAt >= len(c.shadow) {
		return
	}
	if c.shadow[c.shadowAt] == id {
		if c.shadowAt++; c.shadowAt < len(c.shadow) {
			return
		}
	}
	c.record(c.shadowClass, len(c.shadow), c.shadowAt)
	c.shadow, c.shadowAt = nil, 0
}

// chooseDraft returns the k in 0..kmax that maximises the expected tokens
// per second of a pass with k drafts at per-token acceptance a, 0 unless it
// beats k = 0 by specGain.
func chooseDraft(a float64, kmax int, cost func(T int) float64) int {
	base := cost(1)
	if base <= 0 {
		return 0
	}
	best, bestRate := 0, specGain/base
	tokens, pow := 1.0, 1.0
	for k := 1; k <= kmax; k++ {
		pow *= a
		tokens += pow
		if r := tokens / cost(k+1); r > bestRate {
			best, bestRate = k, r
		}
	}
	return best
}

// passMeter measures one decode pass for the cost model.
type passMeter struct {
	t0    time.Time
	stats Stats
}

func (e *Engine) startPass() passMeter { return passMeter{time.Now(), e.counters()} }

func (e *Engine) endPass(p passMeter, T int) {
	d := e.counters().Sub(p.stats)
	e.spec.measure(T, time.Since(p.t0).Seconds(), d.IOWaitSeconds(), d.ReadBusySeconds, d.TrunkBytesRead, d.Expert.BytesRead)
}
