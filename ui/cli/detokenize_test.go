package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/tokenizer"
)

// TestDetokenizeRoundTrip: k3 detokenize gives back, byte for byte, what
// k3 tokenize encoded (invalid UTF-8 and a newline included), and a special
// id as its name; an id outside the vocabulary is refused (the C engine's
// decode tool; k3 had no decode command).
func TestDetokenizeRoundTrip(t *testing.T) {
	in := filepath.Join(t.TempDir(), "in.txt")
	text := "Hello 漢字 it's\xff\nsecond line"
	require.NoError(t, os.WriteFile(in, []byte(text), 0o644))
	code, out, errs := tokRunCmd("tokenize", "--tok", tokParityDir, "--file", in)
	require.Equal(t, ExitOK, code, errs)
	var ids []int
	require.NoError(t, json.Unmarshal([]byte(out), &ids))
	require.Greater(t, len(ids), 5)
	list := make([]string, len(ids))
	for i, id := range ids {
		list[i] = strconv.Itoa(id)
	}
	code, out, errs = tokRunCmd("detokenize", "--tok", tokParityDir, "--ids", strings.Join(list, ","))
	require.Equal(t, ExitOK, code, errs)
	assert.Empty(t, errs)
	assert.Equal(t, text, out)

	tok, err := tokenizer.Load(tokParityDir)
	require.NoError(t, err)
	open, _ := tok.SpecialID(tokenizer.Open)
	code, out, _ = tokRunCmd("detokenize", "--tok", tokParityDir, "--ids", list[0]+" "+strconv.Itoa(open))
	require.Equal(t, ExitOK, code)
	assert.Equal(t, string(tok.Decode(ids[:1]))+tokenizer.Open, out)

	n := tok.VocabSize()
	code, out, errs = tokRunCmd("detokenize", "--tok", tokParityDir, "--ids", "1,"+strconv.Itoa(n))
	assert.Equal(t, ExitUsage, code)
	assert.Empty(t, out)
	assert.Equal(t, "k3 detokenize: token id "+strconv.Itoa(n)+" is outside the vocabulary 0.."+strconv.Itoa(n-1)+"\n", errs)
	code, _, errs = tokRunCmd("detokenize", "--tok", tokParityDir)
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, "--tok and --ids are required")
}
