package safetensors

import (
	"hash/maphash"
	"runtime"
	"sync"
	"sync/atomic"
)

// nameTable maps tensor names to ordinals with open addressing and linear
// probing over a power-of-two slot array. A slot packs 32 bits of the name's
// hash with ordinal+1 (0 marks an empty slot), so probing rarely touches the
// names themselves. Slots are claimed with compare-and-swap, so shards can be
// inserted concurrently; once built, lookups are read-only.
type nameTable struct {
	seed  maphash.Seed
	slots []atomic.Uint64
	mask  uint64
}

func newNameTable(seed maphash.Seed, n int) *nameTable {
	size := 1024
	for size < 2*n {
		size <<= 1
	}
	return &nameTable{seed: seed, slots: make([]atomic.Uint64, size), mask: uint64(size - 1)}
}

// insert adds ordinal ord for name, whose hash is h. If the name is already
// present it returns the existing ordinal and false. nameOf resolves any
// ordinal that may be in the table to its name.
func (t *nameTable) insert(h uint64, name string, ord int, nameOf func(int) string) (int, bool) {
	tag := h >> 32
	v := tag<<32 | uint64(ord+1)
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		cur := t.slots[i].Load()
		if cur == 0 {
			if t.slots[i].CompareAndSwap(0, v) {
				return ord, true
			}
			cur = t.slots[i].Load()
		}
		if cur>>32 == tag {
			if k := int(uint32(cur)) - 1; nameOf(k) == name {
				return k, false
			}
		}
	}
}

// lookup returns the ordinal of name.
func (t *nameTable) lookup(name string, nameOf func(int) string) (int, bool) {
	if t == nil {
		return 0, false
	}
	h := maphash.String(t.seed, name)
	tag := h >> 32
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		cur := t.slots[i].Load()
		if cur == 0 {
			return 0, false
		}
		if cur>>32 == tag {
			if k := int(uint32(cur)) - 1; nameOf(k) == name {
				return k, true
			}
		}
	}
}

// parallelFor calls fn(0..n-1) from up to GOMAXPROCS goroutines (at least
// minWorkers, for I/O-bound work) and waits.
func parallelFor(n, minWorkers int, fn func(i int)) {
	workers := min(n, max(minWorkers, runtime.GOMAXPROCS(0)))
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}
