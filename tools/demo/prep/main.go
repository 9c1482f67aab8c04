// Command prep is the Go half of the demo model's training (tools/demo/train.py
// runs it): it trains the demo tokenizer on the text of the rendered training
// conversations and encodes every conversation exactly as a chat session
// would, with the official renderer (xtml.Render) and the trained
// vocabulary, so the model learns the ids the app feeds it.
//
//	prep tokenizer -conv conv.jsonl -merges 1792 -numbase 2048 -out DIR
//	prep encode -tok DIR -conv conv.jsonl -out enc.jsonl
//	prep generate -model DIR -turns turns.jsonl -out gen.jsonl [-max N]
//	prep accept -model DIR -draft DIR -turns turns.jsonl -spec N [-max N]
//
// conv.jsonl has one conversation per line: {"messages": [...]} whose last
// message is the assistant reply to learn (and "no_think": true to render it
// with thinking off). enc.jsonl has one line per
// conversation: {"ids": [...], "prompt": n}; ids[:n] is what the chat sends
// (the transcript and the open assistant turn), ids[n:] the reply, ending in
// <|end_of_msg|>.
//
// generate is for the draft model's training (train_draft.py): the model's
// own replies, as a chat session generates them. turns.jsonl has one line
// per conversation, {"turns": ["user message", ...], "seed": S}: every turn
// is sent in order (earlier replies are the model's own) and the last one's
// prompt and reply are written like encode's lines. Seed 0 decodes greedily,
// any other seed samples as k3 bench spec's "seed 7" rows do (temperature
// 0.8, top-k 40, top-p 0.95) with that seed.
//
// accept measures a draft model's acceptance per draft position: each
// conversation of a turns file is generated as generate does, its last
// reply with the draft model at the forced draft length -spec (the stream
// of k3 bench spec's seeded rows: the number of turns). It prints one JSON
// line per conversation with the reply's tokens and each decode pass's
// drafted and accepted counts, then the share of passes whose draft
// position k came true, k = 1..spec.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"k3/doctor/bench"
	"k3/engine"
	"k3/engine/chat"
	"k3/tokenizer"
	"k3/tokenizer/xtml"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: prep tokenizer|encode|generate|accept [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "tokenizer":
		err = trainTokenizer(os.Args[2:])
	case "encode":
		err = encode(os.Args[2:])
	case "generate":
		err = generate(os.Args[2:])
	case "accept":
		err = accept(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "prep:", err)
		os.Exit(1)
	}
}

type conversation struct {
	Messages []xtml.Message `json:"messages"`
	NoThink  bool           `json:"no_think"` // render with thinking off
	// Image, when set, is [w, h]: the last user message holds a picture of
	// that size before its text (as an attached picture is sent), rendered
	// with its one media pad (the trainer repeats the pad per image token).
	Image []int `json:"image,omitempty"`
}

