package constrain

import (
	"crypto/sha256"
	"sync"
)

// Vocab is what the constraint needs of a vocabulary: each id's bytes,
// and which ids are control tokens (never part of the JSON).
type Vocab struct {
	tokens  [][]byte
	special []bool
}

// NewVocab builds a Vocab from the token bytes of every id (nil or
// special entries are control tokens).
func NewVocab(tokens [][]byte, special []bool) *Vocab {
	return &Vocab{tokens: tokens, special: special}
}

// Size is the number of ids.
func (v *Vocab) Size() int { return len(v.tokens) }

// Constraint is a schema over a vocabulary with a cache of the allowed
// tokens per state. It is safe for one generation at a time; constraints
// made by one Turn share that Turn's cache (Turn.constraint).
type Constraint struct {
	v      *Vocab
	schema *Schema
	mu     sync.Mutex
	cache  *MaskCache
	prefix [32]byte // the schema's fingerprint: keys of equal schemas agree
	keyBuf []byte
	// scratch and out are accepts' buffers
	scratch []frame
	out     []machine
}

// MaxCachedBytes bounds what a private cache keeps, keys included.
const MaxCachedBytes = 64 << 20

// SharedCacheBytes bounds what a Turn's shared cache keeps, in bytes,
// keys and bookkeeping included (about 3,270 masks at K3's vocabulary,
// 500,000 at the demo's 512 ids).
const SharedCacheBytes = 64 << 20

// entryOverhead is what one cached mask costs beside its words: its
// 32-byte key in the map and in the eviction queue, the slice header and
// the map's own bookkeeping (an estimate on the high side).
const entryOverhead = 32 + 32 + 24 + 48

// MaskCache keeps masks by schema and state (a fixed-size hash of both),
// up to a number of bytes; it is safe for concurrent use. When full, the
// oldest masks make room, and nothing of them is kept.
type MaskCache struct {
	mu           sync.Mutex
	m            map[[32]byte][]uint64
	order        [][32]byte // keys, oldest first
	head         int        // order[head:] are the keys kept
	bytes, max   int
	hits, misses int64
}

// NewMaskCache returns a cache of at most maxBytes bytes.
func NewMaskCache(maxBytes int) *MaskCache {
	return &MaskCache{m: map[[32]byte][]uint64{}, max: maxBytes}
}

func (mc *MaskCache) get(key [32]byte) ([]uint64, bool) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	m, ok := mc.m[key]
	if ok {
		mc.hits++
	} else {
		mc.misses++
	}
	return m, ok
}

func maskCost(m []uint64) int { return 8*len(m) + entryOverhead }

func (mc *MaskCache) put(key [32]byte, m []uint64) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if _, ok := mc.m[key]; ok || maskCost(m) > mc.max {
		return
	}
	for mc.bytes+maskCost(m) > mc.max && mc.head < len(mc.order) {
		old := mc.order[mc.head]
		mc.head++
		mc.bytes -= maskCost(mc.m[old])
		delete(mc.m, old)
	}
	if mc.head > len(mc.order)/2 { // drop the evicted keys' slots
		mc.order = append(mc.order[:0:0], mc.order[mc.head:]...)
		mc.head = 0
	}
	if len(mc.m) == 0 { // a fresh map: Go's maps keep their buckets after deletes
		mc.m = map[[32]byte][]uint64{}
	}
	mc.m[key] = m
	mc.order = append(mc.order, key)
	mc.bytes += maskCost(m)
}

// Stats returns the masks kept, and how many lookups found one (hits) or
// not (misses: each then computed).
func (mc *MaskCache) Stats() (kept int, hits, misses int64) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	return len(mc.m), mc.hits, mc.misses
}

// Bytes is what the cache holds by its own count (masks, keys and
// bookkeeping), never above its cap.
func (mc *MaskCache) Bytes() int {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	return mc.bytes
}

// New returns the constraint of schema s over v, with a cache of its own.
func New(v *Vocab, s *Schema) *Constraint {
	return newConstraint(v, s, NewMaskCache(MaxCachedBytes))
}

func newConstraint(v *Vocab, s *Schema, cache *MaskCache) *Constraint {
	return &Constraint{v: v, schema: s, cache: cache, prefix: s.fingerprint()}
}

// Start is the state before any output.
func (c *Constraint) Start() *State { return Start(c.schema) }

// Mask returns the ids whose bytes keep st a valid prefix, as a bitset
// (bit id%64 of word id/64). Control tokens are never in it. Masks are
// computed once per distinct schema and state and cached; the result
// must not be changed.
func (c *Constraint) Mask(st *State) []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keyBuf = st.key(append(c.keyBuf[:0], c.prefix[:]...))
	key := sha256.Sum256(c.keyBuf)
	if m, ok := c.cache.get(key); ok {
		return m
	}
	m := make([]uint64, (len(c.v.tokens)+63)/64)
	for id, b := range c.v.tokens {
		if len(b) == 0 || c.v.special[id] {
			continue
		}
		if c.accepts(st, b) {
			m[id/64] |= 1 << (id % 64)
		}
	}
	c.cache.put(key, m)
	return m
}

// accepts reports whether b continues st, without changing st. A state
// of one reading (the common case) is stepped in the Constraint's scratch
// buffers, with no allocation; several readings (anyOf) take a copy.
func (c *Constraint) accepts(st *State, b []byte) bool {
	if len(st.ms) != 1 {
		return st.Clone().Feed(b)
	}
	c.scratch = append(c.scratch[:0], st.ms[0].fr...)
	cur := machine{fr: c.scratch, ws: st.ms[0].ws}
	for i, x := range b {
		c.out = step(c.out[:0], cur, x)
		switch len(c.out) {
		case 0:
			return false
		case 1:
			cur = c.out[0]
		default: // a fork: read the rest on copies
			rest := &State{ms: make([]machine, len(c.out))}
			for j, m := range c.out {
				rest.ms[j] = m.clone()
			}
			return rest.Feed(b[i+1:])
		}
	}
	c.scratch = cur.fr[:0] // keep a grown buffer
	return true
}
