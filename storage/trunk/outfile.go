package trunk

import (
	"errors"
	"fmt"
	"os"

	"k3/storage/direct"
)

// outFile is trunk.bin opened for writing, bypassing the page cache where
// the filesystem allows it (direct.OpenUncached). (storage/direct.Create
// only creates new files; a resumed pack writes into an existing one.)
type outFile struct {
	path   string
	f      *os.File
	direct bool
	note   string
}

// openOut opens (creating if needed) path for reading and writing.
func openOut(path string) (*outFile, error) {
	o := &outFile{path: path}
	f, err := direct.OpenUncached(path, os.O_RDWR|os.O_CREATE, 0o644)
	switch {
	case err == nil:
		o.f, o.direct = f, true
		return o, nil
	case errors.Is(err, errors.ErrUnsupported):
		o.note = "no uncached writes on this system: writing through the page cache"
	case direct.RefusesUncached(err):
		o.note = fmt.Sprintf("%s refused for %s (%v): writing through the page cache", direct.UncachedName, path, err)
	default:
		return nil, err
	}
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	o.f = f
	return o, nil
}

// writeAt writes all of p at off. p, off and len(p) must be aligned when the
// file is direct (callers write from huge-page buffers). An O_DIRECT write
// the filesystem refuses switches the file to buffered I/O and is retried.
func (o *outFile) writeAt(p []byte, off int64) error {
	for done := 0; done < len(p); {
		c := min(len(p)-done, direct.MaxIO)
		n, err := o.f.WriteAt(p[done:done+c], off+int64(done))
		done += n
		if err == nil {
			continue
		}
		if o.direct && direct.RefusesUncached(err) && done%RunAlign == 0 {
			f, oerr := os.OpenFile(o.path, os.O_RDWR, 0)
			if oerr != nil {
				return fmt.Errorf("write %s: %w", o.path, oerr)
			}
			o.f.Close()
			o.f, o.direct = f, false
			o.note = fmt.Sprintf("%s writes refused for %s (%v): writing through the page cache", direct.UncachedName, o.path, err)
			continue
		}
		if direct.DiskFull(err) {
			return fmt.Errorf("write %s at offset %d: the disk is full: %w", o.path, off+int64(done), err)
		}
		return fmt.Errorf("write %s at offset %d: %w", o.path, off+int64(done), err)
	}
	return nil
}

func (o *outFile) size() (int64, error) {
	fi, err := o.f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (o *outFile) sync() error {
	if err := o.f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", o.path, err)
	}
	return nil
}

func (o *outFile) close() error { return o.f.Close() }

// readAt reads len(p) bytes at off (aligned as for writeAt).
func (o *outFile) readAt(p []byte, off int64) error {
	if _, err := o.f.ReadAt(p, off); err != nil {
		return fmt.Errorf("read %s at offset %d: %w", o.path, off, err)
	}
	return nil
}
