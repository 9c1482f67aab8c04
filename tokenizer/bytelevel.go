package tokenizer

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"k3/storage/atomicfile"
)

// k3Named maps special-slot offsets (id - num_base) to the names Kimi K3's
// tokenizer_config.json gives them; every other slot is reserved.
var k3Named = map[int]string{
	0: BOS, 1: EOS, 2: EndOfMsg, 3: Open, 4: Close, 5: Sep,
	6: "[start_header_id]", 7: "[end_header_id]", 9: "[EOT]",
	18: "<|media_begin|>", 19: "<|media_content|>", 20: "<|media_end|>", 21: "<|media_pad|>",
	65: "<osagent_mode>", 254: "[UNK]", 255: "[PAD]",
}

// K3SpecialNames returns the 256 Kimi K3 special-token names for a
// vocabulary with numBase base ranks (reserved slots named by their id).
func K3SpecialNames(numBase int) []string {
	names := make([]string, NumSpecial)
	for i := range names {
		if n, ok := k3Named[i]; ok {
			names[i] = n
		} else {
			names[i] = ReservedName(numBase + i)
		}
	}
	return names
}

// ByteLevelOptions configures WriteByteLevel.
type ByteLevelOptions struct {
	// Text, with Merges > 0, is the training text for merges: it is split
	// with the Kimi pre-tokenizer and the most frequent adjacent pair (ties:
	// lowest ranks) is merged, up to Merges times, stopping early when no
	// pair occurs twice. Training is simple (a full recount per merge): keep
	// Text and Merges small (tens of KB, a few thousand merges).
	Text   string
	Merges int
	// NumBase, if non-zero, pads the base vocabulary with filler tokens to
	// exactly NumBase ranks, e.g. 163,584 to give the specials their real
	// K3 ids. Fillers are 5-byte strings starting 0xFF 0xFF that no merge
	// can produce, so they never appear in an encoding.
	NumBase int
}

// WriteByteLevel writes dir/tiktoken.model and dir/tokenizer_config.json
// for a small byte-level vocabulary: the 256 single bytes (ranks 0..255, in
// GPT-2 byte order like cl100k and K3: '!' is 0, '"' is 1), then any
// learned merges, then any fillers; the 256 K3 special tokens follow at ids
// num_base..num_base+255. With zero options the vocabulary has 256 base
// ranks and 512 ids in all. The directory is created if needed. Load reads
// the result back.
func WriteByteLevel(dir string, opt ByteLevelOptions) error {
	tokens := ByteLevelTokens(opt.Text, opt.Merges)
	if opt.NumBase != 0 {
		if opt.NumBase < len(tokens) {
			return fmt.Errorf("tokenizer: NumBase %d is below the %d tokens learned", opt.NumBase, len(tokens))
		}
		if opt.NumBase-len(tokens) > 1<<24 {
			return errors.New("tokenizer: NumBase too large")
		}
		for i := 0; len(tokens) < opt.NumBase; i++ {
			tokens = append(tokens, []byte{0xFF, 0xFF, byte(i >> 16), byte(i >> 8), byte(i)})
		}
	}
	var model bytes.Buffer
	for r, tok := range tokens {
		model.WriteString(base64.StdEncoding.EncodeToString(tok))
		model.WriteByte(' ')
		model.WriteString(strconv.Itoa(r))
		model.WriteByte('\n')
	}
	names := K3SpecialNames(len(tokens))
	dec := map[string]map[string]any{}
	for off, n := range names {
		if _, ok := k3Named[off]; ok {
			dec[strconv.Itoa(len(tokens)+off)] = map[string]any{"content": n, "special": true}
		}
	}
	cfg, err := json.MarshalIndent(map[string]any{
		"added_tokens_decoder": dec,
		"bos_token":            BOS,
		"eos_token":            EOS,
		"tokenizer_class":      "TikTokenTokenizer",
	}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, ModelFile), model.Bytes()); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, ConfigFile), append(cfg, '\n'))
}

