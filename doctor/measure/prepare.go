package measure

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"time"

	"k3/engine/synth"
	st "k3/storage/safetensors"
	"k3/storage/trunk"
)

// prepare writes spec's checkpoint to dir/model and packs its trunk into
// dir/trunk, each only when it is not there yet.
func prepare(ctx context.Context, dir string, spec synth.Spec, logf func(string, ...any)) (model, tr string, err error) {
	model, tr = filepath.Join(dir, "model"), filepath.Join(dir, "trunk")
	if _, err := os.Stat(filepath.Join(model, "model.safetensors.index.json")); err != nil {
		logf("generating the benchmark checkpoint in %s (once)", model)
		os.RemoveAll(model)
		err := synth.WriteProgress(ctx, model, spec, func(shards, of int, bytes int64) {
			logf("  shard %d of %d written (%.1f GB so far)", shards, of, float64(bytes)/1e9)
		})
		if err != nil {
			return "", "", err
		}
		releaseGenerator(logf)
	}
	if _, err := os.Stat(filepath.Join(tr, trunk.ManifestFile)); err != nil {
		logf("packing its trunk into %s (once)", tr)
		last := time.Now()
		progress := func(p trunk.Progress) {
			if p.Phase == trunk.PhasePack && time.Since(last) >= 5*time.Second {
				last = time.Now()
				logf("  packed %.1f of %.1f GB", float64(p.BytesDone)/1e9, float64(p.BytesTotal)/1e9)
			}
		}
		if _, err := trunk.Pack(ctx, model, tr, trunk.Options{Progress: progress}); err != nil {
			return "", "", err
		}
	}
	return model, tr, nil
}

// ShardPaths lists the checkpoint's shard files.
func ShardPaths(model string) ([]string, error) { return shardPaths(model) }

// releaseGenerator hands the generator's memory back to the system. It generates
// a shard's tensors in memory (at the real K3 width the model tables are
// 9.4 GB of float32 before they are bf16), all garbage once written, and
// the Go heap keeps freed memory resident for a while: a first k3 bench
// layer on a 24 GB machine kept ~14 GB and then refused its own
// measurement for want of memory (the second run, with the checkpoint on
// disk, fitted).
func releaseGenerator(logf func(string, ...any)) {
	held := heapHeld()
	debug.FreeOSMemory()
	logf("released the generator's memory: %.2f GB returned to the system", float64(held-heapHeld())/1e9)
}

// heapHeld is the Go heap memory the process holds from the system (in
// use, or free and not yet returned).
func heapHeld() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapSys - ms.HeapReleased)
}

// shardPaths lists the checkpoint's shard files.
func shardPaths(model string) ([]string, error) {
	set, err := st.Open(model)
	if err != nil {
		return nil, err
	}
	defer set.Close()
	var files []string
	for _, f := range set.Files() {
		files = append(files, f.Path)
	}
	return files, nil
}
