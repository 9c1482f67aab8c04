package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// Encode encodes ordinary text: special-token strings such as "<|open|>"
// are plain text (tiktoken's encode with disallowed_special=()). No BOS.
func (t *Tokenizer) Encode(text string) []int {
	bmp := bmpTable()
	out := make([]int, 0, len(text)/3+1)
	forEachChunk(text, bmp, func(chunk string) {
		out = t.encodeOrdinary(chunk, bmp, out)
	})
	return out
}

// EncodeSpecial encodes text in which special-token strings become their
// ids (tiktoken's allowed_special="all"); the rest is ordinary text. As in
// the reference, specials are looked for inside each long-input chunk, so a
// marker cut by a 25,000-character run split stays text.
func (t *Tokenizer) EncodeSpecial(text string) []int {
	bmp := bmpTable()
	out := make([]int, 0, len(text)/3+1)
	forEachChunk(text, bmp, func(chunk string) {
		for len(chunk) > 0 {
			at, id := t.findSpecial(chunk)
			if at < 0 {
				out = t.encodeOrdinary(chunk, bmp, out)
				return
			}
			out = t.encodeOrdinary(chunk[:at], bmp, out)
			out = append(out, id)
			chunk = chunk[at+len(t.tokens[id]):]
		}
	})
	return out
}

// findSpecial returns the earliest position of a special-token string in s
// and its id (the longest one if several start there), or -1.
func (t *Tokenizer) findSpecial(s string) (int, int) {
	for i := 0; i < len(s); i++ {
		for _, id := range t.specialByFirst[s[i]] {
			if strings.HasPrefix(s[i:], t.specialName[id-t.numBase]) {
				return i, id
			}
		}
	}
	return -1, 0
}

func (t *Tokenizer) encodeOrdinary(s string, bmp []uint8, out []int) []int {
	var scratch []bpePart
	for p := 0; p < len(s); {
		e := pieceEnd(s, p, bmp)
		out = t.bpe(s[p:e], out, &scratch)
		p = e
	}
	return out
}

// Decode returns the bytes of ids concatenated; a special id gives its name.
// Ids outside 0..VocabSize()-1 are skipped.
func (t *Tokenizer) Decode(ids []int) []byte {
	n := 0
	for _, id := range ids {
		if id >= 0 && id < len(t.tokens) {
			n += len(t.tokens[id])
		}
	}
	out := make([]byte, 0, n)
	for _, id := range ids {
		if id >= 0 && id < len(t.tokens) {
			out = append(out, t.tokens[id]...)
		}
	}
	return out
}

// StreamDecoder turns ids into text incrementally without ever splitting a
// UTF-8 character: bytes that may still become a character are held back
// until the next id completes them (or Flush). Bytes that can never be
// valid UTF-8 are passed through unchanged, so the concatenation of every
// Add result and Flush equals Decode of all the ids.
type StreamDecoder struct {
	t       *Tokenizer
	pending []byte
}

// NewStreamDecoder returns a decoder with nothing pending.
func (t *Tokenizer) NewStreamDecoder() *StreamDecoder { return &StreamDecoder{t: t} }

// Add appends the bytes of id and returns the text that is now complete.
func (d *StreamDecoder) Add(id int) string {
	d.pending = append(d.pending, d.t.TokenBytes(id)...)
	cut := completePrefix(d.pending)
	out := string(d.pending[:cut])
	d.pending = append(d.pending[:0], d.pending[cut:]...)
	return out
}

// Flush returns whatever is held back (an incomplete character at the end
// of the stream) and resets the decoder.
func (d *StreamDecoder) Flush() string {
	out := string(d.pending)
	d.pending = d.pending[:0]
	return out
}

// completePrefix returns the length of b without a trailing incomplete (but
// so far valid) UTF-8 sequence.
func completePrefix(b []byte) int {
	for back := 1; back <= utf8.UTFMax-1 && back <= len(b); back++ {
		i := len(b) - back
		c := b[i]
		if c < 0x80 {
			return len(b) // ASCII: nothing incomplete after it
		}
		if c >= 0xC0 { // a lead byte
			if !utf8.FullRune(b[i:]) {
				return i
			}
			return len(b)
		}
	}
	return len(b)
}
