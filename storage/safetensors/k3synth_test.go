package safetensors

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// k3Tensors is the number of tensors in the released checkpoint
// (seed-engine-spec §1.1, k3-model.md §2.2).
const k3Tensors = 497220

// k3Inventory returns header specs with the released checkpoint's text-model
// names, shapes and dtypes (k3-model.md §2.2), plus filler vision-tower
// entries bringing the count to the released 497,220.
func k3Inventory() []headerSpec {
	var out []headerSpec
	add := func(name string, dt DType, shape ...int64) {
		n, _ := shapeNumel(shape)
		out = append(out, headerSpec{name: name, dtype: dt, shape: shape, size: n * dt.Size()})
	}
	const P = "language_model.model."
	add(P+"embed_tokens.weight", BF16, 163840, 7168)
	mla := func(l int) bool { return (l+1)%4 == 0 || l == 92 }
	for l := 0; l < 93; l++ {
		L := fmt.Sprintf("%slayers.%d.", P, l)
		for _, n := range []string{"input_layernorm", "post_attention_layernorm", "self_attention_res_norm", "mlp_res_norm"} {
			add(L+n+".weight", BF16, 7168)
		}
		add(L+"self_attention_res_proj.weight", BF16, 1, 7168)
		add(L+"mlp_res_proj.weight", BF16, 1, 7168)
		A := L + "self_attn."
		add(A+"g_proj.weight", BF16, 12288, 7168)
		add(A+"o_proj.weight", BF16, 7168, 12288)
		if mla(l) {
			add(A+"q_a_proj.weight", BF16, 1536, 7168)
			add(A+"q_a_layernorm.weight", BF16, 1536)
			add(A+"q_b_proj.weight", BF16, 18432, 1536)
			add(A+"kv_a_proj_with_mqa.weight", BF16, 576, 7168)
			add(A+"kv_a_layernorm.weight", BF16, 512)
			add(A+"kv_b_proj.weight", BF16, 24576, 512)
		} else {
			for _, n := range []string{"q", "k", "v"} {
				add(A+n+"_proj.weight", BF16, 12288, 7168)
				add(A+n+"_conv1d.weight", F32, 12288, 1, 4)
			}
			add(A+"f_a_proj.weight", BF16, 128, 7168)
			add(A+"f_b_proj.weight", BF16, 12288, 128)
			add(A+"b_proj.weight", BF16, 96, 7168)
			add(A+"A_log", F32, 128)
			add(A+"dt_bias", F32, 12288)
			add(A+"o_norm.weight", F32, 128)
		}
		if l == 0 {
			add(L+"mlp.gate_proj.weight", BF16, 33792, 7168)
			add(L+"mlp.up_proj.weight", BF16, 33792, 7168)
			add(L+"mlp.down_proj.weight", BF16, 7168, 33792)
			continue
		}
		M := L + "block_sparse_moe."
		add(M+"gate.weight", BF16, 896, 7168)
		add(M+"gate.e_score_correction_bias", F32, 896)
		add(M+"routed_expert_down_proj.weight", BF16, 3584, 7168)
		add(M+"routed_expert_up_proj.weight", BF16, 7168, 3584)
		add(M+"routed_expert_norm.weight", BF16, 3584)
		add(M+"shared_experts.gate_proj.weight", BF16, 6144, 7168)
		add(M+"shared_experts.up_proj.weight", BF16, 6144, 7168)
		add(M+"shared_experts.down_proj.weight", BF16, 7168, 6144)
		for e := 0; e < 896; e++ {
			E := fmt.Sprintf("%sexperts.%d.", M, e)
			add(E+"w1.weight_packed", U8, 3072, 1792)
			add(E+"w1.weight_scale", U8, 3072, 112)
			add(E+"w2.weight_packed", U8, 3584, 1536)
			add(E+"w2.weight_scale", U8, 3584, 96)
			add(E+"w3.weight_packed", U8, 3072, 1792)
			add(E+"w3.weight_scale", U8, 3072, 112)
		}
	}
	add(P+"norm.weight", BF16, 7168)
	add(P+"output_attn_res_norm.weight", BF16, 7168)
	add(P+"output_attn_res_proj.weight", BF16, 1, 7168)
	add("language_model.lm_head.weight", BF16, 163840, 7168)
	for i := 0; len(out) < k3Tensors; i++ {
		add(fmt.Sprintf("vision_tower.encoder.blocks.%d.attn.qkv.weight", i), BF16, 3456, 1152)
	}
	return out
}

