package trunk

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
	"k3/kernels"
	"k3/storage/safetensors"
)

var demoModel = fixture.ModelDir("demo")

// requireDecodes checks a BF16C tensor's stored bytes: exactly what the
// kernels' own serialisation of the checkpoint matrix gives, accepted by
// BF16CFromBytes, and every row decoding to the checkpoint's words.
func requireDecodes(t *testing.T, tt *Tensor, stored, src []byte) {
	t.Helper()
	rows, cols := int(tt.Shape[0]), int(tt.Shape[1])
	words := make([]uint16, rows*cols)
	for i := range words {
		words[i] = binary.LittleEndian.Uint16(src[2*i:])
	}
	ref := kernels.CompressBF16(&kernels.Mat{DType: kernels.BF16, Rows: rows, Cols: cols, BF16: words})
	require.True(t, bytes.Equal(kernels.BF16CBytes(&ref), stored), "%s: stored bytes differ from kernels.BF16CBytes", tt.Name)
	m, err := kernels.BF16CFromBytes(stored, rows, cols)
	require.NoError(t, err, tt.Name)
	row := make([]uint16, cols)
	for r := 0; r < rows; r++ {
		m.DecodeRowBF16(r, row)
		require.Equal(t, words[r*cols:(r+1)*cols], row, "%s row %d", tt.Name, r)
	}
}

func TestCRCZeros(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int64{0, 1, 7, 8, 4096, 100003} {
		reg := rng.Uint32()
		want := ^crc32.Update(^reg, castagnoli, make([]byte, n))
		assert.Equal(t, want, crcZeros(reg, n), "n=%d", n)
	}
	// a patch into zeros written earlier
	for _, c := range []struct{ n, off, len int }{{4096, 0, 8}, {4096, 4088, 8}, {12288, 100, 5000}, {64, 10, 1}} {
		buf := make([]byte, c.n)
		for i := range buf {
			buf[i] = byte(rng.Uint32())
		}
		clear(buf[c.off : c.off+c.len])
		crc := crc32.Checksum(buf, castagnoli)
		data := make([]byte, c.len)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		copy(buf[c.off:], data)
		assert.Equal(t, crc32.Checksum(buf, castagnoli), patchCRC(crc, patch{int64(c.off), data}, int64(c.n)), "%+v", c)
	}
}

func TestCompressible(t *testing.T) {
	bf, f32 := safetensors.BF16, safetensors.F32
	mat := []int64{4, 64}
	for _, c := range []struct {
		name  string
		dt    safetensors.DType
		shape []int64
		want  bool
	}{
		{"model.embed_tokens.weight", bf, mat, true},
		{"lm_head.weight", bf, mat, true},
		{"model.layers.0.self_attn.q_proj.weight", bf, mat, true},
		{"model.layers.12.self_attn.kv_a_proj_with_mqa.weight", bf, mat, true},
		{"model.layers.12.block_sparse_moe.shared_experts.down_proj.weight", bf, mat, true},
		{"model.layers.3.mlp.up_proj.weight", bf, mat, true},
		{"model.layers.3.self_attn.kv_b_proj.weight", bf, mat, false}, // MatTVec
		{"model.layers.3.self_attention_res_proj.weight", bf, []int64{1, 64}, false},
		{"model.output_attn_res_proj.weight", bf, []int64{1, 64}, false},
		{"model.layers.3.input_layernorm.weight", bf, []int64{64}, false},
		{"model.layers.3.self_attn.q_proj.weight", f32, mat, false},
		{"model.layers.3.self_attn.q_proj.weight", bf, []int64{0, 64}, false},
		{"model.layers.3.self_attn.q_conv1d.weight", bf, []int64{4, 1, 4}, false},
		{"model.layers.3.self_attn.f_b_proj.weight", bf, []int64{64, 31}, false}, // no whole block
		{"model.layers.3.self_attn.f_b_proj.weight", bf, []int64{64, 32}, true},
		{"model.layers.x.self_attn.q_proj.weight", bf, mat, false},
		{"model.layers.3.block_sparse_moe.experts.0.w1.weight", bf, mat, false},
	} {
		assert.Equal(t, c.want, Compressible(c.name, c.dt, c.shape), c.name)
	}
	assert.Equal(t, "mlp.up_proj.weight", Kind("language_model.model.layers.3.mlp.up_proj.weight", "language_model."))
	assert.Equal(t, "lm_head.weight", Kind("lm_head.weight", ""))
}

