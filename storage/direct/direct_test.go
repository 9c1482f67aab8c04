package direct

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"
)

// pattern returns n bytes where every 8-byte word encodes its own offset,
// so a read from the wrong place can never pass.
func pattern(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32()) ^ byte(i>>12)
	}
	return b
}

func writeTemp(t *testing.T, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "data.bin")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAllocHuge(t *testing.T) {
	for _, n := range []int{1, 4096, HugePage, HugePage + 1, 17_551_360} {
		b, err := AllocHuge(n)
		if err != nil {
			t.Fatal(err)
		}
		p := b.Bytes()
		if len(p) != n {
			t.Fatalf("AllocHuge(%d): len %d", n, len(p))
		}
		if len(b.Cap())%HugePage != 0 || len(b.Cap()) < n {
			t.Fatalf("AllocHuge(%d): cap %d not a multiple of 2 MiB", n, len(b.Cap()))
		}
		if a := uintptr(unsafe.Pointer(&p[0])); a%HugePage != 0 {
			t.Fatalf("AllocHuge(%d): address %#x not 2 MiB aligned", n, a)
		}
		for i := range p {
			p[i] = byte(i)
		}
		if p[n-1] != byte(n-1) {
			t.Fatal("buffer not writable")
		}
		if runtime.GOOS == "linux" {
			if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled"); err == nil && !b.Huge() {
				t.Errorf("AllocHuge(%d): madvise(MADV_HUGEPAGE) refused on a THP kernel", n)
			}
		}
		if err := b.Free(); err != nil {
			t.Fatal(err)
		}
		if err := b.Free(); err != nil {
			t.Fatalf("second Free: %v", err)
		}
	}
	if _, err := AllocHuge(0); err == nil {
		t.Fatal("AllocHuge(0) succeeded")
	}
}

// TestReadAtMatches reads many aligned and unaligned ranges, into huge
// buffers and into Go slices, and compares with the file's bytes.
func TestReadAtMatches(t *testing.T) {
	size := 3<<20 + BounceSize + 1234 // not a multiple of 4096, larger than one bounce
	data := pattern(size)
	f, err := Open(writeTemp(t, data))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	t.Logf("direct=%v note=%q", f.Direct(), f.Note())
	if uncachedOS() && !f.Direct() && !strings.Contains(f.Note(), "refused") {
		t.Fatalf("not direct and no reason given: %q", f.Note())
	}
	hb, err := AllocHuge(size + 2*Align)
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Free()

	type rq struct {
		off  int64
		n    int
		huge bool
		skew int // destination offset inside the buffer
	}
	cases := []rq{
		{0, Align, true, 0},
		{0, size, true, 0},                             // whole file, unaligned length
		{0, size, false, 1},                            // whole file, unaligned address
		{Align, 2 * Align, true, 0},                    // aligned fast path
		{Align, 2 * Align, false, 3},                   // aligned span, unaligned memory
		{1, 1, true, 0},                                // one byte
		{4095, 2, true, 0},                             // crosses a block boundary
		{int64(size) - 1, 1, true, 0},                  // last byte
		{int64(size) - 1234, 1234, true, 0},            // tail, unaligned length
		{int64(AlignDown(int64(size))), 1234, true, 0}, // tail from an aligned offset
		{7, BounceSize + 9000, true, 5},                // longer than one bounce buffer
	}
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 200; i++ {
		off := r.Int64N(int64(size))
		n := 1 + r.IntN(min(size-int(off), 1<<20))
		cases = append(cases, rq{off, n, r.IntN(2) == 0, r.IntN(2) * r.IntN(4096)})
	}
	for _, c := range cases {
		var dst []byte
		if c.huge {
			dst = hb.Cap()[c.skew : c.skew+c.n]
		} else {
			dst = make([]byte, c.n+c.skew)[c.skew:]
		}
		n, err := f.ReadAt(dst, c.off)
		if err != nil || n != c.n {
			t.Fatalf("ReadAt(off %d, len %d): n=%d err=%v", c.off, c.n, n, err)
		}
		if !bytes.Equal(dst, data[c.off:c.off+int64(c.n)]) {
			t.Fatalf("ReadAt(off %d, len %d): wrong bytes", c.off, c.n)
		}
	}
}

