package constrain

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/tokenizer"
	"k3/tokenizer/xtml"
)

// mergedTokenizer is a byte-level tokenizer with merges learned from JSON
// and chat markup, so tokens span several bytes.
func mergedTokenizer(t *testing.T) *tokenizer.Tokenizer {
	text := `{"name": "Al", "age": 42, "tags": ["x", "y"]} response message think call tool= index="1" json type="object" `
	base := tokenizer.ByteLevelTokens(text+text+text, 200)
	tok, err := tokenizer.New(base, tokenizer.K3SpecialNames(len(base)))
	require.NoError(t, err)
	return tok
}

// Recognizer, token by token: a JSON text encoded with merges is accepted
// one token at a time exactly when it is accepted byte by byte.
func TestRecognizerTokens(t *testing.T) {
	tok := mergedTokenizer(t)
	p, err := Compile(json.RawMessage(person))
	require.NoError(t, err)
	for _, text := range []string{`{"name": "Al", "age": 42, "tags": ["x", "y"]}`, `{"name": "Al", "age": 4.2}`, `{"name": "Al", "age": 42, "x": 1}`} {
		ids := tok.Encode(text)
		require.Less(t, len(ids), len(text), "merged tokens")
		st := Start(p)
		ok := true
		for _, id := range ids {
			if ok = st.Feed(tok.TokenBytes(id)); !ok {
				break
			}
		}
		alive, complete := feed(p, text)
		assert.Equal(t, alive, ok, text)
		assert.Equal(t, complete, ok && st.Complete(), text)
	}
}

type fixedPicker struct{ r *rand.Rand }

// Pick draws from softmax(logits) like the engine's random sampler.
func (f fixedPicker) Pick(_ int, logits []float32) int {
	best := 0
	for i, l := range logits {
		if l > logits[best] {
			best = i
		}
	}
	// the allowed ids, weighted by exp(l - max)
	u, z := f.r.Float64(), 0.0
	for _, l := range logits {
		z += expOf(l - logits[best])
	}
	cum := 0.0
	for i, l := range logits {
		cum += expOf(l-logits[best]) / z
		if u < cum {
			return i
		}
	}
	return best
}

func expOf(x float32) float64 { return math.Exp(float64(x)) }

// A sampler on random logits (a model that knows no JSON) writes a turn
// the reply reader reads as JSON of the schema, or as one call of a
// declared tool with fitting arguments, within the budget, every time.
func TestSamplerRandomLogits(t *testing.T) {
	tok := mergedTokenizer(t)
	tn := ForTokenizer(tok)
	p, err := Compile(json.RawMessage(person))
	require.NoError(t, err)
	tools := map[string]*Schema{"person": p, "noop": AnyObject()}
	valid, calls := 0, 0
	for seed := range uint64(12) {
		for _, thinking := range []bool{false, true} {
			for _, call := range []bool{false, true} {
				plan := tn.Answer(p, thinking)
				if call {
					plan = tn.ToolCall(tools, thinking, seed%3 == 0)
				}
				var base Picker
				if seed%2 == 1 {
					base = fixedPicker{rand.New(rand.NewPCG(seed, 9))}
				}
				budget := 160 + 240*int(seed%2)
				s := NewSampler(tn, plan, base, budget)
				r := rand.New(rand.NewPCG(seed, 1))
				logits := make([]float32, tok.VocabSize())
				var ids []int
				for pos := 0; pos < budget; pos++ {
					for i := range logits {
						logits[i] = float32(r.NormFloat64() * 3)
					}
					if seed%2 == 1 { // a model that closes its channels and opens calls
						logits[tn.Close] += 6
						logits[tn.Open] += 6
					}
					id := s.Pick(pos, logits)
					require.Equal(t, id, s.Pick(pos, logits), "a second pick at a position is the first")
					ids = append(ids, id)
					if id == tn.EndOfMsg {
						break
					}
				}
				rep := xtml.ReadReply(tok, ids, xtml.ReplyOptions{Thinking: thinking})
				require.True(t, rep.Complete, "seed %d thinking %v call %v: %q", seed, thinking, call, tok.Decode(ids))
				assert.Empty(t, rep.Warnings, "%q", tok.Decode(ids))
				js := rep.Content
				if call {
					require.NotEmpty(t, rep.ToolCalls, "%q", tok.Decode(ids))
					if seed%3 == 0 {
						require.Len(t, rep.ToolCalls, 1, "single: %q", tok.Decode(ids))
					}
					calls += len(rep.ToolCalls)
					for _, c := range rep.ToolCalls { // every call of a reply is held
						checkCall(t, p, c)
					}
					valid++
					continue
				}
				alive, complete := feed(p, js)
				require.True(t, alive && complete, "%q", js)
				var v map[string]any
				require.NoError(t, decodeExact([]byte(js), &v), js)
				valid++
			}
		}
	}
	assert.Equal(t, 48, valid)
	assert.Greater(t, calls, 24, "some replies made parallel calls")
}