// TestPackCompressed: a compressed pack of each reference checkpoint is
// the same whatever the buffer size (4096-byte buffers put row offsets
// into patches), holds exactly the kernels' BF16C form of the matrices
// Compressible names and the checkpoint's bytes of the rest, and is
// smaller by the measured ratio.
func TestPackCompressed(t *testing.T) {
	for _, model := range []string{tinyRelease, tinyFlat, demoModel} {
		t.Run(filepath.Base(filepath.Dir(model))+"/"+filepath.Base(model), func(t *testing.T) {
			plain := packed(t, model)
			dir := t.TempDir()
			res := pack(t, model, dir, Options{Compress: true})
			m := checkTrunk(t, model, dir)
			pm := checkTrunk(t, model, plain)
			assert.Equal(t, BF16C, m.Compression)
			assert.Equal(t, Version, m.Version)
			assert.Equal(t, pm.TotalBytes, res.UncompressedBytes)
			assert.Equal(t, pm.TotalBytes, m.UncompressedBytes())
			// expanded, every run is laid out as the uncompressed pack's
			require.Len(t, m.Runs, len(pm.Runs))
			for i := range m.Runs {
				want := pm.Runs[i]
				want.Offset, want.CRC32C = 0, 0
				assert.Equal(t, want, m.Runs[i].Expanded(), m.Runs[i].Name)
			}
			assert.Equal(t, m.TotalBytes, res.BytesWritten)
			st, err := os.Stat(filepath.Join(dir, BinFile))
			require.NoError(t, err)
			assert.Equal(t, m.TotalBytes, st.Size())
			var logical, stored int64
			for _, k := range m.ByKind() {
				logical += k.Logical
				stored += k.Stored
				t.Logf("%-52s %3d tensors %9d -> %9d bytes, %.3fx", k.Kind, k.Compressed, k.Logical, k.Stored, k.Ratio())
			}
			t.Logf("trunk.bin %d -> %d bytes (%.3fx); compressed tensors %d -> %d (%.3fx)",
				pm.TotalBytes, m.TotalBytes, float64(pm.TotalBytes)/float64(m.TotalBytes), logical, stored, float64(logical)/float64(max(stored, 1)))
			if model == tinyFlat {
				// f32: nothing to compress, the same bytes
				assert.Empty(t, m.ByKind())
				a, _ := os.ReadFile(filepath.Join(plain, BinFile))
				b, _ := os.ReadFile(filepath.Join(dir, BinFile))
				assert.True(t, bytes.Equal(a, b), "trunk.bin differs")
			} else {
				require.NotEmpty(t, m.ByKind())
				// the runs shrink by what their tensors shrink (up to padding)
				assert.InDelta(t, float64(pm.TotalBytes-m.TotalBytes), float64(logical-stored), float64(len(m.Runs)*(RunAlign+64*20)))
			}
			if model == demoModel {
				// trained weights: the matrices are at least 1.2x smaller
				assert.Greater(t, float64(logical)/float64(stored), 1.2)
				assert.Less(t, m.TotalBytes, pm.TotalBytes)
			}
			for _, bs := range []int{4096, 8192} {
				other := t.TempDir()
				pack(t, model, other, Options{Compress: true, BufferSize: bs})
				sameFiles(t, dir, other)
			}
			tr, err := Open(dir)
			require.NoError(t, err)
			defer tr.Close()
			require.NoError(t, tr.CheckSource(model))
			// packing again: up to date
			res = pack(t, model, dir, Options{Compress: true})
			assert.True(t, res.UpToDate)
		})
	}
}