// gpt2ByteOrder lists the 256 byte values in GPT-2's order: printable
// ranges first ('!'..'~', '¡'..'¬', '®'..'ÿ'), then the rest ascending.
func gpt2ByteOrder() []byte {
	var order []byte
	printable := func(b int) bool { return b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE }
	for b := 0; b < 256; b++ {
		if printable(b) {
			order = append(order, byte(b))
		}
	}
	for b := 0; b < 256; b++ {
		if !printable(b) {
			order = append(order, byte(b))
		}
	}
	return order
}

// ByteLevelTokens returns the base tokens WriteByteLevel writes (before
// filler): the 256 single bytes then up to merges tokens learned from text.
// Deterministic for given arguments.
func ByteLevelTokens(text string, merges int) [][]byte {
	var tokens [][]byte
	index := map[string]int{}
	for _, b := range gpt2ByteOrder() {
		index[string([]byte{b})] = len(tokens)
		tokens = append(tokens, []byte{b})
	}
	if merges <= 0 || text == "" {
		return tokens
	}
	words := bpeWords(text, index)
	for learned := 0; learned < merges; {
		best, ok := bestPair(words, tokens)
		if !ok {
			break
		}
		joined := append(append([]byte{}, tokens[best.a]...), tokens[best.b]...)
		id, exists := index[string(joined)]
		if !exists {
			id = len(tokens)
			index[string(joined)] = id
			tokens = append(tokens, joined)
			learned++
		}
		for wi := range words {
			words[wi].merge(best, id)
		}
	}
	return tokens
}

// bpeWord is a distinct pre-tokenized piece as token ids, with its count.
type bpeWord struct {
	ids   []int
	count int
}

// bpePair is two adjacent token ids.
type bpePair struct{ a, b int }

// bpeWords is the distinct pieces of text, in first-seen order, as ids of
// their bytes (index maps each byte to its id), with their counts.
func bpeWords(text string, index map[string]int) []bpeWord {
	counts := map[string]int{}
	var order []string
	for _, p := range Pretokenize(text) {
		if counts[p] == 0 {
			order = append(order, p)
		}
		counts[p]++
	}
	words := make([]bpeWord, len(order))
	for i, p := range order {
		ids := make([]int, len(p))
		for k := 0; k < len(p); k++ {
			ids[k] = index[p[k:k+1]]
		}
		words[i] = bpeWord{ids, counts[p]}
	}
	return words
}

// bestPair is the most frequent adjacent pair (seen at least twice, whose
// bytes hold no 0xFF), ties to the lowest ids; ok is false when there is
// none.
func bestPair(words []bpeWord, tokens [][]byte) (best bpePair, ok bool) {
	freq := map[bpePair]int{}
	for _, w := range words {
		for k := 0; k+1 < len(w.ids); k++ {
			freq[bpePair{w.ids[k], w.ids[k+1]}] += w.count
		}
	}
	var cands []bpePair
	for p, f := range freq {
		joined := append(append([]byte{}, tokens[p.a]...), tokens[p.b]...)
		if f >= 2 && bytes.IndexByte(joined, 0xFF) < 0 {
			cands = append(cands, p)
		}
	}
	if len(cands) == 0 {
		return bpePair{}, false
	}
	sort.Slice(cands, func(i, j int) bool {
		fi, fj := freq[cands[i]], freq[cands[j]]
		if fi != fj {
			return fi > fj
		}
		if cands[i].a != cands[j].a {
			return cands[i].a < cands[j].a
		}
		return cands[i].b < cands[j].b
	})
	return cands[0], true
}

// merge replaces each occurrence of the pair p in w by id, left to right.
func (w *bpeWord) merge(p bpePair, id int) {
	ids := w.ids
	out := ids[:0]
	for k := 0; k < len(ids); k++ {
		if k+1 < len(ids) && ids[k] == p.a && ids[k+1] == p.b {
			out = append(out, id)
			k++
		} else {
			out = append(out, ids[k])
		}
	}
	w.ids = out
}
