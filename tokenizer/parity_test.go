package tokenizer

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The parity files are produced by tools/tokenizer-oracle/oracle.js from
// OpenAI's tiktoken (WASM build of the Rust crate) configured with the Kimi
// K3 pat_str, the K3 specials and a stand-in vocabulary (cl100k_base ranks
// trimmed to the corpus; see the script).
const parityDir = "testdata/parity"

type parityGen struct {
	Prefix string `json:"prefix"`
	Unit   string `json:"unit"`
	Count  int    `json:"count"`
	Suffix string `json:"suffix"`
}

type parityCase struct {
	Text       *string    `json:"text"`
	PieceEnds  []int      `json:"piece_ends"`
	IDs        []int      `json:"ids"`
	SpecialIDs []int      `json:"special_ids"`
	Gen        *parityGen `json:"gen"`
	NPieces    int        `json:"n_pieces"`
	PiecesSHA  string     `json:"pieces_sha256"`
	NIDs       int        `json:"n_ids"`
	IDsSHA     string     `json:"ids_sha256"`
	NSpecial   int        `json:"n_special_ids"`
	SpecialSHA string     `json:"special_ids_sha256"`
}

type parityFile struct {
	ModelSHA string `json:"tiktoken_model_sha256"`
	Summary  struct {
		Cases   int `json:"cases"`
		Pieces  int `json:"pieces"`
		IDs     int `json:"ids"`
		NumBase int `json:"num_base"`
	} `json:"summary"`
	Cases []parityCase `json:"cases"`
}

func (c *parityCase) text() string {
	if c.Text != nil {
		return *c.Text
	}
	return c.Gen.Prefix + strings.Repeat(c.Gen.Unit, c.Gen.Count) + c.Gen.Suffix
}

func loadParity(t testing.TB) (*Tokenizer, *parityFile) {
	t.Helper()
	f, err := os.Open(filepath.Join(parityDir, "expected.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var pf parityFile
	if err := json.NewDecoder(zr).Decode(&pf); err != nil {
		t.Fatal(err)
	}
	model, err := os.ReadFile(filepath.Join(parityDir, ModelFile))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(model)
	if hex.EncodeToString(sum[:]) != pf.ModelSHA {
		t.Fatalf("%s does not match the vocabulary the oracle used", ModelFile)
	}
	tok, err := Load(parityDir)
	if err != nil {
		t.Fatal(err)
	}
	if tok.NumBase() != pf.Summary.NumBase {
		t.Fatalf("NumBase %d, oracle %d", tok.NumBase(), pf.Summary.NumBase)
	}
	return tok, &pf
}

func joinInts(a []int) string {
	var b strings.Builder
	for i, x := range a {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(x))
	}
	return b.String()
}

func shaInts(a []int) string {
	s := sha256.Sum256([]byte(joinInts(a)))
	return hex.EncodeToString(s[:])
}

func firstDiff(a, b []int) int {
	for i := range a {
		if i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return len(a)
	}
	return -1
}

// TestParityTiktoken compares pieces, ordinary ids and special-mode ids with
// the oracle on every corpus case.
func TestParityTiktoken(t *testing.T) {
	tok, pf := loadParity(t)
	if len(pf.Cases) != pf.Summary.Cases || len(pf.Cases) < 2000 {
		t.Fatalf("corpus has %d cases", len(pf.Cases))
	}
	var nPieces, nIDs, bad int
	for ci := range pf.Cases {
		c := &pf.Cases[ci]
		text := c.text()
		pieces := Pretokenize(text)
		ends := make([]int, len(pieces))
		pos := 0
		for i, p := range pieces {
			pos += len(p)
			ends[i] = pos
		}
		ids := tok.Encode(text)
		sids := tok.EncodeSpecial(text)
		nPieces += len(pieces)
		nIDs += len(ids)
		if c.Gen == nil {
			wantS := c.SpecialIDs
			if wantS == nil {
				wantS = c.IDs
			}
			if d := firstDiff(ends, c.PieceEnds); d >= 0 {
				bad++
				t.Errorf("case %d %q: pieces differ at piece %d: got %q", ci, trunc(text), d, pieces[max(0, min(d, len(pieces)-1))])
			}
			if d := firstDiff(ids, c.IDs); d >= 0 {
				bad++
				t.Errorf("case %d %q: ids differ at %d: got %v want %v", ci, trunc(text), d, ids, c.IDs)
			}
			if d := firstDiff(sids, wantS); d >= 0 {
				bad++
				t.Errorf("case %d %q: special ids differ at %d", ci, trunc(text), d)
			}
		} else {
			if len(ends) != c.NPieces || shaInts(ends) != c.PiecesSHA {
				bad++
				t.Errorf("case %d (generated %q x%d): %d pieces, oracle %d (or hash differs)", ci, c.Gen.Unit, c.Gen.Count, len(ends), c.NPieces)
			}
			if len(ids) != c.NIDs || shaInts(ids) != c.IDsSHA {
				bad++
				t.Errorf("case %d (generated %q x%d): %d ids, oracle %d (or hash differs)", ci, c.Gen.Unit, c.Gen.Count, len(ids), c.NIDs)
			}
			if len(sids) != c.NSpecial || shaInts(sids) != c.SpecialSHA {
				bad++
				t.Errorf("case %d (generated %q x%d): %d special ids, oracle %d (or hash differs)", ci, c.Gen.Unit, c.Gen.Count, len(sids), c.NSpecial)
			}
		}
		if got := string(tok.Decode(ids)); got != text {
			t.Errorf("case %d: round trip differs", ci)
		}
		if bad > 20 {
			t.Fatal("too many mismatches")
		}
	}
	if nPieces != pf.Summary.Pieces || nIDs != pf.Summary.IDs {
		t.Errorf("totals: %d pieces, %d ids; oracle %d, %d", nPieces, nIDs, pf.Summary.Pieces, pf.Summary.IDs)
	}
	t.Logf("%d cases, %d pieces, %d ids compared with tiktoken", len(pf.Cases), nPieces, nIDs)
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
