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
	"k3/storage/safetensors"
)

// indexTensors is how many routed-expert tensors TestTensorIndexBytes
// indexes: 12 MoE layers of K3's 896 experts (six tensors each), an eighth
// of the released checkpoint's 494,592.
const indexTensors = 12 * 896 * 6

// TestTensorIndexBytes: a process that opens a checkpoint holds at most
// TensorIndexBytes per tensor for its index (safetensors.Set: each
// tensor's name, shape and place), measured in a child process on shards
// whose headers name routed experts as the released checkpoint does
// (sparse files: the data is never read).
func TestTensorIndexBytes(t *testing.T) {
	if dir := os.Getenv("K3_INDEX_CHILD"); dir != "" {
		debug.FreeOSMemory()
		before := machine.RSS()
		s, err := safetensors.Open(dir)
		if err != nil {
			os.Exit(9)
		}
		debug.FreeOSMemory()
		fmt.Printf("\nindex %d %d\n", machine.RSS()-before, s.Len())
		runtime.KeepAlive(s)
		os.Exit(0)
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
	var held int64
	var n int
	_, err = fmt.Sscanf(string(out[i+1:]), "index %d %d", &held, &n)
	require.NoError(t, err)
	require.Equal(t, indexTensors, n)
	per := float64(held) / float64(n)
	t.Logf("%d tensors: %.1f MB held, %.0f bytes a tensor (counted: %d; the released checkpoint's index: %.2f GB)",
		n, float64(held)/1e6, per, TensorIndexBytes, float64(K3.IndexBytes())/1e9)
	assert.LessOrEqual(t, per, float64(TensorIndexBytes))
	assert.Greater(t, per, 0.5*TensorIndexBytes, "the bound is near what is held")
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
