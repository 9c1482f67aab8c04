package bridge

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k3/storage/config"
	"k3/storage/safetensors"
	"k3/storage/verify"
	"k3/tokenizer"
)

// FolderProblem is one thing wrong with a model folder, in plain words: the
// file, what is wrong with it and what to do.
type FolderProblem struct {
	File string
	Text string
}

// FolderCheck is what a model folder holds, checked against the folder's
// own files: its config.json read by the engine's reader, and every shard
// its index names (present, as large as its header says, header readable).
type FolderCheck struct {
	Dir       string
	HasConfig bool
	Layers    int // num_hidden_layers of a readable config (0: unknown)
	Shards    []string
	Bytes     int64 // bytes of the shards present
	Problems  []FolderProblem
}

// OK reports whether the folder holds a checkpoint the engine can open.
func (c *FolderCheck) OK() bool { return c.HasConfig && len(c.Problems) == 0 }

// Summary is one sentence for the wizard: the first problem, and how many
// more there are.
func (c *FolderCheck) Summary() string {
	if len(c.Problems) == 0 {
		return ""
	}
	s := c.Problems[0].Text
	if n := len(c.Problems) - 1; n == 1 {
		s += " (and 1 more problem: see Verify)"
	} else if n > 1 {
		s += fmt.Sprintf(" (and %d more problems: see Verify)", n)
	}
	return s
}

// Err is the folder's problems as one error (nil when OK), for the later
// steps to repeat the real cause.
func (c *FolderCheck) Err() error {
	if c.OK() {
		return nil
	}
	if !c.HasConfig {
		return &FolderError{Check: c, Msg: "there is no checkpoint in " + c.Dir + " (no config.json)"}
	}
	return &FolderError{Check: c, Msg: c.Summary()}
}

// FolderError is a model folder the engine cannot open, in plain words.
type FolderError struct {
	Check *FolderCheck
	Msg   string
}

func (e *FolderError) Error() string { return e.Msg }

// CheckFolder checks the model folder dir, only the shards the first
// layers need when layers > 0 (a partial download). It reads every shard's
// header (a few hundred KB each for the release), not the weights.
func CheckFolder(ctx context.Context, dir string, layers int) *FolderCheck {
	c := &FolderCheck{Dir: dir}
	problem := func(file, format string, args ...any) {
		c.Problems = append(c.Problems, FolderProblem{File: file, Text: fmt.Sprintf(format, args...)})
	}
	cfgPath := filepath.Join(dir, "config.json")
	if _, err := os.Stat(cfgPath); err != nil {
		return c
	}
	c.HasConfig = true
	if text := verify.CheckConfig(cfgPath); text != "" {
		problem("config.json", "%s", text)
	} else if cfg, err := config.Load(cfgPath); err == nil {
		c.Layers = cfg.Layers
	}
	for _, f := range []string{tokenizer.ModelFile, "tokenizer_config.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			problem(f, "%s is missing: the tokenizer needs it. Download it (Download fetches only the missing files).", f)
		}
	}
	shards, err := verify.FolderShards(dir, layers)
	if err != nil {
		problem(safetensors.IndexFile, "%s", sentence(err))
		return c
	}
	c.Shards = shards
	want := verify.ExpectedSizes(dir)
	for _, name := range shards {
		if ctx.Err() != nil {
			return c
		}
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if _, perr := os.Stat(p + verify.PartSuffix); perr == nil {
				problem(name, "%s is still being downloaded. Resume the download.", name)
			} else {
				problem(name, "%s is missing. Download it again (Download fetches only the missing files).", name)
			}
			continue
		case err != nil:
			problem(name, "%s cannot be read (%v).", name, err)
			continue
		}
		c.Bytes += fi.Size()
		if text := verify.CheckShard(p, fi.Size(), want[name]); text != "" {
			problem(name, "%s", text)
		}
	}
	return c
}

// Sentence is an error as a sentence: a capital first letter, a full stop.
func Sentence(err error) string { return sentence(err) }

// sentence is an error as a sentence: a capital first letter, a full stop.
func sentence(err error) string {
	t := strings.SplitN(err.Error(), "\n", 2)[0]
	if t == "" {
		return t
	}
	return strings.ToUpper(t[:1]) + strings.TrimSuffix(t[1:], ".") + "."
}

// VerifyFolder is `k3 verify` on dir (verify.CheckFolder, the one check of
// the CLI and the app): sizes against the release's file list or the
// folder's own index, every shard opened by the engine's reader, the config
// read by the engine's reader.
func VerifyFolder(ctx context.Context, dir string, layers int, progress func(done, total int64)) (*verify.Report, error) {
	return verify.CheckFolder(ctx, dir, verify.Options{Layers: layers, Progress: progress})
}
