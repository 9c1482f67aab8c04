package cachesim

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"k3/engine/expertcache"
	"k3/storage/config"
)

// Stats is the outcome of replaying a trace under one policy.
type Stats struct {
	Policy    string
	Capacity  int // slots
	Requests  int
	Hits      int
	Misses    int
	Evictions int
}

// HitRate is Hits/Requests (0 for an empty trace).
func (s Stats) HitRate() float64 {
	if s.Requests == 0 {
		return 0
	}
	return float64(s.Hits) / float64(s.Requests)
}

// Trace is a decoded trace with the dense keys the policies run on.
type Trace struct {
	Reqs     []Request
	Keys     []uint64 // dense key per request: layer*NExperts+expert, or a compacted form
	NLayers  int      // layer rows in the key space (0 when keys are opaque ids)
	NExperts int      // the key stride (0 when keys are opaque ids)
}

// maxDenseKeys bounds the key space a trace's raw indices may span before
// they are compacted.
func maxDenseKeys(n int) int { return max(1<<20, 4*n) }

// NewTrace derives dense keys for reqs: layer*(max expert+1)+expert when
// that space is small (real traces: 93x896); otherwise layers and experts
// are each renumbered by rank (keeping the layer order the layer policies
// rely on), and if even that is too large, keys are first-appearance ids
// (layer and layer+r then refuse the trace).
func NewTrace(reqs []Request) *Trace {
	t := &Trace{Reqs: reqs, Keys: make([]uint64, len(reqs)), NLayers: 1, NExperts: 1}
	for _, r := range reqs {
		t.NLayers = max(t.NLayers, int(r.Layer)+1)
		t.NExperts = max(t.NExperts, int(r.Expert)+1)
	}
	limit := maxDenseKeys(len(reqs))
	if uint64(t.NLayers)*uint64(t.NExperts) <= uint64(limit) {
		for i, r := range reqs {
			t.Keys[i] = expertcache.Key(r.Layer, r.Expert, int32(t.NExperts))
		}
		return t
	}
	lr, er := rank(reqs, func(r Request) int32 { return r.Layer }), rank(reqs, func(r Request) int32 { return r.Expert })
	if uint64(len(lr))*uint64(len(er)) <= uint64(limit) {
		t.NLayers, t.NExperts = len(lr), len(er)
		for i, r := range reqs {
			t.Keys[i] = uint64(lr[r.Layer])*uint64(len(er)) + uint64(er[r.Expert])
		}
		return t
	}
	ids := map[Request]uint64{}
	for i, r := range reqs {
		id, ok := ids[r]
		if !ok {
			id = uint64(len(ids))
			ids[r] = id
		}
		t.Keys[i] = id
	}
	t.NLayers, t.NExperts = 0, 0
	return t
}

// rank numbers the distinct values of f over reqs in increasing order.
func rank(reqs []Request, f func(Request) int32) map[int32]int {
	m := map[int32]int{}
	for _, r := range reqs {
		m[f(r)] = 0
	}
	vals := make([]int32, 0, len(m))
	for v := range m {
		vals = append(vals, v)
	}
	sort.Slice(vals, func(i, j int) bool { return vals[i] < vals[j] })
	for i, v := range vals {
		m[v] = i
	}
	return m
}

// KeySpace is one more than the largest key.
func (t *Trace) KeySpace() int {
	if t.NExperts == 0 {
		var m uint64
		for _, k := range t.Keys {
			m = max(m, k+1)
		}
		return int(m)
	}
	return t.NLayers * t.NExperts
}

// Replay runs keys through an online policy from its current state.
func Replay(p expertcache.Policy, keys []uint64) Stats {
	st := Stats{Policy: p.Name(), Capacity: p.Capacity(), Requests: len(keys)}
	for _, k := range keys {
		ev := p.Access(k)
		if ev.Hit {
			st.Hits++
			continue
		}
		st.Misses++
		if ev.Evicted {
			st.Evictions++
		}
	}
	return st
}

// HotKeys returns the n most requested keys of the trace, by descending
// count, ties to the key requested first.
func HotKeys(keys []uint64, n int) []uint64 {
	type kc struct {
		key          uint64
		count, first int
	}
	idx := map[uint64]int{}
	var all []kc
	for i, k := range keys {
		j, ok := idx[k]
		if !ok {
			j = len(all)
			idx[k] = j
			all = append(all, kc{key: k, first: i})
		}
		all[j].count++
	}
	sort.SliceStable(all, func(a, b int) bool { return all[a].count > all[b].count })
	n = min(max(n, 0), len(all))
	out := make([]uint64, n)
	for i := range out {
		out[i] = all[i].key
	}
	return out
}

