package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"time"

	"k3/doctor"
	"k3/engine"
	"k3/engine/chat"
	"k3/engine/plan"
	"k3/storage/units"
	"k3/tokenizer"
	"k3/tokenizer/constrain"
	"k3/tokenizer/xtml"
)

func init() {
	register("chat", "talk with the model (multi-turn, streamed, thinking shown)", cmdChat)
}

// stdin is the REPL's input (tests replace it).
var stdin io.Reader = os.Stdin

const chatHelp = `commands:
  /help            this list
  /reset           forget the conversation
  /think on|off    thinking channel on or off
  /effort E        thinking effort: low, high or max
  /json on|off     answers held to any JSON object, or free
  /json FILE       answers held to the JSON schema in FILE
  /image FILE      a picture (PNG, JPEG, GIF, WebP) for your next message
  /exit            leave (Ctrl-D works too)
Ctrl-C stops the reply being written; a second Ctrl-C leaves.
`

func cmdChat(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("chat", stderr)
	mf := addModelFlags(fs, "chat")
	cf := addCacheFlags(fs)
	tokDir := fs.String("tok", "", "tokenizer directory (default: the model directory)")
	history := fs.String("history", "", "JSONL history file: loaded at start, written after every turn")
	system := fs.String("system", "", "system prompt")
	temp := fs.Float64("temperature", 0, "sampling temperature (0: greedy)")
	topP := fs.Float64("top-p", 0, "nucleus sampling threshold (0: off)")
	topK := fs.Int("top-k", 0, "sample among the K most likely tokens (0: all)")
	seed := fs.Uint64("seed", 0, "sampling seed (each turn, and each position in it, draws from its own PCG32 stream)")
	greedy := fs.Bool("greedy", false, "always pick the most likely token")
	noThink := fs.Bool("no-think", false, "thinking off: answer directly")
	effort := fs.String("thinking-effort", "max", "low, high or max")
	gen := fs.Int("gen", 4096, "turn cap in tokens, thinking included")
	jsonObj := fs.Bool("json", false, "hold every answer to a JSON object (decoded token by token, as k3 serve's response_format)")
	jsonSchema := fs.String("json-schema", "", "hold every answer to the JSON schema in this file (the subset of OpenAI's strict mode)")
	var images storeDirs
	fs.Var(&images, "image", "a picture for the first message (repeatable; /image FILE attaches one later)")
	setUsage(fs, stderr, "usage: k3 chat MODEL_DIR [flags]")
	pos, code := parseN(fs, args, 1, stderr, "k3 chat: give exactly one MODEL_DIR (run 'k3 chat -h' for the flags)")
	if code >= 0 {
		return code
	}
	if code := mf.resolve(fs, stdout, stderr); code >= 0 {
		return code
	}
	format, err := chatChecks(*effort, *gen, *temp, *topP, *topK, *jsonObj, *jsonSchema)
	if err != nil {
		fmt.Fprintf(stderr, "k3 chat: %v\n", err)
		return ExitUsage
	}
	if line := samplingSwitch(fs, temp, topP); line != "" {
		fmt.Fprintln(stdout, line)
	}
	dir := pos[0]
	tok, code := chatTokenizer("chat", dir, *tokDir, stderr)
	if code >= 0 {
		return code
	}
	hist, release, code := chatHistory(*history, *system, stdout, stderr)
	defer release()
	if code >= 0 {
		return code
	}
	// the plan reserves the loaded conversation and a turn (a 4K-position
	// context for a new chat at the default turn cap); a turn that may take
	// it further grows the plan first (growPlan)
	held := historyPositions(tok, "", hist, *noThink, *effort)
	planned := held + *gen
	e, o, closeModel, code := mf.openChat(dir, planned, tok, stdout, stderr)
	if code >= 0 {
		return code
	}
	defer closeModel()
	s := chat.NewSession(e, tok)
	s.FitBudget(o)
	pc, err := cf.open("chat", e.Model(), o, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "k3 chat: --prompt-cache: %v\n", err)
		return ExitUsage
	}
	if pc != nil {
		s.Cache = pc
	}
	s.SetHistory(hist)
	s.HistoryPath = *history
	opt := chat.Options{Thinking: !*noThink, Effort: *effort, MaxTokens: *gen, Spec: mf.spec,
		Sampling: engine.Sampling{Greedy: *greedy, Temperature: *temp, TopP: *topP, TopK: *topK, Seed: *seed}, ResponseFormat: format}
	if len(hist) > 0 {
		fmt.Fprintf(stdout, "history: %d messages from %s\n", len(hist), *history)
	}
	if code := attachImages(s, images, stdout, stderr); code >= 0 {
		return code
	}
	fmt.Fprintln(stdout, "type a message; /help for commands")
	r := &repl{s: s, opt: opt, planned: planned, held: held, o: o, tok: tok, historyPath: *history, stdout: stdout, stderr: stderr}
	return r.run()
}

