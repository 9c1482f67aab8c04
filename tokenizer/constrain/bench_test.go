package constrain

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
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