// writeSyntheticK3 writes the inventory as 96 sparse shards (real header,
// data region created by truncation) in dir, plus the index if withIndex.
func writeSyntheticK3(tb testing.TB, dir string, withIndex bool) {
	tb.Helper()
	inv := k3Inventory()
	if len(inv) != k3Tensors {
		tb.Fatalf("inventory has %d tensors, want %d", len(inv), k3Tensors)
	}
	const m = 96
	where := make(map[string]string, len(inv))
	var total int64
	for i := 0; i < m; i++ {
		lo, hi := i*len(inv)/m, (i+1)*len(inv)/m
		name := ShardName(i+1, m)
		hdr, _, dataLen, err := encodeHeader(inv[lo:hi], map[string]string{"format": "pt"})
		if err != nil {
			tb.Fatal(err)
		}
		for _, sp := range inv[lo:hi] {
			where[sp.name] = name
			total += sp.size
		}
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			tb.Fatal(err)
		}
		var lb [8]byte
		binary.LittleEndian.PutUint64(lb[:], uint64(len(hdr)))
		if _, err := f.Write(append(lb[:], hdr...)); err != nil {
			tb.Fatal(err)
		}
		if err := f.Truncate(8 + int64(len(hdr)) + dataLen); err != nil {
			tb.Fatal(err)
		}
		if err := f.Close(); err != nil {
			tb.Fatal(err)
		}
	}
	if withIndex {
		if err := os.WriteFile(filepath.Join(dir, IndexFile), encodeIndex(where, total), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

func TestOpenSyntheticK3(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("writes 96 sparse shards and parses 497k entries (slow under -race; TestManyTensors covers the concurrent paths)")
	}
	dir := t.TempDir()
	writeSyntheticK3(t, dir, true)
	for _, mode := range []string{"index", "glob"} {
		if mode == "glob" {
			os.Remove(filepath.Join(dir, IndexFile))
		}
		start := time.Now()
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: opened %d tensors in %d files in %v", mode, s.Len(), len(s.Files()), time.Since(start))
		if s.Len() != k3Tensors || len(s.Files()) != 96 {
			t.Fatalf("got %d tensors in %d files", s.Len(), len(s.Files()))
		}
		tn, ok := s.Get("language_model.model.layers.92.block_sparse_moe.experts.895.w2.weight_packed")
		if !ok || tn.DType != U8 || len(tn.Shape) != 2 || tn.Shape[0] != 3584 || tn.Shape[1] != 1536 || tn.Size != 3584*1536 {
			t.Fatalf("last expert tensor: %v %v", tn, ok)
		}
		tn, ok = s.Get("language_model.model.layers.0.self_attn.A_log")
		if !ok || tn.DType != F32 || tn.Numel() != 128 || tn.Offset%8 != 0 {
			t.Fatalf("A_log: %v %v", tn, ok)
		}
		// Sparse data reads back as zeros.
		buf := make([]float32, 128)
		if err := s.ReadFloat32(tn, buf); err != nil || buf[0] != 0 || buf[127] != 0 {
			t.Fatalf("ReadFloat32: %v %v", err, buf[:2])
		}
		var sum int64
		for _, fi := range s.Files() {
			sum += fi.Size
		}
		t.Logf("apparent size of the set: %d bytes", sum)
		names := s.Names()
		if len(names) != k3Tensors || names[0] != "language_model.lm_head.weight" {
			t.Fatalf("Names: %d, first %q", len(names), names[0])
		}
		s.Close()
	}
}

// BenchmarkOpenK3 measures Open of a 96-shard set with the released
// checkpoint's 497,220 tensor names and shapes (the C engine: 0.27 s).
func BenchmarkOpenK3(b *testing.B) {
	dir := b.TempDir()
	writeSyntheticK3(b, dir, true)
	for _, mode := range []string{"index", "glob"} {
		if mode == "glob" {
			os.Remove(filepath.Join(dir, IndexFile))
		}
		b.Run(mode, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				s, err := Open(dir)
				if err != nil {
					b.Fatal(err)
				}
				if s.Len() != k3Tensors {
					b.Fatal(s.Len())
				}
				s.Close()
			}
			// CPU time is a steadier figure than wall time on a shared machine.
			b.ReportMetric(float64((processCPU()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op")
		})
	}
}
