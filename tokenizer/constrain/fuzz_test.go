package constrain

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// schemaGen writes a random schema in the subset from a stream of
// choices.
type schemaGen struct {
	r *rand.Rand
}

func (g *schemaGen) pick(n int) int { return g.r.IntN(n) }

func (g *schemaGen) schema(depth int) string {
	k := g.pick(15)
	if depth > 3 {
		k = 2 + g.pick(6) // leaves only
	}
	switch k {
	case 0, 1:
		n := 1 + g.pick(3)
		var props, req []string
		for i := range n {
			name := []string{"a", "b", "ab", "k\u00e9", "a\"q", fmt.Sprint("p", i)}[g.pick(6)]
			if strings.Contains(strings.Join(props, ","), `"`+jsonStr(name)+`":`) {
				continue
			}
			props = append(props, fmt.Sprintf(`"%s":%s`, jsonStr(name), g.schema(depth+1)))
			if g.pick(2) == 0 {
				req = append(req, `"`+jsonStr(name)+`"`)
			}
		}
		return fmt.Sprintf(`{"type":"object","properties":{%s},"required":[%s],"additionalProperties":false}`,
			strings.Join(props, ","), strings.Join(req, ","))
	case 2:
		lo, hi := g.pick(3), -1
		if g.pick(2) == 0 {
			hi = lo + g.pick(3)
		}
		s := fmt.Sprintf(`{"type":"string","minLength":%d`, lo)
		if hi >= 0 {
			s += fmt.Sprintf(`,"maxLength":%d`, hi)
		}
		return s + "}"
	case 3:
		f := []string{"date", "time", "date-time", "uuid", "email", "ipv4", "uri"}[g.pick(7)]
		if g.pick(3) == 0 {
			return []string{`{"type":"string","pattern":"^[a-c]{1,3}(-[0-9])?$"}`, `{"type":"string","pattern":"x"}`}[g.pick(2)]
		}
		return fmt.Sprintf(`{"type":"string","format":%q}`, f)
	case 4, 5:
		return g.number(k == 4)
	case 6:
		return []string{`{"type":"boolean"}`, `{"type":"null"}`, `{"type":["integer","null"]}`, `{}`}[g.pick(4)]
	case 7:
		return []string{`{"enum":["x","xy",9007199254740993,-1.50,null,true]}`, `{"const":{"z":[1,"é"]}}`, `{"const":123456789012345678901234567890}`}[g.pick(3)]
	case 8, 9:
		s := fmt.Sprintf(`{"type":"array","items":%s`, g.schema(depth+1))
		if g.pick(2) == 0 {
			lo := g.pick(3)
			s += fmt.Sprintf(`,"minItems":%d,"maxItems":%d`, lo, lo+g.pick(3))
		}
		return s + "}"
	case 10:
		return fmt.Sprintf(`{"anyOf":[%s,%s]}`, g.schema(depth+1), g.schema(depth+1))
	case 11:
		return `{"$ref":"#/$defs/tree"}`
	case 13: // exclusive when the compiler can prove it, else refused
		return fmt.Sprintf(`{"oneOf":[%s,%s]}`, g.schema(depth+1), g.schema(depth+1))
	case 14: // told apart by a const and an enum, by type, and by a required key
		return fmt.Sprintf(`{"oneOf":[{"type":"object","properties":{"kind":{"const":"x"},"v":%s},"required":["kind"],"additionalProperties":false},`+
			`{"type":"object","properties":{"kind":{"enum":["y","z"]},"v":%s},"required":["kind","v"],"additionalProperties":false},`+
			`{"type":"object","properties":{"w":%s},"required":["w"],"additionalProperties":false},{"type":["string","null"]}]}`,
			g.schema(depth+1), g.schema(depth+1), g.schema(depth+1))
	default:
		return fmt.Sprintf(`{"type":"object","additionalProperties":%s}`, g.schema(depth+1))
	}
}

func jsonStr(s string) string { b, _ := json.Marshal(s); return string(b[1 : len(b)-1]) }

