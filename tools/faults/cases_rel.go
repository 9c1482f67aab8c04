//go:build linux || darwin

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"k3/engine/chat"
)

// Issue 31's cases (besides the server and the remote client): weights
// fingerprints of trunks and state files, file modes, concurrent conflict
// copies, compressed packs, speculative decoding, and progress while a
// long prompt is read.

// saverEnv makes this program a history saver process (case 13.11):
// "PATH|TAG|N" saves N distinct conversations to PATH and prints how many
// were saved aside as conflict copies.
const saverEnv = "K3_FAULTS_SAVER"

func init() {
	if v := os.Getenv(saverEnv); v != "" {
		os.Exit(saverMain(v))
	}
}

func saverMain(v string) int {
	f := strings.Split(v, "|")
	if len(f) != 3 {
		fmt.Fprintln(os.Stderr, "bad", saverEnv)
		return 2
	}
	n, err := strconv.Atoi(f[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	aside := 0
	for i := range n {
		err := chat.SaveHistory(f[0], []chat.Message{{Role: "user", Content: fmt.Sprintf("%s-%d", f[1], i)}, {Role: "assistant", Content: "a"}})
		var ce *chat.ConflictError
		switch {
		case errors.As(err, &ce):
			aside++
		case err != nil:
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	fmt.Println(aside)
	return 0
}

// withUmask runs f with the process's umask (inherited by the k3 it
// starts) set to mask.
func withUmask(mask int, f func() Result) Result {
	old := syscall.Umask(mask)
	defer syscall.Umask(old)
	return f()
}

func modeOf(p string) fs.FileMode {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.Mode().Perm()
}

// restoreTimes gives every file of dir the modification time of the file
// of the same name in orig (touch -r).
func restoreTimes(dir, orig string) {
	ents, err := os.ReadDir(orig)
	must(err)
	for _, en := range ents {
		fi, err := os.Stat(filepath.Join(orig, en.Name()))
		must(err)
		if fi.Mode().IsRegular() {
			must(os.Chtimes(filepath.Join(dir, en.Name()), fi.ModTime(), fi.ModTime()))
		}
	}
}

func relCases() []Case {
	tj := func(t string) string { return filepath.Join(t, "trunk.json") }
	ids := func(e *Env, dir, out string, extra ...string) run {
		return e.k3(nil, append([]string{"run", dir, "--ids", "1,2,3,4,5", "--gen", "8", "--out", out}, extra...)...)
	}
	compressed := func(e *Env) string {
		t := filepath.Join(e.dir("tc"), "T")
		must(expectOK(e.k3(nil, "pack", e.Demo, t, "--compress", "--disk-test-mb", "0", "--quiet")))
		return t
	}
	return []Case{
		{ID: "13.1", Name: "pack --compress, then run pinned and streamed", Want: "rc0, the same ids as without a trunk", Quick: true, Run: func(e *Env) Result {
			t := compressed(e)
			d := e.dir("out")
			ref := filepath.Join(d, "ref.json")
			must(expectOK(ids(e, e.Demo, ref)))
			if res := expectRan(ids(e, e.Demo, filepath.Join(d, "p.json"), "--trunk", t), func() error { return sameIDs(ref, filepath.Join(d, "p.json")) }); res.Verdict != Ran {
				return res
			}
			return expectRan(ids(e, e.Demo, filepath.Join(d, "s.json"), "--trunk", t, "--trunk-gb", "0.0005", "--cache-gb", "0.001"),
				func() error { return sameIDs(ref, filepath.Join(d, "s.json")) })
		}},
		{ID: "13.2", Name: "compressed trunk: a bit flipped in layer.3", Want: "rc1 CRC", Run: func(e *Env) Result {
			t := compressed(e)
			must(flipRun(t, "layer.3"))
			return expect(e.runIDs(e.Demo, "--trunk", t, "--trunk-gb", "0.0005", "--cache-gb", "0.001"), 1, "CRC-32C")
		}},
		{ID: "13.3", Name: "compressed pack over a plain trunk", Want: "rc2 naming both kinds, trunk unchanged", Run: func(e *Env) Result {
			t := e.copyDir(e.Trunk, "trunk")
			before, _ := os.ReadFile(tj(t))
			r := e.k3(nil, "pack", e.Demo, t, "--compress", "--disk-test-mb", "0", "--quiet")
			return then(expect(r, 2, "compress"), unchanged(tj(t), before))
		}},
		{ID: "13.4", Name: "fine-tune with the original files' mtimes, plain trunk (Z11f)", Want: "rc1 packed from different weights (was: rc0, old logits)", Quick: true, Run: func(e *Env) Result {
			ft := fineTune(e)
			restoreTimes(ft, e.Demo)
			return expect(e.runIDs(ft, "--trunk", e.copyDir(e.Trunk, "trunk")), 1, "packed from different weights", "pack again")
		}},
		{ID: "13.5", Name: "fine-tune with the original files' mtimes, compressed trunk", Want: "rc1 packed from different weights (was: rc0)", Run: func(e *Env) Result {
			t := compressed(e)
			ft := fineTune(e)
			restoreTimes(ft, e.Demo)
			return expect(e.runIDs(ft, "--trunk", t), 1, "packed from different weights")
		}},
		{ID: "13.6", Name: "trunk.json version 3 (no weights fingerprint)", Want: "run rc1 saying what to do; pack upgrades, rc0", Run: func(e *Env) Result {
			t := e.copyDir(e.Trunk, "trunk")
			must(editJSON(tj(t), func(m map[string]any) {
				m["version"] = 3
				delete(m["source"].(map[string]any), "weights_sha256")
			}))
			if res := expect(e.runIDs(e.Demo, "--trunk", t), 1, "did not fingerprint the weights", "k3 pack"); res.Verdict != Clear {
				return res
			}
			r := e.k3(nil, "pack", e.Demo, t, "--disk-test-mb", "0", "--quiet")
			if res := expectRan(r, func() error { return sameFile(tj(t), tj(e.Trunk)) }); res.Verdict != Ran {
				return res
			}
			return expect(e.runIDs(e.Demo, "--trunk", t), 0)
		}},
		{ID: "13.7", Name: "state from demo loaded into a same-layout fine-tune (ST1)", Want: "rc1 another model (was: rc0, other output)", Quick: true, Run: func(e *Env) Result {
			p := filepath.Join(e.dir("state"), "P")
			must(expectOK(e.k3(nil, "run", e.Demo, "--ids", "1,2,3", "--gen", "0", "--save-state", p)))
			ft := fineTune(e)
			restoreTimes(ft, e.Demo)
			return expect(e.k3(nil, "run", ft, "--ids", "4,5", "--gen", "2", "--load-state", p), 1, "another model")
		}},
		{ID: "13.8", Name: "--spec 4 and --spec 1 against --spec off", Want: "rc0, identical ids", Quick: true, Run: func(e *Env) Result {
			d := e.dir("spec")
			ref := filepath.Join(d, "off.json")
			must(expectOK(ids(e, e.Demo, ref, "--spec", "off")))
			for _, s := range []string{"4", "1", "auto"} {
				out := filepath.Join(d, s+".json")
				if res := expectRan(ids(e, e.Demo, out, "--spec", s), func() error { return sameIDs(ref, out) }); res.Verdict != Ran {
					return res
				}
			}
			return Result{Ran, "--spec 4, 1 and auto give the ids of --spec off", 0}
		}},
		{ID: "13.9", Name: "--spec -1, abc, 65 on run and chat", Want: "rc2", Run: func(e *Env) Result {
			var last run
			for _, v := range []string{"-1", "abc", "65"} {
				last = e.runIDs(e.Demo, "--spec", v)
				if res := expect(last, 2, "--spec"); res.Verdict != Clear {
					return res
				}
				if res := expect(e.k3(strings.NewReader("hi\n"), "chat", e.Demo, "--spec", v), 2, "--spec"); res.Verdict != Clear {
					return res
				}
			}
			return expect(last, 2, "--spec")
		}},
		{ID: "13.10", Name: "history made 0600 (and 0640), one chat turn under umask 022 (H4)", Want: "mode kept (was: 0644)", Quick: true, Run: func(e *Env) Result {
			return withUmask(0o022, func() Result {
				for _, m := range []fs.FileMode{0o600, 0o640} {
					h := filepath.Join(e.dir("hist"), "H")
					must(os.WriteFile(h, []byte(`{"role":"user","content":"my medical record"}`+"\n"+`{"role":"assistant","content":"ok"}`+"\n"), 0o600))
					must(os.Chmod(h, m))
					r := e.k3(strings.NewReader("hi\n"), "chat", e.Demo, "--history", h, "--gen", "2")
					if res := expect(r, 0); res.Verdict != Ran {
						return res
					}
					if got := modeOf(h); got != m {
						return Result{Loss, fmt.Sprintf("the history was %v, now %v", m, got), r.code}
					}
				}
				return Result{Ran, "0600 and 0640 kept", 0}
			})
		}},
		{ID: "13.11", Name: "new history under umask 022 and 077; state file", Want: "0600 (private by default)", Run: func(e *Env) Result {
			for _, mask := range []int{0o022, 0o077} {
				res := withUmask(mask, func() Result {
					d := e.dir("hist")
					h, p := filepath.Join(d, "H"), filepath.Join(d, "P")
					if res := expect(e.k3(strings.NewReader("hi\n"), "chat", e.Demo, "--history", h, "--gen", "2"), 0); res.Verdict != Ran {
						return res
					}
					if res := expect(e.k3(nil, "run", e.Demo, "--ids", "1,2", "--gen", "0", "--save-state", p), 0); res.Verdict != Ran {
						return res
					}
					if modeOf(h) != 0o600 || modeOf(p) != 0o600 {
						return Result{Loss, fmt.Sprintf("umask %03o: history %v, state %v", mask, modeOf(h), modeOf(p)), 0}
					}
					return Result{Ran, "", 0}
				})
				if res.Verdict != Ran {
					return res
				}
			}
			return Result{Ran, "history and state 0600 under umask 022 and 077", 0}
		}},
		{ID: "13.12", Name: "3 processes save one history (100 each) while k3 chat holds it (H3)", Want: "every save kept as its own conflict copy (was: 458 of 900 lost)", Quick: true, Run: func(e *Env) Result {
			d := e.dir("hist")
			h := filepath.Join(d, "H.jsonl")
			a := e.holdChat(h, "2")
			defer a.kill()
			a.turn("hold it") // A holds the history once its first turn is saved
			self, err := os.Executable()
			must(err)
			const procs, per = 3, 100
			var cmds []*exec.Cmd
			var outs []*strings.Builder
			for p := range procs {
				c := exec.Command(self)
				c.Env = append(os.Environ(), fmt.Sprintf("%s=%s|p%d|%d", saverEnv, h, p, per))
				o := &strings.Builder{}
				c.Stdout, c.Stderr = o, o
				must(c.Start())
				cmds, outs = append(cmds, c), append(outs, o)
			}
			for i, c := range cmds {
				if err := c.Wait(); err != nil {
					return Result{Wrong, fmt.Sprintf("saver %d: %v: %s", i, err, lastLine(outs[i].String())), exitCode(err)}
				}
			}
			a.close()
			copies, _ := filepath.Glob(filepath.Join(d, "H.conflict-*.jsonl"))
			found := map[string]bool{}
			for _, c := range copies {
				hh, err := chat.LoadHistory(c)
				if err == nil && len(hh) == 2 {
					found[hh[0].Content] = true
				}
			}
			if len(found) != procs*per || len(copies) != procs*per {
				return Result{Loss, fmt.Sprintf("%d of %d saves found in %d conflict copies", len(found), procs*per, len(copies)), 0}
			}
			return Result{Ran, fmt.Sprintf("%d saves, %d distinct conflict copies", procs*per, len(found)), 0}
		}},
		{ID: "13.13", Name: "k3 chat reads a 3,000-character message", Want: "rc0, progress shown while it is read", Run: func(e *Env) Result {
			msg := strings.Repeat("the quick brown fox jumps over the lazy dog. ", 70)[:3000]
			r := e.k3(strings.NewReader(msg+"\n"), "chat", e.Demo, "--gen", "2", "--chunk", "64")
			res := expect(r, 0, "[reading your message: ")
			if res.Verdict != Ran {
				return res
			}
			n := strings.Count(r.stdout, "[reading your message: ")
			if n < 3000/64/2 {
				return Result{Wrong, fmt.Sprintf("%d progress lines for a 3,000-character message read 64 positions at a time", n), r.code}
			}
			return Result{Ran, fmt.Sprintf("%d progress updates", n), r.code}
		}},
		{ID: "13.14", Name: "k3 run over a 2,000-id prompt (chunk 64)", Want: "rc0, a prefill line per chunk", Run: func(e *Env) Result {
			ids := make([]string, 2000)
			for i := range ids {
				ids[i] = fmt.Sprint((7 + 13*i) % 256)
			}
			r := e.k3(nil, "run", e.Demo, "--ids", strings.Join(ids, ","), "--gen", "1", "--chunk", "64")
			if res := expect(r, 0); res.Verdict != Ran {
				return res
			}
			n := len(regexp.MustCompile(`prefill  : \d+/2000 positions`).FindAllString(r.stdout, -1))
			if n != (2000+63)/64 {
				return Result{Wrong, fmt.Sprintf("%d prefill lines, want %d", n, (2000+63)/64), r.code}
			}
			return Result{Ran, fmt.Sprintf("%d prefill lines", n), r.code}
		}},
	}
}
