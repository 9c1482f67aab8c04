package expertcache

import "fmt"

// S3FIFO is S3-FIFO (Yang et al., SOSP 2023) over a unified slot budget, the
// variant the C engine's k3_cache.c implements:
//
//   - S, a small FIFO with a target of max(1, floor(capacity*SmallFrac))
//     slots, admits every new key; M, the main FIFO, takes keys that earned a
//     second touch; G, a ghost FIFO of the last GhostCap keys evicted from S
//     (keys only, no slots).
//   - Each resident key has a 2-bit saturating frequency: 0 on admission,
//     +1 per hit (at most 3).
//   - Admission: a key found in G goes straight to the tail of M (and leaves
//     G); any other key goes to the tail of S. Both start at frequency 0.
//   - Eviction, repeated until one key is dropped: take the head of S if
//     len(S) >= target (or M is empty), else the head of M. From S: frequency
//     > 0 moves it to the tail of M with frequency 0 (no slot is freed, keep
//     going); frequency 0 evicts it and records its key in G. From M:
//     frequency > 0 decrements it and reinserts at the tail; 0 evicts it.
//   - A key refused by the SetEvictable hook goes back to the tail of its
//     queue; after 4*capacity+8 steps, or when every key of both queues was
//     refused in a row, the miss is not admitted.
//
// Differences from the paper: one slot budget shared by S and M instead of
// two separately sized queues (moving S->M frees nothing, so the loop runs
// on); the move threshold is one hit while in S (freq > 0); the ghost holds
// GhostCap = capacity keys by default (the paper sizes it like M).
type S3FIFO struct {
	slots
	l          lists
	freq       []uint8
	queue      []uint8 // per slot: qSmall or qMain
	sLen, mLen int
	sTarget    int

	ghost     []uint64 // ring of evicted-from-S keys
	ghostHead int      // next ring position to write
	ghostN    int      // entries in use
	ghostMark []int32  // per key: ring position+1 of its latest ghost entry, 0 = not in G
	// lossyGhost, for tests only, reproduces the ghost of the C project's sim_cache.py: a key
	// leaves G when ANY of its ring entries ages out, even a stale one from
	// an earlier eviction that a newer entry superseded.
	lossyGhost bool
}

const (
	qSmall = 0
	qMain  = 1
)

// NewS3FIFO returns S3-FIFO with the paper's 10% small queue and a ghost of
// capacity keys.
func NewS3FIFO(capacity, keySpace int) *S3FIFO {
	return NewS3FIFOWith(capacity, keySpace, 0.10, capacity)
}

// NewS3FIFOWith returns S3-FIFO with the small queue's share of the slots
// (0 < smallFrac < 1) and the ghost's length in keys (>= 1).
func NewS3FIFOWith(capacity, keySpace int, smallFrac float64, ghostCap int) *S3FIFO {
	if !(smallFrac > 0 && smallFrac < 1) {
		panic(fmt.Sprintf("expertcache: S3-FIFO small fraction %v not in (0,1)", smallFrac))
	}
	if ghostCap < 1 {
		ghostCap = 1
	}
	p := &S3FIFO{
		slots: newSlots(capacity, keySpace),
		l:     newLists(capacity, 2),
		freq:  make([]uint8, capacity),
		queue: make([]uint8, capacity),
		ghost: make([]uint64, ghostCap),
	}
	p.sTarget = max(1, int(float64(capacity)*smallFrac))
	if keySpace > 0 {
		p.ghostMark = make([]int32, keySpace)
	}
	return p
}

func (p *S3FIFO) Name() string { return NameS3FIFO }

// SmallTarget is the small queue's target length in slots.
func (p *S3FIFO) SmallTarget() int { return p.sTarget }

func (p *S3FIFO) Reset() {
	p.resetSlots()
	p.l.reset(2)
	p.sLen, p.mLen = 0, 0
	p.ghostHead, p.ghostN = 0, 0
	clear(p.ghostMark)
}

func (p *S3FIFO) inGhost(key uint64) bool {
	return key < uint64(len(p.ghostMark)) && p.ghostMark[key] != 0
}

func (p *S3FIFO) ghostAdd(key uint64) {
	if key >= uint64(len(p.ghostMark)) {
		m := make([]int32, growTo(key))
		copy(m, p.ghostMark)
		p.ghostMark = m
	}
	pos := p.ghostHead
	if p.ghostN == len(p.ghost) { // overwrite the oldest entry
		old := p.ghost[pos]
		if p.ghostMark[old] == int32(pos+1) || (p.lossyGhost && p.ghostMark[old] != 0) {
			p.ghostMark[old] = 0
		}
	} else {
		p.ghostN++
	}
	p.ghost[pos] = key
	p.ghostMark[key] = int32(pos + 1)
	p.ghostHead = (pos + 1) % len(p.ghost)
}

func (p *S3FIFO) Access(key uint64) Event {
	if i := p.index.get(key); i != none {
		if p.freq[i] < 3 {
			p.freq[i]++
		}
		return Event{Hit: true}
	}
	var ev Event
	if len(p.free) == 0 {
		v, ok := p.victim()
		if !ok {
			return ev
		}
		ev.Evicted, ev.Victim = true, p.keyOf[v]
		p.drop(v)
	}
	i := p.take(key)
	p.freq[i] = 0
	if p.inGhost(key) {
		p.ghostMark[key] = 0
		p.queue[i] = qMain
		p.l.pushBack(qMain, i)
		p.mLen++
	} else {
		p.queue[i] = qSmall
		p.l.pushBack(qSmall, i)
		p.sLen++
	}
	ev.Admitted = true
	return ev
}

// victim runs the eviction loop and returns the slot to drop (still linked
// and indexed); S-victims have already been recorded in the ghost.
func (p *S3FIFO) victim() (int32, bool) {
	guard := 4*len(p.keyOf) + 8
	sRefused, mRefused := 0, 0 // consecutive refusals per queue
	for step := 0; step < guard; step++ {
		sOpen := p.sLen > 0 && sRefused < p.sLen
		mOpen := p.mLen > 0 && mRefused < p.mLen
		switch {
		case sOpen && (p.sLen >= p.sTarget || !mOpen):
			i := p.l.front(qSmall)
			p.l.unlink(i)
			if !p.evictable(i) {
				p.l.pushBack(qSmall, i)
				sRefused++
				continue
			}
			if p.freq[i] > 0 {
				p.freq[i] = 0
				p.queue[i] = qMain
				p.l.pushBack(qMain, i)
				p.sLen--
				p.mLen++
				sRefused, mRefused = 0, 0
				continue
			}
			p.l.pushBack(qSmall, i) // keep it linked; drop unlinks it
			p.ghostAdd(p.keyOf[i])
			return i, true
		case mOpen:
			i := p.l.front(qMain)
			p.l.unlink(i)
			p.l.pushBack(qMain, i)
			if !p.evictable(i) {
				mRefused++
				continue
			}
			if p.freq[i] > 0 {
				p.freq[i]--
				mRefused = 0
				continue
			}
			return i, true
		default:
			return none, false
		}
	}
	return none, false
}

// drop unlinks and frees a resident slot.
func (p *S3FIFO) drop(i int32) {
	p.l.unlink(i)
	if p.queue[i] == qSmall {
		p.sLen--
	} else {
		p.mLen--
	}
	p.release(i)
}

func (p *S3FIFO) Remove(key uint64) bool {
	i := p.index.get(key)
	if i == none {
		return false
	}
	p.drop(i)
	return true
}