func TestReadPastEOFIsAnErrorNamingFileOffsetLength(t *testing.T) {
	data := pattern(10000)
	path := writeTemp(t, data)
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct {
		off int64
		n   int
	}{{8192, 4096}, {9000, 2000}, {0, 10001}, {20000, 10}, {0, 12288}} {
		p := make([]byte, c.n)
		n, err := f.ReadAt(p, c.off)
		var re *ReadError
		if !errors.As(err, &re) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("ReadAt(%d,%d) past EOF: n=%d err=%v, want *ReadError wrapping io.ErrUnexpectedEOF", c.off, c.n, n, err)
		}
		want := max(0, min(int64(c.n), 10000-c.off))
		if int64(n) != want || re.Got != n || re.Size != 10000 {
			t.Fatalf("ReadAt(%d,%d): n=%d got=%d size=%d, want n=%d size 10000", c.off, c.n, n, re.Got, re.Size, want)
		}
		msg := err.Error()
		for _, s := range []string{path, "offset " + strconv.FormatInt(c.off, 10), "length " + strconv.Itoa(c.n), "10000 bytes"} {
			if !strings.Contains(msg, s) {
				t.Fatalf("error %q does not name %q", msg, s)
			}
		}
		if n > 0 && !bytes.Equal(p[:n], data[c.off:c.off+int64(n)]) {
			t.Fatal("bytes before EOF wrong")
		}
	}
}

func TestTruncatedAfterOpen(t *testing.T) {
	path := writeTemp(t, pattern(1<<20))
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Truncate(path, 300000); err != nil {
		t.Fatal(err)
	}
	buf, _ := AllocHuge(1 << 20)
	defer buf.Free()
	n, err := f.ReadAt(buf.Bytes(), 0)
	if !errors.Is(err, io.ErrUnexpectedEOF) || n != 300000 {
		t.Fatalf("read of truncated file: n=%d err=%v", n, err)
	}
}

func TestInjectedEIOAndShortReads(t *testing.T) {
	data := pattern(1 << 20)
	path := writeTemp(t, data)
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.preadFn = func(*os.File, []byte, int64) (int, error) { return 0, syscall.EIO }
	p := make([]byte, 8192)
	_, err = f.ReadAt(p, 4096)
	var re *ReadError
	if !errors.As(err, &re) || !errors.Is(err, syscall.EIO) || re.Off != 4096 || re.Len != 8192 {
		t.Fatalf("EIO: got %v", err)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "input/output error") {
		t.Fatalf("EIO message %q", err)
	}

	// A device that returns 4096 bytes per call, then EOF at 12288: the
	// loop must continue across short reads and then report the shortfall.
	f.preadFn = func(fd *os.File, b []byte, off int64) (int, error) {
		if off >= 12288 {
			return 0, nil
		}
		return pread(fd, b[:min(len(b), 4096)], off)
	}
	hb, _ := AllocHuge(65536)
	defer hb.Free()
	n, err := f.ReadAt(hb.Cap()[:8192], 0)
	if err != nil || n != 8192 || !bytes.Equal(hb.Cap()[:8192], data[:8192]) {
		t.Fatalf("short reads not continued: n=%d err=%v", n, err)
	}
	n, err = f.ReadAt(hb.Cap()[:65536], 0)
	if !errors.Is(err, io.ErrUnexpectedEOF) || n != 12288 {
		t.Fatalf("short device: n=%d err=%v", n, err)
	}
	// EINTR is retried.
	calls := 0
	f.preadFn = func(fd *os.File, b []byte, off int64) (int, error) {
		calls++
		if calls == 1 {
			return 0, syscall.EINTR
		}
		return pread(fd, b, off)
	}
	if _, err := f.ReadAt(hb.Cap()[:4096], 0); err != nil {
		t.Fatalf("EINTR not retried: %v", err)
	}
}

