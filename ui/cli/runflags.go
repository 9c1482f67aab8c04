package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"k3/engine"
	"k3/tokenizer"
)

// runFlags are k3 run's flags as declared, before they are checked.
type runFlags struct {
	fs                                        *flag.FlagSet
	ids, prompt, promptFile, tokDir           *string
	gen                                       *int
	recompute, tf                             *bool
	dump, out, traceDir, saveState, loadState *string
	mf                                        *modelFlags
	cf                                        *cacheFlags
	stops                                     intList
	images                                    storeDirs
}

// declareRunFlags declares k3 run's flags on fs.
func declareRunFlags(fs *flag.FlagSet) *runFlags {
	f := &runFlags{fs: fs}
	f.ids = fs.String("ids", "", "token ids, e.g. 1,2,3")
	f.prompt = fs.String("prompt", "", "prompt text (needs the tokenizer)")
	f.promptFile = fs.String("prompt-file", "", "read the prompt text from a file")
	f.tokDir = fs.String("tok", "", "tokenizer directory (default: the model directory)")
	f.gen = fs.Int("gen", 8, "tokens to generate")
	f.recompute = fs.Bool("recompute", false, "run the whole prefix every step instead of carrying KV/KDA state")
	f.tf = fs.Bool("teacher-forcing", false, "one forward over the ids; report the argmax after every position")
	f.dump = fs.String("dump-logits", "", "write the first generated position's logits (little-endian float32)")
	f.out = fs.String("out", defaultRunOut, "write the JSON report here, as the C engine does (--out= writes none)")
	f.mf = addModelFlags(fs, "run")
	f.cf = addCacheFlags(fs)
	f.traceDir = fs.String("dump-cache-trace", "", "write DIR/expert_trace.bin and DIR/expert_hist.json (replay with k3 sim-cache)")
	f.saveState = fs.String("save-state", "", "write the decode state after the run (resume later with --load-state)")
	f.loadState = fs.String("load-state", "", "resume from a state file; the prompt continues it")
	fs.Var(&f.stops, "stop-id", "stop after emitting this id (repeatable)")
	fs.Var(&f.images, "image", "a picture (PNG, JPEG, GIF, WebP) before the prompt text (repeatable; needs a model with a vision tower)")
	return f
}

// parseRun reads and checks the flags and the prompt; it returns an exit
// code, or -1 with the configuration.
func parseRun(args []string, stdout, stderr io.Writer) (*runConfig, int) {
	fs := newFlags("run", stderr)
	f := declareRunFlags(fs)
	setUsage(fs, stderr, "usage: k3 run MODEL_DIR (--ids 1,2,3 | --prompt TEXT | --prompt-file PATH) [--image FILE] [flags]")
	pos, code := parseN(fs, args, 1, stderr, "k3 run: give exactly one MODEL_DIR (run 'k3 run -h' for the flags)")
	if code >= 0 {
		return nil, code
	}
	c := &runConfig{dir: pos[0], gen: *f.gen, stops: f.stops, recompute: *f.recompute, teacherForcing: *f.tf, dumpLogits: *f.dump,
		out: *f.out, traceDir: *f.traceDir, saveState: *f.saveState, loadSt: *f.loadState, mf: f.mf, cf: f.cf}
	for _, step := range []func(*runConfig, io.Writer, io.Writer) int{f.check, f.outputs, f.readPrompt, f.options} {
		if code := step(c, stdout, stderr); code >= 0 {
			return nil, code
		}
	}
	return c, -1
}

// check refuses flags that do not go together, reads the pictures and
// resolves the model flags.
func (f *runFlags) check(c *runConfig, stdout, stderr io.Writer) int {
	if msg := f.promptSource(); msg != "" {
		fmt.Fprintln(stderr, "k3 run: "+msg)
		return ExitUsage
	}
	if len(f.images) > 0 && (*f.ids != "" || *f.tf) {
		fmt.Fprintln(stderr, "k3 run: --image goes with --prompt or --prompt-file (not --ids or --teacher-forcing)")
		return ExitUsage
	}
	imgs, err := readRunImages(f.images)
	if err != nil {
		fmt.Fprintln(stderr, "k3 run:", err)
		return ExitUsage
	}
	c.images = imgs
	if *f.gen < 0 || *f.gen > 1<<20 {
		fmt.Fprintf(stderr, "k3 run: --gen %d is outside 0..%d\n", *f.gen, 1<<20)
		return ExitUsage
	}
	if code := f.mf.resolve(f.fs, stdout, stderr); code >= 0 {
		return code
	}
	if *f.recompute && (*f.saveState != "" || *f.loadState != "") {
		fmt.Fprintln(stderr, "k3 run: --save-state and --load-state need the carried state; drop --recompute")
		return ExitUsage
	}
	return -1
}

// promptSource says what is wrong with the prompt flags: not exactly one
// of them, or the one given empty ("" when they are right).
func (f *runFlags) promptSource() string {
	nsrc := 0
	for _, src := range []struct {
		name string
		val  *string
	}{{"ids", f.ids}, {"prompt", f.prompt}, {"prompt-file", f.promptFile}} {
		switch {
		case *src.val != "":
			nsrc++
		case flagGiven(f.fs, src.name):
			return "--" + src.name + " is empty: there is no prompt to read"
		}
	}
	if nsrc != 1 {
		return "give exactly one of --ids, --prompt or --prompt-file"
	}
	return ""
}

