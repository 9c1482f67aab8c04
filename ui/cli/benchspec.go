package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"k3/doctor/bench"
	"k3/engine"
)

func init() {
	benchCommands.add("spec", "speculative decoding: draft acceptance of a trained model on fixed prompts, projected bytes and s/token per preset with and without it", benchSpec)
}

// specLine is one line of `k3 bench spec --json`.
type specLine = bench.SpecLine

func benchSpec(args []string, stdout, stderr io.Writer) int {
	b := newBenchFlags("spec", stderr, jsonLinesUsage, threadsUsage, "where the real-width checkpoint of k3 bench layer is generated (reused; ~10 GB + trunk)")
	fs, jsonOut := b.FlagSet, b.json
	modelDir := fs.String("model", "", "the trained model whose replies are measured (default: the demo model, written to a temporary folder)")
	maxDraft := fs.Int("max-draft", engine.DefaultMaxDraft, "longest draft")
	maxTokens := fs.Int("max-tokens", 512, "reply cap in tokens")
	reps := fs.Int("reps", 2, "timed passes per length (the fastest counts)")
	acceptOnly := fs.Bool("acceptance-only", false, "only the replies, the acceptance and the read-bound projection of bytes (no checkpoint, no timing)")
	reference := fs.Bool("reference", false, "also run the drafter over hand-written replies (code, a summary; no model)")
	draftDir := fs.String("draft", "", "also draft with this DSpark draft model of the model (docs/DSPARK.md): rows \"draft auto\" and \"draft N\"")
	setUsage(fs, stderr, "usage: k3 bench spec [--json] [--model DIR] [--draft DIR] [--threads N] [--max-draft N] [--dir PATH] [--acceptance-only] [--reference]",
		"Asks a trained model (the demo model unless --model) a fixed set of prompts (chat, code,",
		"summarise-this-text, a second chat turn) greedy and with a seed, generating with the engine's",
		"drafter and verifier without speculation and at every draft length up to --max-draft (the ids",
		"are checked to be the same), and reports drafted/accepted tokens, accepted per pass and passes",
		"per token. A reply not of the kind asked (the demo model knows sayings, not code) is marked;",
		"the task model in a clone's testdata/models/task also writes code and summaries.",
		"Then it projects the full model's bytes read and s/token per generated token at the laptop,",
		"desktop and server presets without speculation, with the automatic draft length (the engine's",
		"controller deciding at the preset's pass costs while the model generates) and the best fixed",
		"one: read-bound (bytes only: load-independent), and with the compute of verification passes of",
		"1..max-draft+1 positions timed at the real K3 width (the k3 bench layer checkpoint), the disk,",
		"and a streamed decode's overlap of reads and compute.")
	if _, code := parseArgs(fs, args); code >= 0 {
		return code
	}
	if *maxDraft < 1 || *maxDraft > 32 || *reps < 1 || *maxTokens < 2 {
		fmt.Fprintln(stderr, "k3 bench spec: --max-draft must be 1..32, --reps at least 1 and --max-tokens at least 2")
		return ExitUsage
	}
	enc := json.NewEncoder(stdout)
	var last string // the section of the line printed last
	emit := func(l specLine) {
		if *jsonOut {
			enc.Encode(l)
			return
		}
		if sec := specSection(l); sec != last {
			specTitles(stdout, last, sec, l)
			last = sec
		}
		fmt.Fprintln(stdout, specText(l))
	}
	err := bench.Spec(context.Background(), bench.SpecConfig{Model: *modelDir, Draft: *draftDir, Dir: *b.dir, Threads: *b.threads, MaxDraft: *maxDraft,
		MaxTokens: *maxTokens, Reps: *reps, AcceptanceOnly: *acceptOnly, Reference: *reference, Emit: emit, Logf: b.logf(stderr)})
	if !*jsonOut {
		specTitles(stdout, last, "", specLine{})
	}
	if err != nil {
		return b.failed(stderr, err)
	}
	return ExitOK
}

// specSection is the table a line belongs to: its kind, a projection's
// by its compute (the ceiling rows stand among the read-bound ones).
func specSection(l specLine) string {
	if l.Kind == "projection" || l.Kind == "ceiling" {
		return l.Compute
	}
	return l.Kind
}

