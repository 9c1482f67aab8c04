package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/plan"
	"k3/engine/synth"
	"k3/storage/trunk"
)

// budgetModel is a generated checkpoint large enough that budgets matter
// (~40 MB: 10 layers of ~1 MB trunk and 48 experts of 52 KB each).
func budgetSpec() synth.Spec { return synth.Medium() }

var (
	budgetOnce sync.Once
	budgetDir  string
	budgetErr  error
)

// budgetCheckpoint generates and packs the checkpoint once per test binary.
func budgetCheckpoint(t *testing.T) (model, tr string) {
	budgetOnce.Do(func() {
		budgetDir, budgetErr = os.MkdirTemp("", "k3-budget-*")
		if budgetErr != nil {
			return
		}
		if budgetErr = synth.Write(filepath.Join(budgetDir, "model"), budgetSpec()); budgetErr != nil {
			return
		}
		_, budgetErr = trunk.Pack(context.Background(), filepath.Join(budgetDir, "model"), filepath.Join(budgetDir, "trunk"), trunk.Options{})
	})
	if budgetErr != nil {
		t.Fatal(budgetErr)
	}
	return filepath.Join(budgetDir, "model"), filepath.Join(budgetDir, "trunk")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if budgetDir != "" {
		os.RemoveAll(budgetDir)
	}
	os.Exit(code)
}

type runResult struct {
	ids    []int
	logits []float32
	plan   *plan.Plan
	stats  Stats
}

func runBudget(t *testing.T, dir string, opt Options, threads int, prompt []int, gen int) runResult {
	t.Helper()
	opt.Chunk = 16
	opt.Positions = len(prompt) + gen
	m, err := Open(dir, opt)
	require.NoError(t, err)
	defer m.Close()
	e := m.NewEngine(threads)
	defer e.Close()
	res, err := e.Generate(context.Background(), nil, prompt, GenOptions{MaxTokens: gen})
	require.NoError(t, err)
	return runResult{res.Generated, res.FirstLogits, m.Plan, e.Snapshot()}
}

