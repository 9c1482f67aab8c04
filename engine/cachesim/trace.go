// Package cachesim replays routed-expert request traces through cache
// replacement policies: the engine's own (engine/expertcache, under the
// registry's names) and the simulator's (s3fifo-ws, lfu, and the offline
// belady and pin+lru), and prints the capacity table of k3 sim-cache.
//
// A trace is what the engine records with --dump-cache-trace: every routed
// expert request, in order, as flat little-endian int32 pairs (layer, expert),
// 8 bytes per request (12 KB per token for Kimi K3: 92 MoE layers x top-16).
// The histogram written beside it is expert_hist.json.
//
// Capacities are counted in slots; one slot holds one expert. A policy counts
// a request as a hit when the expert is resident at the moment it is asked
// for, and as a miss otherwise (every miss is one expert read from disk).
package cachesim

import (
	"encoding/binary"
	"errors"
	"fmt"

	"k3/storage/atomicfile"

	"k3/storage/regfile"
)

// Request is one routed-expert request: the expert's layer and its index
// within that layer.
type Request struct{ Layer, Expert int32 }

// BytesPerRequest is the size of one request in a trace file.
const BytesPerRequest = 8

// TraceError describes a malformed trace; Offset is the byte offset of the
// offending record (or the file length for a bad length).
type TraceError struct {
	Path   string // file name, empty when decoding a buffer
	Offset int64
	Msg    string
}

func (e *TraceError) Error() string {
	name := e.Path
	if name == "" {
		name = "trace"
	}
	return fmt.Sprintf("%s: offset %d: %s", name, e.Offset, e.Msg)
}

// DecodeTrace parses a trace held in memory. The length must be a multiple
// of 8 and every layer and expert index must be non-negative.
func DecodeTrace(b []byte) ([]Request, error) {
	if len(b)%BytesPerRequest != 0 {
		return nil, &TraceError{Offset: int64(len(b)), Msg: fmt.Sprintf(
			"length %d is not a multiple of %d (flat little-endian int32 (layer, expert) pairs); %d trailing byte(s)",
			len(b), BytesPerRequest, len(b)%BytesPerRequest)}
	}
	reqs := make([]Request, len(b)/BytesPerRequest)
	for i := range reqs {
		off := i * BytesPerRequest
		l := int32(binary.LittleEndian.Uint32(b[off:]))
		e := int32(binary.LittleEndian.Uint32(b[off+4:]))
		if l < 0 {
			return nil, &TraceError{Offset: int64(off), Msg: fmt.Sprintf("request %d: negative layer %d", i, l)}
		}
		if e < 0 {
			return nil, &TraceError{Offset: int64(off + 4), Msg: fmt.Sprintf("request %d: negative expert %d", i, e)}
		}
		reqs[i] = Request{l, e}
	}
	return reqs, nil
}

// ReadTrace reads and validates a trace file. Errors name the file and,
// for malformed content, the byte offset.
func ReadTrace(path string) ([]Request, error) {
	b, err := regfile.ReadFile(path)
	if err != nil {
		return nil, err
	}
	reqs, err := DecodeTrace(b)
	if err != nil {
		var te *TraceError
		if errors.As(err, &te) {
			te.Path = path
		}
		return nil, err
	}
	return reqs, nil
}

// EncodeTrace returns the file form of reqs.
func EncodeTrace(reqs []Request) []byte {
	b := make([]byte, len(reqs)*BytesPerRequest)
	for i, r := range reqs {
		binary.LittleEndian.PutUint32(b[i*8:], uint32(r.Layer))
		binary.LittleEndian.PutUint32(b[i*8+4:], uint32(r.Expert))
	}
	return b
}

// WriteTrace writes reqs to path atomically: the bytes go to a temporary
// file in the same directory, which is synced and then renamed over path,
// so a reader never sees a partial trace. Negative indices are refused.
func WriteTrace(path string, reqs []Request) error {
	for i, r := range reqs {
		if r.Layer < 0 || r.Expert < 0 {
			return fmt.Errorf("write trace %s: request %d has a negative index (layer %d, expert %d)", path, i, r.Layer, r.Expert)
		}
	}
	return atomicfile.Write(path, EncodeTrace(reqs))
}
