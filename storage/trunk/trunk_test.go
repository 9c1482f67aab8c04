package trunk

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
	"k3/storage/direct"
	"k3/storage/safetensors"
	"k3/storage/units"
)

var (
	tinyRelease = fixture.Path("models/tiny-release")
	tinyFlat    = fixture.Path("models/tiny-flat-f32")
)

// isTrunkTensor is the spec's selection rule, written independently of
// the planner.
func isTrunkTensor(name, prefix string) (run string, ok bool) {
	switch strings.TrimPrefix(name, prefix) {
	case "model.embed_tokens.weight":
		return "embed", true
	case "lm_head.weight":
		return "head", true
	case "model.norm.weight", "model.output_attn_res_norm.weight", "model.output_attn_res_proj.weight":
		return "final", true
	}
	rest, ok := strings.CutPrefix(name, prefix+"model.layers.")
	if !ok || strings.Contains(name, ".block_sparse_moe.experts.") {
		return "", false
	}
	num, _, _ := strings.Cut(rest, ".")
	return "layer." + num, true
}

// checkTrunk opens trunkDir and checks it against the checkpoint in
// modelDir byte by byte.
func checkTrunk(t *testing.T, modelDir, trunkDir string) *Manifest {
	t.Helper()
	tr, err := Open(trunkDir)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	set, err := safetensors.Open(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	m := tr.Manifest()
	want := map[string]string{}
	for _, n := range set.Names() {
		if run, ok := isTrunkTensor(n, m.Source.Prefix); ok {
			want[n] = run
		}
	}
	var maxLen int64
	for _, r := range m.Runs {
		maxLen = max(maxLen, r.Length)
	}
	hb, err := direct.AllocHuge(int(maxLen))
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Free()
	buf := hb.Bytes()
	seen := map[string]bool{}
	var end int64
	for i := range m.Runs {
		r := &m.Runs[i]
		if r.Offset != end || r.Offset%4096 != 0 || r.Length%4096 != 0 || r.Length != (r.DataBytes+4095)/4096*4096 {
			t.Fatalf("run %s: offset %d length %d data %d (previous end %d)", r.Name, r.Offset, r.Length, r.DataBytes, end)
		}
		end = r.Offset + r.Length
		if err := tr.VerifyRun(r, buf); err != nil {
			t.Fatal(err)
		}
		covered := make([]bool, r.Length)
		for _, tt := range r.Tensors {
			if tt.Offset%64 != 0 {
				t.Fatalf("%s: offset %d not 64-aligned", tt.Name, tt.Offset)
			}
			if want[tt.Name] != r.Name {
				t.Fatalf("tensor %s is in run %s, want run %q", tt.Name, r.Name, want[tt.Name])
			}
			seen[tt.Name] = true
			st, _ := set.Get(tt.Name)
			src := make([]byte, st.Size)
			if err := set.ReadTensor(st, src); err != nil {
				t.Fatal(err)
			}
			wantC := m.Compressed() && Compressible(strings.TrimPrefix(tt.Name, m.Source.Prefix), st.DType, st.Shape)
			require.Equal(t, wantC, tt.Compressed(), "%s: compressed", tt.Name)
			if tt.Compressed() {
				require.Equal(t, safetensors.BF16, st.DType, tt.Name)
				require.Equal(t, st.Shape, tt.Shape, tt.Name)
				require.Equal(t, st.Size, tt.LogicalSize(), tt.Name)
				requireDecodes(t, &tt, tt.Bytes(buf), src)
			} else {
				if string(st.DType) != tt.DType || !slices.Equal(st.Shape, tt.Shape) || st.Size != tt.Size {
					t.Fatalf("%s: manifest %s%v %d, checkpoint %s%v %d", tt.Name, tt.DType, tt.Shape, tt.Size, st.DType, st.Shape, st.Size)
				}
				if !bytes.Equal(tt.Bytes(buf), src) {
					t.Fatalf("%s: trunk bytes differ from the checkpoint", tt.Name)
				}
			}
			for k := tt.Offset; k < tt.Offset+tt.Size; k++ {
				covered[k] = true
			}
		}
		for k, c := range covered {
			if !c && buf[k] != 0 {
				t.Fatalf("run %s: padding byte %d is %#x", r.Name, k, buf[k])
			}
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("trunk holds %d tensors, the checkpoint has %d trunk tensors", len(seen), len(want))
	}
	if end != m.TotalBytes {
		t.Fatalf("runs end at %d, total_bytes %d", end, m.TotalBytes)
	}
	return m
}

func pack(t *testing.T, model, dir string, opt Options) *Result {
	t.Helper()
	res, err := Pack(context.Background(), model, dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// packed packs model with the default options into a new temporary
// folder and returns the folder.
func packed(t *testing.T, model string) string {
	t.Helper()
	dir := t.TempDir()
	pack(t, model, dir, Options{})
	return dir
}

func TestPackTinyRelease(t *testing.T) {
	dir := t.TempDir()
	res := pack(t, tinyRelease, dir, Options{})
	m := checkTrunk(t, tinyRelease, dir)
	if m.Source.Prefix != "language_model." || len(m.Source.Files) != 3 || m.Layers() != 8 || len(m.Runs) != 11 {
		t.Fatalf("prefix %q, %d files, %d layers, %d runs", m.Source.Prefix, len(m.Source.Files), m.Layers(), len(m.Runs))
	}
	f0 := m.Source.Files[0]
	src0, err := os.Stat(filepath.Join(tinyRelease, f0.Name))
	require.NoError(t, err)
	assert.Equal(t, SourceFile{Name: "model-00001-of-00003.safetensors", Size: 412584, ModTime: src0.ModTime().UnixNano(), HeaderSHA256: headerSHA256(t, filepath.Join(tinyRelease, f0.Name))}, f0)
	assert.Equal(t, Version, m.Version)
	names := []string{"embed", "head", "final"}
	for i := 0; i < 8; i++ {
		names = append(names, fmt.Sprintf("layer.%d", i))
	}
	for i, r := range m.Runs {
		if r.Name != names[i] || r.Layer != i-3 && i >= 3 {
			t.Fatalf("run %d is %s (layer %d)", i, r.Name, r.Layer)
		}
	}
	if f := m.Runs[2].Tensors; len(f) != 3 {
		t.Fatalf("final run has %d tensors", len(f))
	}
	if res.RunsWritten != 11 || res.BytesWritten != m.TotalBytes || res.Resumed || res.UpToDate {
		t.Fatalf("result %+v", res)
	}
	if _, err := os.Stat(filepath.Join(dir, PartialFile)); !os.IsNotExist(err) {
		t.Fatalf("partial file left behind: %v", err)
	}
	// Packing again finds the complete trunk and writes nothing.
	st0, _ := os.Stat(filepath.Join(dir, BinFile))
	res = pack(t, tinyRelease, dir, Options{})
	st1, _ := os.Stat(filepath.Join(dir, BinFile))
	if !res.UpToDate || res.BytesWritten != 0 || !st1.ModTime().Equal(st0.ModTime()) {
		t.Fatalf("second pack: %+v", res)
	}
}

func TestPackFlat(t *testing.T) {
	dir := t.TempDir()
	pack(t, tinyFlat, dir, Options{BufferSize: 8192})
	m := checkTrunk(t, tinyFlat, dir)
	if m.Source.Prefix != "" || len(m.Source.Files) != 1 || m.Source.Files[0].Name != "model.safetensors" {
		t.Fatalf("source %+v", m.Source)
	}
	// The same trunk whatever the buffer size.
	dir2 := packed(t, tinyFlat)
	sameFiles(t, dir, dir2)
}

// sameFiles asserts that two trunk directories hold identical trunk.bin
// and trunk.json and no partial file.
func sameFiles(t *testing.T, a, b string) {
	t.Helper()
	for _, f := range []string{BinFile, ManifestFile} {
		x, err := os.ReadFile(filepath.Join(a, f))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(b, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Fatalf("%s differs between %s and %s", f, a, b)
		}
	}
	if _, err := os.Stat(filepath.Join(b, PartialFile)); !os.IsNotExist(err) {
		t.Fatalf("%s left in %s", PartialFile, b)
	}
}

// synth writes a K3-shaped checkpoint: layers of trunk tensors with
// routed experts interleaved between them (so a layer's trunk is not
// contiguous), layer 1 split across shards 1 and 2, odd-sized f32 tensors,
// globals in the last shard. scale multiplies the big matrices' rows.
func synth(t testing.TB, dir string, layers, scale int, prefix string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	data := func(n int64) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	ten := func(name string, dt safetensors.DType, shape ...int64) safetensors.WriteTensor {
		n := dt.Size()
		for _, d := range shape {
			n *= d
		}
		return safetensors.WriteTensor{Name: prefix + name, DType: dt, Shape: shape, Data: data(n)}
	}
	const H = 64
	R := int64(64 * scale)
	shards := make([][]safetensors.WriteTensor, 3)
	for l := 0; l < layers; l++ {
		L := fmt.Sprintf("model.layers.%d.", l)
		ts := []safetensors.WriteTensor{
			ten(L+"input_layernorm.weight", safetensors.BF16, H),
			ten(L+"self_attn.q_proj.weight", safetensors.BF16, R, H),
			ten(L+"block_sparse_moe.experts.0.w1.weight_packed", safetensors.U8, R, 32),
			ten(L+"self_attn.A_log", safetensors.F32, 3),
			ten(L+"self_attn.q_conv1d.weight", safetensors.F32, H, 1, 4),
			ten(L+"block_sparse_moe.experts.1.w1.weight_packed", safetensors.U8, R, 32),
			ten(L+"block_sparse_moe.shared_experts.up_proj.weight", safetensors.BF16, R, H),
			ten(L+"self_attn.o_norm.weight", safetensors.F32, 5),
			ten(L+"block_sparse_moe.gate.weight", safetensors.BF16, 8, H),
		}
		switch {
		case l == 1:
			shards[0] = append(shards[0], ts[:4]...)
			shards[1] = append(shards[1], ts[4:]...)
		case l < layers/2:
			shards[0] = append(shards[0], ts...)
		default:
			shards[1] = append(shards[1], ts...)
		}
	}
	shards[2] = []safetensors.WriteTensor{
		ten("model.norm.weight", safetensors.BF16, H),
		ten("lm_head.weight", safetensors.BF16, R*4, H),
		ten("model.output_attn_res_proj.weight", safetensors.BF16, 1, H),
		ten("model.embed_tokens.weight", safetensors.BF16, R*4, H),
		ten("model.output_attn_res_norm.weight", safetensors.BF16, H),
	}
	if prefix != "" {
		shards[2] = append(shards[2], safetensors.WriteTensor{Name: "vision_tower.x", DType: safetensors.F32, Shape: []int64{7}, Data: data(28)})
	}
	if err := safetensors.WriteSharded(dir, shards); err != nil {
		t.Fatal(err)
	}
}

func TestPackGathersSplitLayer(t *testing.T) {
	model := t.TempDir()
	synth(t, model, 5, 3, "language_model.")
	dir := t.TempDir()
	pack(t, model, dir, Options{BufferSize: 4096})
	m := checkTrunk(t, model, dir)
	tr, _ := Open(dir)
	defer tr.Close()
	r, ok := tr.LayerRun(1)
	if !ok || r.Name != "layer.1" || len(r.Tensors) != 7 {
		t.Fatalf("layer 1 run: %+v", r)
	}
	// Layer 1's tensors come from two shards, in shard order.
	if !strings.HasSuffix(r.Tensors[0].Name, "input_layernorm.weight") || !strings.HasSuffix(r.Tensors[3].Name, "q_conv1d.weight") {
		t.Fatalf("layer 1 order: %s ... %s", r.Tensors[0].Name, r.Tensors[3].Name)
	}
	if h, ok := tr.Run("head"); !ok || h.Layer != -1 || h.Offset != m.Runs[1].Offset || tr.Layers() != 5 {
		t.Fatalf("Run(head): %+v", h)
	}
	if _, ok := tr.Run("layer.5"); ok {
		t.Fatal("Run(layer.5) exists")
	}
	if x, ok := r.Tensor("language_model.model.layers.1.self_attn.o_norm.weight"); !ok || x.DType != "F32" || x.Size != 20 || x.Offset%64 != 0 {
		t.Fatalf("Run.Tensor: %+v", x)
	}
	foreign := *r
	foreign.Offset += 4096
	if err := tr.ReadRun(&foreign, make([]byte, r.Length)); err == nil || !strings.Contains(err.Error(), "not a run of this trunk") {
		t.Fatalf("foreign run: %v", err)
	}
	if _, ok := tr.LayerRun(5); ok || m.Layers() != 5 {
		t.Fatalf("%d layers", m.Layers())
	}
	if run, tt, ok := tr.Tensor("language_model.model.layers.3.self_attn.A_log"); !ok || run.Name != "layer.3" || tt.Size != 12 {
		t.Fatalf("Tensor lookup: %v %+v", run, tt)
	}
	if _, _, ok := tr.Tensor("language_model.model.layers.3.block_sparse_moe.experts.0.w1.weight_packed"); ok {
		t.Fatal("a routed expert is in the trunk")
	}
	// ReadRun into an ordinary (unaligned) slice gives the same bytes.
	hb, _ := direct.AllocHuge(int(r.Length))
	defer hb.Free()
	plain := make([]byte, r.Length+1)[1:]
	if err := tr.ReadRun(r, hb.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := tr.ReadRun(r, plain); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(plain, hb.Bytes()) || crc32.Checksum(plain, castagnoli) != r.CRC32C {
		t.Fatal("ReadRun into a plain slice differs")
	}
	if err := tr.ReadRun(r, plain[:r.Length-1]); err == nil || !strings.Contains(err.Error(), "buffer") {
		t.Fatalf("short buffer: %v", err)
	}
	if err := tr.CheckSource(model); err != nil {
		t.Fatal(err)
	}
	if err := tr.CheckSource(tinyRelease); !errors.Is(err, ErrSourceMismatch) {
		t.Fatalf("CheckSource(tiny-release): %v", err)
	}
}

// packCancelled packs until stop says to cancel and returns the error.
func packCancelled(t *testing.T, model, dir string, bufSize int, stop func(Progress) bool) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := Pack(ctx, model, dir, Options{BufferSize: bufSize, Progress: func(p Progress) {
		if stop(p) {
			cancel()
		}
	}})
	if err == nil {
		t.Fatal("pack was not interrupted")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted pack: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ManifestFile)); !os.IsNotExist(err) {
		t.Fatalf("an interrupted pack wrote %s", ManifestFile)
	}
	return err
}

func readPartial(t *testing.T, dir string) *partial {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, PartialFile))
	if err != nil {
		t.Fatal(err)
	}
	p, err := parsePartial(data)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestResume(t *testing.T) {
	for _, model := range []string{tinyRelease, tinyFlat} {
		ref := packed(t, model)
		nruns := len(checkTrunk(t, model, ref).Runs)
		for _, k := range []int{1, 2, 5, nruns - 1} {
			t.Run(fmt.Sprintf("%s/after%d", filepath.Base(model), k), func(t *testing.T) {
				dir := t.TempDir()
				packCancelled(t, model, dir, 0, func(p Progress) bool { return p.Phase == PhasePack && p.RunsDone == k })
				pt := readPartial(t, dir)
				if len(pt.Done) != k {
					t.Fatalf("partial lists %d runs done, want %d", len(pt.Done), k)
				}
				if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "interrupted") {
					t.Fatalf("Open of an interrupted pack: %v", err)
				}
				res := pack(t, model, dir, Options{})
				if !res.Resumed || res.RunsKept != k || res.RunsWritten != nruns-k || res.RunsRewritten != 0 {
					t.Fatalf("resume: %+v", res)
				}
				sameFiles(t, ref, dir)
			})
		}
		// Cancelled in the middle of runs (4096-byte chunks), twice.
		t.Run(filepath.Base(model)+"/midrun", func(t *testing.T) {
			dir := t.TempDir()
			chunks := 0
			packCancelled(t, model, dir, 4096, func(p Progress) bool {
				if p.Phase == PhasePack && p.BytesDone > 0 {
					chunks++
				}
				return chunks == 7
			})
			first := len(readPartial(t, dir).Done)
			chunks = 0
			packCancelled(t, model, dir, 4096, func(p Progress) bool {
				if p.Phase == PhasePack && p.BytesDone > 0 {
					chunks++
				}
				return chunks == 30
			})
			if second := len(readPartial(t, dir).Done); second <= first {
				t.Fatalf("no progress across resumes: %d then %d runs", first, second)
			}
			pack(t, model, dir, Options{BufferSize: 4096})
			sameFiles(t, ref, dir)
		})
	}
}

func TestResumeRewritesCorruptRun(t *testing.T) {
	ref := packed(t, tinyRelease)
	dir := t.TempDir()
	packCancelled(t, tinyRelease, dir, 0, func(p Progress) bool { return p.Phase == PhasePack && p.RunsDone == 4 })
	pt := readPartial(t, dir)
	// Flip one byte inside run "head" (done) in trunk.bin.
	head := pt.Runs[1]
	f, err := os.OpenFile(filepath.Join(dir, BinFile), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := []byte{0}
	f.ReadAt(b, head.Offset+100)
	b[0] ^= 0x40
	f.WriteAt(b, head.Offset+100)
	f.Close()
	var phases []string
	res := pack(t, tinyRelease, dir, Options{Progress: func(p Progress) {
		if len(phases) == 0 || phases[len(phases)-1] != p.Phase {
			phases = append(phases, p.Phase)
		}
	}})
	if res.RunsRewritten != 1 || res.RunsKept != 3 || res.RunsWritten != 8 || len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "run head") {
		t.Fatalf("result %+v", res)
	}
	if !slices.Equal(phases, []string{PhaseCheck, PhasePack, PhaseDone}) {
		t.Fatalf("phases %v", phases)
	}
	sameFiles(t, ref, dir)
}

func TestPartialCorruptStartsOver(t *testing.T) {
	ref := packed(t, tinyRelease)
	dir := t.TempDir()
	packCancelled(t, tinyRelease, dir, 0, func(p Progress) bool { return p.Phase == PhasePack && p.RunsDone == 3 })
	os.WriteFile(filepath.Join(dir, PartialFile), []byte(`{"format":"k3-trunk","vers`), 0o644)
	res := pack(t, tinyRelease, dir, Options{})
	if res.Resumed || res.RunsWritten != 11 || len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "truncated JSON") {
		t.Fatalf("result %+v", res)
	}
	sameFiles(t, ref, dir)
}