// withImage puts the picture part before the last user message's text.
func (c *conversation) withImage() error {
	if c.Image == nil {
		return nil
	}
	if len(c.Image) != 2 || c.Image[0] <= 0 || c.Image[1] <= 0 {
		return fmt.Errorf("image %v is not [w, h]", c.Image)
	}
	for i := len(c.Messages) - 1; i >= 0; i-- {
		if m := &c.Messages[i]; m.Role == "user" {
			m.Parts = []xtml.Part{{Image: &xtml.ImageSize{W: c.Image[0], H: c.Image[1]}}}
			if m.Content != "" {
				m.Parts = append(m.Parts, xtml.Part{Text: m.Content})
			}
			return nil
		}
	}
	return errors.New("image without a user message")
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
		if err := c.withImage(); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, len(out)+1, err)
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
		segs, err := xtml.Render(c.Messages, nil, xtml.RenderOptions{NoGenerationPrompt: true})
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
		e, err := encodeOne(tok, c.Messages, xtml.RenderOptions{NoThink: c.NoThink})
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
func encodeOne(tok *tokenizer.Tokenizer, msgs []xtml.Message, opt xtml.RenderOptions) (encoded, error) {
	prompt, err := xtml.Render(msgs[:len(msgs)-1], nil, opt)
	if err != nil {
		return encoded{}, err
	}
	opt.NoGenerationPrompt = true
	full, err := xtml.Render(msgs, nil, opt)
	if err != nil {
		return encoded{}, err
	}
	ids, pids := xtml.Encode(tok, full), xtml.Encode(tok, prompt)
	if len(pids) >= len(ids) || !slices.Equal(ids[:len(pids)], pids) {
		return encoded{}, errors.New("the prompt is not a prefix of the rendered conversation")
	}
	last := msgs[len(msgs)-1]
	a := xtml.ReadReply(tok, ids[len(pids):], xtml.ReplyOptions{Thinking: !opt.NoThink})
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

// generate writes the model's own replies to the conversations of a turns
// file (see the package comment).
func generate(args []string) error {
	fs := flag.NewFlagSet("generate", flag.ExitOnError)
	dir := fs.String("model", "", "model directory (with its tokenizer)")
	in := fs.String("turns", "", "conversations to generate (JSONL)")
	out := fs.String("out", "", "prompts and replies (JSONL)")
	maxTokens := fs.Int("max", 512, "reply cap in tokens, thinking included")
	threads := fs.Int("threads", 1, "threads")
	_ = fs.Parse(args)
	if *dir == "" || *in == "" || *out == "" {
		return errors.New("generate: -model, -turns and -out are required")
	}
	tok, err := tokenizer.Load(*dir)
	if err != nil {
		return err
	}
	m, err := engine.Open(*dir, engine.Options{Budget: engine.Budget{CacheBytes: 1 << 40}})
	if err != nil {
		return err
	}
	defer m.Close()
	e := m.NewEngine(*threads)
	defer e.Close()
	convs, err := readTurns(*in)
	if err != nil {
		return err
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for i, c := range convs {
		opt := chatOptions(c, *maxTokens)
		s := chat.NewSession(e, tok)
		last := c.Turns[len(c.Turns)-1]
		for _, u := range c.Turns[:len(c.Turns)-1] {
			if _, err := s.Turn(context.Background(), u, opt, nil); err != nil {
				f.Close()
				return fmt.Errorf("conversation %d: %v", i+1, err)
			}
		}
		ids, err := s.Prompt(last, opt)
		if err != nil {
			f.Close()
			return fmt.Errorf("conversation %d: %v", i+1, err)
		}
		rep, err := s.Turn(context.Background(), last, opt, nil)
		if err != nil {
			f.Close()
			return fmt.Errorf("conversation %d: %v", i+1, err)
		}
		line, _ := json.Marshal(encoded{IDs: slices.Concat(ids, rep.IDs), Prompt: len(ids)})
		w.Write(line)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// turnsLine is a line of a turns file.
type turnsLine struct {
	Turns []string `json:"turns"`
	Seed  uint64   `json:"seed"`
}

// readTurns reads a turns file (see the package comment).
func readTurns(path string) ([]turnsLine, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []turnsLine
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var c turnsLine
		if err := json.Unmarshal([]byte(line), &c); err != nil || len(c.Turns) == 0 {
			return nil, fmt.Errorf("%s:%d: want {\"turns\": [...], \"seed\": S}", path, i+1)
		}
		out = append(out, c)
	}
	return out, nil
}

// chatOptions are a turns line's options: k3 bench spec's chat options,
// greedy for seed 0, else sampled as its seeded rows with that seed.
func chatOptions(c turnsLine, maxTokens int) chat.Options {
	var sm engine.Sampling
	if c.Seed != 0 {
		sm = bench.Seeded(c.Seed)
	}
	return bench.ChatOptions(sm, maxTokens)
}

func accept(args []string) error {
	fs := flag.NewFlagSet("accept", flag.ExitOnError)
	dir := fs.String("model", "", "model directory (with its tokenizer)")
	draft := fs.String("draft", "", "draft model directory")
	in := fs.String("turns", "", "conversations (JSONL)")
	spec := fs.Int("spec", 8, "forced draft length")
	maxTokens := fs.Int("max", 512, "reply cap in tokens, thinking included")
	_ = fs.Parse(args)
	if *dir == "" || *draft == "" || *in == "" || *spec < 1 {
		return errors.New("accept: -model, -draft, -turns and -spec >= 1 are required")
	}
	tok, err := tokenizer.Load(*dir)
	if err != nil {
		return err
	}
	m, err := engine.Open(*dir, engine.Options{Budget: engine.Budget{CacheBytes: 1 << 40}, MaxDraft: *spec, Draft: *draft})
	if err != nil {
		return err
	}
	defer m.Close()
	e := m.NewEngine(1)
	defer e.Close()
	convs, err := readTurns(*in)
	if err != nil {
		return err
	}
	at := make([]int, *spec)
	passes := 0
	for i, c := range convs {
		opt := chatOptions(c, *maxTokens)
		s := chat.NewSession(e, tok)
		last := c.Turns[len(c.Turns)-1]
		for _, u := range c.Turns[:len(c.Turns)-1] {
			if _, err := s.Turn(context.Background(), u, opt, nil); err != nil {
				return fmt.Errorf("conversation %d: %v", i+1, err)
			}
		}
		ids, err := s.Prompt(last, opt)
		if err != nil {
			return fmt.Errorf("conversation %d: %v", i+1, err)
		}
		res, err := e.Generate(context.Background(), nil, ids, engine.GenOptions{MaxTokens: *maxTokens, StopIDs: tok.StopIDs(),
			Sampler: opt.Sampler(uint64(len(c.Turns))), Spec: engine.Spec(*spec)})
		if err != nil {
			return fmt.Errorf("conversation %d: %v", i+1, err)
		}
		var pp [][2]int
		for _, p := range res.Passes {
			pp = append(pp, [2]int{p.Drafted, p.Accepted})
			if p.Drafted == *spec {
				passes++
				for k := 0; k < p.Accepted; k++ {
					at[k]++
				}
			}
		}
		line, _ := json.Marshal(map[string]any{"tokens": len(res.Generated), "passes": pp})
		fmt.Println(string(line))
	}
	share := make([]float64, *spec)
	for k, n := range at {
		share[k] = float64(n) / float64(max(passes, 1))
	}
	line, _ := json.Marshal(map[string]any{"full_length_passes": passes, "accepted_at_position": share})
	fmt.Println(string(line))
	return nil
}
