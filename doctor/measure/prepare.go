package measure

import (
	"context"
	"os"
	"path/filepath"
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