func TestSourceMismatch(t *testing.T) {
	// A complete trunk of another checkpoint.
	dir := packed(t, tinyRelease)
	_, err := Pack(context.Background(), tinyFlat, dir, Options{})
	if !errors.Is(err, ErrSourceMismatch) || !strings.Contains(err.Error(), "--force") || !strings.Contains(err.Error(), "prefix") {
		t.Fatalf("pack over another checkpoint's trunk: %v", err)
	}
	pack(t, tinyFlat, dir, Options{Force: true})
	checkTrunk(t, tinyFlat, dir)

	// Same file names, one size different.
	a, b := t.TempDir(), t.TempDir()
	synth(t, a, 4, 1, "")
	synth(t, b, 4, 2, "")
	dir = t.TempDir()
	packCancelled(t, a, dir, 0, func(p Progress) bool { return p.Phase == PhasePack && p.RunsDone == 2 })
	_, err = Pack(context.Background(), b, dir, Options{})
	if !errors.Is(err, ErrSourceMismatch) || !strings.Contains(err.Error(), "model-00001-of-00003.safetensors was") {
		t.Fatalf("pack over another checkpoint's partial: %v", err)
	}
	pack(t, b, dir, Options{Force: true})
	checkTrunk(t, b, dir)
}

func TestNoSpace(t *testing.T) {
	old := diskFree
	defer func() { diskFree = old }()
	diskFree = func(string) (int64, int64, error) { return 5000, 10000, nil }
	dir := t.TempDir()
	_, err := Pack(context.Background(), tinyRelease, dir, Options{})
	m, perr := Plan(tinyRelease)
	require.NoError(t, perr)
	var se *SpaceError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, int64(5000), se.Avail)
	assert.Equal(t, m.TotalBytes+1<<20, se.Need)
	assert.Contains(t, err.Error(), fmt.Sprintf("the trunk needs %d more bytes (%s), 5000 (5.00 KB) available", se.Need, units.Bytes(se.Need)))
	_, err = os.Stat(filepath.Join(dir, BinFile))
	assert.True(t, os.IsNotExist(err), "trunk.bin created despite the refusal")

	// an unknown free space does not refuse
	diskFree = func(string) (int64, int64, error) { return 0, 0, errors.ErrUnsupported }
	_, err = Pack(context.Background(), tinyRelease, dir, Options{})
	assert.NoError(t, err)
}

