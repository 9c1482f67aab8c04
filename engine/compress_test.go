package engine

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	plan   []bool
	stats  Stats
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
	return tfResult{res.Generated, lg, m.Plan.Pinned, e.Snapshot()}
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
// uncompressed trunk, with every layer pinned, some streamed (ring of 2),
// all streamed through one slot, in ultra-low-memory mode, at 1 and 2
// threads. The plan reads the compressed sizes: the same budget pins more
// layers, and streaming reads the compressed bytes.
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
			cases := []struct {
				what    string
				trunk   string
				budget  Budget
				threads int
			}{
				{"plain, pinned", plain, Budget{TrunkBytes: big, CacheBytes: big}, 2},
				{"compressed, pinned", packed, Budget{TrunkBytes: big, CacheBytes: big}, 2},
				{"compressed, pinned, 1 thread", packed, Budget{TrunkBytes: big, CacheBytes: big}, 1},
				{"compressed, budget of the compressed layers", packed, Budget{TrunkBytes: allPacked, Ring: 2, CacheBytes: big}, 2},
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
			assert.Equal(t, layers, pinned(got["compressed, budget of the compressed layers"].plan))
			assert.Less(t, pinned(got["compressed, some streamed, ring 2"].plan), layers)
			assert.Positive(t, pinned(got["compressed, some streamed, ring 2"].plan))
			// streaming every layer reads each run once per pass: the
			// compressed runs are smaller by the measured ratio
			zr, pr := got["compressed, all streamed, ring 1"].stats.TrunkBytesRead, got["plain, all streamed, ring 1"].stats.TrunkBytesRead
			require.Positive(t, zr)
			passes := float64(pr) / float64(runBytes(t, plain))
			assert.InDelta(t, passes, float64(zr)/float64(runBytes(t, packed)), 1e-9, "same passes over the layers")
			if name == "tiny-flat-f32" {
				assert.Equal(t, plainSizes, packedSizes)
				assert.Equal(t, pr, zr)
				return
			}
			assert.Less(t, pinned(got["plain, budget of the compressed layers"].plan), layers)
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

// TestCompressedBindsEveryRowMatrix: bound from a compressed trunk, every
// matrix the layers read is BF16C except kv_b_proj (read by columns) and
// rows too short to have a block; the model tables are BF16C too. So the
// list of compressed tensors (trunk.Compressible) and the binder agree.
func TestCompressedBindsEveryRowMatrix(t *testing.T) {
	for _, name := range []string{"tiny-release", "demo"} {
		_, packed := packBoth(t, name)
		m, err := Open(fixture.ModelDir(name), Options{TrunkDir: packed, Budget: Budget{TrunkBytes: 1 << 40, CacheBytes: 1 << 40}})
		require.NoError(t, err)
		n := 0
		for _, L := range m.layers {
			for _, block := range []any{L.Attn, L.MLP} {
				v := reflect.ValueOf(block).Elem()
				for i := 0; i < v.NumField(); i++ {
					f := v.Type().Field(i)
					if !f.IsExported() || f.Type != reflect.TypeOf((*kernels.Mat)(nil)) || v.Field(i).IsNil() {
						continue
					}
					mat := v.Field(i).Interface().(*kernels.Mat)
					n++
					want := kernels.BF16C
					if f.Name == "KVB" || mat.Cols < kernels.BF16CBlock {
						want = kernels.BF16
					}
					assert.Equal(t, want, mat.DType, "%s layer %d %T.%s (%dx%d)", name, L.Index, block, f.Name, mat.Rows, mat.Cols)
				}
			}
		}
		assert.Greater(t, n, 5*m.Bound, name)
		rt := m.tables.(*residentTables)
		assert.Equal(t, kernels.BF16C, rt.embedding.DType)
		assert.Equal(t, kernels.BF16C, rt.lmHead.DType)
		kind, bytes, logical := m.TrunkCompression()
		assert.Equal(t, trunk.BF16C, kind)
		assert.Less(t, bytes, logical)
		m.Close()
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

	_, err := Open(dir, Options{TrunkDir: packed, Budget: Budget{TrunkBytes: 1 << 40, CacheBytes: 1 << 40}})
	var be *BindError
	require.ErrorAs(t, err, &be)
	assert.Contains(t, err.Error(), "tensor "+tensor+" (BF16C")
	assert.Contains(t, err.Error(), "is corrupt")
	assert.Contains(t, err.Error(), "k3 pack")

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
