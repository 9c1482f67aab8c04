package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"k3/tokenizer"
	"k3/tokenizer/xtml"
)

func init() {
	register("parse", "read a model's output (K3 XTML) as a server does; prints {\"reasoning_content\", \"content\", \"tool_calls\", \"warnings\"}", runParse)
}

const parseUsage = "usage: k3 parse --tok DIR --text-file F [--no-think] [--tools FILE] [--tool-choice auto|none|required]"

// parseOut is what k3 parse prints: the reply as k3 serve answers it.
type parseOut struct {
	ReasoningContent *string         `json:"reasoning_content"`
	Content          *string         `json:"content"`
	ToolCalls        []parseToolCall `json:"tool_calls"`
	Warnings         []string        `json:"warnings"`
}

type parseToolCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// runParse is the mirror of k3 template: the text that follows the
// generation prompt the options render (thinking on or off; tools declared
// or not, tool_choice), with control tokens written as themselves, read by
// the reply reader the chat session and the server use.
func runParse(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("parse", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dir := fs.String("tok", "", "tokenizer directory (tiktoken.model, tokenizer_config.json)")
	textPath := fs.String("text-file", "", "the model's output after the generation prompt, control tokens as <|open|> etc.")
	noThink := fs.Bool("no-think", false, "thinking off: the prompt opened the response channel")
	toolsPath := fs.String("tools", "", "JSON file: the request's tools (an array of OpenAI tools)")
	choice := fs.String("tool-choice", "auto", "auto, none or required")
	if code, done := tokParseFlags(fs, args, "parse", parseUsage, stdout, stderr); done {
		return code
	}
	switch {
	case *dir == "":
		return tokUsageError(stderr, "parse", "--tok is required", parseUsage)
	case *textPath == "":
		return tokUsageError(stderr, "parse", "--text-file is required", parseUsage)
	case *choice != "auto" && *choice != "none" && *choice != "required":
		return tokUsageError(stderr, "parse", fmt.Sprintf("--tool-choice %q is not one of auto, none, required", *choice), parseUsage)
	case *choice == "required" && *toolsPath == "":
		return tokUsageError(stderr, "parse", "--tool-choice required needs --tools", parseUsage)
	}
	in, err := os.Open(*textPath)
	if err != nil {
		return tokUsageError(stderr, "parse", err.Error(), "")
	}
	defer in.Close()
	var tools []json.RawMessage
	if *toolsPath != "" {
		data, err := os.ReadFile(*toolsPath)
		if err != nil {
			return tokUsageError(stderr, "parse", err.Error(), "")
		}
		if err := json.Unmarshal(data, &tools); err != nil {
			return tokUsageError(stderr, "parse", fmt.Sprintf("%s: not a JSON array of tools: %v", *toolsPath, err), "")
		}
	}
	tok, code := chatTokenizer("parse", *dir, "", stderr)
	if code >= 0 {
		return code
	}
	// the prompt these options render must render: the tools are checked
	// as a request's are
	tc := *choice
	if tc == "auto" {
		tc = ""
	}
	if _, err := xtml.Render([]xtml.Message{{Role: "user", Content: "."}}, tools, xtml.RenderOptions{NoThink: *noThink, ToolChoice: tc}); err != nil {
		return tokUsageError(stderr, "parse", err.Error(), "")
	}
	o := xtml.ReplyOptions{Thinking: !*noThink}
	switch {
	case len(tools) == 0:
		o.NoTools, o.NoToolsWhy = true, "no tools were declared"
	case *choice == "none":
		o.NoTools, o.NoToolsWhy = true, `tool_choice is "none"`
	}
	r, err := readReplyStream(tok, in, o)
	if err != nil {
		fmt.Fprintf(stderr, "k3 parse: %v\n", err)
		return ExitRuntime
	}
	out := parseOut{ToolCalls: []parseToolCall{}, Warnings: []string{}}
	if r.Reasoning != "" {
		out.ReasoningContent = &r.Reasoning
	}
	if r.Content != "" {
		out.Content = &r.Content
	}
	for _, c := range r.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, parseToolCall{Name: c.Function.Name, Arguments: c.Function.Arguments})
	}
	out.Warnings = append(out.Warnings, r.Warnings...)
	return tokWriteJSON(stdout, stderr, out)
}

// parsePiece is how much of the input k3 parse reads at a time;
// maxSpecialName bounds a control token's written length.
const (
	parsePiece     = 1 << 20
	maxSpecialName = 64
)

// readReplyStream reads the model's output from in a piece at a time and
// gives its ids to the reply reader as they come, so memory holds one
// piece (and what the reply keeps), not the whole input encoded. Control
// tokens are found before the text is encoded, so none is split, however
// long the input: a piece ends before a "<|" that may begin one.
func readReplyStream(tok *tokenizer.Tokenizer, in io.Reader, o xtml.ReplyOptions) (xtml.Reply, error) {
	rr := xtml.NewReplyReader(tok, o)
	buf := make([]byte, parsePiece)
	var pending []byte
	for {
		n, err := io.ReadFull(in, buf)
		pending = append(pending, buf[:n]...)
		end := err == io.EOF || err == io.ErrUnexpectedEOF
		if err != nil && !end {
			return xtml.Reply{}, err
		}
		cut := len(pending)
		if !end {
			cut = safeCut(pending)
		}
		feedMarkup(tok, rr, string(pending[:cut]))
		pending = append(pending[:0], pending[cut:]...)
		if end {
			break
		}
	}
	rr.Finish()
	return rr.Reply(), nil
}

// safeCut is where a piece may end: before a "<|" with no "|>" after it
// (it may begin a control token the next piece ends), and not inside a
// UTF-8 sequence.
func safeCut(b []byte) int {
	cut := len(b)
	tail := max(0, len(b)-maxSpecialName)
	if i := bytes.LastIndex(b[tail:], []byte("<|")); i >= 0 && !bytes.Contains(b[tail+i+2:], []byte("|>")) {
		cut = tail + i
	}
	for p := cut - 1; p >= 0 && p >= cut-utf8.UTFMax; p-- {
		if utf8.RuneStart(b[p]) {
			if !utf8.FullRune(b[p:cut]) {
				cut = p // a sequence the next piece ends
			}
			break
		}
	}
	return cut
}

// feedMarkup gives text to the reply reader: control tokens written as
// themselves ("<|open|>") become their ids, the text between is encoded.
func feedMarkup(tok *tokenizer.Tokenizer, rr *xtml.ReplyReader, text string) {
	add := func(ids []int) {
		for _, id := range ids {
			rr.Add(id)
		}
	}
	from := 0
	for i := 0; i < len(text); {
		j := strings.Index(text[i:], "<|")
		if j < 0 {
			break
		}
		j += i
		k := strings.Index(text[j+2:min(len(text), j+maxSpecialName)], "|>")
		if k < 0 {
			i = j + 2
			continue
		}
		name := text[j : j+2+k+2]
		if id, ok := tok.SpecialID(name); ok {
			add(tok.Encode(text[from:j]))
			rr.Add(id)
			from = j + len(name)
			i = from
			continue
		}
		i = j + 2
	}
	add(tok.Encode(text[from:]))
}
