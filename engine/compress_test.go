package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/plan"
	"k3/internal/fixture"
	"k3/kernels"
	"k3/storage/trunk"
)

// packBoth packs checkpoint name without and with compression, verifies
// both trunks (every run's CRC, the checkpoint's identity) and returns
// their folders.
func packBoth(t *testing.T, name string) (plain, packed string) {
	t.Helper()
	dir := fixture.ModelDir(name)
	plain, packed = t.TempDir(), t.TempDir()
	for _, c := range []struct {
		dir      string
		compress bool
	}{{plain, false}, {packed, true}} {
		res, err := trunk.Pack(context.Background(), dir, c.dir, trunk.Options{Compress: c.compress})
		require.NoError(t, err)
		require.Equal(t, c.compress, res.Manifest.Compressed())
		tr, err := trunk.Open(c.dir)
		require.NoError(t, err)
		require.NoError(t, tr.CheckSource(dir))
		for i := range tr.Manifest().Runs {
			r := &tr.Manifest().Runs[i]
			require.NoError(t, tr.VerifyRun(r, make([]byte, r.Length)))
		}
		tr.Close()
	}
	return plain, packed
}

type tfResult struct {
	ids    []int     // greedy continuation of the prompt
	logits []float32 // teacher forcing: every position's logits
	plan   *plan.Plan
	stats  Stats
	dtypes map[kernels.DType]int // the pinned layers' matrices by dtype
}

func runTF(t *testing.T, name string, opt Options, threads int) tfResult {
	t.Helper()
	p := fixture.LoadExpect(t, name).Prompts[1]
	opt.Chunk, opt.AllLogits = 16, true
	opt.Positions = len(p.FullIDs) + len(p.GreedyIDs)
	m, err := Open(fixture.ModelDir(name), opt)
	require.NoError(t, err)
	defer m.Close()
	e := m.NewEngine(threads)
	defer e.Close()
	lg, err := e.Feed(context.Background(), m.NewState(), p.FullIDs, true)
	require.NoError(t, err)
	res, err := e.Generate(context.Background(), nil, p.PromptIDs, GenOptions{MaxTokens: len(p.GreedyIDs)})
	require.NoError(t, err)
	dtypes := map[kernels.DType]int{}
	for _, bm := range layerMats(m) {
		dtypes[bm.mat.DType]++
	}
	return tfResult{res.Generated, lg, m.Plan, e.Snapshot(), dtypes}
}

// boundMat is one matrix field of a bound layer's attention or MLP block.
type boundMat struct {
	layer int
	block any
	field string
	mat   *kernels.Mat
}

// layerMats lists the matrices of the model's pinned layers.
func layerMats(m *Model) []boundMat {
	var out []boundMat
	for _, L := range m.layers {
		if L == nil {
			continue
		}
		for _, block := range []any{L.Attn, L.MLP} {
			v := reflect.ValueOf(block).Elem()
			for i := 0; i < v.NumField(); i++ {
				f := v.Type().Field(i)
				if !f.IsExported() || f.Type != reflect.TypeOf((*kernels.Mat)(nil)) || v.Field(i).IsNil() {
					continue
				}
				out = append(out, boundMat{L.Index, block, f.Name, v.Field(i).Interface().(*kernels.Mat)})
			}
		}
	}
	return out
}

func sum(xs []int64) int64 {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s
}

