package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

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
	text, err := os.ReadFile(*textPath)
	if err != nil {
		return tokUsageError(stderr, "parse", err.Error(), "")
	}
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
	tok, err := tokenizer.Load(*dir)
	if err != nil {
		return tokUsageError(stderr, "parse", err.Error(), "")
	}
	if err := tok.CheckChat(); err != nil {
		return tokUsageError(stderr, "parse", err.Error(), "")
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
	r := xtml.ReadReply(tok, tok.EncodeSpecial(string(text)), o)
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
