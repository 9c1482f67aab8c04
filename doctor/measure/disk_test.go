package measure

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/storage/direct"
)

// twoFiles writes a (5 MiB + 4 KiB) and b (3 MiB + 100 bytes) and returns
// their paths.
func twoFiles(t *testing.T) []string {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	require.NoError(t, os.WriteFile(a, make([]byte, 5<<20+4096), 0o644))
	require.NoError(t, os.WriteFile(b, make([]byte, 3<<20+100), 0o644))
	return []string{a, b}
}

func openTargets(t *testing.T, paths []string) Targets {
	ts, err := OpenTargets(paths)
	require.NoError(t, err)
	t.Cleanup(ts.Close)
	return ts
}

// TestReadDiskSequential reads whole aligned files, stops at the limit after
// the request that reaches it, and gives the same byte count at every queue
// depth.
func TestReadDiskSequential(t *testing.T) {
	ts := openTargets(t, twoFiles(t))
	assert.Equal(t, int64(8<<20+4196), ts.Bytes())
	ctx := context.Background()
	for qd := 1; qd <= 3; qd++ {
		r, err := ReadDisk(ctx, ts, DiskRead{Request: 1 << 20, QD: qd, When: "before"})
		require.NoError(t, err, "qd %d", qd)
		assert.Equal(t, int64(8<<20+4096), r.Bytes, "qd %d: the last 100 bytes are not a whole block", qd)
		assert.Positive(t, r.Seconds)
		assert.Equal(t, float64(r.Bytes)/r.Seconds/1e9, r.GBps)
		assert.Equal(t, DiskRun{When: "before", QD: qd, Request: 1 << 20, Bytes: r.Bytes, Seconds: r.Seconds, GBps: r.GBps, Huge: r.Huge}, r)

		r, err = ReadDisk(ctx, ts, DiskRead{Request: 1 << 20, QD: qd, Limit: 2<<20 + 1})
		require.NoError(t, err)
		assert.Equal(t, int64(3<<20), r.Bytes, "qd %d with a limit", qd)
	}
	// one request larger than a file reads all of it
	r, err := ReadDisk(ctx, ts, DiskRead{Request: 64 << 20})
	require.NoError(t, err)
	assert.Equal(t, int64(8<<20+4096), r.Bytes)
	assert.Equal(t, "64 MiB requests at queue depth 1, ", r.String())

	// from an offset into the first file, once round: the same bytes
	var fracs []float64
	r, err = ReadDisk(ctx, ts, DiskRead{Request: 1 << 20, Start: 3<<20 + 5, Progress: func(f float64) { fracs = append(fracs, f) }})
	require.NoError(t, err)
	assert.Equal(t, int64(8<<20+4096), r.Bytes)
	require.NotEmpty(t, fracs)
	assert.Equal(t, 1.0, fracs[len(fracs)-1])

	// with a duration it goes round and round until the time is up or the
	// limit is reached (how far it gets depends on the machine's load: only
	// the bounds are asserted)
	r, err = ReadDisk(ctx, ts, DiskRead{Request: 1 << 20, QD: 2, Duration: 50 * time.Millisecond, Limit: 40 << 20})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, r.Bytes, int64(1<<20), "not one request: %+v", r)
	assert.Less(t, r.Bytes, int64(41<<20), "past the limit by more than the request that reached it")
	// with only a limit, past one pass: it goes round again
	r, err = ReadDisk(ctx, ts, DiskRead{Request: 1 << 20, QD: 2, Duration: time.Hour, Limit: 20 << 20})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, r.Bytes, int64(20<<20), "round and round to the limit")
	assert.Less(t, r.Bytes, int64(21<<20), "past the limit by more than the request that reached it")
}