// TestCompressedResume: a compressed pack interrupted between runs or in
// the middle of one resumes to the same files as one uninterrupted pack.
func TestCompressedResume(t *testing.T) {
	ref := t.TempDir()
	pack(t, tinyRelease, ref, Options{Compress: true})
	nruns := len(checkTrunk(t, tinyRelease, ref).Runs)
	for _, k := range []int{1, 4, nruns - 1} {
		t.Run(fmt.Sprintf("after%d", k), func(t *testing.T) {
			dir := t.TempDir()
			_, err := packCancelledOpt(t, tinyRelease, dir, Options{Compress: true}, func(p Progress) bool { return p.Phase == PhasePack && p.RunsDone == k })
			require.ErrorIs(t, err, context.Canceled)
			pt := readPartial(t, dir)
			require.Len(t, pt.Done, k)
			assert.Equal(t, BF16C, pt.Compression)
			res := pack(t, tinyRelease, dir, Options{Compress: true})
			assert.True(t, res.Resumed)
			assert.Equal(t, k, res.RunsKept)
			assert.Equal(t, nruns-k, res.RunsWritten)
			sameFiles(t, ref, dir)
		})
	}
	t.Run("midrun", func(t *testing.T) {
		dir := t.TempDir()
		for _, stopAt := range []int{5, 20, 40} {
			chunks := 0
			_, err := packCancelledOpt(t, tinyRelease, dir, Options{Compress: true, BufferSize: 4096}, func(p Progress) bool {
				if p.Phase == PhasePack && p.BytesDone > 0 {
					chunks++
				}
				return chunks == stopAt
			})
			require.ErrorIs(t, err, context.Canceled)
		}
		pack(t, tinyRelease, dir, Options{Compress: true, BufferSize: 4096})
		sameFiles(t, ref, dir)
	})
	t.Run("corrupt run", func(t *testing.T) {
		dir := t.TempDir()
		_, err := packCancelledOpt(t, tinyRelease, dir, Options{Compress: true}, func(p Progress) bool { return p.Phase == PhasePack && p.RunsDone == 4 })
		require.ErrorIs(t, err, context.Canceled)
		head := readPartial(t, dir).Runs[1]
		flipByte(t, filepath.Join(dir, BinFile), head.Offset+100)
		res := pack(t, tinyRelease, dir, Options{Compress: true})
		// head is rewritten and, as a compressed trunk is written in
		// order, the runs after it too
		assert.Equal(t, 1, res.RunsKept)
		assert.Equal(t, 1, res.RunsRewritten)
		assert.Equal(t, nruns-1, res.RunsWritten)
		require.Len(t, res.Notes, 2)
		assert.Contains(t, res.Notes[0], "run head")
		assert.Contains(t, res.Notes[1], "the 2 run(s) after it are packed again")
		sameFiles(t, ref, dir)
	})
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	b := []byte{0}
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	b[0] ^= 0x40
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
}

// packCancelledOpt is packCancelled with options.
func packCancelledOpt(t *testing.T, model, dir string, opt Options, stop func(Progress) bool) (*Result, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opt.Progress = func(p Progress) {
		if stop(p) {
			cancel()
		}
	}
	res, err := Pack(ctx, model, dir, opt)
	_, serr := os.Stat(filepath.Join(dir, ManifestFile))
	require.True(t, os.IsNotExist(serr), "an interrupted pack wrote %s", ManifestFile)
	return res, err
}

// TestCompressionNeverMixed: packing with the other --compress setting
// into a folder holding a complete or interrupted trunk is refused with a
// message saying so; Force repacks.
func TestCompressionNeverMixed(t *testing.T) {
	for _, compressed := range []bool{false, true} {
		name := kindName(compressed)
		t.Run(name+"/complete", func(t *testing.T) {
			dir := t.TempDir()
			pack(t, tinyRelease, dir, Options{Compress: compressed})
			_, err := Pack(context.Background(), tinyRelease, dir, Options{Compress: !compressed})
			require.ErrorIs(t, err, ErrRefused)
			assert.Contains(t, err.Error(), "holds "+aKind(compressed)+" trunk of this checkpoint and this pack would write "+aKind(!compressed)+" one")
			assert.Contains(t, err.Error(), "--force")
			res := pack(t, tinyRelease, dir, Options{Compress: !compressed, Force: true})
			assert.Equal(t, !compressed, res.Manifest.Compressed())
			checkTrunk(t, tinyRelease, dir)
		})
		t.Run(name+"/interrupted", func(t *testing.T) {
			dir := t.TempDir()
			_, err := packCancelledOpt(t, tinyRelease, dir, Options{Compress: compressed}, func(p Progress) bool { return p.Phase == PhasePack && p.RunsDone == 3 })
			require.ErrorIs(t, err, context.Canceled)
			_, err = Pack(context.Background(), tinyRelease, dir, Options{Compress: !compressed})
			require.ErrorIs(t, err, ErrRefused)
			assert.Contains(t, err.Error(), "holds an interrupted "+name+" pack of this checkpoint")
			assert.Contains(t, err.Error(), "--force to start over")
			assert.FileExists(t, filepath.Join(dir, PartialFile), "the refusal keeps the interrupted pack")
			res := pack(t, tinyRelease, dir, Options{Compress: !compressed, Force: true})
			assert.False(t, res.Resumed)
			assert.Equal(t, !compressed, res.Manifest.Compressed())
			checkTrunk(t, tinyRelease, dir)
		})
	}
}