func TestNotK3(t *testing.T) {
	model := t.TempDir()
	err := safetensors.WriteFile(filepath.Join(model, "model.safetensors"), []safetensors.WriteTensor{{Name: "x", DType: safetensors.F32, Shape: []int64{1}, Data: make([]byte, 4)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Pack(context.Background(), model, t.TempDir(), Options{}); err == nil || !strings.Contains(err.Error(), "embed_tokens") {
		t.Fatalf("err %v", err)
	}
}

// mutate rewrites trunk.json of a good trunk through f and returns
// Open's error.
func mutate(t *testing.T, good []byte, f func(m map[string]any)) error {
	var m map[string]any
	if err := json.Unmarshal(good, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, _ := json.Marshal(m)
	return openWith(t, b)
}

var goodTrunk string

func openWith(t *testing.T, manifest []byte) error {
	dir := t.TempDir()
	bin, err := os.ReadFile(filepath.Join(goodTrunk, BinFile))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, BinFile), bin, 0o644)
	os.WriteFile(filepath.Join(dir, ManifestFile), manifest, 0o644)
	tr, err := Open(dir)
	if err == nil {
		tr.Close()
	}
	return err
}

func TestOpenRefusesCorruptManifest(t *testing.T) {
	goodTrunk = t.TempDir()
	pack(t, tinyRelease, goodTrunk, Options{})
	good, _ := os.ReadFile(filepath.Join(goodTrunk, ManifestFile))
	if err := openWith(t, good); err != nil {
		t.Fatal(err)
	}
	runs := func(m map[string]any) []any { return m["runs"].([]any) }
	run := func(m map[string]any, i int) map[string]any { return runs(m)[i].(map[string]any) }
	tensor := func(m map[string]any, i, j int) map[string]any {
		return run(m, i)["tensors"].([]any)[j].(map[string]any)
	}
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"truncated", openWith(t, good[:len(good)/2]), "truncated JSON"},
		{"empty", openWith(t, nil), "empty file"},
		{"trailing", openWith(t, append(slices.Clone(good), "{}"...)), "trailing data"},
		{"version", mutate(t, good, func(m map[string]any) { m["version"] = 5 }), "version 5 is not supported"},
		{"header hash", mutate(t, good, func(m map[string]any) {
			m["source"].(map[string]any)["files"].([]any)[0].(map[string]any)["header_sha256"] = "abc"
		}), "header_sha256 \"abc\" is not 64 lowercase hex digits"},
		{"format", mutate(t, good, func(m map[string]any) { m["format"] = "gguf" }), `format is "gguf"`},
		{"unknown field", mutate(t, good, func(m map[string]any) { m["extra"] = 1 }), `unknown field "extra"`},
		{"overlap", mutate(t, good, func(m map[string]any) { run(m, 4)["offset"] = run(m, 3)["offset"] }), "overlap"},
		{"unaligned run", mutate(t, good, func(m map[string]any) { run(m, 1)["offset"] = run(m, 1)["offset"].(float64) + 100 }), "not a non-negative multiple of 4096"},
		{"negative offset", mutate(t, good, func(m map[string]any) { run(m, 0)["offset"] = -4096 }), "not a non-negative multiple of 4096"},
		{"length", mutate(t, good, func(m map[string]any) { run(m, 5)["length"] = run(m, 5)["length"].(float64) + 4096 }), "does not round up to length"},
		{"tensor outside", mutate(t, good, func(m map[string]any) {
			r := run(m, 3)
			ts := r["tensors"].([]any)
			ts[len(ts)-1].(map[string]any)["offset"] = r["data_bytes"].(float64) + 64
		}), "outside the run"},
		{"tensor unaligned", mutate(t, good, func(m map[string]any) { tensor(m, 3, 1)["offset"] = tensor(m, 3, 1)["offset"].(float64) + 2 }), "multiple of 64"},
		{"tensor overlap", mutate(t, good, func(m map[string]any) { tensor(m, 3, 1)["offset"] = 0 }), "overlaps the previous tensor"},
		{"size vs shape", mutate(t, good, func(m map[string]any) { tensor(m, 3, 0)["shape"] = []int{3} }), "does not match"},
		{"dtype", mutate(t, good, func(m map[string]any) { tensor(m, 3, 0)["dtype"] = "F64" }), "unsupported dtype"},
		{"total", mutate(t, good, func(m map[string]any) { m["total_bytes"] = m["total_bytes"].(float64) + 4096 }), "total_bytes"},
		{"missing layer", mutate(t, good, func(m map[string]any) { run(m, 4)["name"] = "layer.9"; run(m, 4)["layer"] = 9 }), `"layer.1" is missing`},
		{"layer number", mutate(t, good, func(m map[string]any) { run(m, 4)["layer"] = 3 }), `run "layer.1" has layer 3`},
		{"duplicate run", mutate(t, good, func(m map[string]any) { run(m, 1)["name"] = "embed" }), "both called"},
		{"no head", mutate(t, good, func(m map[string]any) { run(m, 1)["name"] = "layer.8"; run(m, 1)["layer"] = 8 }), `run "head" is missing`},
		{"no runs", mutate(t, good, func(m map[string]any) { m["runs"] = []any{} }), "no runs"},
		{"source", mutate(t, good, func(m map[string]any) { m["source"].(map[string]any)["files"] = []any{} }), "source.files is empty"},
		{"prefix", mutate(t, good, func(m map[string]any) { m["source"].(map[string]any)["prefix"] = "x." }), "source.prefix"},
		{"bin size", mutate(t, good, func(m map[string]any) {
			last := run(m, len(runs(m))-1)
			last["length"] = last["length"].(float64) + 4096
			m["total_bytes"] = m["total_bytes"].(float64) + 4096
		}), "does not round up"},
	}
	for _, c := range cases {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to mention %q", c.name, c.err, c.want)
		}
		if c.err != nil && !strings.Contains(c.err.Error(), ManifestFile) && c.name != "bin size" {
			t.Errorf("%s: error %v does not name the file", c.name, c.err)
		}
	}
	// trunk.bin of the wrong size.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ManifestFile), good, 0o644)
	os.WriteFile(filepath.Join(dir, BinFile), make([]byte, 4096), 0o644)
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "is 4096 bytes but") {
		t.Fatalf("short trunk.bin: %v", err)
	}
	// A corrupt run is caught by VerifyRun.
	bin, _ := os.ReadFile(filepath.Join(goodTrunk, BinFile))
	m, _ := ParseManifest(good)
	bin[m.Runs[6].Offset+7] ^= 1
	os.WriteFile(filepath.Join(dir, BinFile), bin, 0o644)
	tr, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	buf := make([]byte, m.Runs[6].Length)
	if err := tr.VerifyRun(&tr.Manifest().Runs[6], buf); err == nil || !strings.Contains(err.Error(), "run layer.3") {
		t.Fatalf("VerifyRun of a corrupt run: %v", err)
	}
	if err := tr.VerifyRun(&tr.Manifest().Runs[5], buf); err != nil {
		t.Fatal(err)
	}
	// A corrupt complete trunk.json is refused by Pack unless forced.
	os.WriteFile(filepath.Join(dir, ManifestFile), good[:100], 0o644)
	if _, err := Pack(context.Background(), tinyRelease, dir, Options{}); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("pack over a corrupt trunk.json: %v", err)
	}
}

