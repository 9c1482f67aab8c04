package tokenizer

import (
	"sync"
	"unicode"
	"unicode/utf8"
)

// The Kimi K3 pre-tokenizer. The reference is this tiktoken (fancy-regex)
// pattern, alternatives joined with "|" and tried leftmost-first:
//
//	1 [\p{Han}]+
//	2 [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	3 [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	4 \p{N}{1,3}
//	5  ?[^\s\p{L}\p{N}]+[\r\n]*
//	6 \s*[\r\n]+
//	7 \s+(?!\S)
//	8 \s+
//
// Go's regexp has neither class intersection nor lookahead, so each
// alternative is matched by hand below, reproducing the backtracking
// engine's choice: the first alternative that matches wins, and inside it
// greedy quantifiers take as much as they can, giving back one character at
// a time only when the rest of the alternative fails.
//
// Classes: \p{Han} is the Han script (unicode.Han); \p{L}, \p{Lu}, ... are
// general categories; \s is Unicode White_Space (unicode.White_Space), as in
// Rust's regex crate. (?i) uses simple case folding, so 's also matches 'S
// and 'ſ (U+017F). A byte that is not valid UTF-8 is treated as one
// character outside every class (like a symbol).

// Character class bits.
const (
	cHan     uint8 = 1 << iota // \p{Han}
	cUp                        // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]
	cLow                       // [\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]
	cL                         // \p{L}
	cN                         // \p{N}
	cSpace                     // \s (White_Space)
	cNL                        // \r or \n
	cPySpace                   // Python str.isspace(): White_Space or U+001C..U+001F
)

func classify(r rune) uint8 {
	var c uint8
	han := unicode.Is(unicode.Han, r)
	if han {
		c |= cHan
	}
	lu, ll, lt, lm, lo := unicode.Is(unicode.Lu, r), unicode.Is(unicode.Ll, r), unicode.Is(unicode.Lt, r),
		unicode.Is(unicode.Lm, r), unicode.Is(unicode.Lo, r)
	m := unicode.Is(unicode.M, r)
	if !han && (lu || lt || lm || lo || m) {
		c |= cUp
	}
	if !han && (ll || lm || lo || m) {
		c |= cLow
	}
	if lu || ll || lt || lm || lo {
		c |= cL
	}
	if unicode.Is(unicode.N, r) {
		c |= cN
	}
	if unicode.Is(unicode.White_Space, r) {
		c |= cSpace | cPySpace
	}
	if r >= 0x1c && r <= 0x1f {
		c |= cPySpace
	}
	if r == '\r' || r == '\n' {
		c |= cNL
	}
	return c
}

var (
	bmpOnce  sync.Once
	bmpClass []uint8 // class of every rune below 0x10000
)

func bmpTable() []uint8 {
	bmpOnce.Do(func() {
		t := make([]uint8, 0x10000)
		for r := range t {
			t[r] = classify(rune(r))
		}
		bmpClass = t
	})
	return bmpClass
}