// chatChecks checks k3 chat's thinking effort and sampling numbers, and
// gives the response format --json or --json-schema asks for.
func chatChecks(effort string, gen int, temp, topP float64, topK int, jsonObj bool, schemaFile string) (json.RawMessage, error) {
	if !slices.Contains(xtml.ThinkingEfforts, effort) {
		return nil, fmt.Errorf("--thinking-effort %q is not one of %v", effort, xtml.ThinkingEfforts)
	}
	switch {
	case gen < 1:
		return nil, fmt.Errorf("--gen %d: the turn cap must be 1 or more tokens", gen)
	case temp < 0:
		return nil, fmt.Errorf("--temperature %g: give 0 (greedy) or more", temp)
	case topP < 0 || topP > 1:
		return nil, fmt.Errorf("--top-p %g: give 0..1 (0: off)", topP)
	case topK < 0:
		return nil, fmt.Errorf("--top-k %d: give 0 (all) or more", topK)
	}
	return chatFormat(jsonObj, schemaFile)
}

// chatFormat is the response format --json or --json-schema FILE asks for
// (nil: free text).
func chatFormat(jsonObj bool, schemaFile string) (json.RawMessage, error) {
	switch {
	case jsonObj && schemaFile != "":
		return nil, errors.New("give --json or --json-schema, not both")
	case jsonObj:
		return constrain.ObjectFormat, nil
	case schemaFile != "":
		f, err := schemaFormat(schemaFile)
		if err != nil {
			return nil, fmt.Errorf("--json-schema %v", err)
		}
		return f, nil
	}
	return nil, nil
}

// chatHistory loads the --history file, holding its lock until release
// (nothing to load or release without one), and puts --system in it:
// rendered once, saved with it. A code >= 0 is the exit code after the
// message.
func chatHistory(path, system string, stdout, stderr io.Writer) (hist []chat.Message, release func(), code int) {
	release = func() {}
	if path != "" {
		lk, err := chat.LockHistory(path)
		if err != nil {
			fmt.Fprintf(stderr, "k3 chat: %v\n", err)
			return nil, release, ExitUsage
		}
		release = lk.Release
		cleanStaleFiles(stdout, "chat", path)
		if hist, err = chat.LoadHistory(path); err != nil {
			fmt.Fprintf(stderr, "k3 chat: %v\n", err)
			return nil, release, ExitUsage
		}
	}
	loaded := len(hist)
	hist, replaced := chat.ApplySystem(hist, system)
	if replaced {
		fmt.Fprintln(stdout, "note: --system replaces the system prompt the history held")
	}
	if path != "" && (replaced || len(hist) != loaded) {
		if err := chat.SaveHistory(path, hist); err != nil {
			fmt.Fprintf(stderr, "k3 chat: saving the system prompt: %v\n", err)
			return nil, release, ExitRuntime
		}
	}
	return hist, release, -1
}