// TestCompressedTrunkSameOutput is the round trip of every reference
// checkpoint through a compressed pack: greedy ids and teacher-forcing
// logits are byte for byte those of the resident model and of the
// uncompressed trunk, with every layer pinned (expanded to bf16 when the
// budget holds the bf16 trunk, compressed when it holds only the
// compressed one), some streamed (ring of 2), all streamed through one
// slot, in ultra-low-memory mode, at 1 and 2 threads. The plan reads the
// compressed sizes: the same budget pins more layers, and streaming reads
// the compressed bytes.
func TestCompressedTrunkSameOutput(t *testing.T) {
	big := int64(1 << 40)
	for _, name := range fixture.Models {
		t.Run(name, func(t *testing.T) {
			plain, packed := packBoth(t, name)
			plainSizes := layerSizes(t, name, plain)
			packedSizes := layerSizes(t, name, packed)
			ref := runTF(t, name, Options{Budget: Budget{CacheBytes: big}}, 2)
			require.Equal(t, fixture.LoadExpect(t, name).Prompts[1].GreedyIDs, ref.ids)
			// a budget that pins every compressed layer but not every
			// uncompressed one (nothing to compress in the f32 model)
			allPacked := sum(packedSizes)
			// the largest layer pinned, a ring of two of the next largest
			sorted := slices.Clone(packedSizes)
			slices.Sort(sorted)
			some := sorted[len(sorted)-1] + 2*sorted[len(sorted)-2]
			allPlain := sum(plainSizes) // the bf16 sizes: the least budget that expands
			cases := []struct {
				what    string
				trunk   string
				budget  Budget
				threads int
			}{
				{"plain, pinned", plain, Budget{TrunkBytes: big, CacheBytes: big}, 2},
				{"compressed, pinned", packed, Budget{TrunkBytes: big, CacheBytes: big}, 2},
				{"compressed, pinned, 1 thread", packed, Budget{TrunkBytes: big, CacheBytes: big}, 1},
				{"compressed, budget of the bf16 layers", packed, Budget{TrunkBytes: allPlain, Ring: 2, CacheBytes: big}, 2},
				{"compressed, a byte short of the bf16 layers", packed, Budget{TrunkBytes: allPlain - 1, Ring: 2, CacheBytes: big}, 2},
				{"compressed, budget of the compressed layers", packed, Budget{TrunkBytes: allPacked, Ring: 2, CacheBytes: big}, 2},
				{"compressed, budget of the compressed layers, 1 thread", packed, Budget{TrunkBytes: allPacked, Ring: 2, CacheBytes: 1}, 1},
				{"plain, budget of the compressed layers", plain, Budget{TrunkBytes: allPacked, Ring: 2, CacheBytes: big}, 2},
				{"compressed, some streamed, ring 2", packed, Budget{TrunkBytes: some, Ring: 2, CacheBytes: big}, 2},
				{"compressed, some streamed, ring 2, 1 thread", packed, Budget{TrunkBytes: some, Ring: 2, CacheBytes: 1}, 1},
				{"compressed, all streamed, ring 1", packed, Budget{TrunkBytes: 1, Ring: 1, CacheBytes: big}, 2},
				{"plain, all streamed, ring 1", plain, Budget{TrunkBytes: 1, Ring: 1, CacheBytes: big}, 2},
				{"compressed, all streamed, ring 1, 1 thread", packed, Budget{TrunkBytes: 1, Ring: 1, CacheBytes: 1}, 1},
				{"compressed, ultra", packed, Budget{TrunkBytes: 1, Ring: 1, CacheBytes: 1, Ultra: true}, 2},
				{"compressed, ultra, 1 thread", packed, Budget{TrunkBytes: 1, Ring: 2, CacheBytes: 1, Ultra: true}, 1},
			}
			got := map[string]tfResult{}
			for _, c := range cases {
				r := runTF(t, name, Options{TrunkDir: c.trunk, Budget: c.budget}, c.threads)
				require.Equal(t, ref.ids, r.ids, c.what)
				requireSameBits(t, name+" "+c.what, r.logits, ref.logits)
				got[c.what] = r
			}
			pinned := func(p []bool) int {
				n := 0
				for _, b := range p {
					if b {
						n++
					}
				}
				return n
			}
			layers := len(packedSizes)
			assert.Equal(t, layers, pinned(got["compressed, budget of the compressed layers"].plan.Pinned))
			assert.Less(t, pinned(got["compressed, some streamed, ring 2"].plan.Pinned), layers)
			assert.Positive(t, pinned(got["compressed, some streamed, ring 2"].plan.Pinned))
			for what, r := range got {
				switch {
				case strings.HasPrefix(what, "plain") || name == "tiny-flat-f32":
					assert.False(t, r.plan.Compressed || r.plan.Expanded, what)
				case !r.plan.Expanded:
					// a compressed plan that does not expand keeps the pinned layers BF16C
					assert.True(t, r.plan.Compressed, what)
					assert.NotContains(t, r.plan.String(), "expanded", what)
					assert.Equal(t, pinned(r.plan.Pinned) > 0, r.dtypes[kernels.BF16C] > 0, what)
				}
			}
			plainPinned := got["plain, pinned"].plan
			assert.False(t, plainPinned.Compressed)
			assert.Equal(t, allPlain, plainPinned.PinnedBytes)
			assert.Zero(t, got["plain, pinned"].dtypes[kernels.BF16C])
			// streaming every layer reads each run once per pass, plus at
			// most the first layer once more, read ahead for a next token
			// while the last pass ends: the compressed runs are smaller by
			// the measured ratio
			zs, ps := got["compressed, all streamed, ring 1"].stats, got["plain, all streamed, ring 1"].stats
			zr, pr := zs.TrunkBytesRead, ps.TrunkBytesRead
			require.Positive(t, zr)
			require.Equal(t, ps.ForwardPasses, zs.ForwardPasses, "same passes over the layers")
			// (the embedding rows the floor reads are not a layer's run)
			zr, pr = zr-zs.EmbedBytesRead, pr-ps.EmbedBytesRead
			for _, c := range []struct {
				dir   string
				bytes int64
			}{{plain, pr}, {packed, zr}} {
				once := c.bytes - ps.ForwardPasses*runBytes(t, c.dir)
				assert.GreaterOrEqual(t, once, int64(0), "%s: every pass reads every layer", c.dir)
				assert.LessOrEqual(t, once, firstRun(t, c.dir), "%s: at most the first layer read ahead beyond the last pass", c.dir)
			}
			if name == "tiny-flat-f32" {
				// nothing compressed: nothing to expand, the plain plan
				// (the bytes read per pass are bounded alike above)
				assert.Equal(t, plainSizes, packedSizes)
				return
			}
			// a budget that holds the bf16 trunk: every layer pinned and
			// expanded to bf16, counted at the bf16 sizes, no ring
			for _, what := range []string{"compressed, pinned", "compressed, pinned, 1 thread", "compressed, budget of the bf16 layers"} {
				r := got[what]
				assert.True(t, r.plan.Compressed && r.plan.Expanded, what)
				assert.Equal(t, layers, pinned(r.plan.Pinned), what)
				assert.Equal(t, allPlain, r.plan.PinnedBytes, what)
				assert.Zero(t, r.plan.RingSlots+int(r.plan.RingBytes), what)
				assert.Contains(t, r.plan.String(), fmt.Sprintf("(%d of %d layers, expanded to bf16 for speed)", layers, layers), what)
				assert.Zero(t, r.dtypes[kernels.BF16C], what)
				assert.Equal(t, got["plain, pinned"].dtypes, r.dtypes, what)
				assert.Zero(t, r.stats.TrunkBytesRead, what)
				assert.Equal(t, slices.Max(packedSizes), r.plan.Load, what)
			}
			// a byte less: every layer still pins, compressed
			for _, what := range []string{"compressed, a byte short of the bf16 layers", "compressed, budget of the compressed layers"} {
				r := got[what]
				assert.False(t, r.plan.Expanded, what)
				assert.Equal(t, layers, pinned(r.plan.Pinned), what)
				assert.Equal(t, allPacked, r.plan.PinnedBytes, what)
				assert.Contains(t, r.plan.String(), fmt.Sprintf("(%d of %d layers, compressed)", layers, layers), what)
				assert.Equal(t, got["compressed, budget of the compressed layers"].dtypes, r.dtypes, what)
			}
			assert.Less(t, pinned(got["plain, budget of the compressed layers"].plan.Pinned), layers)
			assert.Less(t, zr, pr)
			t.Logf("%s: layer bytes %d -> %d (%.3fx), streamed per run %d -> %d bytes (%.3fx)", name,
				sum(plainSizes), sum(packedSizes), float64(sum(plainSizes))/float64(sum(packedSizes)), pr, zr, float64(pr)/float64(zr))
		})
	}
}