func (g *schemaGen) number(integer bool) string {
	t := "number"
	if integer {
		t = "integer"
	}
	vals := []string{"0", "-3", "7", "100", "-9007199254740991", "9007199254740991", "2.5", "-0.125", "12345678901234567890"}
	s := `{"type":"` + t + `"`
	for _, k := range []string{"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"} {
		if g.pick(3) == 0 {
			s += fmt.Sprintf(`,"%s":%s`, k, vals[g.pick(len(vals))])
		}
	}
	if integer && g.pick(3) == 0 {
		s += fmt.Sprintf(`,"multipleOf":%d`, 2+g.pick(5))
	}
	return s + "}"
}

const treeDef = `"$defs":{"tree":{"type":"object","properties":{"v":{"type":"integer","minimum":-5,"maximum":5},"kids":{"type":"array","items":{"$ref":"#/$defs/tree"},"maxItems":2}},"required":["v"],"additionalProperties":false}}`

// fuzzVocab is a small vocabulary of single bytes and JSON-ish pieces.
func fuzzVocab() *Vocab {
	var toks [][]byte
	for c := 0x20; c < 0x7f; c++ {
		toks = append(toks, []byte{byte(c)})
	}
	for _, p := range []string{"true", "null", "false", `":`, `,"`, "12", "-0.", "00", "2024-", "-01", "T12:", "Z\"", "\u00e9", "@x.", "com", "99999", "{\"", "[]", "\\n", "\\u00"} {
		toks = append(toks, []byte(p))
	}
	return NewVocab(toks, make([]bool, len(toks)))
}

// outputs writes one random output of schema: random allowed tokens for a
// random number of steps, then the shortest completion. Every output the
// constraint lets through must validate.
func checkRandomOutput(t *testing.T, v *Vocab, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	g := &schemaGen{r: r}
	body := g.schema(0)
	schema := body[:len(body)-1]
	if schema == "" || !strings.HasPrefix(body, "{") {
		return
	}
	if len(schema) > 1 {
		schema += ","
	}
	schema += treeDef + "}"
	s, err := Compile(json.RawMessage(schema))
	if err != nil {
		// the generator can write schemas with no value (bounds that
		// exclude everything), and oneOfs whose alternatives may overlap
		if !strings.Contains(err.Error(), `"oneOf": alternatives`) {
			require.Contains(t, err.Error(), "fit", "seed %d: %s", seed, schema)
		}
		return
	}
	c := New(v, s)
	st := c.Start()
	var out []byte
	steps := r.IntN(60)
	for range steps {
		if st.Done() {
			break
		}
		mask := c.Mask(st)
		var ok []int
		for id := range v.Size() {
			if mask[id/64]&(1<<(id%64)) != 0 {
				ok = append(ok, id)
			}
		}
		if len(ok) == 0 {
			require.True(t, st.Complete(), "seed %d: a live state allows some token, or is whole: %s after %q", seed, schema, out)
			break
		}
		id := ok[r.IntN(len(ok))]
		require.True(t, st.Feed(v.tokens[id]), "seed %d", seed)
		out = append(out, v.tokens[id]...)
		if st.Complete() && r.IntN(4) == 0 {
			break
		}
	}
	comp := st.Completion()
	require.True(t, st.Feed(comp), "seed %d: completion %q of %q", seed, comp, out)
	out = append(out, comp...)
	require.True(t, st.Complete(), "seed %d: %q", seed, out)
	require.NoError(t, validate(schema, string(out)), "seed %d: %s\n%s", seed, schema, out)
}

// Random schemas times random token streams: every accepted output
// validates against its schema (an independent validator, which holds
// oneOf to exactly one alternative).
func TestRandomSchemaOutputs(t *testing.T) {
	v := fuzzVocab()
	for seed := range uint64(300) {
		checkRandomOutput(t, v, seed)
	}
}

func FuzzSchemaOutputs(f *testing.F) {
	v := fuzzVocab()
	for _, s := range []uint64{1, 2, 3, 42} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { checkRandomOutput(t, v, seed) })
}