// specTitles prints what ends section from and starts section to (l is
// the first line of to; "": the end).
func specTitles(w io.Writer, from, to string, l specLine) {
	projection := fmt.Sprintf("%-8s %-12s %-7s %-10s %9s %9s %7s %9s %11s  %s", "preset", "prompt", "", "spec", "s/token", "GB/token", "vs off", "acc/pass", "pass/token", "passes by draft length 0..")
	if from == "reference" {
		fmt.Fprintln(w, "(ceiling: each pass drafts what the drafter proposes, cut where it first fails, as a controller that knew the reply would)")
	}
	switch to {
	case "reply":
		fmt.Fprintf(w, "replies of %s (each prompt as a chat session sends it; plain decoding)\n", filepath.Base(l.Model))
	case "acceptance":
		fmt.Fprintln(w, "\ndraft acceptance, generating with the drafter and verifier at forced draft lengths (the same ids as plain decoding)")
		fmt.Fprintf(w, "%-12s %-7s %6s %7s %9s %9s %11s %11s\n", "prompt", "", "reply", "draft", "drafted", "accepted", "acc./pass", "pass/token")
	case "read-bound":
		fmt.Fprintln(w, "\nprojected full model per generated token, read-bound (compute hidden under the reads): GB read per token")
		fmt.Fprintln(w, projection)
	case "reference":
		fmt.Fprintln(w, "\nhand-written replies, no model (the drafter on code and a summary, which the demo model cannot write): laptop, read-bound")
		fmt.Fprintf(w, "%-12s %6s %-7s %9s %9s %10s %7s  %s\n", "prompt", "reply", "spec", "drafted", "accepted", "GB/token", "vs off", "passes by draft length 0..")
	case "timing":
		fmt.Fprintln(w, "\ncompute of one pass of the full model (projected from the measured layers; no expert shared between positions)")
	case "measured":
		fmt.Fprintln(w, "\nprojected full model per generated token, compute as measured here: s = max(read, compute) / overlap efficiency")
		fmt.Fprintln(w, projection)
	}
}

// specText is a line of the tables.
func specText(l specLine) string {
	lengths := strings.Trim(fmt.Sprint(l.Lengths), "[]")
	weak := ""
	if l.TooWeak {
		weak = "  (too weak)"
	}
	switch l.Kind {
	case "reply":
		return fmt.Sprintf("%-12s %-7s prompt %4d, reply %4d tokens: %q\n%21s %s", l.Prompt, l.Sampling, l.Positions, l.Tokens, clip(l.Text, 90), "", l.Note)
	case "acceptance":
		return fmt.Sprintf("%-12s %-7s %6d %7s %9d %9d %11.2f %11.2f%s", l.Prompt, l.Sampling, l.Tokens, l.Spec, l.Drafted, l.Accepted, l.AcceptedPerPass, l.PassesPerToken, weak)
	case "projection", "ceiling":
		s := fmt.Sprintf("%9s", "-")
		if l.Timed {
			s = fmt.Sprintf("%9.2f", l.SecondsPerToken)
		}
		return fmt.Sprintf("%-8s %-12s %-7s %-10s %s %9.2f %6.2fx %9.2f %11.2f  %s%s", l.Preset, l.Prompt, l.Sampling, l.Spec, s, l.BytesPerToken/1e9, l.BytesRatio,
			l.AcceptedPerPass, l.PassesPerToken, lengths, weak)
	case "reference":
		return fmt.Sprintf("%-12s %6d %-7s %9d %9d %10.2f %6.2fx  %s", l.Prompt, l.Tokens, l.Spec, l.Drafted, l.Accepted, l.BytesPerToken/1e9, l.BytesRatio, lengths)
	case "disk":
		return fmt.Sprintf("\ndisk: %.2f GB/s (%s)", l.GBps, l.Note)
	case "overlap":
		ov := l.Overlap
		return fmt.Sprintf("streamed decode of the 3-layer checkpoint: %.2f s/token, max(read %.2f, compute %.2f) = %.2f s/token: overlap efficiency %.2f",
			ov.SecondsPerToken(), ov.ReadSeconds/float64(ov.Tokens), ov.ComputeSeconds/float64(ov.Tokens), ov.BoundSecondsPerToken(), ov.Efficiency)
	default: // timing
		return fmt.Sprintf("  %d position(s): %.2f s (%.2f s per position)", l.Positions, l.Seconds, l.Seconds/float64(l.Positions))
	}
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
