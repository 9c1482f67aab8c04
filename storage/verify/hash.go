package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"

	"k3/storage/direct"
)

// hashChunk is the read size while hashing: big enough to reach the disk's
// ceiling at queue depth 1 (machine-limits: >= 4 MiB), small enough to keep
// two of them cheap.
const hashChunk = 16 << 20

// HashFile returns the SHA-256 (lowercase hex) and size of a file, read with
// O_DIRECT into huge-page buffers so hashing 1.5 TB does not flush the page
// cache. progress, if not nil, is called with each chunk's byte count.
func HashFile(ctx context.Context, path string, progress func(n int64)) (sum string, size int64, err error) {
	f, err := direct.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	size, err = f.Size()
	if err != nil {
		return "", 0, err
	}
	h := sha256.New()
	if err := hashFrom(ctx, h, f, size, progress); err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), size, nil
}

// HashPrefix feeds the first n bytes of path into h (used to resume a
// download's running hash from its .part file).
func HashPrefix(ctx context.Context, h hash.Hash, path string, n int64, progress func(int64)) error {
	f, err := direct.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return hashFrom(ctx, h, f, n, progress)
}

// hashFrom hashes bytes [0, n) of f, reading the next chunk while the
// current one is hashed (two buffers, one reader goroutine).
func hashFrom(ctx context.Context, h hash.Hash, f *direct.File, n int64, progress func(int64)) error {
	if n == 0 {
		return nil
	}
	var bufs [2]*direct.Buffer
	for i := range bufs {
		b, err := direct.AllocHuge(hashChunk)
		if err != nil {
			return err
		}
		defer b.Free()
		bufs[i] = b
	}
	type chunk struct {
		p   []byte
		err error
	}
	ready := make(chan chunk, 1)
	free := make(chan int, 2)
	free <- 0
	free <- 1
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		defer close(ready)
		for off := int64(0); off < n; {
			var i int
			select {
			case i = <-free:
			case <-stop:
				return
			}
			if err := ctx.Err(); err != nil {
				ready <- chunk{err: err}
				return
			}
			c := int(min(int64(hashChunk), n-off))
			p := bufs[i].Cap()[:c]
			if _, err := f.ReadAt(p, off); err != nil {
				ready <- chunk{err: err}
				return
			}
			select {
			case ready <- chunk{p: p}:
			case <-stop:
				return
			}
			off += int64(c)
		}
	}()
	var done int64
	for c := range ready {
		if c.err != nil {
			return c.err
		}
		h.Write(c.p)
		done += int64(len(c.p))
		if progress != nil {
			progress(int64(len(c.p)))
		}
		// Return the buffer: its index is whichever of the two c.p lives in.
		if &c.p[0] == &bufs[0].Cap()[0] {
			free <- 0
		} else {
			free <- 1
		}
	}
	if done != n {
		return fmt.Errorf("hash %s: read %d of %d bytes", f.Path(), done, n)
	}
	return nil
}