// TestSameOutputAtEveryBudget: token ids and logits bytes are identical with
// no trunk, a fully pinned trunk, a streamed trunk with 1- and 3-slot rings,
// an expert cache so small that every step evicts, and 1 or 2 threads.
func TestSameOutputAtEveryBudget(t *testing.T) {
	model, tr := budgetCheckpoint(t)
	prompt := []int{5, 77, 300, 12, 999, 41, 8, 150, 151, 152, 3, 600, 601, 2, 9, 10, 11, 12, 13, 14, 700}
	const gen = 6
	big := int64(1 << 40)
	cases := []struct {
		name    string
		opt     Options
		threads int
	}{
		{"resident", Options{Budget: Budget{CacheBytes: big}}, 2},
		{"trunk pinned", Options{TrunkDir: tr, Budget: Budget{TrunkBytes: big, Ring: 2, CacheBytes: big}}, 2},
		{"ring 1", Options{TrunkDir: tr, Budget: Budget{TrunkBytes: 1, Ring: 1, CacheBytes: big}}, 2},
		{"ring 3 + some pinned", Options{TrunkDir: tr, Budget: Budget{TrunkBytes: 6e6, Ring: 3, CacheBytes: big}}, 1},
		{"ring below two of the largest", Options{TrunkDir: tr, Budget: Budget{TrunkBytes: 2.7e6, Ring: 2, CacheBytes: big}}, 2},
		{"ring of one layer, next read after attention", Options{TrunkDir: tr, Budget: Budget{TrunkBytes: 1.7e6, Ring: 2, CacheBytes: 1}}, 2},
		{"tiny expert cache", Options{TrunkDir: tr, Budget: Budget{TrunkBytes: 1, Ring: 2, CacheBytes: 1}}, 2},
		{"small cache, lru", Options{Budget: Budget{CacheBytes: 3e6}, CachePolicy: "lru"}, 2},
		{"small cache, s3fifo", Options{Budget: Budget{CacheBytes: 3e6}, CachePolicy: "s3fifo"}, 2},
		{"tiny cache, 1 thread", Options{Budget: Budget{CacheBytes: 1}}, 1},
		{"ultra-low-memory", Options{TrunkDir: tr, Budget: Budget{TrunkBytes: 1, Ring: 1, CacheBytes: 1, Ultra: true}}, 2},
	}
	var ref runResult
	for i, c := range cases {
		r := runBudget(t, model, c.opt, c.threads, prompt, gen)
		switch c.name {
		case "ring 1":
			if r.plan.RingSlots != 1 || r.plan.PinnedBytes != 0 || r.stats.TrunkBytesRead == 0 {
				t.Fatalf("%s: plan %+v, streamed %d bytes", c.name, r.plan, r.stats.TrunkBytesRead)
			}
		case "ring 3 + some pinned":
			if r.plan.RingSlots != 3 || r.plan.PinnedBytes == 0 || !slices.Contains(r.plan.Pinned, false) {
				t.Fatalf("%s: plan %+v", c.name, r.plan)
			}
		case "ring below two of the largest":
			// the dense layer is 1.53 MB, the others 1.29 and 0.87 MB: two
			// of those are in flight in a budget of 2.7 MB, in a ring of
			// the largest two that fit (2.59 MB, TestRingReadsAhead)
			if r.plan.RingSlots != 2 || r.plan.RingBytes >= 2.7e6 || r.plan.RingBytes < 2.5e6 || r.plan.PinnedBytes != 0 || 2*r.plan.SlotBytes <= r.plan.RingBytes {
				t.Fatalf("%s: plan %+v", c.name, r.plan)
			}
		case "ultra-low-memory":
			if r.plan.Globals > 10000 {
				t.Fatalf("%s: model tables %d bytes planned resident", c.name, r.plan.Globals)
			}
		case "tiny expert cache":
			if r.stats.Expert.Evictions == 0 || r.plan.CacheSlots != 7 {
				t.Fatalf("%s: %d evictions, %d slots", c.name, r.stats.Expert.Evictions, r.plan.CacheSlots)
			}
			// at the floor the embedding rows stream, lm_head stays
			// resident: one row read per position fed, nothing of lm_head
			h := int64(budgetSpec().Hidden)
			require.True(t, r.plan.EmbedStreamed, c.name)
			assert.Less(t, r.plan.Globals, ref.plan.Globals, c.name)
			assert.Equal(t, int64(len(prompt)+gen-1)*2*h, r.stats.EmbedBytesRead, c.name)
			assert.Zero(t, r.stats.HeadBytesRead, c.name)
		}
		if i == 0 {
			ref = r
			continue
		}
		require.Equal(t, ref.ids, r.ids, c.name)
		requireSameBits(t, c.name+" logits", r.logits, ref.logits)
	}
}

// TestStreamedStateRoundTrip: save after a streamed prefill, load, continue
// == one uninterrupted run.
func TestStreamedStateRoundTrip(t *testing.T) {
	model, tr := budgetCheckpoint(t)
	opt := Options{TrunkDir: tr, Budget: Budget{TrunkBytes: 1, Ring: 2, CacheBytes: 1}, Positions: 40, Chunk: 16}
	m, err := Open(model, opt)
	require.NoError(t, err)
	defer m.Close()
	e := m.NewEngine(2)
	defer e.Close()
	prompt := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}
	whole, err := e.Generate(context.Background(), nil, prompt, GenOptions{MaxTokens: 5})
	if err != nil {
		t.Fatal(err)
	}
	st := m.NewState()
	e.Generate(context.Background(), st, prompt[:11], GenOptions{})
	path := filepath.Join(t.TempDir(), "s")
	if err := m.SaveState(path, st); err != nil {
		t.Fatal(err)
	}
	ld, err := m.LoadState(path)
	if err != nil {
		t.Fatal(err)
	}
	rest, err := e.Generate(context.Background(), ld, prompt[11:], GenOptions{MaxTokens: 5})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rest.Generated, whole.Generated) {
		t.Fatalf("resumed %v, whole %v", rest.Generated, whole.Generated)
	}
}

