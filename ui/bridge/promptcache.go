package bridge

import (
	"sync"

	"k3/engine"
	"k3/engine/promptcache"
)

// The app's prompt cache (engine/promptcache): the model's states after
// prompts it read, in memory and in the user's cache folder, so a new
// conversation starts from the saved preamble and a restarted app reads
// only what is new. The app's server shares it (partitioned per client).

var liveCache struct {
	sync.Mutex
	c *promptcache.Cache
}

// openPromptCache opens the prompt cache of model m, or nil when it is off
// ($K3_PROMPT_CACHE=off) or cannot be opened (the app then reads every
// prompt whole). Its memory share is the plan's state copies (none at the
// smallest presets: snapshots are then read from disk when used).
func openPromptCache(m *engine.Model, o engine.Options) *promptcache.Cache {
	dir, err := promptcache.ResolveDir("")
	if err != nil || dir == "" {
		return nil
	}
	var ram int64
	if m.Plan != nil {
		ram = int64(o.StateCopies) * (m.Plan.State + m.Plan.KV)
	}
	c, err := promptcache.Open(m, promptcache.Options{Dir: dir, RAMBytes: ram, DiskBytes: promptcache.DefaultDiskBytes(dir)})
	if err != nil {
		return nil
	}
	liveCache.Lock()
	liveCache.c = c
	liveCache.Unlock()
	return c
}

// PromptCacheSize is what the prompt cache holds on disk: the saved
// prompts and their bytes (0, 0 when it is off).
func PromptCacheSize() (files int, bytes int64) {
	dir, err := promptcache.ResolveDir("")
	if err != nil || dir == "" {
		return 0, 0
	}
	for _, f := range promptcache.Files(dir) {
		files++
		bytes += f.Size
	}
	return files, bytes
}

// ClearPromptCache deletes the saved prompts, the open model's copies in
// memory included.
func ClearPromptCache() error {
	liveCache.Lock()
	c := liveCache.c
	liveCache.Unlock()
	var first error
	if c != nil {
		first = c.Clear()
	}
	dir, err := promptcache.ResolveDir("")
	if err != nil || dir == "" {
		return first
	}
	if _, _, err := promptcache.ClearDir(dir); err != nil && first == nil {
		first = err
	}
	return first
}
