// Package tokenizer implements the Kimi K3 tokenizer: the tiktoken.model
// rank file and tokenizer_config.json loaders, the Kimi pre-tokenizer (a
// hand-written equivalent of its pat_str regex), rank-ordered byte-level BPE,
// the 256 special tokens, decoding (whole and streaming), the check that a
// vocabulary has K3's chat tokens (CheckChat) and a small vocabulary writer
// for tests and demo models (WriteByteLevel). The XTML chat format built on
// these ids (rendering and the reply reader) is package tokenizer/xtml.
//
// Behaviour follows Moonshot's TikTokenTokenizer (tokenization_kimi.py) on top
// of OpenAI's tiktoken:
//
//   - ranks: tiktoken.model has one "base64(token bytes) SP rank" line per
//     base token; num_base is the number of lines and ranks must be exactly
//     0..num_base-1. Token ids are ranks.
//   - specials: ids num_base..num_base+255, named by tokenizer_config.json's
//     added_tokens_decoder; an unnamed id N is "<|reserved_token_N|>" (N is
//     the token id itself, as in Moonshot's code and the fixtures).
//   - Encode treats control-token strings as plain text; EncodeSpecial turns
//     them into their ids (tiktoken's allowed_special="all").
//   - long inputs are cut into 400,000-code-point windows and each window so
//     that no run of whitespace or non-whitespace exceeds 25,000 code points,
//     before pre-tokenization, exactly as the reference does.
//
// Strings are treated as bytes: invalid UTF-8 is accepted everywhere, each
// invalid byte counting as one symbol character, so Decode(Encode(s)) == s
// for every byte string.
package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"unsafe"

	"k3/storage/regfile"
)

// NumSpecial is the number of special (added) token ids after the base ranks.
const NumSpecial = 256

// Names of the special tokens the chat format relies on.
const (
	BOS      = "[BOS]"
	EOS      = "[EOS]"
	EndOfMsg = "<|end_of_msg|>"
	Open     = "<|open|>"
	Close    = "<|close|>"
	Sep      = "<|sep|>"
)

// File names inside a tokenizer directory.
const (
	ModelFile  = "tiktoken.model"
	ConfigFile = "tokenizer_config.json"
)

// maxTokenBytes bounds one base token (the reference C loader uses 512).
const maxTokenBytes = 512

// Tokenizer is an immutable, loaded vocabulary; safe for concurrent use.
type Tokenizer struct {
	ranks    map[string]int // base token bytes -> rank (= id)
	byteRank [256]int       // rank of each single byte
	tokens   [][]byte       // id -> bytes, for base and special ids
	numBase  int

	special     map[string]int // special content -> id
	specialName []string       // id-numBase -> content
	// specials grouped by first byte, longest first, for EncodeSpecial.
	specialByFirst [256][]int
}

// Load reads dir/tiktoken.model and dir/tokenizer_config.json.
func Load(dir string) (*Tokenizer, error) {
	mf, err := regfile.Open(filepath.Join(dir, ModelFile))
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	defer mf.Close()
	ranks, err := ParseModel(mf)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", filepath.Join(dir, ModelFile), err)
	}
	cfgPath := filepath.Join(dir, ConfigFile)
	cfg, err := regfile.ReadFile(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	names, err := ParseConfig(cfg, len(ranks))
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", cfgPath, err)
	}
	return New(ranks, names)
}

// ParseModel parses a tiktoken rank file: one "base64 SP rank" line per
// token (standard base64 with padding, decimal rank), LF line ends with an
// optional CR, blank lines ignored. It returns tokens indexed by rank and
// refuses, with the 1-based line number, a malformed line, a duplicate
// token, a duplicate rank or a rank outside 0..n-1 (n = number of tokens).
func ParseModel(r io.Reader) ([][]byte, error) {
	var entries []modelEntry
	seen := map[string]int{}
	br := bufio.NewReaderSize(r, 1<<16)
	line := 0
	for {
		raw, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			return nil, fmt.Errorf("line %d: line too long", line+1)
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		if len(raw) == 0 && err == io.EOF {
			break
		}
		line++
		l := bytes.TrimSuffix(raw, []byte("\n"))
		l = bytes.TrimSuffix(l, []byte("\r"))
		if len(l) > 0 {
			tok, rank, perr := parseModelLine(l)
			if perr != nil {
				return nil, fmt.Errorf("line %d: %w", line, perr)
			}
			if prev, dup := seen[string(tok)]; dup {
				return nil, fmt.Errorf("line %d: duplicate token %q (first on line %d)", line, tok, prev)
			}
			seen[string(tok)] = line
			entries = append(entries, modelEntry{tok, rank, line})
		}
		if err == io.EOF {
			break
		}
	}
	if len(entries) == 0 {
		return nil, errors.New("no tokens")
	}
	return byRank(entries)
}

// modelEntry is one line of a tiktoken model file.
type modelEntry struct {
	tok  []byte
	rank int
	line int
}