// TestStreamFaults: an expert read that fails with EIO, a truncated shard,
// a corrupt trunk.json and a corrupt trunk run each give a clear error.
func TestStreamFaults(t *testing.T) {
	model, tr := budgetCheckpoint(t)
	// EIO from an expert read: the run is invalid
	m, err := Open(model, Options{TrunkDir: tr, Budget: Budget{TrunkBytes: 1, Ring: 1, CacheBytes: 1},
		ExpertReadAt: func(path string, off int64, dst []byte) error { return errors.New("input/output error") }})
	require.NoError(t, err)
	e := m.NewEngine(1)
	res, err := e.Generate(context.Background(), nil, []int{1, 2, 3}, GenOptions{MaxTokens: 2})
	var ee *ExpertError
	require.ErrorAs(t, err, &ee)
	assert.Contains(t, err.Error(), "model-0000")
	assert.NotZero(t, m.Experts().Stats().Failures)
	// the failed forward left the state half-updated: it is refused, not reused
	_, err = e.Feed(context.Background(), res.State, []int{4}, false)
	assert.ErrorIs(t, err, errDamaged)
	e.Close()
	m.Close()

	copyDir := func(src string) string {
		dst := filepath.Join(t.TempDir(), filepath.Base(src))
		os.MkdirAll(dst, 0o755)
		ents, _ := os.ReadDir(src)
		for _, en := range ents {
			b, _ := os.ReadFile(filepath.Join(src, en.Name()))
			os.WriteFile(filepath.Join(dst, en.Name()), b, 0o644)
		}
		return dst
	}
	// truncated shard: refused when the checkpoint is opened
	bad := copyDir(model)
	shard := filepath.Join(bad, "model-00002-of-00011.safetensors")
	fi, _ := os.Stat(shard)
	os.Truncate(shard, fi.Size()-100)
	if _, err := Open(bad, Options{Budget: Budget{CacheBytes: 1}}); err == nil || !strings.Contains(err.Error(), "model-00002-of-00011") {
		t.Fatalf("truncated shard: %v", err)
	}
	// corrupt trunk.json
	badTrunk := copyDir(tr)
	os.WriteFile(filepath.Join(badTrunk, "trunk.json"), []byte(`{"format":"k3-trunk","version":1,"runs":[`), 0o644)
	if _, err := Open(model, Options{TrunkDir: badTrunk, Budget: Budget{TrunkBytes: 1, Ring: 1, CacheBytes: 1}}); err == nil || !strings.Contains(err.Error(), "trunk") {
		t.Fatalf("corrupt trunk.json: %v", err)
	}
	// a flipped byte inside a streamed layer's run: the first read's CRC check catches it
	badTrunk = copyDir(tr)
	trk, err := trunk.Open(badTrunk)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := trk.LayerRun(5)
	trk.Close()
	f, _ := os.OpenFile(filepath.Join(badTrunk, "trunk.bin"), os.O_RDWR, 0)
	b := []byte{0}
	f.ReadAt(b, r.Offset+100)
	b[0] ^= 0xff
	f.WriteAt(b, r.Offset+100)
	f.Close()
	m, err = Open(model, Options{TrunkDir: badTrunk, Budget: Budget{TrunkBytes: 1, Ring: 1, CacheBytes: 1}})
	require.NoError(t, err)
	defer m.Close()
	e = m.NewEngine(1)
	defer e.Close()
	if _, err := e.Generate(context.Background(), nil, []int{1, 2}, GenOptions{MaxTokens: 1}); err == nil || !strings.Contains(err.Error(), "CRC") {
		t.Fatalf("corrupt run: %v", err)
	}
}

