package constrain

import (
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Equal schemas compiled again (as each request compiles its own) share a
// Turn's masks; different schemas whose nodes have the same ids do not.
func TestMaskCacheSharedAcrossCompiles(t *testing.T) {
	tn := ForTokenizer(mergedTokenizer(t))
	compile := func(s string) *Schema {
		p, err := Compile(json.RawMessage(s))
		require.NoError(t, err)
		return p
	}
	const a = `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"],"additionalProperties":false}`
	const b = `{"type":"object","properties":{"nick":{"type":"string"},"age":{"type":"integer"}},"required":["nick","age"],"additionalProperties":false}`
	p1, p2, q := compile(a), compile(a), compile(b)
	assert.Equal(t, p1.fingerprint(), p2.fingerprint(), "compiling is deterministic")
	assert.NotEqual(t, p1.fingerprint(), q.fingerprint())

	mask := func(p *Schema, prefix string) []uint64 {
		st := Start(p)
		require.True(t, st.Feed([]byte(prefix)))
		return tn.constraint(p).Mask(st)
	}
	prefixes := []string{``, `{"`, `{"name":"A`, `{"name":"Al","age":4`}
	for _, pre := range prefixes {
		mask(p1, pre)
	}
	kept, hits, misses := tn.Masks.Stats()
	assert.Equal(t, 4, kept)
	assert.Equal(t, [2]int64{0, 4}, [2]int64{hits, misses})
	for _, pre := range prefixes {
		assert.Equal(t, New(tn.V, p2).Mask(stateAfter(t, p2, pre)), mask(p2, pre), pre)
	}
	_, hits, misses = tn.Masks.Stats()
	assert.Equal(t, [2]int64{4, 4}, [2]int64{hits, misses}, "the second compile computed nothing")

	// the other schema: its own masks, which differ after {"
	mq := mask(q, `{"`)
	assert.NotEqual(t, mask(p1, `{"`), mq)
	assert.Equal(t, New(tn.V, q).Mask(stateAfter(t, q, `{"`)), mq)
}

func stateAfter(t *testing.T, p *Schema, prefix string) *State {
	st := Start(p)
	require.True(t, st.Feed([]byte(prefix)))
	return st
}

// The shared cache is bounded: past its size it drops masks, and what it
// returns is always the mask of the state asked for.
func TestMaskCacheBounded(t *testing.T) {
	tn := ForTokenizer(mergedTokenizer(t))
	cost := maskCost(make([]uint64, (tn.V.Size()+63)/64))
	tn.Masks = NewMaskCache(3*cost + cost/2)
	p, err := Compile(json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}`))
	require.NoError(t, err)
	full := `{"name":"a"}`
	for i := range 2 * len(full) {
		pre := full[:i%len(full)]
		st := stateAfter(t, p, pre)
		assert.Equal(t, New(tn.V, p).Mask(st), tn.constraint(p).Mask(st), pre)
		kept, _, _ := tn.Masks.Stats()
		assert.LessOrEqual(t, kept, 3)
		assert.LessOrEqual(t, tn.Masks.Bytes(), 3*cost)
	}
	kept, _, _ := tn.Masks.Stats()
	assert.Equal(t, 3, kept)
	assert.Equal(t, 3*cost, tn.Masks.Bytes(), "keys and bookkeeping counted")
}

// Constraints of one Turn used from several goroutines at once (requests
// of a server) get the masks a private cache computes (run with -race).
func TestMaskCacheConcurrent(t *testing.T) {
	tn := ForTokenizer(mergedTokenizer(t))
	tn.Masks = NewMaskCache(8 * maskCost(make([]uint64, (tn.V.Size()+63)/64))) // small: lookups, stores and drops interleave
	const schema = `{"type":"object","properties":{"name":{"type":"string"},"tags":{"type":"array","items":{"enum":["x","y"]}}},"required":["name","tags"],"additionalProperties":false}`
	prefixes := []string{``, `{"`, `{"name":"`, `{"name":"Al"`, `{"name":"Al","tags":[`, `{"name":"Al","tags":["x",`}
	p, err := Compile(json.RawMessage(schema))
	require.NoError(t, err)
	want := map[string][]uint64{}
	for _, pre := range prefixes {
		want[pre] = New(tn.V, p).Mask(stateAfter(t, p, pre))
	}
	var wg sync.WaitGroup
	got := make([]map[string][]uint64, 4)
	for g := range got {
		got[g] = map[string][]uint64{}
		wg.Go(func() {
			q, _ := Compile(json.RawMessage(schema))
			c := tn.constraint(q)
			for i := range 30 {
				pre := prefixes[(i+g)%len(prefixes)]
				st := Start(q)
				st.Feed([]byte(pre))
				got[g][pre] = slices.Clone(c.Mask(st))
			}
		})
	}
	wg.Wait()
	for g := range got {
		assert.Equal(t, want, got[g], "goroutine %d", g)
	}
}

// A mask's key is a fixed-size hash whatever the schema's size (the
// audit's J13: each key held a 5 MB fingerprint, outside the cap): the
// cache's bytes are its masks' words and fixed bookkeeping only.
func TestMaskCacheKeysFixedSize(t *testing.T) {
	tn := ForTokenizer(mergedTokenizer(t))
	cost := maskCost(make([]uint64, (tn.V.Size()+63)/64))
	for _, levels := range []int{2, 17, 60} {
		tn.Masks = NewMaskCache(SharedCacheBytes)
		p, err := Compile(json.RawMessage(nestedTypeList(levels, `["object","object"]`)))
		require.NoError(t, err)
		prefix := ""
		for i := range min(levels, 8) {
			prefix += `{"a":`
			tn.constraint(p).Mask(stateAfter(t, p, prefix[:len(prefix)-i%2]))
		}
		kept, _, _ := tn.Masks.Stats()
		assert.Equal(t, kept*cost, tn.Masks.Bytes(), "%d levels", levels)
		assert.Less(t, cost, 300, "a 512-id mask and its 32-byte key")
	}
}