// repl is k3 chat's read-eval-print loop over a session: a line is a
// message, or a command from replCommands.
type repl struct {
	s           *chat.Session
	opt         chat.Options
	planned     int // positions the memory plan reserved (growPlan grows it)
	held        int // positions the conversation holds
	o           engine.Options
	tok         *tokenizer.Tokenizer
	historyPath string // --history ("" none)
	stdout      io.Writer
	stderr      io.Writer

	mu         sync.Mutex // guards cancelTurn and inFlight for the Ctrl-C watcher
	cancelTurn context.CancelFunc
	inFlight   *partialTurn
}

// replCommands are the REPL's /commands: each gets the line and its
// fields, and says whether to leave.
var replCommands = map[string]func(r *repl, f []string, line string) (leave bool){
	"/exit": func(*repl, []string, string) bool { return true },
	"/quit": func(*repl, []string, string) bool { return true },
	"/help": func(r *repl, _ []string, _ string) bool {
		fmt.Fprint(r.stdout, chatHelp)
		return false
	},
	"/reset":  (*repl).reset,
	"/think":  (*repl).think,
	"/effort": (*repl).effort,
	"/json":   (*repl).json,
	"/image":  (*repl).image,
}

// image attaches a picture file to the next message.
func (r *repl) image(f []string, line string) bool {
	if len(f) < 2 {
		r.unknown(line)
		return false
	}
	if err := attachImage(r.s, strings.TrimSpace(strings.TrimPrefix(line, "/image")), r.stdout); err != nil {
		fmt.Fprintf(r.stdout, "/image: %v\n", err)
	}
	return false
}

// run reads lines until /exit or the end of the input. Ctrl-C cancels the
// reply in flight; a second one (or one at the prompt) leaves with exit 5,
// keeping what the reply had so far.
func (r *repl) run() int {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt)
	defer signal.Stop(sig)
	go watchChatInterrupts(sig, r.stderr, &r.mu, &r.cancelTurn, &r.inFlight, r.historyPath)
	in := bufio.NewReaderSize(stdin, 1<<16)
	for {
		fmt.Fprint(r.stdout, "\n> ")
		raw, tooLong, err := readLine(in, maxChatLine)
		if tooLong {
			fmt.Fprintf(r.stderr, "k3 chat: that message is longer than %d MiB and was not sent; send a shorter one\n", maxChatLine>>20)
			continue
		}
		if err != nil && raw == "" {
			fmt.Fprintln(r.stdout)
			if err != io.EOF {
				fmt.Fprintf(r.stderr, "k3 chat: reading the input: %v\n", err)
				return ExitRuntime
			}
			return ExitOK
		}
		line := strings.TrimSpace(raw)
		switch {
		case line == "":
		case strings.HasPrefix(line, "/"):
			if r.command(line) {
				return ExitOK
			}
		default:
			if code := r.turn(line); code >= 0 {
				return code
			}
		}
	}
}

// command runs a /command line; it says whether to leave.
func (r *repl) command(line string) bool {
	f := strings.Fields(line)
	if c, ok := replCommands[f[0]]; ok {
		return c(r, f, line)
	}
	r.unknown(line)
	return false
}

func (r *repl) unknown(line string) { fmt.Fprintf(r.stdout, "unknown command %q\n%s", line, chatHelp) }

// reset forgets the conversation (the system prompt stays).
func (r *repl) reset([]string, string) bool {
	r.s.ResetKeepSystem()
	if r.s.HistoryPath != "" {
		// saved now: leaving after /reset must not bring the turns back
		if err := chat.SaveHistory(r.s.HistoryPath, r.s.History()); err != nil {
			fmt.Fprintf(r.stderr, "k3 chat: saving the cleared history: %v\n", err)
		}
	}
	fmt.Fprintln(r.stdout, "conversation cleared")
	return false
}

// think turns the thinking channel on or off.
func (r *repl) think(f []string, line string) bool {
	if len(f) != 2 || (f[1] != "on" && f[1] != "off") {
		r.unknown(line)
		return false
	}
	r.opt.Thinking = f[1] != "off"
	fmt.Fprintf(r.stdout, "thinking %s\n", f[1])
	return false
}

