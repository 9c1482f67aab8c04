package constrain

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"k3/tokenizer"
)

// k3SizeVocab is a synthetic vocabulary of K3's size (163,840 ids): the
// 256 bytes, then words and JSON-ish pieces of 2 to 12 bytes.
func k3SizeVocab() *Vocab {
	const n = 163840
	r := rand.New(rand.NewPCG(1, 2))
	toks, special := make([][]byte, n), make([]bool, n)
	alphabet := []byte(" abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 \"{}[]:,.-_\n\t\\")
	for i := range 256 {
		toks[i] = []byte{byte(i)}
	}
	for i := 256; i < n-256; i++ {
		b := make([]byte, 2+r.IntN(11))
		for j := range b {
			if r.IntN(4) == 0 {
				b[j] = alphabet[r.IntN(len(alphabet))]
			} else {
				b[j] = byte('a' + r.IntN(26))
			}
		}
		toks[i] = b
	}
	for i := n - 256; i < n; i++ {
		special[i] = true
	}
	return NewVocab(toks, special)
}

// BenchmarkMaskK3Size is the time of one uncached mask over 163,840 ids,
// in a few states of a schema'd answer.
func BenchmarkMaskK3Size(b *testing.B) {
	v := k3SizeVocab()
	p, err := Compile(json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"],"additionalProperties":false}`))
	if err != nil {
		b.Fatal(err)
	}
	for _, prefix := range []string{``, `{"`, `{"name":"Al`, `{"name":"Al","age":4`} {
		b.Run(prefix, func(b *testing.B) {
			st := Start(p)
			st.Feed([]byte(prefix))
			for b.Loop() {
				c := New(v, p) // a fresh cache: every mask is computed
				c.Mask(st)
			}
		})
	}
}

// demoVocab is the demo model's vocabulary (tokenizer.WriteByteLevel).
func demoVocab(b *testing.B) *Vocab {
	dir := b.TempDir()
	if err := tokenizer.WriteByteLevel(dir, tokenizer.ByteLevelOptions{}); err != nil {
		b.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		b.Fatal(err)
	}
	return ForTokenizer(tok).V
}

// BenchmarkMaskCache is one mask uncached (a fresh cache) and cached (a
// Turn's shared cache, filled by an earlier request; the schema compiled
// again as each request does), at the demo's vocabulary and K3's size, inside a string (the
// slowest state uncached).
func BenchmarkMaskCache(b *testing.B) {
	const schema = `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"],"additionalProperties":false}`
	for _, vc := range []struct {
		name string
		v    func(*testing.B) *Vocab
	}{{"demo", demoVocab}, {"k3size", func(*testing.B) *Vocab { return k3SizeVocab() }}} {
		v := vc.v(b)
		p, err := Compile(json.RawMessage(schema))
		if err != nil {
			b.Fatal(err)
		}
		st := Start(p)
		st.Feed([]byte(`{"name":"Al`))
		b.Run(vc.name+"/uncached", func(b *testing.B) {
			for b.Loop() {
				New(v, p).Mask(st)
			}
		})
		b.Run(vc.name+"/cached", func(b *testing.B) {
			shared := NewMaskCache(SharedCacheBytes)
			newConstraint(v, p, shared).Mask(st) // an earlier request's
			q, _ := Compile(json.RawMessage(schema))
			c := newConstraint(v, q, shared) // this request's, compiled again
			for b.Loop() {
				c.Mask(st)
			}
		})
	}
}
