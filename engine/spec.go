package engine

import (
	"context"
	"fmt"
	"k3/engine/plan"
	"math"
	"strconv"
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

// Pass is one decode pass of Generate: it fed the chosen token and Drafted
// draft tokens, of which Accepted became tokens (fewer than were accepted
// when generation ended inside the draft).
type Pass struct{ Drafted, Accepted int }

// draftNgram is the longest context suffix the drafter matches,
// draftWindow how far back it looks, and draftPerMatch how many tokens a
// match of one token may propose: a longer match is likelier to go on, so
// it may propose more (k3 bench spec measures the trade).
const (
	draftNgram    = 8
	draftWindow   = 1 << 16
	draftPerMatch = 2
)

// matchSuffix finds an earlier occurrence of the longest suffix of ids (at
// most draftNgram tokens, at least one): of the equally long ones, one
// whose next token is the one that followed them most often, the most
// recent of those. It returns where that occurrence ends and its length,
// or -1, 0 when the last token never occurred before.
func matchSuffix(ids []int) (at, n int) {
	last := len(ids) - 1
	at = -1
	var ends []int
	for i := last - 1; i >= max(0, last-draftWindow); i-- {
		l := 0
		for l < draftNgram && l <= i && ids[i-l] == ids[last-l] {
			l++
		}
		if l > n {
			n, at, ends = l, i, ends[:0]
		}
		if l == n && l > 0 {
			ends = append(ends, i)
		}
	}
	count := make(map[int]int, len(ends))
	for _, e := range ends {
		count[ids[e+1]]++
	}
	best := 0
	for _, e := range ends {
		if c := count[ids[e+1]]; c > best {
			best, at = c, e
		}
	}
	return at, n
}

// proposeDraft returns up to k tokens that followed the match of
// matchSuffix, no more than draftPerMatch per matched token; nil without
// a match. The copy may run into the tokens it proposes (like an LZ77
// match), so a repeating stretch is proposed as repeating on.
func proposeDraft(ids []int, k int) []int {
	d, _ := suggestDraft(ids, k)
	return d
}

// suggestDraft is proposeDraft with the length of the match.
func suggestDraft(ids []int, k int) ([]int, int) {
	at, n := matchSuffix(ids)
	if at < 0 || k <= 0 {
		return nil, n
	}
	draft := make([]int, min(k, draftPerMatch*n))
	for j := range draft {
		if src := at + 1 + j; src < len(ids) {
			draft[j] = ids[src]
		} else {
			draft[j] = draft[src-len(ids)]
		}
	}
	return draft, n
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
// drops the others: the MLA rows past them are cut; every KDA layer's
// state, which the pass left as it was (it ran on a scratch copy,
// State.beginLayer), takes the n recorded positions through the same
// delta-rule updates and convolution history shifts (replayKDA), so it
// equals, bit for bit, the state of feeding the n positions alone. No
// weight is read again.
func (e *Engine) rewind(s *State, n int) {
	n = min(n, s.recN)
	keep := s.recBase + n
	for _, m := range s.mla {
		if m != nil {
			m.rows = m.rows[:keep*m.width]
		}
	}
	e.replayKDA(s, n)
	s.draft.truncate(keep)
	s.Pos, s.IDs, s.recN = keep, s.IDs[:keep], n
}

// replayKDA feeds every KDA layer's state the first n positions of the
// record of the pass just run: the delta-rule updates and the short
// convolutions' history, compute only.
func (e *Engine) replayKDA(s *State, n int) {
	c := e.m.Cfg
	nh, d := c.KDAHeads, c.KDAHeadDim
	P := nh * d
	var kdaLayers []int
	for li := range s.kda {
		if s.kda[li] != nil {
			kdaLayers = append(kdaLayers, li)
		}
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

// specForget is the weight of the past in the cost averages.
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

// withDraftReads is cost with a streamed draft model's reads added to
// every pass that drafts (T > 1): its matrices, read bytes per cycle, at
// the measured disk speed.
func (c *specCosts) withDraftReads(cost func(T int) float64, bytes float64) func(T int) float64 {
	return func(T int) float64 {
		x := cost(T)
		if T > 1 && c.diskBps > 0 {
			x += bytes / c.diskBps
		}
		return x
	}
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

// specControl chooses the draft length of each pass of one generation.
// At every position of the text it generates it asks the drafter what it
// would propose there and checks the proposal against the tokens that come, drafted or
// not, at no cost: per match class (how long a suffix the drafter matched)
// and depth in the draft, it measures the share of draft tokens that came
// true when every token before them did. A pass drafting k tokens of class
// c then yields 1 + a1 + a1·a2 + ... + a1···ak tokens on average; the k
// with the most tokens per second of modelled cost wins, 0 unless it beats
// plain decoding by specGain. So a text that does not repeat itself is not
// drafted, however long its matches, and one that does is drafted as far as
// its matches have come true.
type specControl struct {
	max    int                 // longest draft
	forced bool                // always draft max tokens (a positive Spec)
	prior  float64             // the acceptance every depth starts at
	cost   func(T int) float64 // modelled seconds of a pass of T positions
	// suggest drafts up to k tokens after ids and says how many tokens it
	// matched (proposeDraft)
	suggest func(ids []int, k int) ([]int, int)
	// hit and seen count, per class and depth, the draft tokens that came
	// true and those checked, exponentially forgotten
	hit, seen [specClasses][]float64
	// allHit and allSeen pool the classes: a class with little evidence
	// of its own borrows the text's
	allHit, allSeen []float64
	open            []openDraft // proposals still coming true
	next            openDraft   // the proposal at the end of the text
	// lazy: proposals cost reads (a streamed draft model reads its
	// matrices for each), so one is made only before a pass
	// (worthProposing), not at every token to measure acceptance with
	lazy bool
}

// openDraft is a proposal being checked against the tokens that come.
type openDraft struct {
	draft []int
	class int
	pos   int // the text length it was proposed at
	at    int // its tokens that came true so far
}

// specClasses are the match lengths acceptance is measured for: 1, 2, 3,
// and 4 or more.
const specClasses = 4

// specPrior is the acceptance every depth starts at, counted as
// specPriorWeight tokens checked: low, so that a draft is made once the
// text has shown its matches come true, and worth a few checks, so that one
// or two lucky matches do not start drafting. A class's own evidence is
// weighed against the classes pooled as specClassWeight tokens checked, and
// acceptance forgets the past by specAcceptForget a token checked. These
// and specGain were chosen with k3 bench spec's prompts on the demo and
// task models and the hand-written replies, at the laptop and desktop
// presets: the values where no prompt reads more than plain decoding (the
// previous 0.8, weight 1 and gain 1.05 read up to 1.7% more on replies
// that do not repeat themselves) with the most bytes saved elsewhere.
const (
	specAcceptForget = 0.9
	specPrior        = 0.1
	specPriorWeight  = 4
	specClassWeight  = 4
)

// draftModelPrior is specPrior for a draft model: a trained drafter's
// tokens mostly come true from the first (at length 4 on k3 bench spec's
// prompts, greedy, its first token came true in 62-100% of passes), so its
// drafts start long and short ones are learnt where they fail, where the
// context drafter's start short and grow where the text repeats itself.
// Chosen with k3 bench spec --draft on the demo and task models at the
// laptop and desktop presets (docs/BENCHMARKS.md): 0.7 against 0.1, 0.4
// and 0.9, the most bytes saved over all rows with none reading more than
// plain decoding.
const draftModelPrior = 0.7

func matchClass(n int) int { return min(max(n, 1), specClasses) - 1 }

// specGain is how many times the tokens per second of plain decoding a
// draft must promise: a margin for the acceptance being an estimate.
const specGain = 1.2

func newSpecControl(maxDraft int, cost func(T int) float64) *specControl {
	c := &specControl{max: maxDraft, cost: cost, suggest: suggestDraft, prior: specPrior}
	for i := range c.hit {
		c.hit[i], c.seen[i] = make([]float64, maxDraft), make([]float64, maxDraft)
	}
	c.allHit, c.allSeen = make([]float64, maxDraft), make([]float64, maxDraft)
	return c
}

// specSetup is what a generation asks of its draft controller: the
// speculation setting, the sampler (a draft model's drafts stop where it
// foreseeably samples another token), and optionally the pass costs to
// choose lengths by and a proposer in place of the model's drafter
// (GenTrace.SpecCosts and Propose).
type specSetup struct {
	mode    Spec
	sampler Sampler
	cost    func(T int) float64
	propose func(ids []int, k int) []int
}

// newSpec returns the draft controller of a generation over s, nil when it
// will not draft: speculation off, or a prefill chunk of one position (a
// pass never feeds more than a chunk: the plan's buffers are sized for
// one). The model's draft model drafts when one is attached, else the
// context drafter.
func (e *Engine) newSpec(s *State, set specSetup) *specControl {
	kmax := min(e.m.maxDraft, e.m.chunk-1)
	if set.mode > 0 {
		kmax = min(kmax, int(set.mode))
	}
	if set.mode == SpecOff || kmax < 1 {
		return nil
	}
	cost := e.spec.passCost
	if set.cost != nil {
		cost = set.cost
	}
	c := newSpecControl(kmax, cost)
	c.forced = set.mode > 0
	if d := e.drafter(set.sampler); d != nil {
		c.suggest = func(ids []int, k int) ([]int, int) { return d.suggest(s, ids, k) }
		c.prior = draftModelPrior
		if d.d.stream != nil {
			c.lazy = true
			if set.cost == nil {
				c.cost = e.spec.withDraftReads(cost, float64(d.d.ReadBytes))
			}
		}
	}
	if p := set.propose; p != nil {
		c.suggest = func(ids []int, k int) ([]int, int) {
			_, n := matchSuffix(ids)
			return p(ids, k), n
		}
	}
	return c
}

// draft returns the draft of the next pass after ids, with room for at
// most remaining more tokens (nil: a plain step).
func (c *specControl) draft(ids []int, remaining int) []int {
	if c == nil || remaining < 2 {
		return nil
	}
	if c.forced {
		d, _ := c.suggest(ids, min(c.max, remaining-1))
		return d
	}
	if c.next.pos != len(ids) {
		if c.lazy && !c.worthProposing() {
			return nil // a proposal would cost its reads and not be drafted
		}
		c.propose(ids)
	}
	d := c.next.draft
	if k := min(chooseDraft(c.acceptance(c.next.class, len(d)), c.cost), remaining-1); k > 0 {
		return d[:k]
	}
	return nil
}

// start makes the proposal at the end of the prompt, which the first
// token generated checks.
func (c *specControl) start(ids []int) {
	if c != nil && !c.forced && !c.lazy && len(ids) > 0 && c.mayPay() {
		c.propose(ids)
	}
}

// propose makes the proposal at the end of ids, to be checked as tokens come.
func (c *specControl) propose(ids []int) {
	d, n := c.suggest(ids, c.max)
	c.next = openDraft{draft: d, class: matchClass(n), pos: len(ids)}
	if len(d) > 0 {
		c.open = append(c.open, c.next)
	}
}

// acceptance is the measured share of draft tokens of a class that come
// true at each depth up to k, given the tokens before them did.
func (c *specControl) acceptance(class, k int) []float64 {
	a := make([]float64, k)
	for j := range a {
		pooled := (c.allHit[j] + c.prior*specPriorWeight) / (c.allSeen[j] + specPriorWeight)
		a[j] = (c.hit[class][j] + pooled*specClassWeight) / (c.seen[class][j] + specClassWeight)
	}
	return a
}

// observeToken checks the open proposals against the last token of ids,
// the text so far, and makes the proposal after it.
func (c *specControl) observeToken(ids []int) {
	if c == nil || c.forced {
		return
	}
	id := ids[len(ids)-1]
	kept := c.open[:0]
	for _, o := range c.open {
		ok := o.draft[o.at] == id
		c.hit[o.class][o.at] *= specAcceptForget
		c.seen[o.class][o.at] = c.seen[o.class][o.at]*specAcceptForget + 1
		c.allHit[o.at] *= specAcceptForget
		c.allSeen[o.at] = c.allSeen[o.at]*specAcceptForget + 1
		if ok {
			c.hit[o.class][o.at]++
			c.allHit[o.at]++
			if o.at++; o.at < len(o.draft) {
				kept = append(kept, o)
			}
		}
	}
	c.open = kept
	switch {
	case c.lazy: // draft proposes where a pass is about to run
	case c.mayPay():
		c.propose(ids)
	default:
		c.next = openDraft{pos: len(ids)}
	}
}

// worthProposing reports, for a lazy controller, whether a proposal is
// worth its reads: it would be drafted at the acceptance measured so far,
// or too few of its first tokens have been checked to know (fewer than
// specPriorWeight) and it would pay if it came true.
func (c *specControl) worthProposing() bool {
	if chooseDraft(c.acceptance(matchClass(1), c.max), c.cost) > 0 {
		return true
	}
	return c.allSeen[0] < specPriorWeight && c.mayPay()
}

// mayPay reports whether a draft would pay if it always came true; when
// not (everything resident, compute-bound) nothing is proposed or measured.
func (c *specControl) mayPay() bool {
	sure := make([]float64, c.max)
	for j := range sure {
		sure[j] = 1
	}
	return chooseDraft(sure, c.cost) > 0
}

// chooseDraft returns the k in 0..len(a) that maximises the expected
// tokens per second of a pass with k drafts whose tokens come true at the
// conditional rates a, 0 unless it beats k = 0 by specGain.
func chooseDraft(a []float64, cost func(T int) float64) int {
	base := cost(1)
	if base <= 0 {
		return 0
	}
	best, bestRate := 0, specGain/base
	tokens, pow := 1.0, 1.0
	for k := 1; k <= len(a); k++ {
		pow *= a[k-1]
		tokens += pow
		if r := tokens / cost(k+1); r > bestRate {
			best, bestRate = k, r
		}
	}
	return best
}