// layerSizes are the per-layer sizes the plan uses with trunk dir.
func layerSizes(t *testing.T, name, dir string) []int64 {
	t.Helper()
	m, err := Open(fixture.ModelDir(name), Options{TrunkDir: dir, Budget: Budget{TrunkBytes: 1, Ring: 1, CacheBytes: 1}})
	require.NoError(t, err)
	defer m.Close()
	return m.TrunkLayerBytes()
}

// firstRun is the length of the first layer's run in the trunk at dir.
func firstRun(t *testing.T, dir string) int64 {
	t.Helper()
	tr, err := trunk.Open(dir)
	require.NoError(t, err)
	defer tr.Close()
	r, _ := tr.LayerRun(0)
	return r.Length
}

// runBytes is the length of all layer runs of a trunk.
func runBytes(t *testing.T, dir string) int64 {
	t.Helper()
	tr, err := trunk.Open(dir)
	require.NoError(t, err)
	defer tr.Close()
	var n int64
	for i := 0; i < tr.Layers(); i++ {
		r, _ := tr.LayerRun(i)
		n += r.Length
	}
	return n
}

// TestCompressedBindsEveryRowMatrix: bound from a compressed trunk pinned
// compressed, every matrix the layers read is BF16C except kv_b_proj
// (read by columns) and rows too short to have a block; the model tables
// are BF16C too. So the list of compressed tensors (trunk.Compressible)
// and the binder agree. Pinned expanded, every layer matrix is BF16 (the
// tables stay BF16C).
func TestCompressedBindsEveryRowMatrix(t *testing.T) {
	for _, name := range []string{"tiny-release", "demo"} {
		_, packed := packBoth(t, name)
		for _, expanded := range []bool{false, true} {
			budget := sum(layerSizes(t, name, packed))
			if expanded {
				budget = 1 << 40
			}
			m, err := Open(fixture.ModelDir(name), Options{TrunkDir: packed, Budget: Budget{TrunkBytes: budget, CacheBytes: 1 << 40}})
			require.NoError(t, err)
			require.Equal(t, expanded, m.Plan.Expanded)
			require.NotContains(t, m.Plan.Pinned, false)
			// the model holds one buffer per run (embed, head, final, each
			// layer): an expanded layer's, not the one it was read into
			assert.Len(t, m.release, 3+m.Bound)
			mats := layerMats(m)
			for _, bm := range mats {
				want := kernels.BF16C
				if expanded || bm.field == "KVB" || bm.mat.Cols < kernels.BF16CBlock {
					want = kernels.BF16
				}
				assert.Equal(t, want, bm.mat.DType, "%s layer %d %T.%s (%dx%d)", name, bm.layer, bm.block, bm.field, bm.mat.Rows, bm.mat.Cols)
			}
			assert.Greater(t, len(mats), 5*m.Bound, name)
			rt := m.tables.(*residentTables)
			assert.Equal(t, kernels.BF16C, rt.embedding.DType)
			assert.Equal(t, kernels.BF16C, rt.lmHead.DType)
			kind, bytes, logical := m.TrunkCompression()
			assert.Equal(t, trunk.BF16C, kind)
			assert.Less(t, bytes, logical)
			m.Close()
		}
	}
}