// effort sets the thinking effort.
func (r *repl) effort(f []string, line string) bool {
	if len(f) != 2 || !slices.Contains(xtml.ThinkingEfforts, f[1]) {
		r.unknown(line)
		return false
	}
	r.opt.Effort = f[1]
	fmt.Fprintf(r.stdout, "thinking effort %s\n", f[1])
	return false
}

// json holds the answers to JSON (on), to a schema file, or frees them (off).
func (r *repl) json(f []string, line string) bool {
	arg := strings.TrimSpace(strings.TrimPrefix(line, "/json"))
	switch {
	case len(f) < 2:
		r.unknown(line)
	case arg == "off":
		r.opt.ResponseFormat = nil
		fmt.Fprintln(r.stdout, "answers: free text")
	case arg == "on":
		r.opt.ResponseFormat = constrain.ObjectFormat
		fmt.Fprintln(r.stdout, "answers: any JSON object")
	default:
		rf, err := schemaFormat(arg)
		if err != nil {
			fmt.Fprintf(r.stdout, "/json %v; answers stay as they were\n", err)
			break
		}
		r.opt.ResponseFormat = rf
		fmt.Fprintf(r.stdout, "answers: JSON of the schema in %s\n", arg)
	}
	return false
}

// turn sends a message and prints the reply as it comes, then its
// numbers. A code >= 0 ends the REPL with it.
func (r *repl) turn(line string) int {
	s, opt := r.s, r.opt
	if need := r.held + len(r.tok.Encode(line)) + turnMarkup + opt.MaxTokens; need > r.planned {
		grown, err := growPlan(s.Engine.Model(), r.o, r.planned, need, r.stderr)
		if err != nil {
			fmt.Fprintf(r.stderr, "k3 chat: %v; the message was not sent (/reset starts over)\n", err)
			return -1
		}
		r.planned = grown
	}
	ctx, cancel := context.WithCancel(context.Background())
	pt := &partialTurn{before: s.History(), user: line}
	r.mu.Lock()
	r.cancelTurn, r.inFlight = cancel, pt
	r.mu.Unlock()
	show := chatPrinter(r.stdout)
	rep, err := s.Turn(ctx, line, opt, func(ev engine.Event) { pt.add(ev); show(ev) })
	r.mu.Lock()
	r.cancelTurn, r.inFlight = nil, nil
	r.mu.Unlock()
	cancel()
	var conflict *chat.ConflictError
	if errors.As(err, &conflict) {
		fmt.Fprintf(r.stderr, "\nk3 chat: %v\n", err)
	} else if err != nil {
		return exitFor(r.stderr, "chat", err)
	}
	fmt.Fprintln(r.stdout)
	switch rep.Cut() {
	case chat.CutStopped:
		fmt.Fprintln(r.stdout, "[stopped; the partial reply is kept]")
	case chat.CutTurnCap:
		fmt.Fprintf(r.stdout, "[turn cap of %d tokens reached; the reply is kept]\n", opt.MaxTokens)
	}
	fmt.Fprintf(r.stdout, "[%d tokens, %d prompt positions reused, %d read; first token %.2f s, %.3f s/token]\n",
		len(rep.IDs), rep.Reused, rep.Prefilled, rep.FirstTokenSeconds, rep.SecondsPerToken)
	r.held = rep.Reused + rep.Prefilled + len(rep.IDs)
	return -1
}

// turnMarkup is more than the positions a turn's markup takes besides the
// message and the reply (message tags, think and response channels).
const turnMarkup = 64

// growPlan is the memory plan growing with a conversation (plan.Grow, by
// plan.ContextStep positions at a time): before a turn that may take it
// from the planned positions to need, it checks that the KV cache rows
// those positions add (with the state copies the session keeps) fit the
// memory available now, which no longer counts what the model already
// holds, and says so on w (stderr, beside the other notes). It returns the
// positions now planned.
func growPlan(m *engine.Model, o engine.Options, planned, need int, w io.Writer) (int, error) {
	var memp *plan.Memory
	if mem, err := doctor.ReadMemory(); err == nil {
		memp = &mem
	}
	g, err := plan.Grow(m.Cfg, m.Bound, o.StateCopies, planned, need, memp)
	if err != nil {
		return planned, fmt.Errorf("this turn may take the conversation past the plan: %v", err)
	}
	fmt.Fprintf(w, "note: memory plan: the conversation may reach %d positions: the KV cache grows by %s (%s a position)\n", g.Need, units.Bytes(g.More), units.Bytes(g.PerPos))
	return g.Need, nil
}