// classAt returns the class and byte width of the character at s[i].
func classAt(s string, i int, bmp []uint8) (uint8, int) {
	c := s[i]
	if c < utf8.RuneSelf {
		return bmp[c], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	if w == 1 { // invalid byte
		return 0, 1
	}
	if r < 0x10000 {
		return bmp[r], w
	}
	return classify(r), w
}

// pieceEnd returns the end of the piece that starts at p (p < len(s)).
func pieceEnd(s string, p int, bmp []uint8) int {
	c0, w0 := classAt(s, p, bmp)
	// 1: [\p{Han}]+
	if c0&cHan != 0 {
		return runWith(s, p+w0, bmp, cHan)
	}
	// 2 and 3: the optional prefix is [^\r\n\p{L}\p{N}].
	if c0&(cUp|cLow) != 0 || (p+w0 < len(s) && c0&(cNL|cL|cN) == 0) {
		if e := wordEnd(s, p, c0&(cNL|cL|cN) == 0, w0, bmp); e >= 0 {
			return e
		}
	}
	// 4: \p{N}{1,3}
	if c0&cN != 0 {
		e := p + w0
		for k := 1; k < 3 && e < len(s); k++ {
			c, w := classAt(s, e, bmp)
			if c&cN == 0 {
				break
			}
			e += w
		}
		return e
	}
	// 5: " ?[^\s\p{L}\p{N}]+[\r\n]*"
	if e := punctEnd(s, p, bmp); e >= 0 {
		return e
	}
	// 6, 7, 8: whitespace runs.
	if c0&cSpace != 0 {
		return spaceEnd(s, p, c0, w0, bmp)
	}
	// Not reachable: every character is in one of the classes above.
	return p + w0
}

// runWith is the end of the run of characters from e whose class has a bit
// of mask.
func runWith(s string, e int, bmp []uint8, mask uint8) int {
	for e < len(s) {
		c, w := classAt(s, e, bmp)
		if c&mask == 0 {
			break
		}
		e += w
	}
	return e
}

// wordEnd matches alternatives 2 and 3 at p, after the one-character
// prefix (of width w0) when pre allows it; -1 when neither matches.
func wordEnd(s string, p int, pre bool, w0 int, bmp []uint8) int {
	if pre {
		if e := lettersLowEnd(s, p+w0, bmp); e >= 0 {
			return e
		}
	}
	if e := lettersLowEnd(s, p, bmp); e >= 0 {
		return e
	}
	if pre {
		if e := lettersUpEnd(s, p+w0, bmp); e >= 0 {
			return e
		}
	}
	return lettersUpEnd(s, p, bmp)
}

// punctEnd matches " ?[^\s\p{L}\p{N}]+[\r\n]*" at p (alternative 5); -1
// when it does not match.
func punctEnd(s string, p int, bmp []uint8) int {
	q := p
	if s[p] == ' ' {
		q = p + 1
	}
	if q >= len(s) {
		return -1
	}
	c, w := classAt(s, q, bmp)
	if c&(cSpace|cL|cN) != 0 {
		return -1
	}
	e := q + w
	for e < len(s) {
		c, w := classAt(s, e, bmp)
		if c&(cSpace|cL|cN) != 0 {
			break
		}
		e += w
	}
	for e < len(s) && (s[e] == '\r' || s[e] == '\n') {
		e++
	}
	return e
}

// spaceEnd matches the whitespace alternatives 6, 7 and 8 at p, whose
// first character has class c0 and width w0.
func spaceEnd(s string, p int, c0 uint8, w0 int, bmp []uint8) int {
	e := p + w0
	lastNL, lastStart := -1, p
	if c0&cNL != 0 {
		lastNL = p
	}
	for e < len(s) {
		c, w := classAt(s, e, bmp)
		if c&cSpace == 0 {
			break
		}
		if c&cNL != 0 {
			lastNL = e
		}
		lastStart = e
		e += w
	}
	switch {
	case lastNL >= 0: // 6: \s* gives back down to the last \r or \n
		return lastNL + 1
	case e == len(s): // 7 at the end of the text
		return e
	case lastStart > p: // 7: give back the last space before a non-space
		return lastStart
	default: // 8
		return e
	}
}

// lettersLowEnd matches U* W+ S? at q (alternative 2 after its optional
// prefix), where U and W are the two letter classes and S the contraction
// suffix; -1 if it does not match.
func lettersLowEnd(s string, q int, bmp []uint8) int {
	e := q
	lastW, lastWEnd := -1, -1
	for e < len(s) {
		c, w := classAt(s, e, bmp)
		if c&cUp == 0 {
			break
		}
		if c&cLow != 0 {
			lastW, lastWEnd = e, e+w
		}
		e += w
	}
	if e < len(s) {
		if c, w := classAt(s, e, bmp); c&cLow != 0 {
			return suffixEnd(s, runWith(s, e+w, bmp, cLow))
		}
	}
	if lastW >= 0 {
		// U* gives back down to the last W character of its run; W+ takes
		// just that one (the characters after it are not W).
		return suffixEnd(s, lastWEnd)
	}
	return -1
}

// lettersUpEnd matches U+ W* S? at q (alternative 3 after its prefix).
func lettersUpEnd(s string, q int, bmp []uint8) int {
	e := runWith(s, q, bmp, cUp)
	if e == q {
		return -1
	}
	return suffixEnd(s, runWith(s, e, bmp, cLow))
}

// suffixEnd extends e over (?i:'s|'t|'re|'ve|'m|'ll|'d) if present.
func suffixEnd(s string, e int) int {
	if e+1 >= len(s) || s[e] != '\'' {
		return e
	}
	switch s[e+1] {
	case 's', 'S', 't', 'T', 'm', 'M', 'd', 'D':
		return e + 2
	case 0xC5: // U+017F LATIN SMALL LETTER LONG S folds to s
		if e+2 < len(s) && s[e+2] == 0xBF {
			return e + 3
		}
	case 'r', 'R', 'v', 'V':
		if e+2 < len(s) && (s[e+2] == 'e' || s[e+2] == 'E') {
			return e + 3
		}
	case 'l', 'L':
		if e+2 < len(s) && (s[e+2] == 'l' || s[e+2] == 'L') {
			return e + 3
		}
	}
	return e
}

// Long-input rules of TikTokenTokenizer.encode.
const (
	windowChars = 400_000 // TIKTOKEN_MAX_ENCODE_CHARS
	maxRunChars = 25_000  // MAX_NO_WHITESPACES_CHARS
)

// forEachChunk calls fn with each substring the reference hands to tiktoken
// separately: 400,000-character windows, each split by
// _split_whitespaces_or_nonwhitespaces so that no run of (Python isspace)
// whitespace or non-whitespace exceeds 25,000 characters. Characters are
// code points; an invalid byte counts as one non-space character.
func forEachChunk(s string, bmp []uint8, fn func(string)) {
	if len(s) <= maxRunChars { // fewer bytes than the run limit: one chunk
		fn(s)
		return
	}
	for start := 0; start < len(s); {
		end, n := start, 0
		for end < len(s) && n < windowChars {
			if s[end] < utf8.RuneSelf {
				end++
			} else {
				_, w := utf8.DecodeRuneInString(s[end:])
				end += w
			}
			n++
		}
		splitRuns(s[start:end], bmp, fn)
		start = end
	}
}

func splitRuns(w string, bmp []uint8, fn func(string)) {
	if len(w) <= maxRunChars {
		fn(w)
		return
	}
	runLen := 0
	c0, _ := classAt(w, 0, bmp)
	inSpace := c0&cPySpace != 0
	start := 0
	for i := 0; i < len(w); {
		c, sz := classAt(w, i, bmp)
		sp := c&cPySpace != 0
		if sp != inSpace {
			runLen = 1
			inSpace = sp
		} else {
			runLen++
			if runLen > maxRunChars {
				fn(w[start:i])
				start = i
				runLen = 1
			}
		}
		i += sz
	}
	fn(w[start:])
}

// Pretokenize returns the pieces the reference splits ordinary text into
// before BPE (long-input chunking included). Concatenated, they give text.
func Pretokenize(text string) []string {
	bmp := bmpTable()
	var out []string
	forEachChunk(text, bmp, func(chunk string) {
		for p := 0; p < len(chunk); {
			e := pieceEnd(chunk, p, bmp)
			out = append(out, chunk[p:e])
			p = e
		}
	})
	return out
}

// PyIsBlank reports whether s is empty after Python's str.strip(): whether
// every character is whitespace by Python's str.isspace(), the class the
// pre-tokenizer uses.
func PyIsBlank(s string) bool {
	bmp := bmpTable()
	for i := 0; i < len(s); {
		c, w := classAt(s, i, bmp)
		if c&cPySpace == 0 {
			return false
		}
		i += w
	}
	return true
}