func checkCall(t *testing.T, p *Schema, c xtml.ToolCall) {
	js := c.Function.Arguments
	var v map[string]any
	require.NoError(t, decodeExact([]byte(js), &v), js)
	if c.Function.Name == "noop" {
		return
	}
	require.Equal(t, "person", c.Function.Name)
	alive, complete := feed(p, js)
	require.True(t, alive && complete, "%q", js)
}

// AutoCall on random logits: a model that opens calls has every call it
// writes held to its tool's schema; one that ends its turn does so with
// no call; the free parts keep no budget back (a model that never closes
// its answer writes it to the last token).
func TestSamplerAutoCall(t *testing.T) {
	tok := mergedTokenizer(t)
	tn := ForTokenizer(tok)
	p, err := Compile(json.RawMessage(person))
	require.NoError(t, err)
	tools := map[string]*Schema{"person": p, "noop": AnyObject()}
	calls, ended := 0, 0
	for seed := range uint64(16) {
		thinking := seed%2 == 1
		s := NewSampler(tn, tn.AutoCall(tools, thinking, seed%4 == 0), nil, 400)
		r := rand.New(rand.NewPCG(seed, 3))
		logits := make([]float32, tok.VocabSize())
		var ids []int
		for pos := 0; pos < 400; pos++ {
			for i := range logits {
				logits[i] = float32(r.NormFloat64() * 3)
			}
			switch seed % 3 {
			case 0: // closes its channels and opens calls
				logits[tn.Close] += 6
				logits[tn.Open] += 20
			case 1: // ends its turn after a few words
				logits[tn.EndOfMsg] += float32(pos) / 4
			default:
				logits[tn.Close], logits[tn.EndOfMsg], logits[tn.EOS] = -100, -100, -100
			}
			id := s.Pick(pos, logits)
			ids = append(ids, id)
			if id == tn.EndOfMsg {
				break
			}
		}
		rep := xtml.ReadReply(tok, ids, xtml.ReplyOptions{Thinking: thinking})
		switch seed % 3 {
		case 0:
			require.True(t, rep.Complete, "%q", tok.Decode(ids))
			assert.Empty(t, rep.Warnings, "%q", tok.Decode(ids))
			require.NotEmpty(t, rep.ToolCalls, "%q", tok.Decode(ids))
			for _, c := range rep.ToolCalls {
				checkCall(t, p, c)
			}
			calls += len(rep.ToolCalls)
		case 1:
			require.True(t, rep.Complete, "%q", tok.Decode(ids))
			assert.Empty(t, rep.ToolCalls)
			ended++
		default: // never closes: free to the budget's end
			assert.Len(t, ids, 400)
			assert.False(t, rep.Complete)
			for _, id := range ids {
				assert.False(t, tok.IsSpecial(id) && id != tn.Close, "%q", tok.Decode(ids))
			}
		}
	}
	assert.Greater(t, calls, 6, "parallel calls")
	assert.Equal(t, 5, ended)
}