func TestMeasureDisk(t *testing.T) {
	dir := t.TempDir()
	d, err := MeasureDisk(context.Background(), tinyRelease, dir, 1<<20, 100000, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The largest tiny-release shard is 476184 bytes: its aligned part.
	if d.ReadBytes != 475136 || d.WriteBytes != 102400 || filepath.Base(d.ReadFile) != "model-00002-of-00003.safetensors" {
		t.Fatalf("%+v", d)
	}
	if d.ReadBPS() <= 0 || d.WriteBPS() <= 0 || d.PackBound() <= 0 || d.PackBound() >= min(d.ReadBPS(), d.WriteBPS()) {
		t.Fatalf("speeds %v %v %v", d.ReadBPS(), d.WriteBPS(), d.PackBound())
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 0 {
		t.Fatalf("test file left behind: %v", ents)
	}
}

// headerSHA256 hashes a safetensors file's length prefix and header.
func headerSHA256(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	n := binary.LittleEndian.Uint64(b[:8])
	sum := sha256.Sum256(b[:8+n])
	return hex.EncodeToString(sum[:])
}

// TestReadRunParts reads runs in parts placed apart in memory (one page
// read twice where two parts overlap) and gets the bytes and CRC of the
// whole run; layouts that leave a gap or break pages are refused.
func TestReadRunParts(t *testing.T) {
	dir := packed(t, tinyRelease)
	tr, err := Open(dir)
	require.NoError(t, err)
	defer tr.Close()
	m := tr.Manifest()
	r := &m.Runs[0]
	for i := range m.Runs {
		if m.Runs[i].Length > r.Length {
			r = &m.Runs[i]
		}
	}
	require.GreaterOrEqual(t, r.Length, int64(3*4096), "the test needs a run of 3 pages")
	whole := make([]byte, r.Length)
	require.NoError(t, tr.VerifyRun(r, whole))
	// pages [0, 2) and [1, n): a one-page overlap
	a, b := make([]byte, 2*4096), make([]byte, r.Length-4096)
	calls := 0
	require.NoError(t, tr.ReadRunParts(r, []RunPart{{0, a}, {4096, b}}, true, 4096, func() { calls++ }))
	assert.Equal(t, whole[:2*4096], a)
	assert.Equal(t, whole[4096:], b)
	assert.Equal(t, int(2+(r.Length-4096)/4096), calls, "before runs once per piece")
	// every page once, no piece limit
	a, b = make([]byte, 4096), make([]byte, r.Length-4096)
	require.NoError(t, tr.ReadRunParts(r, []RunPart{{0, a}, {4096, b}}, true, 0, nil))
	assert.Equal(t, whole, append(a, b...))
	for name, parts := range map[string][]RunPart{
		"gap":         {{0, make([]byte, 4096)}, {2 * 4096, make([]byte, r.Length-2*4096)}},
		"short":       {{0, make([]byte, r.Length-4096)}},
		"not a page":  {{0, make([]byte, 100)}, {100, make([]byte, r.Length-100)}},
		"out of turn": {{4096, make([]byte, r.Length-4096)}, {0, make([]byte, 4096)}},
	} {
		assert.Error(t, tr.ReadRunParts(r, parts, false, 0, nil), name)
	}
	// a corrupt byte in the second part fails the check
	bin, err := os.ReadFile(filepath.Join(dir, BinFile))
	require.NoError(t, err)
	bin[r.Offset+r.Length-5] ^= 1
	require.NoError(t, os.WriteFile(filepath.Join(dir, BinFile), bin, 0o644))
	tr2, err := Open(dir)
	require.NoError(t, err)
	defer tr2.Close()
	a, b = make([]byte, 4096), make([]byte, r.Length-4096)
	err = tr2.ReadRunParts(r, []RunPart{{0, a}, {4096, b}}, true, 0, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "CRC-32C")
	assert.NoError(t, tr2.ReadRunParts(r, []RunPart{{0, a}, {4096, b}}, false, 0, nil), "unverified reads do not check")
}
