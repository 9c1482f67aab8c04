package cli

import (
	"flag"
	"fmt"
	"io"

	"k3/tokenizer"
)

func init() {
	register("detokenize", "decode ids with a tokenizer directory; prints their bytes as they are", runDetokenize)
}

const detokenizeUsage = "usage: k3 detokenize --tok DIR --ids 1,2,3"

// runDetokenize: k3 detokenize --tok DIR --ids LIST. It writes the bytes of
// the ids, concatenated, and nothing else (no newline), so that what
// k3 tokenize encoded comes back byte for byte; a special id gives its
// name, as in k3 run's text. An id outside the vocabulary is refused. This
// is the C engine's `test_tok decode` (seed-engine-spec.md §6.3) and the
// server's /detokenize on the command line.
func runDetokenize(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("detokenize", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dir := fs.String("tok", "", "tokenizer directory (tiktoken.model, tokenizer_config.json)")
	list := fs.String("ids", "", "ids, comma or space separated")
	if code, done := tokParseFlags(fs, args, "detokenize", detokenizeUsage, stdout, stderr); done {
		return code
	}
	if *dir == "" || *list == "" {
		return tokUsageError(stderr, "detokenize", "--tok and --ids are required", detokenizeUsage)
	}
	ids, err := parseIDs(*list)
	if err != nil {
		return tokUsageError(stderr, "detokenize", err.Error(), "")
	}
	tok, err := tokenizer.Load(*dir)
	if err != nil {
		return tokUsageError(stderr, "detokenize", err.Error(), "")
	}
	for _, id := range ids {
		if id >= tok.VocabSize() {
			return tokUsageError(stderr, "detokenize", fmt.Sprintf("token id %d is outside the vocabulary 0..%d", id, tok.VocabSize()-1), "")
		}
	}
	if _, err := stdout.Write(tok.Decode(ids)); err != nil {
		fmt.Fprintf(stderr, "k3: writing output: %v\n", err)
		return ExitOutput
	}
	return ExitOK
}
