package trunk

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"k3/storage/safetensors"
)

// TestWriteBenchCheckpoint writes a larger K3-shaped checkpoint for
// measuring pack throughput by hand:
//
//	K3_TRUNK_BENCH_DIR=/tmp/bench K3_TRUNK_BENCH_MB=2048 go test -run TestWriteBenchCheckpoint ./storage/trunk
//	k3 pack /tmp/bench /tmp/bench-trunk
//
// About half the bytes are trunk (bf16 matrices, f32 vectors with odd
// sizes), half routed experts interleaved with them; 4 shards, with layers
// split across shard boundaries. Skipped unless K3_TRUNK_BENCH_DIR is set.
func TestWriteBenchCheckpoint(t *testing.T) {
	dir := os.Getenv("K3_TRUNK_BENCH_DIR")
	if dir == "" {
		t.Skip("set K3_TRUNK_BENCH_DIR to write the benchmark checkpoint")
	}
	mb := 2048
	if s := os.Getenv("K3_TRUNK_BENCH_MB"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 64 {
			t.Fatalf("K3_TRUNK_BENCH_MB=%q", s)
		}
		mb = v
	}
	const layers, shards, H = 16, 4, 1024
	// Per layer: 4 trunk matrices of R x H bf16 and 4 expert blocks of the
	// same size; globals: embed and head of 2R x H each.
	R := int64(mb) << 20 / (layers*8 + 4) / (H * 2)
	state := uint64(0x9E3779B97F4A7C15)
	fill := func(n int64) []byte {
		b := make([]byte, n)
		for i := 0; i+8 <= len(b); i += 8 {
			state ^= state << 13
			state ^= state >> 7
			state ^= state << 17
			binary.LittleEndian.PutUint64(b[i:], state)
		}
		return b
	}
	mk := func(name string, dt safetensors.DType, shape ...int64) safetensors.WriteTensor {
		n := dt.Size()
		for _, d := range shape {
			n *= d
		}
		return safetensors.WriteTensor{Name: "language_model." + name, DType: dt, Shape: shape, Data: fill(n)}
	}
	var all [][]safetensors.WriteTensor
	var cur []safetensors.WriteTensor
	for l := 0; l < layers; l++ {
		L := fmt.Sprintf("model.layers.%d.", l)
		ts := []safetensors.WriteTensor{
			mk(L+"input_layernorm.weight", safetensors.BF16, H),
			mk(L+"self_attn.q_proj.weight", safetensors.BF16, R, H),
			mk(L+"block_sparse_moe.experts.0.w1.weight_packed", safetensors.U8, R, 2*H),
			mk(L+"self_attn.A_log", safetensors.F32, 3),
			mk(L+"self_attn.k_proj.weight", safetensors.BF16, R, H),
			mk(L+"block_sparse_moe.experts.1.w1.weight_packed", safetensors.U8, R, 2*H),
			mk(L+"block_sparse_moe.experts.2.w1.weight_packed", safetensors.U8, R, 2*H),
			mk(L+"self_attn.o_proj.weight", safetensors.BF16, R, H),
			mk(L+"self_attn.dt_bias", safetensors.F32, 77),
			mk(L+"block_sparse_moe.experts.3.w1.weight_packed", safetensors.U8, R, 2*H),
			mk(L+"block_sparse_moe.shared_experts.up_proj.weight", safetensors.BF16, R, H),
		}
		for i, x := range ts {
			cur = append(cur, x)
			// Close a shard in the middle of layers 3, 7 and 11.
			if i == 5 && l%4 == 3 && len(all) < shards-1 {
				all = append(all, cur)
				if err := writeBenchShard(dir, len(all), shards, cur); err != nil {
					t.Fatal(err)
				}
				cur = nil
			}
		}
	}
	cur = append(cur,
		mk("model.embed_tokens.weight", safetensors.BF16, 2*R, H),
		mk("lm_head.weight", safetensors.BF16, 2*R, H),
		mk("model.norm.weight", safetensors.BF16, H),
		mk("model.output_attn_res_norm.weight", safetensors.BF16, H),
		mk("model.output_attn_res_proj.weight", safetensors.BF16, 1, H))
	all = append(all, cur)
	if err := writeBenchShard(dir, len(all), shards, cur); err != nil {
		t.Fatal(err)
	}
	where := map[string]string{}
	for i, sh := range all {
		for _, x := range sh {
			where[x.Name] = safetensors.ShardName(i+1, shards)
		}
	}
	idx, _ := json.MarshalIndent(map[string]any{"metadata": map[string]any{}, "weight_map": where}, "", " ")
	if err := os.WriteFile(filepath.Join(dir, safetensors.IndexFile), idx, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Plan(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s: trunk %d bytes in %d runs", dir, m.TotalBytes, len(m.Runs))
}

func writeBenchShard(dir string, n, m int, ts []safetensors.WriteTensor) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := range ts {
		defer func(i int) { ts[i].Data = nil }(i)
	}
	return safetensors.WriteFile(filepath.Join(dir, safetensors.ShardName(n, m)), ts, map[string]string{"format": "pt"})
}
