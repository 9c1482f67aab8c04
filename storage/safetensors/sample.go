package safetensors

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"sync"
)

// SampleBlock is the size of each block SampleDigest reads of a tensor.
const SampleBlock = 4096

// SampleReads is how many bytes and reads SampleDigest does for names (the
// cost of fingerprinting them): at most three blocks per tensor.
func (s *Set) SampleReads(names []string) (bytes, reads int64) {
	for _, n := range names {
		if t, ok := s.Get(n); ok {
			for _, b := range sampleBlocks(t.Size) {
				bytes += b[1]
				reads++
			}
		}
	}
	return bytes, reads
}

// sampleBlocks returns the [offset, length] of the blocks sampled from a
// tensor of size bytes: the first, middle and last SampleBlock bytes, or
// the whole tensor when it is no larger than three blocks.
func sampleBlocks(size int64) [][2]int64 {
	if size <= 3*SampleBlock {
		if size == 0 {
			return nil
		}
		return [][2]int64{{0, size}}
	}
	mid := (size/2 - SampleBlock/2) &^ (SampleBlock - 1)
	return [][2]int64{{0, SampleBlock}, {mid, SampleBlock}, {size - SampleBlock, SampleBlock}}
}

// SampleDigest fingerprints the content of the tensors called names, in
// that order, from sampled blocks of their data (the first, middle and
// last 4 KiB of each: see sampleBlocks) together with each tensor's name,
// dtype and shape. It reads little (SampleReads) yet any change of weights
// that touches those blocks, as a fine-tune does, changes it. A name the
// set does not hold is an error.
func (s *Set) SampleDigest(names []string) ([32]byte, error) {
	// read in parallel (the reads are small and independent), hash in order
	const workers = 8
	sums := make([][32]byte, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := sha256.New()
			buf := make([]byte, 3*SampleBlock)
			for i := range next {
				sums[i], errs[i] = s.sampleOne(h, names[i], buf)
			}
		}()
	}
	for i := range names {
		next <- i
	}
	close(next)
	wg.Wait()
	all := sha256.New()
	for i := range names {
		if errs[i] != nil {
			return [32]byte{}, errs[i]
		}
		all.Write(sums[i][:])
	}
	var out [32]byte
	all.Sum(out[:0])
	return out, nil
}

func (s *Set) sampleOne(h hash.Hash, name string, buf []byte) ([32]byte, error) {
	var out [32]byte
	t, ok := s.Get(name)
	if !ok {
		return out, fmt.Errorf("safetensors: no tensor %q to fingerprint", name)
	}
	h.Reset()
	fmt.Fprintf(h, "%s|%s|%v|%d|", t.Name, t.DType, t.Shape, t.Size)
	for _, b := range sampleBlocks(t.Size) {
		if err := s.ReadTensorAt(t, b[0], buf[:b[1]]); err != nil {
			return out, err
		}
		binary.Write(h, binary.LittleEndian, b[0])
		h.Write(buf[:b[1]])
	}
	h.Sum(out[:0])
	return out, nil
}