// chatPrinter streams a reply: the think channel under a "thinking" header,
// then the answer after a rule. While a message longer than one prefill
// chunk is read it shows the positions read so far, after every chunk, on
// one line it rewrites.
func chatPrinter(w io.Writer) func(engine.Event) {
	phase := engine.EventKind(-1)
	var clock doctor.PrefillClock
	clock.Begin(time.Now()) // the message's reading starts now
	reading := false
	return func(ev engine.Event) {
		switch ev.Kind {
		case engine.EventPrefill:
			if !reading && (ev.Done >= ev.Total || ev.Done == ev.Reused) {
				return // read in one pass, or the reply's opening (nothing read yet): nothing to show
			}
			reading = true
			st := clock.Observe(ev.Done, ev.Total, ev.Reused, ev.Chunk, time.Now())
			fmt.Fprintf(w, "\r[reading your message: %s]", passLine(st))
			if ev.Done >= ev.Total {
				fmt.Fprintln(w)
				reading = false
				clock.Reset() // a later reading's start is not known
			}
		case engine.EventPhase:
			if ev.Total > 0 { // the vision tower's layers (chat.PictureEvent)
				fmt.Fprintf(w, "\r[%s]", ev.Text)
				if ev.Done >= ev.Total {
					fmt.Fprintln(w)
				}
			}
		case engine.EventReasoning, engine.EventAnswer, engine.EventTool:
			if ev.Kind != phase {
				switch ev.Kind {
				case engine.EventReasoning:
					fmt.Fprint(w, "[thinking]\n")
				case engine.EventAnswer:
					if phase == engine.EventReasoning {
						fmt.Fprint(w, "\n[/thinking]\n")
					}
				case engine.EventTool:
					fmt.Fprint(w, "\n[tool call]\n")
				}
				phase = ev.Kind
			}
			fmt.Fprint(w, ev.Text)
		}
	}
}

// maxChatLine is the longest message the REPL reads.
const maxChatLine = 16 << 20

// readLine reads one line (without its newline) of at most max bytes; a
// longer one is read to its end and dropped (tooLong). At the end of the
// input it returns the last line without a newline, if any, and io.EOF.
func readLine(r *bufio.Reader, max int) (line string, tooLong bool, err error) {
	var b []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(b)+len(chunk) > max+1 { // +1: the newline
			tooLong = true
			b = b[:0]
		} else if !tooLong {
			b = append(b, chunk...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if tooLong {
			return "", true, err
		}
		return strings.TrimSuffix(string(b), "\n"), false, err
	}
}

// partialTurn is the turn in flight, as the REPL saw it stream: what a
// second Ctrl-C saves.
type partialTurn struct {
	before            []chat.Message
	user              string
	mu                sync.Mutex
	reasoning, answer strings.Builder
}

func (p *partialTurn) add(ev engine.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch ev.Kind {
	case engine.EventReasoning:
		p.reasoning.WriteString(ev.Text)
	case engine.EventAnswer:
		p.answer.WriteString(ev.Text)
	}
}

// history is the conversation with the partial reply, marked stopped.
func (p *partialTurn) history() []chat.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append(slices.Clip(p.before), chat.Message{Role: "user", Content: p.user},
		chat.Message{Role: "assistant", Content: p.answer.String(), ReasoningContent: p.reasoning.String(), Cut: chat.CutStopped})
}

