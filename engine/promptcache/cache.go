// Package promptcache keeps exact engine state snapshots of prompts read
// before, so a prompt that starts like one of them is read only from where
// they end (docs/PROMPTCACHE.md). Snapshots are kept in memory within a
// budget and in files in a per-user folder within another, least recently
// used out first, and are keyed by the model's fingerprint (its weights
// and config), the kernels' contract, a partition (who may reuse them) and
// the exact ids they hold. A damaged, truncated or foreign file is skipped
// with a warning and never used.
package promptcache

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"k3/engine"
)

// Options configure a Cache.
type Options struct {
	// Dir is the cache folder ("": memory only). Entries go in a subfolder
	// per model fingerprint.
	Dir string
	// RAMBytes and DiskBytes are the tiers' budgets.
	RAMBytes, DiskBytes int64
	// Warn receives what was skipped (nil: dropped).
	Warn func(string)
}

// Cache is a prompt cache for one model (engine.PromptCache). Its methods
// may be called from several goroutines.
type Cache struct {
	mu      sync.Mutex
	m       *engine.Model
	o       Options
	dir     string // Dir/<fingerprint>, "" without one
	entries []*entry
	tick    int64 // logical clock for least-recently-used order
}

// entry is one snapshot, in memory (st), on disk (file) or both.
type entry struct {
	part string
	ids  []int
	file string // path, "" when not on disk
	size int64  // the file's size
	st   *engine.State
	ram  int64 // st.Bytes()
	used int64
}

// ModelDir is the subfolder of dir that holds model m's entries.
func ModelDir(dir string, m *engine.Model) string {
	return filepath.Join(dir, fmt.Sprintf("%016x", m.Fingerprint))
}

// Open opens the cache of model m, reading the headers of the entries
// already on disk (their last use is the file's modification time).
func Open(m *engine.Model, o Options) (*Cache, error) {
	c := &Cache{m: m, o: o}
	if o.Dir == "" {
		return c, nil
	}
	c.dir = ModelDir(o.Dir, m)
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return nil, fmt.Errorf("prompt cache folder: %w", err)
	}
	_ = os.Chmod(o.Dir, 0o700)
	_ = os.Chmod(c.dir, 0o700)
	des, err := os.ReadDir(c.dir)
	if err != nil {
		return nil, fmt.Errorf("prompt cache folder: %w", err)
	}
	for _, de := range des {
		name := de.Name()
		if strings.HasPrefix(name, ".") || !de.Type().IsRegular() {
			continue // atomic writes' temporary files
		}
		path := filepath.Join(c.dir, name)
		fi, err := de.Info()
		if err != nil {
			continue
		}
		h, err := readHeader(m, path, fi.Size())
		if err != nil || filepath.Base(path) != fileName(h.part, h.ids) {
			if err == nil {
				err = errForeign
			}
			c.warn("prompt cache: skipped %s: %v", path, err)
			continue
		}
		c.entries = append(c.entries, &entry{part: h.part, ids: h.ids, file: path, size: fi.Size(), used: fi.ModTime().UnixNano()})
	}
	c.tick = time.Now().UnixNano()
	c.trim()
	return c, nil
}

func (c *Cache) warn(f string, a ...any) {
	if c.o.Warn != nil {
		c.o.Warn(fmt.Sprintf(f, a...))
	}
}

// now is the next tick of the clock (never below a file's time).
func (c *Cache) now() int64 {
	c.tick = max(c.tick+1, time.Now().UnixNano())
	return c.tick
}

// Longest implements engine.PromptCache: a copy of the longest snapshot of
// part whose ids start ids, with at most max positions. A file that fails
// its checks is dropped with a warning and the next longest is tried.
func (c *Cache) Longest(part string, ids []int, max int) *engine.State {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		var best *entry
		for _, e := range c.entries {
			n := len(e.ids)
			if e.part == part && n <= max && n <= len(ids) && (best == nil || n > len(best.ids)) && slices.Equal(e.ids, ids[:n]) {
				best = e
			}
		}
		if best == nil {
			return nil
		}
		best.used = c.now()
		if best.st != nil {
			c.touch(best)
			return best.st.Clone()
		}
		st, err := load(c.m, best.file, best.part, best.ids)
		if err != nil {
			c.warn("prompt cache: skipped %s: %v", best.file, err)
			_ = os.Remove(best.file)
			c.drop(best)
			continue
		}
		c.touch(best)
		best.st, best.ram = st, st.Bytes()
		out := st.Clone()
		c.trim()
		return out
	}
}

// touch marks an entry's file as just used (its order after a restart).
func (c *Cache) touch(e *entry) {
	if e.file != "" {
		t := time.Unix(0, e.used)
		_ = os.Chtimes(e.file, t, t)
	}
}

// Keep implements engine.PromptCache: s goes into memory and, with a
// folder, into a file; then the budgets are held.
func (c *Cache) Keep(part string, s *engine.State) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if e.part == part && slices.Equal(e.ids, s.IDs) {
			e.used = c.now()
			if e.st == nil {
				e.st, e.ram = s, s.Bytes()
			}
			c.touch(e)
			c.trim()
			return
		}
	}
	e := &entry{part: part, ids: slices.Clone(s.IDs), st: s, ram: s.Bytes(), used: c.now()}
	if c.dir != "" {
		c.save(e)
	}
	c.entries = append(c.entries, e)
	c.trim()
}

// save writes e's file when it fits the disk budget.
func (c *Cache) save(e *entry) {
	raw, err := encode(c.m, e.part, e.st)
	if err != nil || int64(len(raw)) > c.o.DiskBytes {
		return
	}
	path := filepath.Join(c.dir, fileName(e.part, e.ids))
	if err := write(path, raw); err != nil {
		c.warn("prompt cache: not written: %v", err)
		return
	}
	e.file, e.size = path, int64(len(raw))
	c.touch(e)
}

// drop forgets an entry.
func (c *Cache) drop(e *entry) {
	c.entries = slices.DeleteFunc(c.entries, func(x *entry) bool { return x == e })
}

// trim holds the budgets: the least recently used snapshots leave memory
// (kept on disk when they are there) and then the disk.
func (c *Cache) trim() {
	order := slices.Clone(c.entries)
	slices.SortFunc(order, func(a, b *entry) int { return cmp.Compare(a.used, b.used) })
	var ram, disk int64
	for _, e := range c.entries {
		ram += e.ram
		disk += e.size
	}
	for _, e := range order {
		if ram > c.o.RAMBytes && e.st != nil {
			ram -= e.ram
			e.st, e.ram = nil, 0
		}
		if disk > c.o.DiskBytes && e.file != "" {
			if err := os.Remove(e.file); err == nil || os.IsNotExist(err) {
				disk -= e.size
				e.file, e.size = "", 0
			}
		}
		if e.st == nil && e.file == "" {
			c.drop(e)
		}
	}
}

// Stats are what the cache holds.
type Stats struct {
	Entries             int
	RAMBytes, DiskBytes int64
}

// Stats returns what the cache holds now.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	var s Stats
	for _, e := range c.entries {
		s.Entries++
		s.RAMBytes += e.ram
		s.DiskBytes += e.size
	}
	return s
}

// Clear forgets every snapshot of the model, in memory and on disk.
func (c *Cache) Clear() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var first error
	for _, e := range c.entries {
		if e.file != "" {
			if err := os.Remove(e.file); err != nil && !os.IsNotExist(err) && first == nil {
				first = err
			}
		}
	}
	c.entries = nil
	return first
}