func TestODirectRefusedAtOpenFallsBack(t *testing.T) {
	data := pattern(100000)
	path := writeTemp(t, data)
	orig := openUncachedFn
	defer func() { openUncachedFn = orig }()
	openUncachedFn = func(name string, flag int, perm os.FileMode) (*os.File, error) {
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EINVAL}
	}
	f, err := Open(path)
	if err != nil {
		t.Fatalf("Open failed instead of falling back: %v", err)
	}
	defer f.Close()
	if f.Direct() || !strings.Contains(f.Note(), UncachedName+" refused") {
		t.Fatalf("direct=%v note=%q", f.Direct(), f.Note())
	}
	p := make([]byte, 5000)
	if _, err := f.ReadAt(p, 777); err != nil || !bytes.Equal(p, data[777:5777]) {
		t.Fatalf("buffered read: %v", err)
	}
	// Create under the same refusal: no stray file, a working buffered file.
	cp := filepath.Join(t.TempDir(), "new.bin")
	c, err := Create(cp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteAt([]byte("abc"), 1); err != nil {
		t.Fatalf("buffered WriteAt: %v", err)
	}
	c.Close()
	if b, _ := os.ReadFile(cp); string(b) != "\x00abc" {
		t.Fatalf("file holds %q", b)
	}
	// A missing file is still an error naming it.
	if _, err := Open(filepath.Join(t.TempDir(), "nope")); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestODirectRefusedAtReadFallsBack(t *testing.T) {
	data := pattern(200000)
	f, err := Open(writeTemp(t, data))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !f.Direct() {
		t.Skip("filesystem of t.TempDir() has no O_DIRECT")
	}
	f.preadFn = func(fd *os.File, b []byte, off int64) (int, error) {
		if f.Direct() {
			return 0, syscall.EINVAL
		}
		return pread(fd, b, off)
	}
	p := make([]byte, 150001)
	if n, err := f.ReadAt(p, 3); err != nil || n != len(p) || !bytes.Equal(p, data[3:150004]) {
		t.Fatalf("after read-time refusal: n=%d err=%v", n, err)
	}
	if f.Direct() || !strings.Contains(f.Note(), "refused") {
		t.Fatalf("direct=%v note=%q", f.Direct(), f.Note())
	}
}

// TestTmpfs opens a file on a real tmpfs, which refuses O_DIRECT on older
// kernels and accepts it on newer ones: either way Open must work.
func TestTmpfs(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("linux only")
	}
	dir, err := os.MkdirTemp("/dev/shm", "k3-direct-test-")
	if err != nil {
		t.Skip("no /dev/shm")
	}
	defer os.RemoveAll(dir)
	data := pattern(50000)
	p := filepath.Join(dir, "x")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatalf("Open on tmpfs: %v", err)
	}
	defer f.Close()
	t.Logf("tmpfs: direct=%v note=%q", f.Direct(), f.Note())
	b := make([]byte, 40000)
	if _, err := f.ReadAt(b, 123); err != nil || !bytes.Equal(b, data[123:40123]) {
		t.Fatalf("tmpfs read: %v", err)
	}
}

func TestCreateWriteAtAligned(t *testing.T) {
	p := filepath.Join(t.TempDir(), "w.bin")
	f, err := Create(p)
	if err != nil {
		t.Fatal(err)
	}
	buf, _ := AllocHuge(1 << 20)
	defer buf.Free()
	copy(buf.Bytes(), pattern(1<<20))
	if _, err := f.WriteAt(buf.Bytes(), 1<<20); err != nil {
		t.Fatal(err)
	}
	if f.Direct() {
		if _, err := f.WriteAt(buf.Bytes()[:100], 0); !errors.Is(err, ErrUnaligned) {
			t.Fatalf("unaligned direct write: %v", err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.DropCache(); err != nil && runtime.GOOS == "linux" {
		t.Fatal(err)
	}
	if sz, _ := f.Size(); sz != 2<<20 {
		t.Fatalf("size %d", sz)
	}
	got := make([]byte, 1<<20)
	if _, err := f.ReadAt(got, 1<<20); err != nil || !bytes.Equal(got, buf.Bytes()) {
		t.Fatalf("read back: %v", err)
	}
	f.Close()
	if _, err := Create(p); err == nil {
		t.Fatal("Create over an existing file succeeded")
	}
}

func TestConcurrentReadAt(t *testing.T) {
	data := pattern(4 << 20)
	f, err := Open(writeTemp(t, data))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 9))
			for i := 0; i < 50; i++ {
				off := r.Int64N(int64(len(data) - 70000))
				p := make([]byte, 1+r.IntN(70000))
				if _, err := f.ReadAt(p, off); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(p, data[off:off+int64(len(p))]) {
					errs <- errors.New("concurrent read returned wrong bytes")
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