// parseModelLine reads one "base64 rank" line.
func parseModelLine(l []byte) (tok []byte, rank int, err error) {
	sp := bytes.IndexByte(l, ' ')
	if sp < 0 {
		return nil, 0, errors.New("want \"base64 rank\", found no space")
	}
	b64, num := l[:sp], l[sp+1:]
	if len(b64) == 0 {
		return nil, 0, errors.New("empty token")
	}
	if base64.StdEncoding.DecodedLen(len(b64)) > maxTokenBytes+2 {
		return nil, 0, fmt.Errorf("token longer than %d bytes", maxTokenBytes)
	}
	for _, c := range b64 {
		if !isBase64Char(c) {
			return nil, 0, fmt.Errorf("bad base64 %q: byte 0x%02x", b64, c)
		}
	}
	tok = make([]byte, base64.StdEncoding.DecodedLen(len(b64)))
	n, derr := base64.StdEncoding.Strict().Decode(tok, b64)
	if derr != nil {
		return nil, 0, fmt.Errorf("bad base64 %q: %v", b64, derr)
	}
	tok = tok[:n]
	if n == 0 || n > maxTokenBytes {
		return nil, 0, fmt.Errorf("token of %d bytes", n)
	}
	rank, perr := parseRank(num)
	if perr != nil {
		return nil, 0, fmt.Errorf("rank %q: %v", num, perr)
	}
	return tok, rank, nil
}

// byRank puts the tokens in rank order; the ranks must be dense and
// distinct.
func byRank(entries []modelEntry) ([][]byte, error) {
	out := make([][]byte, len(entries))
	lineOf := make([]int, len(entries))
	for _, e := range entries {
		if e.rank >= len(entries) {
			return nil, fmt.Errorf("line %d: rank %d outside 0..%d (ranks must be dense)", e.line, e.rank, len(entries)-1)
		}
		if out[e.rank] != nil {
			return nil, fmt.Errorf("line %d: duplicate rank %d (first on line %d)", e.line, e.rank, lineOf[e.rank])
		}
		out[e.rank] = e.tok
		lineOf[e.rank] = e.line
	}
	return out, nil
}

func isBase64Char(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '='
}

func parseRank(b []byte) (int, error) {
	if len(b) == 0 || len(b) > 9 {
		return 0, errors.New("want 1 to 9 decimal digits")
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, errors.New("want decimal digits")
		}
	}
	return strconv.Atoi(string(b))
}

// ParseConfig reads the special-token names from tokenizer_config.json data
// for a vocabulary of numBase base ranks. It returns the 256 names for ids
// numBase..numBase+255: the added_tokens_decoder "content" where given,
// "<|reserved_token_ID|>" otherwise. Keys must be canonical decimal ids in
// that range, each at most once; contents must be non-empty and distinct.
// Other top-level fields are ignored; a missing added_tokens_decoder means
// every slot is reserved.
func ParseConfig(data []byte, numBase int) ([]string, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	if top == nil {
		return nil, errors.New("not a JSON object")
	}
	names := make([]string, NumSpecial)
	if raw, ok := top["added_tokens_decoder"]; ok {
		dec := json.NewDecoder(bytes.NewReader(raw))
		t, err := dec.Token()
		if err != nil || t != json.Delim('{') {
			return nil, errors.New("added_tokens_decoder: want an object")
		}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, fmt.Errorf("added_tokens_decoder: %v", err)
			}
			key := kt.(string)
			id, err := strconv.Atoi(key)
			if err != nil || strconv.Itoa(id) != key {
				return nil, fmt.Errorf("added_tokens_decoder: key %q is not a decimal id", key)
			}
			if id < numBase || id >= numBase+NumSpecial {
				return nil, fmt.Errorf("added_tokens_decoder: id %d outside the special range %d..%d", id, numBase, numBase+NumSpecial-1)
			}
			var v struct {
				Content *string `json:"content"`
			}
			if err := dec.Decode(&v); err != nil {
				return nil, fmt.Errorf("added_tokens_decoder[%q]: %v", key, err)
			}
			if v.Content == nil || *v.Content == "" {
				return nil, fmt.Errorf("added_tokens_decoder[%q]: missing or empty content", key)
			}
			if names[id-numBase] != "" {
				return nil, fmt.Errorf("added_tokens_decoder: id %d given twice", id)
			}
			names[id-numBase] = *v.Content
		}
	}
	seen := map[string]int{}
	for i := range names {
		if names[i] == "" {
			names[i] = ReservedName(numBase + i)
		}
	}
	for i, n := range names {
		if prev, dup := seen[n]; dup {
			return nil, fmt.Errorf("special token %q used by ids %d and %d", n, prev, numBase+i)
		}
		seen[n] = numBase + i
	}
	return names, nil
}

// ReservedName is the name of an unnamed special slot: "<|reserved_token_ID|>".
func ReservedName(id int) string { return "<|reserved_token_" + strconv.Itoa(id) + "|>" }