// SimPinnedLRU is the C tool's pin+lru column: the capacity/2 hottest
// experts of this very trace pinned (future knowledge), LRU for the rest.
func SimPinnedLRU(keys []uint64, keySpace, capacity int) Stats {
	npin := capacity / 2
	if npin >= capacity {
		npin = capacity - 1
	}
	p := NewPinnedLRU(capacity, keySpace, HotKeys(keys, npin))
	return Replay(p, keys)
}

// The simulator's own policies, on top of the engine's (expertcache.Names:
// layer+r, layer, lru, s3fifo), spelled as in the registry.
const (
	PolicyS3FIFOWS  = "s3fifo-ws" // online: S3-FIFO sized against one token's working set
	PolicyLFU       = "lfu"       // online: LFU
	PolicyBelady    = "belady"    // offline: the optimum (SimBelady)
	PolicyPinnedLRU = "pin+lru"   // offline: this trace's hottest experts pinned (SimPinnedLRU)
)

// Policies lists every policy Simulate knows, in table order: every
// expertcache policy and the simulator's own.
var Policies = []string{expertcache.NameLRU, expertcache.NameS3FIFO, PolicyS3FIFOWS, PolicyLFU,
	expertcache.NameLayer, expertcache.NameLayerR, PolicyBelady, PolicyPinnedLRU}

// Offline reports whether a policy needs the whole trace (future knowledge).
func Offline(name string) bool { return name == PolicyBelady || name == PolicyPinnedLRU }

// LookupPolicy resolves a policy name, case-insensitively as the registry
// does ("LRU" is "lru"; the text table prints names upper-case).
func LookupPolicy(name string) (string, error) {
	for _, p := range Policies {
		if strings.EqualFold(p, name) {
			return p, nil
		}
	}
	return "", fmt.Errorf("unknown cache policy %q (known: %s)", name, strings.Join(Policies, ", "))
}

// NewS3FIFOWS is the C tool's later S3-FIFO sizing: a 10% small queue when
// the cache holds at least one token's working set of workingSet slots
// (Model.TokenRequests), 50% below that (where an admission filter has
// nothing to protect).
func NewS3FIFOWS(capacity, keySpace, workingSet int) *expertcache.S3FIFO {
	frac := 0.10
	if capacity < workingSet {
		frac = 0.50
	}
	return expertcache.NewS3FIFOWith(capacity, keySpace, frac, capacity)
}

// Simulate replays the trace under the named policy at capacity slots; m
// sizes s3fifo-ws.
func Simulate(t *Trace, m Model, policy string, capacity int) (Stats, error) {
	name, err := LookupPolicy(policy)
	if err != nil {
		return Stats{}, err
	}
	if capacity < 1 {
		return Stats{}, fmt.Errorf("capacity %d slots: need at least 1", capacity)
	}
	ks := t.KeySpace()
	var p expertcache.Policy
	switch name {
	case PolicyBelady:
		return SimBelady(t.Keys, ks, capacity), nil
	case PolicyPinnedLRU:
		return SimPinnedLRU(t.Keys, ks, capacity), nil
	case PolicyS3FIFOWS:
		p = NewS3FIFOWS(capacity, ks, m.TokenRequests())
	case PolicyLFU:
		p = NewLFU(capacity, ks)
	default: // the engine's, from the registry
		layers, experts := t.NLayers, t.NExperts
		if experts == 0 { // opaque ids: one row of keys, no layer to cycle on
			if name == expertcache.NameLayer || name == expertcache.NameLayerR {
				return Stats{}, fmt.Errorf("%s needs (layer, expert) indices below %d combined", name, expertcache.MaxKey)
			}
			layers, experts = 1, max(ks, 1)
		}
		newPolicy, _ := expertcache.Lookup(name)
		p = newPolicy(capacity, layers, experts)
	}
	st := Replay(p, t.Keys)
	st.Policy = name
	return st, nil
}

// SlotsForGB is the number of whole experts of expertBytes in gb
// gigabytes (GB = 1e9 bytes), as the published table counts them.
func SlotsForGB(gb float64, expertBytes int64) int {
	return int(math.Floor(gb * 1e9 / float64(expertBytes)))
}

// Model describes what the table's per-token columns need.
type Model struct {
	ExpertBytes int64   // bytes read per miss
	MoELayers   int     // layers with routed experts
	Experts     int     // routed experts per layer
	TopK        int     // experts per token per layer
	DiskMBps    float64 // read rate for SEC/TOK, MB = 1e6 bytes
}

// DiskMBps is the measured random-cold read rate behind the published
// SEC/TOK column.
const DiskMBps = 1234.0

