package constrain

import "sync"

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
	prefix string // the schema's fingerprint: keys of equal schemas agree
	keyBuf []byte
	// scratch and out are accepts' buffers
	scratch []frame
	out     []machine
}

// MaxCached bounds the masks a private cache keeps (each is vocab/8
// bytes: 20 KiB for K3's 163,840 ids).
const MaxCached = 4096

// SharedCacheBytes bounds the masks a Turn's shared cache keeps, in bytes
// (3,276 masks at K3's vocabulary, 131,072 at the demo's 512 ids).
const SharedCacheBytes = 64 << 20

// MaskCache keeps masks by schema and state, up to a number of them; it
// is safe for concurrent use. When full, an arbitrary mask makes room.
type MaskCache struct {
	mu           sync.Mutex
	m            map[string][]uint64
	max          int
	hits, misses int64
}

// NewMaskCache returns a cache of at most max masks.
func NewMaskCache(max int) *MaskCache {
	return &MaskCache{m: map[string][]uint64{}, max: max}
}

func (mc *MaskCache) get(key []byte) ([]uint64, bool) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	m, ok := mc.m[string(key)]
	if ok {
		mc.hits++
	} else {
		mc.misses++
	}
	return m, ok
}

func (mc *MaskCache) put(key []byte, m []uint64) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	for k := range mc.m {
		if len(mc.m) < mc.max {
			break
		}
		delete(mc.m, k)
	}
	mc.m[string(key)] = m
}

// Stats returns the masks kept, and how many lookups found one (hits) or
// not (misses: each then computed).
func (mc *MaskCache) Stats() (kept int, hits, misses int64) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	return len(mc.m), mc.hits, mc.misses
}

// New returns the constraint of schema s over v, with a cache of its own.
func New(v *Vocab, s *Schema) *Constraint {
	return newConstraint(v, s, NewMaskCache(MaxCached))
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
	c.keyBuf = st.key(append(c.keyBuf[:0], c.prefix...))
	if m, ok := c.cache.get(c.keyBuf); ok {
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
	c.cache.put(c.keyBuf, m)
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