// TestExpandedRunIsThePlainRun: a compressed layer run expanded at load
// is, byte for byte and place for place, the run of the uncompressed
// pack (so a pinned expanded layer holds what a pinned uncompressed one
// does), and its decode is the same at any number of processors.
func TestExpandedRunIsThePlainRun(t *testing.T) {
	for _, name := range []string{"tiny-release", "demo"} {
		plain, packed := packBoth(t, name)
		pt, err := trunk.Open(plain)
		require.NoError(t, err)
		zt, err := trunk.Open(packed)
		require.NoError(t, err)
		compressed := 0
		for i := 0; i < zt.Layers(); i++ {
			pr, _ := pt.LayerRun(i)
			zr, _ := zt.LayerRun(i)
			want := make([]byte, pr.Length)
			require.NoError(t, pt.VerifyRun(pr, want))
			mem := make([]byte, zr.Length)
			require.NoError(t, zt.VerifyRun(zr, mem))
			for _, procs := range []int{1, 2, 3} {
				prev := runtime.GOMAXPROCS(procs)
				ex, img, free, err := expandRun(zr, mem)
				runtime.GOMAXPROCS(prev)
				require.NoError(t, err)
				wr := *pr
				wr.Offset, wr.CRC32C = 0, 0
				assert.Equal(t, wr, *ex, "%s layer %d", name, i)
				require.True(t, bytes.Equal(want, img), "%s layer %d at %d processors: the expanded run differs from the uncompressed pack's", name, i, procs)
				free()
			}
			for _, ten := range zr.Tensors {
				if ten.Compressed() {
					compressed++
				}
			}
		}
		assert.Greater(t, compressed, 5*zt.Layers(), name)
		pt.Close()
		zt.Close()
	}
}

// corruptOffsets breaks row 1's offset of tensor name in a compressed
// trunk (beyond the tensor's rows) and, so that only the engine's own check
// can catch it, gives the run the CRC of its new bytes in trunk.json.
func corruptOffsets(t *testing.T, dir, name string) {
	t.Helper()
	tr, err := trunk.Open(dir)
	require.NoError(t, err)
	run, ten, ok := tr.Tensor(name)
	require.True(t, ok, name)
	require.True(t, ten.Compressed(), name)
	off := run.Offset + ten.Offset
	tr.Close()
	bin := filepath.Join(dir, trunk.BinFile)
	b, err := os.ReadFile(bin)
	require.NoError(t, err)
	binary.LittleEndian.PutUint64(b[off+8:], uint64(ten.Size)*4)
	require.NoError(t, os.WriteFile(bin, b, 0o644))
	crc := crc32.Checksum(b[run.Offset:run.Offset+run.Length], crc32.MakeTable(crc32.Castagnoli))
	mp := filepath.Join(dir, trunk.ManifestFile)
	raw, err := os.ReadFile(mp)
	require.NoError(t, err)
	m, err := trunk.ParseManifest(raw)
	require.NoError(t, err)
	for i := range m.Runs {
		if m.Runs[i].Name == run.Name {
			m.Runs[i].CRC32C = crc
		}
	}
	out, err := json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(mp, out, 0o644))
}