// K3 is Kimi K3 as released, for k3 sim-cache without a config: what
// ModelFromConfig gives for testdata/kimi-k3/released-config.json (93
// layers, the first dense; 896 routed experts, top-16; moe_intermediate_size
// 3072 over a 3584 latent, so 17,547,264 bytes an expert), at DiskMBps.
var K3 = Model{ExpertBytes: 17_547_264, MoELayers: 92, Experts: 896, TopK: 16, DiskMBps: DiskMBps}

// ModelFromConfig is the Model of a checkpoint's config at a read rate:
// its MoE layers (all but the first_k_dense_replace dense ones), routed
// experts, top-k, and the bytes of one routed expert as the engine reads it
// (engine/experts.go expertSize: gate and up [MoEInter x Latent] and down
// [Latent x MoEInter] in MXFP4, half a byte a weight plus a scale byte per
// 32).
func ModelFromConfig(c *config.Config, diskMBps float64) Model {
	return Model{
		ExpertBytes: c.ExpertBytes(),
		MoELayers:   max(c.Layers-c.FirstKDense, 0),
		Experts:     c.Experts,
		TopK:        c.TopK,
		DiskMBps:    diskMBps,
	}
}

// TokenRequests is one token's expert requests (1472 for K3).
func (m Model) TokenRequests() int { return m.TopK * m.MoELayers }

// Tokens is the trace's token count as the table reckons it:
// floor(requests / TokenRequests), at least 1.
func (m Model) Tokens(requests int) int { return max(requests/max(m.TokenRequests(), 1), 1) }

// GBPerToken is the expert bytes read per token, in GB, for misses.
func (m Model) GBPerToken(misses, requests int) float64 {
	return float64(misses) * float64(m.ExpertBytes) / 1e9 / float64(m.Tokens(requests))
}

// SecPerToken is the I/O time per token for gbPerToken at DiskMBps.
func (m Model) SecPerToken(gbPerToken float64) float64 { return gbPerToken * 1000 / m.DiskMBps }

// HotExpert is one entry of the hottest-experts line.
type HotExpert struct {
	Request
	Count int
}

// Summary is the trace description printed above the table.
type Summary struct {
	Requests int
	Distinct int         // distinct experts touched = compulsory misses
	Tokens   int         // Model.Tokens
	Pool     int         // MoELayers x Experts
	Repeats  int         // Requests - Distinct
	Hottest  []HotExpert // by count, ties to first requested
}

// Summarize describes a trace; nHot bounds Hottest.
func Summarize(reqs []Request, m Model, nHot int) Summary {
	s := Summary{Requests: len(reqs), Tokens: m.Tokens(len(reqs)), Pool: m.MoELayers * m.Experts}
	counts := map[Request]int{}
	var order []Request
	for _, r := range reqs {
		if counts[r] == 0 {
			order = append(order, r)
		}
		counts[r]++
	}
	s.Distinct = len(order)
	s.Repeats = s.Requests - s.Distinct
	sort.SliceStable(order, func(a, b int) bool { return counts[order[a]] > counts[order[b]] })
	for _, r := range order[:min(max(nHot, 0), len(order))] {
		s.Hottest = append(s.Hottest, HotExpert{r, counts[r]})
	}
	return s
}

// Row is one capacity of the table.
type Row struct {
	CacheGB    float64 // 0 when the capacity was given in slots
	Slots      int
	Stats      []Stats // one per requested policy, in order
	ReadPolicy string  // the policy GB READ/TOK and SEC/TOK follow
	GBPerToken float64
	SecPerTok  float64
}

// Table replays the trace at each capacity (slots) under each policy.
// readPolicy (one of policies) drives the per-token read columns.
func Table(t *Trace, m Model, policies []string, slots []int, readPolicy string) ([]Row, error) {
	names := make([]string, len(policies))
	for i, p := range policies {
		n, err := LookupPolicy(p)
		if err != nil {
			return nil, err
		}
		names[i] = n
	}
	rp, err := LookupPolicy(readPolicy)
	if err != nil {
		return nil, err
	}
	rows := make([]Row, len(slots))
	for i, c := range slots {
		r := Row{Slots: c, ReadPolicy: rp}
		var readStats *Stats
		for _, n := range names {
			st, err := Simulate(t, m, n, c)
			if err != nil {
				return nil, err
			}
			r.Stats = append(r.Stats, st)
			if n == rp {
				readStats = &r.Stats[len(r.Stats)-1]
			}
		}
		if readStats == nil {
			st, err := Simulate(t, m, rp, c)
			if err != nil {
				return nil, err
			}
			readStats = &st
		}
		r.GBPerToken = m.GBPerToken(readStats.Misses, readStats.Requests)
		r.SecPerTok = m.SecPerToken(r.GBPerToken)
		rows[i] = r
	}
	return rows, nil
}
