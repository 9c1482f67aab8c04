package trunk

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k3/storage/atomicfile"
	"k3/storage/direct"
)

// DiskSpeed is a quick measurement of the disks a pack reads and writes,
// to compare the pack's throughput with.
type DiskSpeed struct {
	ReadFile    string        // the checkpoint file read
	ReadBytes   int64         // bytes read
	ReadTime    time.Duration // wall time of the reads
	ReadDirect  bool          // the reads bypassed the page cache
	WriteBytes  int64         // bytes written (then fsynced)
	WriteTime   time.Duration // wall time of the writes and the fsync
	WriteDirect bool          // the writes bypassed the page cache
}

// ReadBPS returns the measured sequential read speed in bytes per second.
func (d *DiskSpeed) ReadBPS() float64 { return rate(d.ReadBytes, d.ReadTime) }

// WriteBPS returns the measured sequential write speed in bytes per second.
func (d *DiskSpeed) WriteBPS() float64 { return rate(d.WriteBytes, d.WriteTime) }

func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// PackBound returns the trunk bytes per second a pack could reach if it
// were limited only by these speeds: each trunk byte is read once from the
// checkpoint, written once and read back once (verification), with reads
// and writes not overlapping (1 / (2/R + 1/W)). 0 if unknown.
func (d *DiskSpeed) PackBound() float64 {
	r, w := d.ReadBPS(), d.WriteBPS()
	if r <= 0 || w <= 0 {
		return 0
	}
	return 1 / (2/r + 1/w)
}

// MeasureDisk times the disk's own sequential speeds the way Pack uses
// them: a read of up to readBytes from the start of the largest
// .safetensors file in modelDir (O_DIRECT, bufSize requests into one
// huge-page buffer; only the file's 4096-aligned part), and a write of
// writeBytes (rounded up to 4096) to a temporary file in trunkDir
// (O_DIRECT, bufSize requests, then fsync; the file is removed). Either
// measurement is skipped when its byte count is 0. bufSize 0 means
// DefaultBufferSize.
func MeasureDisk(ctx context.Context, modelDir, trunkDir string, readBytes, writeBytes int64, bufSize int) (*DiskSpeed, error) {
	if bufSize <= 0 {
		bufSize = DefaultBufferSize
	}
	bufSize = int(alignUp(int64(bufSize), RunAlign))
	buf, err := direct.AllocHuge(bufSize)
	if err != nil {
		return nil, err
	}
	defer buf.Free()
	b := buf.Cap()[:bufSize]
	d := &DiskSpeed{}
	if readBytes > 0 {
		if err := d.read(ctx, modelDir, readBytes, b); err != nil {
			return nil, err
		}
	}
	if writeBytes > 0 {
		if err := d.write(ctx, trunkDir, alignUp(writeBytes, RunAlign), b); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func (d *DiskSpeed) read(ctx context.Context, modelDir string, n int64, b []byte) error {
	ents, err := os.ReadDir(modelDir)
	if err != nil {
		return err
	}
	var best string
	var bestSize int64 = -1
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".safetensors") {
			continue
		}
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if fi.Size() > bestSize {
			best, bestSize = filepath.Join(modelDir, e.Name()), fi.Size()
		}
	}
	if best == "" {
		return fmt.Errorf("no .safetensors file in %s to measure", modelDir)
	}
	n = min(n, direct.AlignDown(bestSize))
	f, err := direct.Open(best)
	if err != nil {
		return err
	}
	defer f.Close()
	d.ReadFile, d.ReadDirect = best, f.Direct()
	t0 := time.Now()
	for off := int64(0); off < n; {
		if err := ctx.Err(); err != nil {
			return err
		}
		c := min(int64(len(b)), n-off)
		if _, err := f.ReadAt(b[:c], off); err != nil {
			return err
		}
		off += c
	}
	d.ReadTime, d.ReadBytes = time.Since(t0), n
	return nil
}

func (d *DiskSpeed) write(ctx context.Context, dir string, n int64, b []byte) error {
	for i := range b {
		b[i] = byte(i*131 + i>>12)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(dir, diskTestName(os.Getpid()))
	_ = os.Remove(path)
	f, err := direct.Create(path)
	if err != nil {
		return err
	}
	defer os.Remove(path)
	defer f.Close()
	d.WriteDirect = f.Direct()
	t0 := time.Now()
	for off := int64(0); off < n; {
		if err := ctx.Err(); err != nil {
			return err
		}
		c := min(int64(len(b)), n-off)
		if _, err := f.WriteAt(b[:c], off); err != nil {
			return err
		}
		off += c
	}
	if err := f.Sync(); err != nil {
		return err
	}
	d.WriteTime, d.WriteBytes = time.Since(t0), n
	return nil
}

// diskTestName is the speed test's scratch file in the trunk directory.
func diskTestName(pid int) string { return fmt.Sprintf(".k3-disktest-%d.tmp", pid) }

// CleanStale removes what packs killed before they could clean up left in
// dir: temporary files of trunk.json and trunk.partial.json, and disk speed
// test files (up to --disk-test-mb each), of processes no longer running.
// It returns what it removed.
func CleanStale(dir string) ([]atomicfile.Stale, error) {
	var out []atomicfile.Stale
	var errs []error
	for _, name := range []string{ManifestFile, PartialFile} {
		s, err := atomicfile.CleanStale(filepath.Join(dir, name))
		out = append(out, s...)
		errs = append(errs, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), ".k3-disktest-")
		pidText, ok2 := strings.CutSuffix(rest, ".tmp")
		pid, perr := strconv.Atoi(pidText)
		if !ok || !ok2 || perr != nil || pid <= 0 || e.Name() != diskTestName(pid) || !e.Type().IsRegular() || atomicfile.ProcessAlive(pid) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		info, ierr := e.Info()
		if err := os.Remove(p); err != nil {
			errs = append(errs, err)
			continue
		}
		s := atomicfile.Stale{Path: p}
		if ierr == nil {
			s.Size = info.Size()
		}
		out = append(out, s)
	}
	return out, errors.Join(errs...)
}
