package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"k3/engine/vision"
	"k3/tokenizer/xtml"
	"k3/ui/openai"
)

func init() {
	register("template", "render a chat (K3 XTML) and encode it; prints {\"text\", \"ids\"}", runTemplate)
}

const templateUsage = "usage: k3 template --tok DIR --messages FILE [--no-think] [--thinking-effort low|high|max] [--no-generation-prompt]"

// tokChatFile is the --messages file: either a JSON array of messages or an
// object with "messages" and optional "tools", "tool_choice" and
// "response_format" (OpenAI request fields).
type tokChatFile struct {
	Messages       templateMessages  `json:"messages"`
	Tools          []json.RawMessage `json:"tools"`
	ToolChoice     string            `json:"tool_choice"`
	ResponseFormat json.RawMessage   `json:"response_format"`
}

func runTemplate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("template", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dir := fs.String("tok", "", "tokenizer directory (tiktoken.model, tokenizer_config.json)")
	msgPath := fs.String("messages", "", "JSON file: an array of messages or {\"messages\": [...], \"tools\": [...]}")
	noThink := fs.Bool("no-think", false, "thinking off: no think blocks, the prompt opens the response channel")
	effort := fs.String("thinking-effort", "", "low, high or max (default max)")
	noGen := fs.Bool("no-generation-prompt", false, "leave out the open assistant turn at the end")
	if code, done := tokParseFlags(fs, args, "template", templateUsage, stdout, stderr); done {
		return code
	}
	switch {
	case *dir == "":
		return tokUsageError(stderr, "template", "--tok is required", templateUsage)
	case *msgPath == "":
		return tokUsageError(stderr, "template", "--messages is required", templateUsage)
	case *noThink && tokFlagSet(fs, "thinking-effort"):
		return tokUsageError(stderr, "template", "--thinking-effort needs thinking on (drop --no-think)", templateUsage)
	}
	data, err := os.ReadFile(*msgPath)
	if err != nil {
		return tokUsageError(stderr, "template", err.Error(), "")
	}
	chat, err := tokParseChatFile(data)
	if err != nil {
		return tokUsageError(stderr, "template", fmt.Sprintf("%s: %v", *msgPath, err), "")
	}
	tok, code := chatTokenizer("template", *dir, "", stderr)
	if code >= 0 {
		return code
	}
	segs, err := xtml.Render(chat.Messages, chat.Tools, xtml.RenderOptions{
		NoThink:            *noThink,
		ThinkingEffort:     *effort,
		NoGenerationPrompt: *noGen,
		ToolChoice:         chat.ToolChoice,
		ResponseFormat:     chat.ResponseFormat,
	})
	if err != nil {
		return tokUsageError(stderr, "template", err.Error(), "")
	}
	ids := xtml.Encode(tok, segs)
	if ids == nil {
		ids = []int{}
	}
	return tokWriteJSON(stdout, stderr, struct {
		Text string `json:"text"`
		IDs  []int  `json:"ids"`
	}{xtml.Text(segs), ids})
}

// templateMessages are OpenAI messages whose content may be an array of
// text parts, flattened as the server does, and image_url parts (data:
// URLs), rendered as Moonshot's encoder does: the image prompt with one
// media pad, naming the picture's size (the server then repeats the pad
// once per image position).
type templateMessages []xtml.Message

func (ms *templateMessages) UnmarshalJSON(b []byte) error {
	var raw []struct {
		xtml.Message
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*ms = make(templateMessages, len(raw))
	for i, r := range raw {
		var m openai.Message
		if err := json.Unmarshal(append(append([]byte(`{"content":`), orNullJSON(r.Content)...), '}'), &m); err != nil {
			return err
		}
		r.Message.Content = string(m.Content)
		for k, p := range m.Parts {
			if !p.Image {
				r.Message.Parts = append(r.Message.Parts, xtml.Part{Text: p.Text})
				continue
			}
			w, h, err := templateImageSize(p.ImageURL)
			if err != nil {
				return fmt.Errorf("message %d content part %d: %v", i, k, err)
			}
			r.Message.Parts = append(r.Message.Parts, xtml.Part{Image: &xtml.ImageSize{W: w, H: h}})
		}
		(*ms)[i] = r.Message
	}
	return nil
}

func orNullJSON(b json.RawMessage) []byte {
	if len(bytes.TrimSpace(b)) == 0 {
		return []byte("null")
	}
	return b
}

// templateImageSize is the size of a picture given as a data: URL, read
// from its header.
func templateImageSize(url string) (int, int, error) {
	head, payload, ok := strings.Cut(url, ",")
	if !strings.HasPrefix(strings.ToLower(head), "data:") || !strings.HasSuffix(strings.ToLower(head), ";base64") || !ok {
		return 0, 0, fmt.Errorf("an image_url must be a base64 data: URL (data:image/png;base64,...); k3 fetches nothing")
	}
	data, err := base64.StdEncoding.DecodeString(strings.TrimSpace(payload))
	if err != nil {
		return 0, 0, fmt.Errorf("the image's base64 data is not valid: %v", err)
	}
	return vision.Size(data)
}

func tokParseChatFile(data []byte) (tokChatFile, error) {
	var c tokChatFile
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		if err := json.Unmarshal(trimmed, &c.Messages); err != nil {
			return c, err
		}
	} else if err := json.Unmarshal(trimmed, &c); err != nil {
		return c, err
	}
	if len(c.Messages) == 0 {
		return c, fmt.Errorf("no messages")
	}
	for i, m := range c.Messages {
		if strings.TrimSpace(m.Role) == "" {
			return c, fmt.Errorf("message %d has no role", i)
		}
	}
	return c, nil
}