// TestReadDiskRandom reads whole requests at random offsets, skipping
// targets smaller than one request, up to the limit or the time.
func TestReadDiskRandom(t *testing.T) {
	ts := openTargets(t, twoFiles(t))
	ctx := context.Background()
	r, err := ReadDisk(ctx, ts, DiskRead{Request: 4 << 20, QD: 3, Random: true, Limit: 30 << 20})
	require.NoError(t, err)
	// ceil(30/4) requests are claimed before the limit is reached
	assert.Equal(t, int64(32<<20), r.Bytes)
	assert.True(t, r.Random)

	r, err = ReadDisk(ctx, ts, DiskRead{Request: 1 << 20, QD: 2, Random: true, Duration: 30 * time.Millisecond})
	require.NoError(t, err)
	assert.Positive(t, r.Bytes)
	assert.Zero(t, r.Bytes%(1<<20))

	_, err = ReadDisk(ctx, ts, DiskRead{Request: 6 << 20, Random: true, Limit: 1})
	assert.ErrorContains(t, err, "no data of at least one")
	_, err = ReadDisk(ctx, ts, DiskRead{Request: 1 << 20, Random: true})
	assert.ErrorContains(t, err, "need a limit or a duration")
	_, err = ReadDisk(ctx, ts, DiskRead{Request: 1000})
	assert.ErrorContains(t, err, "not a positive multiple")
}

// TestReadDiskCancelled: a cancelled context stops the readers and is the
// error.
func TestReadDiskCancelled(t *testing.T) {
	ts := openTargets(t, twoFiles(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, err := ReadDisk(ctx, ts, DiskRead{Request: 1 << 20, Random: true, Duration: time.Hour})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, r.Bytes)
}

// TestLimitRuns: the three sequential reads, in order, each of all the data.
func TestLimitRuns(t *testing.T) {
	paths := twoFiles(t)
	runs, err := LimitRuns(context.Background(), paths, 0, "after")
	require.NoError(t, err)
	require.Len(t, runs, len(limitReads))
	for i, r := range runs {
		assert.Equal(t, limitReads[i].QD, r.QD)
		assert.Equal(t, limitReads[i].Request, r.Request)
		assert.Equal(t, int64(8<<20+4096), r.Bytes)
		assert.False(t, r.Random)
	}
	assert.Equal(t, "64 MiB requests at queue depth 2, after", runs[1].String())
	assert.Equal(t, "256 MiB requests at queue depth 1, after", runs[2].String())

	_, err = LimitRuns(context.Background(), append(paths, filepath.Join(t.TempDir(), "missing")), 0, "before")
	assert.Error(t, err, "a missing file")
}

// TestDropCaches: posix_fadvise works on a regular file; the global drop is
// for root only; How names what was done.
func TestDropCaches(t *testing.T) {
	ts := openTargets(t, twoFiles(t))
	c := DropCaches(ts[0].F, ts[1].F)
	assert.True(t, c.Advised)
	assert.Equal(t, os.Geteuid() == 0, c.Global)
	assert.Equal(t, "posix_fadvise(DONTNEED) and sync + drop_caches (root)", CacheDrop{true, true}.How())
	assert.Equal(t, "sync + drop_caches (root)", CacheDrop{Global: true}.How())
	assert.Equal(t, "", CacheDrop{}.How())
	assert.False(t, DropCaches().Advised, "no file, nothing advised")
}

// TestWriteProbe writes distinct pages, stops early on a slow disk only
// past the minimum, and leaves the file to the caller.
func TestWriteProbe(t *testing.T) {
	dir := t.TempDir()
	var last float64
	p, gbps, err := WriteProbe(context.Background(), dir, Probe{Size: 2 * WriteBlock, MaxTime: time.Hour, Progress: func(f float64) { last = f }})
	require.NoError(t, err)
	defer p.F.Close()
	assert.Equal(t, int64(2*WriteBlock), p.Size)
	assert.Positive(t, gbps)
	assert.Equal(t, 1.0, last)
	assert.Contains(t, filepath.Base(p.F.Path()), ProbePrefix)
	buf, err := direct.AllocHuge(2 * direct.Align)
	require.NoError(t, err)
	defer buf.Free()
	_, err = p.F.ReadAt(buf.Bytes(), WriteBlock)
	require.NoError(t, err)
	b := buf.Bytes()
	assert.NotEqual(t, b[:direct.Align], b[direct.Align:], "two pages alike")

	// MaxTime 0: one block, then the minimum decides
	q, _, err := WriteProbe(context.Background(), dir, Probe{Size: 4 * WriteBlock, MinSize: 1})
	require.NoError(t, err)
	defer q.F.Close()
	assert.Equal(t, int64(WriteBlock), q.Size)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = WriteProbe(ctx, dir, Probe{Size: WriteBlock})
	assert.ErrorIs(t, err, context.Canceled)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, ents, 2, "the cancelled probe is removed")
}