// TestRingReadsAhead: with a ring smaller than two of the largest layer,
// acquiring a layer starts reading the next one wherever the two fit:
// everywhere but after the 1.53 MB dense layer 0 (1.53 + 1.29 > 2.7 MB).
// The ring is sized to the largest two that fit (2.59 MB), not the 2.7 MB
// budget, and reads ahead at the same layers, the same bytes.
func TestRingReadsAhead(t *testing.T) {
	model, tr := budgetCheckpoint(t)
	m, err := Open(model, Options{TrunkDir: tr, Budget: Budget{TrunkBytes: 2.7e6, Ring: 2, CacheBytes: 1}})
	require.NoError(t, err)
	defer m.Close()
	require.Less(t, m.Plan.RingBytes, int64(2.65e6), "the ring holds the largest two layers that fit, not the budget")
	e := m.NewEngine(1)
	s := e.layers.(*trunkStream)
	var ahead []int
	for round := 0; round < 2; round++ {
		for li := 0; li < m.Bound; li++ {
			_, err := s.acquire(li)
			require.NoError(t, err)
			s.mu.Lock()
			for _, sl := range s.held {
				if sl.layer == (li+1)%m.Bound {
					ahead = append(ahead, li)
				}
			}
			s.mu.Unlock()
			s.release(li)
		}
	}
	require.Equal(t, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9}, ahead)
	// every layer read once per round, and layer 0 once more: read ahead
	// for a third round while layer 9 computed (Close lets it land)
	e.Close()
	bytes, _, readSecs := s.trunkStats()
	var all int64
	for li := 0; li < m.Bound; li++ {
		r, _ := m.trunk.LayerRun(li)
		all += r.Length
	}
	r0, _ := m.trunk.LayerRun(0)
	require.Equal(t, 2*all+r0.Length, bytes)
	assert.Positive(t, readSecs, "the reads' device time is counted")
}

// TestRingTrimReadsAhead: a ring of 1.7 MB holds one layer of the budget
// checkpoint, never two. A layer is read in two parts, attention and MLP;
// once its attention has run it gives the attention part back (trim), and
// the next layer is read into that room while its MLP runs, wherever the
// next layer and this one's MLP part fit together: after layers 2, 7 and 8
// (0.55 MB MLP parts before the 0.87 MB MLA layers). Release reads the next
// layer at once, before it is acquired.
func TestRingTrimReadsAhead(t *testing.T) {
	model, tr := budgetCheckpoint(t)
	m, err := Open(model, Options{TrunkDir: tr, Budget: Budget{TrunkBytes: 1.7e6, Ring: 2, CacheBytes: 1}})
	require.NoError(t, err)
	defer m.Close()
	require.Equal(t, 1, m.Plan.RingSlots)
	e := m.NewEngine(1)
	s := e.layers.(*trunkStream)
	heldNext := func(li int) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, sl := range s.held {
			if sl.layer == (li+1)%m.Bound && !sl.trimmed {
				return true
			}
		}
		return false
	}
	var afterTrim, afterRelease []int
	for round := 0; round < 2; round++ {
		for li := 0; li < m.Bound; li++ {
			L, err := s.acquire(li)
			require.NoError(t, err)
			require.Len(t, s.partsOf(li), 2, "layer %d is read in two parts", li)
			require.False(t, heldNext(li), "layer %d: two layers never fit", li)
			s.trim(li)
			if heldNext(li) {
				afterTrim = append(afterTrim, li)
			}
			s.mu.Lock()
			for _, sl := range s.held {
				if sl.layer == li && sl.trimmed {
					require.Len(t, sl.parts, 1)
					require.LessOrEqual(t, sl.parts[0].from, L.MLPFrom, "the MLP part holds every MLP matrix")
				}
			}
			s.mu.Unlock()
			s.release(li)
			if heldNext(li) {
				afterRelease = append(afterRelease, li)
			}
		}
	}
	require.Equal(t, []int{2, 7, 8, 2, 7, 8}, afterTrim)
	require.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, afterRelease)
	e.Close()
}
