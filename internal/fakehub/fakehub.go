// Package fakehub is what the fake Hugging Face hubs share: the hub tests'
// (storage/hub) and the fault matrix's (tools/faults). They compute the
// published hashes themselves rather than through storage/hub, so that a
// wrong hash in the client is not agreed with.
package fakehub

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
)

// SHA256 is b's sha256 in hex, as the hub lists an LFS file's.
func SHA256(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// BlobID is b's git blob id, as the hub lists a file kept in git.
func BlobID(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// Head writes the status and headers of a GET of body: from byte start
// with 206 and Content-Range when the request had a Range, the whole body
// with 200 otherwise; or 416 when refuse is set or start lies past the
// end. It reports whether body[start:] is to follow.
func Head(w http.ResponseWriter, body []byte, start int, ranged, refuse bool) bool {
	switch {
	case ranged && (refuse || start >= len(body)):
		w.Header().Set("Content-Range", "bytes */"+strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
		return false
	case ranged:
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, len(body)-1, len(body)))
		w.Header().Set("Content-Length", strconv.Itoa(len(body)-start))
		w.WriteHeader(http.StatusPartialContent)
	default:
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
	}
	return true
}