// TestCorruptCompressedTensorRefused: a BF16C tensor whose row offsets
// are wrong is refused when it is bound — pinned at open, streamed when
// its layer is first read, read by rows in ultra mode — with an error
// naming the tensor, never read out of bounds.
func TestCorruptCompressedTensorRefused(t *testing.T) {
	const name = "tiny-release"
	tensor := "language_model.model.layers.2.self_attn.q_a_proj.weight"
	_, packed := packBoth(t, name)
	corruptOffsets(t, packed, tensor)
	dir := fixture.ModelDir(name)

	// pinned expanded (decoded at load) and pinned compressed (bound as it is)
	var be *BindError
	for _, budget := range []int64{1 << 40, sum(layerSizes(t, name, packed))} {
		_, err := Open(dir, Options{TrunkDir: packed, Budget: Budget{TrunkBytes: budget, CacheBytes: 1 << 40}})
		require.ErrorAs(t, err, &be, budget)
		assert.Len(t, be.Problems, 1, budget)
		assert.Contains(t, err.Error(), "tensor "+tensor+" (BF16C", budget)
		assert.Contains(t, err.Error(), "is corrupt", budget)
		assert.Contains(t, err.Error(), "k3 pack", budget)
	}

	m, err := Open(dir, Options{TrunkDir: packed, Budget: Budget{TrunkBytes: 1, Ring: 1, CacheBytes: 1 << 40}})
	require.NoError(t, err, "layer 2 is streamed: bound when read")
	e := m.NewEngine(1)
	_, err = e.Feed(context.Background(), m.NewState(), []int{1, 2, 3}, false)
	require.ErrorAs(t, err, &be)
	assert.Contains(t, err.Error(), "tensor "+tensor+" (BF16C")
	e.Close()
	m.Close()

	// the embedding read by rows in ultra mode
	_, packed = packBoth(t, name)
	corruptOffsets(t, packed, "language_model.model.embed_tokens.weight")
	m, err = Open(dir, Options{TrunkDir: packed, Budget: Budget{TrunkBytes: 1, Ring: 1, CacheBytes: 1, Ultra: true}})
	require.NoError(t, err)
	e = m.NewEngine(1)
	_, err = e.Feed(context.Background(), m.NewState(), []int{0, 1, 2}, false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "embedding row 0")
	assert.Contains(t, err.Error(), "bad row offsets")
	e.Close()
	m.Close()
}

// BenchmarkExpandRun: decoding a compressed layer to bf16 at load, a run
// of one 4096x7168 trained-like matrix (normal weights, a per-row scale
// 2^-3..2^-10), at GOMAXPROCS processors; SetBytes is the bf16 size.
func BenchmarkExpandRun(b *testing.B) {
	const rows, cols = 4096, 7168
	r := rand.New(rand.NewPCG(1, 2))
	m := &kernels.Mat{DType: kernels.BF16, Rows: rows, Cols: cols, BF16: make([]uint16, rows*cols)}
	for i := 0; i < rows; i++ {
		s := math.Ldexp(1, -r.IntN(8)-3)
		for j := 0; j < cols; j++ {
			m.BF16[i*cols+j] = kernels.F32ToBF16(float32(r.NormFloat64() * s))
		}
	}
	z := kernels.CompressBF16(m)
	data := kernels.BF16CBytes(&z)
	mem := alignedBytes(int64(len(data)))
	copy(mem, data)
	run := &trunk.Run{Name: "layer.0", Tensors: []trunk.Tensor{{Name: "w", DType: trunk.BF16C, Shape: []int64{rows, cols}, Size: int64(len(data))}}}
	_, img, free, err := expandRun(run, mem)
	require.NoError(b, err)
	require.True(b, slices.Equal(unsafe.Slice((*uint16)(unsafe.Pointer(&img[0])), rows*cols), m.BF16), "the expanded matrix differs")
	free()
	b.SetBytes(2 * rows * cols)
	for b.Loop() {
		_, _, free, err := expandRun(run, mem)
		if err != nil {
			b.Fatal(err)
		}
		free()
	}
}