// outputs checks, before the run, that every file it will write can be
// written (the default report only notes it cannot), and removes the
// stale ones of an earlier run.
func (f *runFlags) outputs(c *runConfig, stdout, stderr io.Writer) int {
	if *f.out == defaultRunOut && !flagGiven(f.fs, "out") {
		// the default report is no reason to refuse a run
		if err := checkWritable(*f.out); err != nil {
			fmt.Fprintf(stderr, "note: no report file: %s cannot be written here (%v); --out PATH writes it elsewhere\n", *f.out, err)
			*f.out, c.out = "", ""
		}
	}
	for _, p := range []string{*f.out, *f.dump, *f.saveState} {
		if p != "" {
			if err := checkWritable(p); err != nil {
				fmt.Fprintf(stderr, "k3 run: cannot write %s: %v\n", p, err)
				return ExitOutput
			}
		}
	}
	if *f.traceDir != "" {
		// checked now: failing after the whole run would lose its work
		if err := checkDirWritable(*f.traceDir, "expert_trace.bin", "expert_hist.json"); err != nil {
			fmt.Fprintf(stderr, "k3 run: --dump-cache-trace: cannot write %s: %v\n", *f.traceDir, err)
			return ExitOutput
		}
	}
	cleanStaleFiles(stdout, "run", *f.out, *f.dump, *f.saveState)
	return -1
}

// readPrompt reads the prompt: --ids as they are (with the tokenizer when
// one is at hand, for the text of the reply), or the text of --prompt or
// --prompt-file tokenized after the pictures' ids.
func (f *runFlags) readPrompt(c *runConfig, stdout, stderr io.Writer) int {
	if *f.ids != "" {
		return f.readIDs(c, stderr)
	}
	text := *f.prompt
	if *f.promptFile != "" {
		b, err := os.ReadFile(*f.promptFile)
		if err != nil {
			fmt.Fprintln(stderr, "k3 run:", err)
			return ExitUsage
		}
		text = string(b)
	}
	tok, code := f.tokenizer(c.dir, stderr)
	if code >= 0 {
		return code
	}
	c.tok, c.ids = tok, append(imagePromptIDs(tok, c.images), tok.Encode(text)...)
	fmt.Fprintf(stdout, "  tokenized: %d bytes -> %d ids\n", len(text), len(c.ids))
	if len(c.ids) == 0 {
		fmt.Fprintln(stderr, "k3 run: the prompt is empty")
		return ExitUsage
	}
	return -1
}

// readIDs reads --ids, and the tokenizer when one is at hand (--tok, or
// one in the model directory) for the text of the generated ids.
func (f *runFlags) readIDs(c *runConfig, stderr io.Writer) int {
	ids, err := parseIDs(*f.ids)
	if err != nil {
		fmt.Fprintln(stderr, "k3 run:", err)
		return ExitUsage
	}
	c.ids = ids
	if c.teacherForcing && len(ids) < 2 {
		fmt.Fprintln(stderr, "k3 run: teacher forcing (--tf-check) needs at least two ids: it checks the argmax after each position against the next id")
		return ExitUsage
	}
	if _, err := os.Stat(filepath.Join(c.dir, tokenizer.ModelFile)); *f.tokDir == "" && err != nil {
		return -1
	}
	dir := c.dir
	if *f.tokDir != "" {
		dir = *f.tokDir
	}
	// the ids need no tokenizer (the C engine loads none for --ids): one
	// that does not load costs the reply's text, not the run
	tok, err := tokenizer.Load(dir)
	if err != nil {
		fmt.Fprintf(stderr, "warning: %v: the ids run without a tokenizer, and the generated text is not decoded\n", err)
		return -1
	}
	c.tok = tok
	return -1
}

// tokenizer loads the tokenizer of --tok, or of the model directory.
func (f *runFlags) tokenizer(dir string, stderr io.Writer) (*tokenizer.Tokenizer, int) {
	if *f.tokDir != "" {
		dir = *f.tokDir
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		fmt.Fprintf(stderr, "k3 run: %v\n", err)
		return nil, ExitUsage
	}
	return tok, -1
}

// options sets the engine options for the positions the run will take
// (a state file's included: refused before the model is opened, so no
// weight is read for a bad one).
func (f *runFlags) options(c *runConfig, stdout, stderr io.Writer) int {
	c.threads = *f.mf.threads
	resumed := 0
	if c.loadSt != "" {
		n, err := engine.PeekStatePositions(c.loadSt)
		if err != nil {
			fmt.Fprintf(stderr, "k3 run: --load-state: %v\n", err)
			return ExitRuntime
		}
		resumed = n
	}
	c.opts = f.mf.options(len(c.ids)+imagePositions(c.images)+c.gen+resumed, c.teacherForcing)
	c.opts.Picture = largestPicture(c.images)
	return -1
}
