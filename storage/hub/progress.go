package hub

import (
	"sort"
	"sync"
	"time"

	"k3/storage/units"
)

// EventKind says what an Event reports.
type EventKind int

const (
	EventPlan     EventKind = iota // the file list and byte totals are known
	EventStart                     // a file started (or resumed) downloading
	EventProgress                  // periodic snapshot (every Options.Interval)
	EventRetry                     // a file's attempt failed; waiting Wait before retrying
	EventFileDone                  // a file is finished and verified (or was already)
	EventNote                      // a message worth showing (pinned commit, re-fetch, …)
	EventDone                      // everything finished (Err set if the download failed)
)

func (k EventKind) String() string {
	return [...]string{"plan", "start", "progress", "retry", "file-done", "note", "done"}[k]
}

// FileState is a file's place in the pipeline.
type FileState string

const (
	StateQueued      FileState = "queued"
	StateChecking    FileState = "checking" // hashing what is already on disk
	StateDownloading FileState = "downloading"
	StateRetrying    FileState = "retrying"
	StateVerifying   FileState = "verifying"
	StateDone        FileState = "done"
	StateFailed      FileState = "failed"
)

// FileProgress is one file in a Snapshot.
type FileProgress struct {
	Name    string
	State   FileState
	Done    int64         // bytes present (resumed + fetched)
	Total   int64         // file size
	Rate    float64       // bytes/s over the last units.Window
	ETA     time.Duration // -1 when unknown
	Attempt int           // current retry number (0: first try)
	Skipped bool          // already complete and verified: nothing fetched
}

// Snapshot is the whole download at one moment.
type Snapshot struct {
	Files      []FileProgress // in plan order
	Done       int64          // bytes present over all files
	Total      int64          // bytes of all files
	Fetched    int64          // bytes transferred in this run
	Rate       float64        // bytes/s over the last units.Window
	ETA        time.Duration  // -1 when unknown
	Elapsed    time.Duration
	FilesDone  int
	FilesTotal int
}

// Event is delivered to Options.Progress. Err never contains the token.
type Event struct {
	Kind    EventKind
	File    string
	Attempt int
	Wait    time.Duration
	Err     error
	Message string
	Snap    Snapshot
}

type fileTrack struct {
	FileProgress
	meter units.Meter // Done, while downloading
}

// tracker keeps the progress of every file; safe for concurrent use.
type tracker struct {
	mu      sync.Mutex
	start   time.Time
	files   map[string]*fileTrack
	order   []string
	fetched int64
	all     units.Meter // fetched
	now     func() time.Time
}

func newTracker(now func() time.Time) *tracker {
	if now == nil {
		now = time.Now
	}
	return &tracker{files: map[string]*fileTrack{}, now: now, start: now()}
}

func (t *tracker) add(name string, total int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.files[name]; !ok {
		t.order = append(t.order, name)
	}
	t.files[name] = &fileTrack{FileProgress: FileProgress{Name: name, State: StateQueued, Total: total, ETA: -1}}
}

func (t *tracker) set(name string, f func(*FileProgress)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ft, ok := t.files[name]; ok {
		f(&ft.FileProgress)
	}
}

// have sets a file's byte count without counting it as transferred (a
// resumed .part or a verified file).
func (t *tracker) have(name string, n int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ft, ok := t.files[name]; ok {
		ft.Done = n
		ft.meter.Reset()
	}
}

// fetched counts n new bytes of name.
func (t *tracker) got(name string, n int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.fetched += n
	t.all.Observe(now, t.fetched)
	if ft, ok := t.files[name]; ok {
		ft.Done += n
		ft.meter.Observe(now, ft.Done)
	}
}

func (t *tracker) snapshot() Snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	s := Snapshot{Elapsed: now.Sub(t.start), Fetched: t.fetched, FilesTotal: len(t.order)}
	s.Rate = t.all.Rate(now)
	for _, n := range t.order {
		ft := t.files[n]
		fp := ft.FileProgress
		if fp.State == StateDownloading || fp.State == StateRetrying {
			fp.Rate = ft.meter.Rate(now)
			fp.ETA = units.ETA(fp.Total-fp.Done, fp.Rate)
		} else {
			fp.Rate, fp.ETA = 0, -1
			if fp.State == StateDone {
				fp.ETA = 0
			}
		}
		if fp.State == StateDone {
			s.FilesDone++
		}
		s.Done += fp.Done
		s.Total += fp.Total
		s.Files = append(s.Files, fp)
	}
	s.ETA = units.ETA(s.Total-s.Done, s.Rate)
	return s
}

// Active returns the files currently transferring, largest remaining first.
func (s Snapshot) Active() []FileProgress {
	var out []FileProgress
	for _, f := range s.Files {
		if f.State == StateDownloading || f.State == StateRetrying || f.State == StateChecking || f.State == StateVerifying {
			out = append(out, f)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Total-out[i].Done > out[j].Total-out[j].Done })
	return out
}
