package tokenizer

import (
	"encoding/base64"
	"strconv"
	"testing"
)

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
func itoa(i int) string   { return strconv.Itoa(i) }

// realIDsTokenizer has a byte-level vocabulary padded to K3's 163,584 base
// ranks, so special ids are the real K3 ids.
func realIDsTokenizer(t testing.TB) *Tokenizer {
	t.Helper()
	dir := t.TempDir()
	if err := WriteByteLevel(dir, ByteLevelOptions{Text: "message role user assistant think response", Merges: 20, NumBase: 163584}); err != nil {
		t.Fatal(err)
	}
	tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
