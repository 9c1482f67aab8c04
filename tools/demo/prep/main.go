// Command prep is the Go half of the demo model's training (tools/demo/train.py
// runs it): it trains the demo tokenizer on the text of the rendered training
// conversations and encodes every conversation exactly as a chat session
// would, with the official renderer (tokenizer.Render) and the trained
// vocabulary, so the model learns the ids the app feeds it.
//
//	prep tokenizer -conv conv.jsonl -merges 1792 -numbase 2048 -out DIR
//	prep encode -tok DIR -conv conv.jsonl -out enc.jsonl
//
// conv.jsonl has one conversation per line: {"messages": [...]} whose last
// message is the assistant reply to learn (and "no_think": true to render it
// with thinking off). enc.jsonl has one line per
// conversation: {"ids": [...], "prompt": n}; ids[:n] is what the chat sends
// (the transcript and the open assistant turn), ids[n:] the reply, ending in
// <|end_of_msg|>.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"k3/tokenizer"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: prep tokenizer|encode [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "tokenizer":
		err = trainTokenizer(os.Args[2:])
	case "encode":
		err = encode(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "prep:", err)
		os.Exit(1)
	}
}

type conversation struct {
	Messages []tokenizer.Message `json:"messages"`
	NoThink  bool                `json:"no_think"` // render with thinking off
}

func readConversations(path string) ([]conversation, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []conversation
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var c conversation
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, len(out)+1, err)
		}
		if n := len(c.Messages); n == 0 || c.Messages[n-1].Role != "assistant" {
			return nil, fmt.Errorf("%s:%d: the last message must be the assistant's", path, len(out)+1)
		}
		out = append(out, c)
	}
	return out, sc.Err()
}

// trainingText is the text the vocabulary is learned from: every text
// segment of every rendered conversation (control tokens are not text),
// one per line.
func trainingText(convs []conversation) (string, error) {
	var b strings.Builder
	for _, c := range convs {
		segs, err := tokenizer.Render(c.Messages, nil, tokenizer.RenderOptions{NoGenerationPrompt: true})
		if err != nil {
			return "", err
		}
		for _, s := range segs {
			if !s.Special {
				b.WriteString(s.Text)
				b.WriteByte('\n')
			}
		}
	}
	return b.String(), nil
}

func trainTokenizer(args []string) error {
	fs := flag.NewFlagSet("tokenizer", flag.ExitOnError)
	conv := fs.String("conv", "", "conversations (JSONL)")
	merges := fs.Int("merges", 1792, "merges to learn")
	numBase := fs.Int("numbase", 2048, "base vocabulary size (bytes + merges, padded)")
	out := fs.String("out", "", "directory to write tiktoken.model and tokenizer_config.json into")
	_ = fs.Parse(args)
	if *conv == "" || *out == "" {
		return errors.New("tokenizer: -conv and -out are required")
	}
	convs, err := readConversations(*conv)
	if err != nil {
		return err
	}
	text, err := trainingText(convs)
	if err != nil {
		return err
	}
	if err := tokenizer.WriteByteLevel(*out, tokenizer.ByteLevelOptions{Text: text, Merges: *merges, NumBase: *numBase}); err != nil {
		return err
	}
	tok, err := tokenizer.Load(*out)
	if err != nil {
		return err
	}
	if err := tok.CheckChat(); err != nil {
		return err
	}
	n := len(tok.Encode(text))
	fmt.Printf("tokenizer: %d base ranks, %d ids; training text %d bytes -> %d tokens (%.2f bytes/token)\n",
		tok.NumBase(), tok.VocabSize(), len(text), n, float64(len(text))/float64(n))
	return nil
}

type encoded struct {
	IDs    []int `json:"ids"`
	Prompt int   `json:"prompt"`
}

func encode(args []string) error {
	fs := flag.NewFlagSet("encode", flag.ExitOnError)
	dir := fs.String("tok", "", "tokenizer directory")
	conv := fs.String("conv", "", "conversations (JSONL)")
	out := fs.String("out", "", "encoded conversations (JSONL)")
	_ = fs.Parse(args)
	if *dir == "" || *conv == "" || *out == "" {
		return errors.New("encode: -tok, -conv and -out are required")
	}
	tok, err := tokenizer.Load(*dir)
	if err != nil {
		return err
	}
	convs, err := readConversations(*conv)
	if err != nil {
		return err
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for i, c := range convs {
		e, err := encodeOne(tok, c.Messages, tokenizer.RenderOptions{NoThink: c.NoThink})
		if err != nil {
			f.Close()
			return fmt.Errorf("conversation %d: %v", i+1, err)
		}
		line, _ := json.Marshal(e)
		w.Write(line)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// encodeOne renders the whole conversation and the prompt a chat session
// sends before the reply (the chat defaults, thinking on with effort max,
// unless opt says NoThink), checks that the prompt is a prefix of the whole
// and that the reply parses back into the assistant message, and returns
// both.
func encodeOne(tok *tokenizer.Tokenizer, msgs []tokenizer.Message, opt tokenizer.RenderOptions) (encoded, error) {
	prompt, err := tokenizer.Render(msgs[:len(msgs)-1], nil, opt)
	if err != nil {
		return encoded{}, err
	}
	opt.NoGenerationPrompt = true
	full, err := tokenizer.Render(msgs, nil, opt)
	if err != nil {
		return encoded{}, err
	}
	ids, pids := tok.EncodeSegments(full), tok.EncodeSegments(prompt)
	if len(pids) >= len(ids) || !slices.Equal(ids[:len(pids)], pids) {
		return encoded{}, errors.New("the prompt is not a prefix of the rendered conversation")
	}
	last := msgs[len(msgs)-1]
	a := tok.ReadReply(ids[len(pids):], tokenizer.ReplyOptions{Thinking: !opt.NoThink})
	if err := a.Err(); err != nil {
		return encoded{}, err
	}
	if opt.NoThink {
		a.Reasoning = last.ReasoningContent // not rendered with thinking off
	}
	if a.Reasoning != last.ReasoningContent || a.Content != last.Content {
		return encoded{}, fmt.Errorf("the reply parses as %q / %q", a.Reasoning, a.Content)
	}
	if end, _ := tok.SpecialID(tokenizer.EndOfMsg); ids[len(ids)-1] != end {
		return encoded{}, errors.New("the reply does not end with <|end_of_msg|>")
	}
	return encoded{IDs: ids, Prompt: len(pids)}, nil
}