// A compressed trunk whose checkpoint files were touched is compressed
// again, compared and kept; one whose weights changed is refused.
func TestCompressedKeptWhenTouched(t *testing.T) {
	model := copyDir(t, tinyRelease)
	dir := t.TempDir()
	pack(t, model, dir, Options{Compress: true})
	before, _ := os.ReadFile(filepath.Join(dir, BinFile))
	later := time.Now().Add(time.Minute)
	for i := 1; i <= 3; i++ {
		require.NoError(t, os.Chtimes(filepath.Join(model, safetensors.ShardName(i, 3)), later, later))
	}
	res := pack(t, model, dir, Options{Compress: true})
	assert.True(t, res.UpToDate)
	require.Len(t, res.Notes, 1)
	assert.Contains(t, res.Notes[0], "11 run(s) gathered again from the checkpoint match the packed ones")
	after, _ := os.ReadFile(filepath.Join(dir, BinFile))
	assert.True(t, bytes.Equal(before, after))
	checkTrunk(t, model, dir)

	file := retouch(t, model, "language_model.model.layers.0.self_attn.q_proj.weight")
	_, err := Pack(context.Background(), model, dir, Options{Compress: true})
	require.ErrorIs(t, err, ErrSourceMismatch)
	assert.Contains(t, err.Error(), file+" changed after the trunk")
	assert.Equal(t, 1, strings.Count(err.Error(), "--force"), err.Error())
}

// compressedManifest is trunk.json of a compressed pack of tiny-release.
func compressedManifest(t *testing.T) (dir string, raw []byte) {
	t.Helper()
	dir = t.TempDir()
	pack(t, tinyRelease, dir, Options{Compress: true})
	raw, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	require.NoError(t, err)
	return dir, raw
}

// TestManifestRefusesBadBF16C: ParseManifest refuses compressed entries
// that cannot be right, naming the tensor.
func TestManifestRefusesBadBF16C(t *testing.T) {
	_, good := compressedManifest(t)
	_, err := ParseManifest(good)
	require.NoError(t, err)
	// the first BF16C tensor of the first layer run
	edit := func(f func(m map[string]any, ts map[string]any)) error {
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(good))
		dec.UseNumber()
		require.NoError(t, dec.Decode(&m))
		for _, r := range m["runs"].([]any)[3:] {
			for _, x := range r.(map[string]any)["tensors"].([]any) {
				if ts := x.(map[string]any); ts["dtype"] == BF16C {
					f(m, ts)
					b, _ := json.Marshal(m)
					_, err := ParseManifest(b)
					return err
				}
			}
		}
		t.Fatal("no BF16C tensor")
		return nil
	}
	for _, c := range []struct {
		name string
		f    func(m, ts map[string]any)
		want string
	}{
		{"no room for offsets", func(m, ts map[string]any) { ts["size"] = 8 }, "cannot hold the"},
		{"too small", func(m, ts map[string]any) { ts["size"] = 8*(num(ts["shape"].([]any)[0])+1) + 1 }, "is outside"},
		{"too large", func(m, ts map[string]any) { ts["size"] = num(ts["size"]) * 4 }, "is outside"},
		{"not a whole number of raw blocks", func(m, ts map[string]any) { ts["size"] = num(ts["size"]) + 1 }, "plus a multiple of 16"},
		{"vector", func(m, ts map[string]any) { ts["shape"] = []any{num(ts["shape"].([]any)[0])} }, "is a matrix"},
		{"empty", func(m, ts map[string]any) { ts["shape"] = []any{0, 64} }, "non-empty matrix"},
		{"uncompressed trunk", func(m, ts map[string]any) { delete(m, "compression") }, "does not say it is compressed"},
		{"version 2", func(m, ts map[string]any) { m["version"] = 2 }, "compression is not part of version 2"},
		{"unknown compression", func(m, ts map[string]any) { m["compression"] = "zstd" }, `compression "zstd" is not supported`},
	} {
		err := edit(c.f)
		if assert.Error(t, err, c.name) {
			assert.Contains(t, err.Error(), c.want, c.name)
			var me *ManifestError
			assert.True(t, errors.As(err, &me), c.name)
		}
	}
}