// New builds a tokenizer from base tokens indexed by rank and the 256
// special names for ids len(tokens)..len(tokens)+255. Every single byte must
// be a base token (so that any input can be encoded); tokens must be
// distinct and non-empty; names distinct and non-empty.
func New(tokens [][]byte, specialNames []string) (*Tokenizer, error) {
	if len(specialNames) != NumSpecial {
		return nil, fmt.Errorf("tokenizer: want %d special names, got %d", NumSpecial, len(specialNames))
	}
	t := &Tokenizer{
		ranks:       make(map[string]int, len(tokens)),
		tokens:      make([][]byte, len(tokens)+NumSpecial),
		numBase:     len(tokens),
		special:     make(map[string]int, NumSpecial),
		specialName: append([]string(nil), specialNames...),
	}
	for i := range t.byteRank {
		t.byteRank[i] = -1
	}
	// every base token's bytes in one array, never written after this, that
	// the token slices and the map's keys share: at K3's 163,584 ranks two
	// small allocations fewer a token, about 5 MB less held by every
	// process with a tokenizer (doctor.CLIBaselineBytes)
	total := 0
	for _, tok := range tokens {
		total += len(tok)
	}
	all := make([]byte, 0, total)
	for r, tok := range tokens {
		if len(tok) == 0 {
			return nil, fmt.Errorf("tokenizer: rank %d is empty", r)
		}
		off := len(all)
		all = append(all, tok...)
		tok = all[off:len(all):len(all)]
		key := unsafe.String(&tok[0], len(tok))
		if _, dup := t.ranks[key]; dup {
			return nil, fmt.Errorf("tokenizer: duplicate token %q", tok)
		}
		t.ranks[key] = r
		t.tokens[r] = tok
		if len(tok) == 1 {
			t.byteRank[tok[0]] = r
		}
	}
	for b, r := range t.byteRank {
		if r < 0 {
			return nil, fmt.Errorf("tokenizer: single byte 0x%02x has no rank; byte-level BPE needs all 256", b)
		}
	}
	for i, n := range specialNames {
		id := t.numBase + i
		if n == "" {
			return nil, fmt.Errorf("tokenizer: special id %d has an empty name", id)
		}
		if prev, dup := t.special[n]; dup {
			return nil, fmt.Errorf("tokenizer: special token %q used by ids %d and %d", n, prev, id)
		}
		t.special[n] = id
		t.tokens[id] = []byte(n)
		t.specialByFirst[n[0]] = append(t.specialByFirst[n[0]], id)
	}
	for b := range t.specialByFirst {
		ids := t.specialByFirst[b]
		sort.SliceStable(ids, func(i, j int) bool { return len(t.tokens[ids[i]]) > len(t.tokens[ids[j]]) })
	}
	return t, nil
}

// NumBase is the number of base (BPE) ranks; special ids start here.
func (t *Tokenizer) NumBase() int { return t.numBase }

// VocabSize is NumBase()+256: one past the largest valid id.
func (t *Tokenizer) VocabSize() int { return t.numBase + NumSpecial }

// IsSpecial reports whether id is one of the 256 special ids.
func (t *Tokenizer) IsSpecial(id int) bool { return id >= t.numBase && id < t.numBase+NumSpecial }

// SpecialID returns the id of the special token with that exact name.
func (t *Tokenizer) SpecialID(name string) (int, bool) {
	id, ok := t.special[name]
	return id, ok
}

// SpecialName returns the name of a special id ("" if id is not special).
func (t *Tokenizer) SpecialName(id int) string {
	if !t.IsSpecial(id) {
		return ""
	}
	return t.specialName[id-t.numBase]
}

// TokenBytes returns the bytes of one id (a special id gives its name), or
// nil for an id outside 0..VocabSize()-1. The slice must not be modified.
func (t *Tokenizer) TokenBytes(id int) []byte {
	if id < 0 || id >= len(t.tokens) {
		return nil
	}
	return t.tokens[id]
}

// StopIDs returns the ids that end an assistant turn: <|end_of_msg|> (the
// config's eos_token_id) and [EOS], in that order, skipping any the
// vocabulary lacks.
func (t *Tokenizer) StopIDs() []int {
	var out []int
	for _, n := range []string{EndOfMsg, EOS} {
		if id, ok := t.special[n]; ok {
			out = append(out, id)
		}
	}
	return out
}

// CheckChat reports an error unless the vocabulary has the special tokens
// the chat format needs (<|open|>, <|close|>, <|sep|>, <|end_of_msg|>,
// [EOS]) at K3's offsets from NumBase (3, 4, 5, 2, 1).
func (t *Tokenizer) CheckChat() error {
	for _, x := range []struct {
		name string
		off  int
	}{{EOS, 1}, {EndOfMsg, 2}, {Open, 3}, {Close, 4}, {Sep, 5}} {
		id, ok := t.special[x.name]
		if !ok {
			return fmt.Errorf("tokenizer: special token %s missing; not a K3 chat vocabulary", x.name)
		}
		if id != t.numBase+x.off {
			return fmt.Errorf("tokenizer: %s has id %d, K3 expects %d", x.name, id, t.numBase+x.off)
		}
	}
	return nil
}