// watchChatInterrupts handles Ctrl-C: the first stops the reply in flight;
// a second one, or one at the prompt, saves the reply so far (when there is
// one and a history file) and exits 5.
func watchChatInterrupts(sig <-chan os.Signal, stderr io.Writer, mu *sync.Mutex, cancelTurn *context.CancelFunc, inFlight **partialTurn, historyPath string) {
	for range sig {
		mu.Lock()
		c, p := *cancelTurn, *inFlight
		*cancelTurn = nil
		mu.Unlock()
		if c != nil {
			fmt.Fprintln(stderr, "\n[stopping the reply; Ctrl-C again to leave]")
			c()
			continue
		}
		if p != nil && historyPath != "" {
			if err := chat.SaveHistory(historyPath, p.history()); err != nil {
				fmt.Fprintf(stderr, "\nk3 chat: saving the stopped reply: %v\n", err)
			} else {
				fmt.Fprintf(stderr, "\n[the reply so far is kept in %s, marked stopped]\n", historyPath)
			}
		}
		fmt.Fprintln(stderr, "\nbye")
		exitNow(ExitInterrupted)
		return
	}
}

// historyPositions is the length in tokens of a loaded conversation as the
// next turn renders it (0 when it cannot be rendered; the turn reports why).
func historyPositions(tok *tokenizer.Tokenizer, system string, hist []chat.Message, noThink bool, effort string) int {
	var msgs []xtml.Message
	if system != "" {
		msgs = append(msgs, xtml.Message{Role: "system", Content: system})
	}
	for _, m := range hist {
		msgs = append(msgs, m.Rendered())
	}
	segs, err := xtml.Render(msgs, nil, xtml.RenderOptions{NoThink: noThink, ThinkingEffort: effort})
	if err != nil {
		return 0
	}
	return len(xtml.Encode(tok, segs))
}

// samplingSwitch turns sampling on, as the C engine did, when --seed,
// --top-p or --top-k is given without --temperature (and without
// --greedy): temperature 1, top-p 0.95 unless given. It returns the line
// that says how the replies are chosen ("" when nothing was switched).
func samplingSwitch(fs *flag.FlagSet, temp, topP *float64) string {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if given["temperature"] || given["greedy"] {
		return ""
	}
	var by []string
	for _, n := range []string{"seed", "top-p", "top-k"} {
		if given[n] {
			by = append(by, "--"+n)
		}
	}
	if len(by) == 0 {
		return ""
	}
	*temp = 1
	if !given["top-p"] {
		*topP = 0.95
	}
	return fmt.Sprintf("sampling: on (temperature 1, top-p %g), turned on by %s as in the C engine; --greedy keeps greedy replies", *topP, strings.Join(by, " and "))
}

// schemaFormat reads a JSON schema file into the strict json_schema
// response_format k3 serve takes; a schema outside the subset the
// constraint keeps is an error naming the file ("FILE: why").
func schemaFormat(path string) (json.RawMessage, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot be read: %v", path, errors.Unwrap(err))
	}
	if !json.Valid(data) {
		return nil, fmt.Errorf("%s: is not JSON", path)
	}
	if _, err := constrain.Compile(data); err != nil {
		return nil, fmt.Errorf("%s: the schema cannot be enforced: %v", path, err)
	}
	return constrain.SchemaFormat("reply", data), nil
}

// attachImages attaches the --image files to the first message: -1, or
// ExitUsage when one cannot be read.
func attachImages(s *chat.Session, files []string, stdout, stderr io.Writer) int {
	for _, f := range files {
		if err := attachImage(s, f, stdout); err != nil {
			fmt.Fprintf(stderr, "k3 chat: --image %s: %v\n", f, err)
			return ExitUsage
		}
	}
	return -1
}

// attachImage reads a picture file for the next message and says what it
// costs in prompt positions.
func attachImage(s *chat.Session, path string, stdout io.Writer) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := s.Attach(data); err != nil {
		return err
	}
	im, err := chat.NewImage(s.Engine.Model(), data)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "picture %s: %dx%d, %d prompt positions; it goes with your next message\n", path, im.Prep.W, im.Prep.H, im.Tokens())
	return nil
}