// CheckSet compares a compressed trunk's tensors with the checkpoint's
// dtypes and shapes (BF16C stands for a BF16 source tensor).
func TestCompressedCheckSet(t *testing.T) {
	dir, raw := compressedManifest(t)
	mp := filepath.Join(dir, ManifestFile)
	for name, f := range map[string]func(ts map[string]any){
		"shape": func(ts map[string]any) { s := ts["shape"].([]any); ts["shape"] = []any{s[1], s[0]} },
	} {
		b, tname := editFirstTensor(t, raw, func(ts map[string]any) bool {
			s := ts["shape"].([]any)
			return ts["dtype"] == BF16C && s[0].(json.Number) != s[1].(json.Number)
		}, f)
		sourceMismatch(t, dir, b, tname, name)
	}
	require.NoError(t, os.WriteFile(mp, raw, 0o644))
	tr, err := Open(dir)
	require.NoError(t, err)
	defer tr.Close()
	require.NoError(t, tr.CheckSource(tinyRelease))
	require.ErrorIs(t, tr.CheckSource(tinyFlat), ErrSourceMismatch)
}

func num(v any) int64 {
	switch x := v.(type) {
	case json.Number:
		n, _ := x.Int64()
		return n
	case float64:
		return int64(x)
	}
	return 0
}

// The assembler's row buffer works on whatever alignment the tensor's
// bytes have in the read buffer (a U8 tensor of odd size before it).
func TestCompressOddOffsets(t *testing.T) {
	model := t.TempDir()
	rng := rand.New(rand.NewPCG(5, 6))
	words := func(n int) []byte {
		b := make([]byte, 2*n)
		for i := 0; i < n; i++ {
			// trained-like: exponents near 120, so most blocks compress
			w := uint16(rng.IntN(2))<<15 | uint16(118+rng.IntN(6))<<7 | uint16(rng.IntN(128))
			if rng.IntN(500) == 0 {
				w = uint16(rng.Uint32()) // an outlier: a raw block
			}
			binary.LittleEndian.PutUint16(b[2*i:], w)
		}
		return b
	}
	ts := []safetensors.WriteTensor{
		{Name: "model.layers.0.a.weight", DType: safetensors.U8, Shape: []int64{3}, Data: []byte{1, 2, 3}},
		{Name: "model.layers.0.self_attn.q_proj.weight", DType: safetensors.BF16, Shape: []int64{37, 70}, Data: words(37 * 70)},
		{Name: "model.layers.0.b.weight", DType: safetensors.U8, Shape: []int64{1}, Data: []byte{9}},
		{Name: "model.layers.0.mlp.up_proj.weight", DType: safetensors.BF16, Shape: []int64{300, 64}, Data: words(300 * 64)},
		{Name: "model.embed_tokens.weight", DType: safetensors.BF16, Shape: []int64{600, 96}, Data: words(600 * 96)},
		{Name: "lm_head.weight", DType: safetensors.BF16, Shape: []int64{600, 96}, Data: words(600 * 96)},
		{Name: "model.norm.weight", DType: safetensors.BF16, Shape: []int64{96}, Data: words(96)},
		{Name: "model.output_attn_res_norm.weight", DType: safetensors.BF16, Shape: []int64{96}, Data: words(96)},
		{Name: "model.output_attn_res_proj.weight", DType: safetensors.BF16, Shape: []int64{1, 96}, Data: words(96)},
	}
	require.NoError(t, safetensors.WriteFile(filepath.Join(model, "model.safetensors"), ts, nil))
	ref := t.TempDir()
	pack(t, model, ref, Options{Compress: true})
	m := checkTrunk(t, model, ref)
	for _, bs := range []int{4096, 12288} {
		dir := t.TempDir()
		pack(t, model, dir, Options{Compress: true, BufferSize: bs})
		sameFiles(t, ref, dir)
	}
	var n int
	for _, k := range m.ByKind() {
		n += k.Compressed
		assert.Greater(t, k.Ratio(), 1.1, k.Kind)
	}
	assert.Equal(t, 4, n)
}

func TestFuzzSeedsCompressed(t *testing.T) {
	// the fuzz target's compressed seeds are accepted (see fuzz_test.go)
	for _, s := range compressedSeeds(t) {
		_, err := ParseManifest(s)
		require.NoError(t, err)
	}
}

// compressedSeeds are manifests of compressed packs cut to their first
// layer.
func compressedSeeds(tb testing.TB) [][]byte {
	var out [][]byte
	for _, model := range []string{tinyRelease, demoModel} {
		dir, err := os.MkdirTemp("", "k3-fuzzseed-*")
		if err != nil {
			tb.Fatal(err)
		}
		defer os.RemoveAll(dir)
		res, err := Pack(context.Background(), model, dir, Options{Compress: true})
		if err != nil {
			tb.Fatal(err)
		}
		m := *res.Manifest
		m.Runs = m.Runs[:4]
		m.TotalBytes = m.Runs[3].Offset + m.Runs[3].Length
		b, err := json.Marshal(&m)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}
