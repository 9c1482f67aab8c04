package doctor

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/machine"
	"k3/storage/layout"
	"k3/storage/safetensors"
)

// indexTensors is how many routed-expert tensors TestTensorIndexBytes
// indexes: 36 MoE layers of K3's 896 experts (six tensors each), two
// fifths of the released checkpoint's 494,592 (enough that the runtime's
// fixed costs, about 1 MB, weigh little per tensor).
const indexTensors = 36 * 896 * 6

// expertPlace is the engine's expertLoc (engine.TestExpertIndexForgotten
// holds its 88 bytes): six offsets, six file indexes, the run's start and
// two flags.
type expertPlace struct {
	parts [6]int64
	files [6]int32
	off   int64
	run   bool
	ok    bool
}

// TestTensorIndexBytes: a process that opens a checkpoint holds at most
// TensorIndexBytes per tensor for its index (safetensors.Set: each
// tensor's name, shape and place), and once the engine has recorded the
// routed experts' places and the set has forgotten them, at most
// ExpertIndexBytes per routed-expert tensor. Measured in a child process on
// shards whose headers name routed experts as the released checkpoint does
// (sparse files: the data is never read).
func TestTensorIndexBytes(t *testing.T) {
	if raceEnabled {
		t.Skip("memory measured in the plain run: the race detector's shadow memory multiplies the resident size")
	}
	if dir := os.Getenv("K3_INDEX_CHILD"); dir != "" {
		indexChild(dir)
	}
	if machine.RSS() <= 0 {
		t.Skip("no resident size on this platform")
	}
	dir := t.TempDir()
	writeExpertShards(t, dir, 4)
	cmd := exec.Command(os.Args[0], "-test.run=^TestTensorIndexBytes$", "-test.count=1")
	cmd.Env = append(os.Environ(), "K3_INDEX_CHILD="+dir)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	i := bytes.LastIndex(out, []byte("\nindex "))
	require.GreaterOrEqual(t, i, 0, "%s", out)
	var opened, located int64
	var n, left int
	_, err = fmt.Sscanf(string(out[i+1:]), "index %d %d located %d %d", &opened, &n, &located, &left)
	require.NoError(t, err, "%s", out)
	require.Equal(t, indexTensors, n)
	require.Zero(t, left, "every routed expert is forgotten")
	per, after := float64(opened)/float64(n), float64(located)/float64(n)
	t.Logf("%d tensors: %.1f MB held opened, %.0f bytes a tensor (counted: %d); %.2f MB once located, %.1f bytes a tensor (counted: %d); the released checkpoint's index: %.3f GB",
		n, float64(opened)/1e6, per, TensorIndexBytes, float64(located)/1e6, after, ExpertIndexBytes, float64(K3.IndexBytes())/1e9)
	assert.LessOrEqual(t, per, float64(TensorIndexBytes))
	assert.Greater(t, per, 0.5*TensorIndexBytes, "the bound is near what is held")
	assert.LessOrEqual(t, after, float64(ExpertIndexBytes))
	assert.Greater(t, after, 0.5*ExpertIndexBytes, "the bound is near what is held")
}

// indexChild opens dir, prints what the index holds, records every routed
// expert's place as the engine does, has the set forget them, prints what
// is held then, and exits.
func indexChild(dir string) {
	debug.FreeOSMemory()
	before := machine.RSS()
	s, err := safetensors.Open(dir)
	if err != nil {
		os.Exit(9)
	}
	debug.FreeOSMemory()
	opened := machine.RSS() - before
	n := s.Len()
	files := map[string]int32{}
	for i, f := range s.Files() {
		files[f.Path] = int32(i)
	}
	parts := []string{"w1.weight_packed", "w1.weight_scale", "w3.weight_packed", "w3.weight_scale", "w2.weight_packed", "w2.weight_scale"}
	locs := make([]expertPlace, indexTensors/6)
	for k := range locs {
		base := fmt.Sprintf("language_model.model.layers.%d.block_sparse_moe.experts.%d.", 1+k/896, k%896)
		for i, p := range parts {
			tn, ok := s.Get(base + p)
			if !ok {
				os.Exit(8)
			}
			locs[k].parts[i], locs[k].files[i] = tn.Offset, files[tn.Path]
		}
		locs[k].off, locs[k].run, locs[k].ok = locs[k].parts[0], true, true
	}
	s.Forget(func(name string) bool { return layout.IsRoutedExpert(name) })
	debug.FreeOSMemory()
	fmt.Printf("\nindex %d %d located %d %d\n", opened, n, machine.RSS()-before, s.Len())
	runtime.KeepAlive(s)
	runtime.KeepAlive(locs)
	os.Exit(0)
}

// writeExpertShards writes indexTensors routed-expert tensors' entries into
// shards sparse files, named and shaped as the released checkpoint's.
func writeExpertShards(t *testing.T, dir string, shards int) {
	type entry struct {
		DType string   `json:"dtype"`
		Shape []int64  `json:"shape"`
		Off   [2]int64 `json:"data_offsets"`
	}
	heads := make([]map[string]entry, shards)
	ends := make([]int64, shards)
	parts := []struct {
		name  string
		shape []int64
	}{{"w1.weight_packed", []int64{3072, 1792}}, {"w1.weight_scale", []int64{3072, 112}}, {"w3.weight_packed", []int64{3072, 1792}},
		{"w3.weight_scale", []int64{3072, 112}}, {"w2.weight_packed", []int64{3584, 1536}}, {"w2.weight_scale", []int64{3584, 96}}}
	for k := 0; k < indexTensors/6; k++ {
		sh := k % shards
		if heads[sh] == nil {
			heads[sh] = map[string]entry{}
		}
		for _, p := range parts {
			size := p.shape[0] * p.shape[1]
			name := fmt.Sprintf("language_model.model.layers.%d.block_sparse_moe.experts.%d.%s", 1+k/896, k%896, p.name)
			heads[sh][name] = entry{"U8", p.shape, [2]int64{ends[sh], ends[sh] + size}}
			ends[sh] += size
		}
	}
	for sh, h := range heads {
		b, err := json.Marshal(h)
		require.NoError(t, err)
		for len(b)%8 != 0 {
			b = append(b, ' ')
		}
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("model-%05d-of-%05d.safetensors", sh+1, shards)))
		require.NoError(t, err)
		require.NoError(t, binary.Write(f, binary.LittleEndian, uint64(len(b))))
		_, err = f.Write(b)
		require.NoError(t, err)
		require.NoError(t, f.Truncate(8+int64(len(b))+ends[sh]))
		require.NoError(t, f.Close())
	}
}
