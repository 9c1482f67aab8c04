package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"k3/tokenizer"
)

func init() {
	register("tokenize", "encode text with a tokenizer directory; prints a JSON array of ids", runTokenize)
}

const tokenizeUsage = "usage: k3 tokenize --tok DIR (--text S | --file F) [--special]"

// runTokenize: k3 tokenize --tok DIR (--text S | --file F) [--special].
// Without --special, control-token strings are ordinary text.
func runTokenize(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tokenize", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dir := fs.String("tok", "", "tokenizer directory (tiktoken.model, tokenizer_config.json)")
	text := fs.String("text", "", "text to encode")
	file := fs.String("file", "", "file whose bytes are encoded")
	special := fs.Bool("special", false, "special-token strings become their ids")
	if code, done := tokParseFlags(fs, args, "tokenize", tokenizeUsage, stdout, stderr); done {
		return code
	}
	textSet, fileSet := tokFlagSet(fs, "text"), tokFlagSet(fs, "file")
	switch {
	case *dir == "":
		return tokUsageError(stderr, "tokenize", "--tok is required", tokenizeUsage)
	case textSet == fileSet:
		return tokUsageError(stderr, "tokenize", "give exactly one of --text and --file", tokenizeUsage)
	}
	input := *text
	if fileSet {
		b, err := os.ReadFile(*file)
		if err != nil {
			return tokUsageError(stderr, "tokenize", err.Error(), "")
		}
		input = string(b)
	}
	tok, err := tokenizer.Load(*dir)
	if err != nil {
		return tokUsageError(stderr, "tokenize", err.Error(), "")
	}
	var ids []int
	if *special {
		ids = tok.EncodeSpecial(input)
	} else {
		ids = tok.Encode(input)
	}
	if ids == nil {
		ids = []int{}
	}
	return tokWriteJSON(stdout, stderr, ids)
}

// tokParseFlags parses args; done reports that the command should return code
// (help was printed, or the arguments are bad).
func tokParseFlags(fs *flag.FlagSet, args []string, name, usage string, stdout, stderr io.Writer) (code int, done bool) {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		printHelp(fs, stdout, usage)
		return ExitOK, true
	}
	if err != nil {
		return tokUsageError(stderr, name, err.Error(), usage), true
	}
	if fs.NArg() > 0 {
		return tokUsageError(stderr, name, fmt.Sprintf("unexpected argument %q", fs.Arg(0)), usage), true
	}
	return 0, false
}

func tokFlagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// tokUsageError prints one line "k3 NAME: MSG (USAGE)" and returns ExitUsage.
func tokUsageError(stderr io.Writer, name, msg, usage string) int {
	if usage != "" {
		fmt.Fprintf(stderr, "k3 %s: %s (%s)\n", name, msg, usage)
	} else {
		fmt.Fprintf(stderr, "k3 %s: %s\n", name, msg)
	}
	return ExitUsage
}

// tokWriteJSON writes v as one line of JSON without HTML escaping.
func tokWriteJSON(stdout, stderr io.Writer, v any) int {
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(stderr, "k3: writing output: %v\n", err)
		return ExitOutput
	}
	return ExitOK
}
