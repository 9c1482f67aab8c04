//go:build linux || darwin

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// mediumTrunk is the reference pack of the medium demo.
func (e *Env) mediumTrunk() (model, ref string, err error) {
	model, err = e.medium()
	if err != nil {
		return "", "", err
	}
	ref = filepath.Join(e.Work, "trunk-medium")
	if _, err := os.Stat(filepath.Join(ref, "trunk.json")); err == nil {
		return model, ref, nil
	}
	if err := expectOK(e.k3(nil, "pack", model, ref, "--disk-test-mb", "0", "--quiet")); err != nil {
		return "", "", err
	}
	return model, ref, nil
}

// killAfter starts k3, kills it with SIGKILL after d (or when ready says
// so) and waits for it.
func (e *Env) killAfter(d time.Duration, ready func() bool, stdin io.Reader, args ...string) (killed bool) {
	cmd := e.command(args...)
	cmd.Stdin = stdin
	must(cmd.Start())
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	deadline := time.After(d)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return false
		case <-deadline:
			if ready == nil {
				cmd.Process.Signal(syscall.SIGKILL)
				<-done
				return true
			}
			deadline = time.After(30 * time.Second)
			ready = func() bool { return true }
		case <-tick.C:
			if ready != nil && ready() {
				cmd.Process.Signal(syscall.SIGKILL)
				<-done
				return true
			}
		}
	}
}

func killCases() []Case {
	var cs []Case
	for i, ms := range []int{3, 8, 15, 25, 40, 60, 85, 120} {
		cs = append(cs, Case{ID: fmt.Sprintf("6.%d", i+1), Name: fmt.Sprintf("kill -9 of k3 pack (medium, --buffer-mb 1) at %d ms, then resume", ms),
			Want: "resumed, byte-identical", Quick: i == 1, Run: func(e *Env) Result {
				model, ref, err := e.mediumTrunk()
				must(err)
				t := filepath.Join(e.dir("kill"), "T")
				killed := e.killAfter(time.Duration(ms)*time.Millisecond, nil, nil, "pack", model, t, "--buffer-mb", "1", "--disk-test-mb", "0", "--quiet")
				if i%3 == 2 { // and kill the resume too
					e.killAfter(time.Duration(ms/2+3)*time.Millisecond, nil, nil, "pack", model, t, "--buffer-mb", "1", "--disk-test-mb", "0", "--quiet")
				}
				r := e.k3(nil, "pack", model, t, "--buffer-mb", "1", "--disk-test-mb", "0", "--quiet")
				res := expectRan(r, clean(t, func() error { return sameTrunk(t, ref) }))
				if strings.Contains(r.stdout, "resumed") {
					res.Actual = firstLine(r.stdout, "resumed")
				}
				if !killed {
					res.Actual = "(finished before the kill) " + res.Actual
				}
				return res
			}})
	}
	cs = append(cs,
		Case{ID: "6.13", Name: "25 kill -9 of k3 pack at random times, each resumed", Want: "every resume byte-identical", Run: func(e *Env) Result {
			model, ref, err := e.mediumTrunk()
			must(err)
			rng := uint32(12345)
			kills := 0
			for trial := 0; trial < 25; trial++ {
				t := filepath.Join(e.dir("kill"), "T")
				for k := 0; k < 1+trial%3; k++ { // up to three kills before the resume
					rng = rng*1664525 + 1013904223
					ms := 2 + int(rng>>16)%90
					if e.killAfter(time.Duration(ms)*time.Millisecond, nil, nil, "pack", model, t, "--buffer-mb", "1", "--disk-test-mb", "0", "--quiet") {
						kills++
					}
				}
				if err := expectOK(e.k3(nil, "pack", model, t, "--buffer-mb", "1", "--disk-test-mb", "0", "--quiet")); err != nil {
					return Result{Wrong, fmt.Sprintf("trial %d: %v", trial, err), -1}
				}
				if err := sameTrunk(t, ref); err != nil {
					return Result{Loss, fmt.Sprintf("trial %d: %v", trial, err), 0}
				}
				if l := leftovers(t); len(l) > 0 {
					return Result{Wrong, fmt.Sprintf("trial %d left %v", trial, l), 0}
				}
				os.RemoveAll(filepath.Dir(t))
			}
			return Result{Ran, fmt.Sprintf("%d kills landed in 25 trials; every resume identical", kills), 0}
		}},
		Case{ID: "6.9", Name: "kill -9 during pack's disk speed test, then pack again", Want: "the 400 MB test file removed, said so", Run: func(e *Env) Result {
			model, _, err := e.mediumTrunk()
			must(err)
			t := filepath.Join(e.dir("kill"), "T")
			found := func() bool {
				ents, _ := os.ReadDir(t)
				for _, x := range ents {
					if strings.HasPrefix(x.Name(), ".k3-disktest-") {
						if info, err := x.Info(); err == nil && info.Size() > 1<<20 {
							return true
						}
					}
				}
				return false
			}
			if !e.killAfter(60*time.Second, found, nil, "pack", model, t, "--disk-test-mb", "400", "--quiet") {
				return Result{Wrong, "the pack ended before its disk test could be killed", -1}
			}
			if len(leftovers(t)) == 0 {
				return Result{Wrong, "no test file to clean up after the kill", -1}
			}
			r := e.k3(nil, "pack", model, t, "--disk-test-mb", "0", "--quiet")
			return then(expect(r, 0, "removed 1 temporary file(s) an interrupted k3 pack left"), func() error {
				if l := leftovers(t); len(l) > 0 {
					return fmt.Errorf("still there: %v", l)
				}
				return nil
			})
		}},
		Case{ID: "6.10", Name: "kill -9 during run --save-state over an older state (6 timings)", Want: "old or new state, never partial; leftovers cleaned", Run: func(e *Env) Result {
			model, err := e.medium()
			must(err)
			d := e.dir("state")
			p := filepath.Join(d, "P")
			must(expectOK(e.k3(nil, "run", model, "--ids", "1,2,3", "--gen", "0", "--save-state", p)))
			ids := make([]string, 300)
			for i := range ids {
				ids[i] = fmt.Sprint((i*7 + 3) % 1000)
			}
			for _, ms := range []int{30, 60, 90, 120, 160, 220} {
				e.killAfter(time.Duration(ms)*time.Millisecond, nil, nil, "run", model, "--ids", strings.Join(ids, ","), "--gen", "3", "--save-state", p)
				if err := expectOK(e.k3(nil, "run", model, "--ids", "5", "--gen", "1", "--load-state", p)); err != nil {
					return Result{Loss, "the state after a kill does not load: " + err.Error(), -1}
				}
			}
			r := e.k3(nil, "run", model, "--ids", "1,2", "--gen", "0", "--save-state", p)
			return then(expect(r, 0), clean(d))
		}},
		Case{ID: "6.11", Name: "a temporary state file of a writer killed before its rename", Want: "removed by the next run, said so", Quick: true, Run: func(e *Env) Result {
			d := e.dir("state")
			p := filepath.Join(d, "s")
			dead := exec.Command("true")
			must(dead.Run())
			left := filepath.Join(d, fmt.Sprintf(".s.tmp%d-763677893", dead.Process.Pid))
			must(os.WriteFile(left, make([]byte, 32908), 0o644))
			r := e.runIDs(e.Demo, "--save-state", p)
			return then(expect(r, 0, "removed 1 temporary file(s) an interrupted k3 run left"), func() error {
				if _, err := os.Stat(left); err == nil {
					return fmt.Errorf("%s still there", left)
				}
				return nil
			})
		}},
		Case{ID: "6.12", Name: "kill -9 during a chat turn (4 timings)", Want: "the history stays valid", Run: func(e *Env) Result {
			h := filepath.Join(e.dir("hist"), "H")
			must(os.WriteFile(h, []byte(`{"role":"user","content":"hi"}`+"\n"+`{"role":"assistant","content":"yo"}`+"\n"), 0o644))
			for _, ms := range []int{20, 60, 120, 200} {
				e.killAfter(time.Duration(ms)*time.Millisecond, nil, strings.NewReader("another\n"), "chat", e.Demo, "--history", h, "--gen", "32")
				if res := expect(e.k3(strings.NewReader(""), "chat", e.Demo, "--history", h), 0); res.Verdict != Ran {
					return Result{Loss, "history after a kill: " + res.Actual, res.Code}
				}
			}
			return Result{Ran, "history loads after every kill", 0}
		}},
	)
	return cs
}

// tmpfs mounts a small tmpfs, or says why it cannot.
func (e *Env) tmpfs(size string) (string, error) {
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("needs root to mount a tmpfs")
	}
	d := e.dir("tmpfs")
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", d).CombinedOutput(); err != nil {
		return "", fmt.Errorf("mount -t tmpfs: %v %s", err, strings.TrimSpace(string(out)))
	}
	e.mounts = append(e.mounts, d)
	return d, nil
}

// fill writes a filler until the filesystem is full, leaving keep bytes.
func fill(dir string, keep int64) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return err
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	n := free - keep
	if n <= 0 {
		return nil
	}
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		return err
	}
	defer f.Close()
	b := make([]byte, 64<<10)
	for n > 0 {
		k := min(int64(len(b)), n)
		if _, err := f.Write(b[:k]); err != nil {
			return nil // full
		}
		n -= k
	}
	return nil
}

func diskFullCases() []Case {
	return []Case{
		{ID: "7.1", Name: "pack demo-medium into a 3 MiB tmpfs", Want: "rc1 up front, nothing left", Run: func(e *Env) Result {
			d, err := e.tmpfs("3m")
			if err != nil {
				return skip(err.Error())
			}
			model, err := e.medium()
			must(err)
			t := filepath.Join(d, "T")
			return then(expect(e.k3(nil, "pack", model, t, "--disk-test-mb", "0", "--quiet"), 1, "not enough free space"), func() error {
				if _, err := os.Stat(filepath.Join(t, "trunk.bin")); err == nil {
					return fmt.Errorf("trunk.bin created")
				}
				return nil
			})
		}},
		{ID: "7.2", Name: "disk speed test hits ENOSPC on a 3 MiB tmpfs", Want: "pack rc0, test skipped", Run: func(e *Env) Result {
			d, err := e.tmpfs("3m")
			if err != nil {
				return skip(err.Error())
			}
			t := filepath.Join(d, "T")
			r := e.k3(nil, "pack", e.Demo, t, "--disk-test-mb", "8", "--quiet")
			return then(expect(r, 0, "disk speed test skipped"), clean(t, func() error { return sameTrunk(t, e.Trunk) }))
		}},
		{ID: "7.3", Name: "--save-state onto a full tmpfs over an older state", Want: "rc3, the old state intact, no temp left", Run: func(e *Env) Result {
			d, err := e.tmpfs("2m")
			if err != nil {
				return skip(err.Error())
			}
			p := filepath.Join(d, "P")
			must(expectOK(e.k3(nil, "run", e.Demo, "--ids", "1,2,3", "--gen", "0", "--save-state", p)))
			before, _ := os.ReadFile(p)
			must(fill(d, 0))
			ids := strings.TrimSuffix(strings.Repeat("7,", 200), ",")
			r := e.k3(nil, "run", e.Demo, "--ids", ids, "--gen", "0", "--save-state", p)
			return then(expect(r, 3, "no space left on device"), clean(d, unchanged(p, before)))
		}},
		{ID: "7.4", Name: "chat history on a full tmpfs", Want: "rc1 naming the disk, the old history intact", Run: func(e *Env) Result {
			d, err := e.tmpfs("1m")
			if err != nil {
				return skip(err.Error())
			}
			h := filepath.Join(d, "H")
			body := []byte(`{"role":"user","content":"hi"}` + "\n" + `{"role":"assistant","content":"yo"}` + "\n")
			must(os.WriteFile(h, body, 0o644))
			must(fill(d, 0))
			r := e.k3(strings.NewReader("again\n"), "chat", e.Demo, "--history", h, "--gen", "4")
			return then(expect(r, 1, "no space left on device"), unchanged(h, body))
		}},
		{ID: "7.5", Name: "download onto a tmpfs another writer fills mid-file, then resumed", Want: "rc1 .part kept; rerun resumes, identical", Run: func(e *Env) Result {
			d, err := e.tmpfs("3m")
			if err != nil {
				return skip(err.Error())
			}
			h := newFakeHub(e.Demo, hubFaults{trickle: map[string]bool{S2: true}})
			defer h.close()
			dest := filepath.Join(d, "dl")
			part := filepath.Join(dest, S2+".part")
			done := make(chan run, 1)
			go func() { done <- e.k3(nil, "download", dest, "--endpoint", h.srv.URL, "--repo", hubRepo, "--jobs", "1") }()
			for i := 0; i < 3000; i++ {
				if st, err := os.Stat(part); err == nil && st.Size() > 30_000 {
					break
				}
				time.Sleep(2 * time.Millisecond)
			}
			must(fill(d, 0))
			r := <-done
			res := expect(r, 1, "disk full")
			if res.Verdict != Clear {
				return res
			}
			if st, err := os.Stat(part); err != nil || st.Size() == 0 {
				return Result{Loss, "the .part was not kept", r.code}
			}
			os.Remove(filepath.Join(d, "filler"))
			return then(expect(e.k3(nil, "download", dest, "--endpoint", h.srv.URL, "--repo", hubRepo), 0, "resuming at"), func() error { return h.sameAsHub(dest) })
		}},
	}
}

func concurrencyCases() []Case {
	return []Case{
		{ID: "8.1", Name: "two k3 chat on one history: A sends a turn, then B", Want: "B refused rc2 naming the file; A's turns kept", Quick: true, Run: func(e *Env) Result {
			h := filepath.Join(e.dir("hist"), "H")
			a := e.holdChat(h, "4")
			defer a.kill()
			a.turn("from A")
			b := e.k3(strings.NewReader("from B\n"), "chat", e.Demo, "--history", h, "--gen", "4")
			a.turn("A again")
			a.close()
			return then(expect(b, 2, "is in use by another k3"), func() error {
				raw, _ := os.ReadFile(h)
				if !strings.Contains(string(raw), "from A") || !strings.Contains(string(raw), "A again") || strings.Count(string(raw), "\n") != 4 {
					return fmt.Errorf("history lost A's turns:\n%s", raw)
				}
				return nil
			})
		}},
		{ID: "8.2", Name: "two k3 pack of demo-medium into one directory at once (3 trials)", Want: "both rc0 (or one refused), result identical", Run: func(e *Env) Result {
			model, ref, err := e.mediumTrunk()
			must(err)
			for trial := 0; trial < 3; trial++ {
				t := filepath.Join(e.dir("pack2"), "T")
				c1 := e.command("pack", model, t, "--buffer-mb", "1", "--disk-test-mb", "0", "--quiet")
				c2 := e.command("pack", model, t, "--buffer-mb", "1", "--disk-test-mb", "0", "--quiet")
				var o1, o2 strings.Builder
				c1.Stderr, c2.Stderr = &o1, &o2
				must(c1.Start())
				must(c2.Start())
				e1, e2 := exitCode(c1.Wait()), exitCode(c2.Wait())
				if (e1 != 0 && e1 != 2) || (e2 != 0 && e2 != 2) || (e1 != 0 && e2 != 0) {
					return Result{Wrong, fmt.Sprintf("rc %d and %d: %s %s", e1, e2, lastLine(o1.String()), lastLine(o2.String())), e1}
				}
				if e1 != 0 || e2 != 0 {
					r := e.k3(nil, "pack", model, t, "--buffer-mb", "1", "--disk-test-mb", "0", "--quiet")
					if r.code != 0 && r.code != 2 {
						return Result{Wrong, lastLine(r.stderr), r.code}
					}
				}
				if err := sameTrunk(t, ref); err != nil {
					if e.k3(nil, "run", model, "--trunk", t, "--ids", "1,2", "--gen", "1").code == 0 {
						return Result{Loss, "the trunk two packs left runs but differs from one pack's: " + err.Error(), 0}
					}
				}
			}
			return Result{Ran, "3 trials: the trunk is whole", 0}
		}},
		{ID: "8.3", Name: "three k3 run on one trunk at once", Want: "all rc0, identical ids", Run: func(e *Env) Result {
			d := e.dir("runs")
			var cmds []*exec.Cmd
			for i := 0; i < 3; i++ {
				args := []string{"run", e.Demo, "--trunk", e.Trunk, "--ids", "1,2,3", "--gen", "4", "--out", filepath.Join(d, fmt.Sprint(i))}
				if i == 2 {
					args = append(args, "--ultra-low-memory")
				}
				c := e.command(args...)
				must(c.Start())
				cmds = append(cmds, c)
			}
			for i, c := range cmds {
				if code := exitCode(c.Wait()); code != 0 {
					return Result{Wrong, fmt.Sprintf("run %d: rc%d", i, code), code}
				}
			}
			for i := 1; i < 3; i++ {
				if err := sameIDs(filepath.Join(d, "0"), filepath.Join(d, fmt.Sprint(i))); err != nil {
					return Result{Loss, err.Error(), 0}
				}
			}
			return Result{Ran, "identical", 0}
		}},
	}
}

func hubCases() []Case {
	dl := func(e *Env, h *fakeHub, dest string, env []string, extra ...string) run {
		cmd := append([]string{"download", dest, "--endpoint", h.srv.URL, "--repo", hubRepo}, extra...)
		old := e.extraEnv
		e.extraEnv = env
		defer func() { e.extraEnv = old }()
		return e.k3(nil, cmd...)
	}
	verifySHA := func(e *Env, dest string) run {
		return e.k3(nil, "verify", dest, "--sha256", "--layers", "2")
	}
	mk := func(id, name, want string, quick bool, f hubFaults, check func(e *Env, h *fakeHub, dest string, r run) Result) Case {
		return Case{ID: id, Name: name, Want: want, Quick: quick, Run: func(e *Env) Result {
			h := newFakeHub(e.Demo, f)
			defer h.close()
			dest := filepath.Join(e.dir("dl"), "D")
			r := dl(e, h, dest, nil)
			res := check(e, h, dest, r)
			if strings.Contains(r.stdout+r.stderr, hubSecret) {
				return Result{Loss, "the token was printed", r.code}
			}
			return res
		}}
	}
	same := func(e *Env, h *fakeHub, dest string, r run) Result {
		return expectRan(r, func() error { return h.sameAsHub(dest) })
	}
	return []Case{
		mk("9.1", "download, clean", "rc0, identical, verify --sha256 rc0", true, hubFaults{}, func(e *Env, h *fakeHub, dest string, r run) Result {
			if res := same(e, h, dest, r); res.Verdict != Ran {
				return res
			}
			return expect(verifySHA(e, dest), 0, "COMPLETE")
		}),
		mk("9.2", "connection dropped at 100 KB, twice", "resumed with Range, identical", false, hubFaults{drop: map[string]int{S2: 2}}, same),
		mk("9.3", "HTTP 500, twice", "retried, identical", false, hubFaults{fail500: map[string]int{S2: 2}}, same),
		mk("9.4", "wrong content every time", "rc1, no final file", false, hubFaults{corrupt: map[string]bool{S2: true}}, func(e *Env, h *fakeHub, dest string, r run) Result {
			return then(expect(r, 1, "downloaded twice"), func() error {
				if _, err := os.Stat(filepath.Join(dest, S2)); err == nil {
					return fmt.Errorf("the bad file was kept as finished")
				}
				return nil
			})
		}),
		mk("9.5", "no published hash, wrong content", "'size checked, no published hash'; verify not COMPLETE (was: 'verified')", true,
			hubFaults{nohash: map[string]bool{S2: true}, corrupt: map[string]bool{S2: true}}, func(e *Env, h *fakeHub, dest string, r run) Result {
				if strings.Contains(r.stdout, S2+" verified") {
					return Result{Loss, "a file never compared was called verified", r.code}
				}
				if res := expect(r, 0, "size checked, no published hash"); res.Verdict != Ran {
					return res
				}
				v := verifySHA(e, dest)
				if v.code == 0 || strings.Contains(v.stdout, "COMPLETE") && !strings.Contains(v.stdout, "INCOMPLETE") {
					return Result{Loss, "verify --sha256 called the set complete: " + lastLine(v.stdout), v.code}
				}
				return Result{Ran, "reported size-checked; verify --sha256 rc" + fmt.Sprint(v.code) + ": " + firstLine(v.stdout+v.stderr, "no published hash"), r.code}
			}),
		mk("9.6", "HTTP 401 without a token", "rc2", false, hubFaults{token: "needed"}, func(e *Env, h *fakeHub, dest string, r run) Result {
			return expect(r, 2, "no token found")
		}),
		{ID: "9.7", Name: "HTTP 401 with a token; the token never printed", Want: "rc2", Run: func(e *Env) Result {
			h := newFakeHub(e.Demo, hubFaults{token: "another"})
			defer h.close()
			dest := filepath.Join(e.dir("dl"), "D")
			r := dl(e, h, dest, []string{"HF_TOKEN=" + hubSecret})
			res := expect(r, 2, "was rejected")
			return then(res, func() error {
				if strings.Contains(r.stdout+r.stderr, hubSecret) {
					return fmt.Errorf("the token was printed")
				}
				return filepath.WalkDir(dest, func(p string, d os.DirEntry, err error) error {
					if err == nil && !d.IsDir() {
						if b, _ := os.ReadFile(p); strings.Contains(string(b), hubSecret) {
							return fmt.Errorf("the token is in %s", p)
						}
					}
					return nil
				})
			})
		}},
		{ID: "9.8", Name: "HF_TOKEN with a newline inside", Want: "rc1 at once (was: 8 retries, 183 s)", Quick: true, Run: func(e *Env) Result {
			h := newFakeHub(e.Demo, hubFaults{})
			defer h.close()
			r := dl(e, h, filepath.Join(e.dir("dl"), "D"), []string{"HF_TOKEN=hf_a\nb"})
			res := expect(r, 1, "invalid header field value")
			if res.Verdict == Clear && strings.Contains(r.stderr, "giving up after") {
				return Result{Wrong, "retried: " + lastLine(r.stderr), r.code}
			}
			return res
		}},
		{ID: "9.9", Name: "endpoint refuses connections", Want: "rc1 'cannot reach' after 4 checks, < 45 s (was: 3 min of retries)", Run: func(e *Env) Result {
			h := newFakeHub(e.Demo, hubFaults{})
			url := h.srv.URL
			h.close()
			r := e.k3(nil, "download", filepath.Join(e.dir("dl"), "D"), "--endpoint", url, "--repo", hubRepo)
			res := expect(r, 1, "cannot reach the model hub")
			if res.Verdict == Clear && r.dur > 45*time.Second {
				return Result{Wrong, fmt.Sprintf("took %s", r.dur.Round(time.Second)), r.code}
			}
			return res
		}},
		mk("9.10", "wrong X-Repo-Commit", "rc1", false, hubFaults{commit: "ffffffffffffffffffffffffffffffffffffffff"}, func(e *Env, h *fakeHub, dest string, r run) Result {
			return expect(r, 1, "the download is pinned to")
		}),
		{ID: "9.11", Name: "kill -9 mid-file, then the same command", Want: "resumes with Range, identical", Run: func(e *Env) Result {
			h := newFakeHub(e.Demo, hubFaults{trickle: map[string]bool{S2: true}})
			defer h.close()
			dest := filepath.Join(e.dir("dl"), "D")
			part := filepath.Join(dest, S2+".part")
			e.killAfter(30*time.Second, func() bool {
				st, err := os.Stat(part)
				return err == nil && st.Size() > 50_000
			}, nil, "download", dest, "--endpoint", h.srv.URL, "--repo", hubRepo)
			r := e.k3(nil, "download", dest, "--endpoint", h.srv.URL, "--repo", hubRepo)
			return then(expect(r, 0, "resuming at"), func() error { return h.sameAsHub(dest) })
		}},
	}
}

func interruptCases() []Case {
	return []Case{
		{ID: "10.1", Name: "Ctrl-C twice during a long prefill (run --out)", Want: "rc5, --out written (was: rc130, nothing)", Run: func(e *Env) Result {
			ids := make([]string, 4000)
			for i := range ids {
				ids[i] = fmt.Sprint((7 + 13*i) % 256)
			}
			out := filepath.Join(e.dir("int"), "o.json")
			cmd := e.command("run", e.Demo, "--ids", strings.Join(ids, ","), "--gen", "4", "--out", out)
			rd, er := startRead(cmd)
			readUntil(rd, "prefill")
			cmd.Process.Signal(os.Interrupt)
			time.Sleep(5 * time.Millisecond)
			cmd.Process.Signal(os.Interrupt)
			go io.Copy(io.Discard, rd)
			code := exitCode(cmd.Wait())
			r := run{code: code, stderr: er.String()}
			return then(expect(r, 5), func() error {
				var rep struct {
					Stop string `json:"stop_reason"`
				}
				raw, err := os.ReadFile(out)
				if err != nil {
					return err
				}
				if err := json.Unmarshal(raw, &rep); err != nil || rep.Stop != "cancelled" {
					return fmt.Errorf("--out %s: %v %q", out, err, rep.Stop)
				}
				return nil
			})
		}},
		{ID: "10.3", Name: "Ctrl-C mid-generation with --save-state and --out", Want: "rc5; the state holds every id --out lists", Run: func(e *Env) Result {
			d := e.dir("int")
			out, state := filepath.Join(d, "o.json"), filepath.Join(d, "s")
			cmd := e.command("run", e.Demo, "--ids", "1,2,3", "--gen", "100000", "--out", out, "--save-state", state)
			rd, er := startRead(cmd)
			rows := 0
			for {
				l, err := rd.ReadString('\n')
				if err != nil {
					break
				}
				if strings.HasPrefix(l, "STEP") || rows > 0 {
					if rows++; rows > 30 {
						break
					}
				}
			}
			cmd.Process.Signal(os.Interrupt)
			go io.Copy(io.Discard, rd)
			r := run{code: exitCode(cmd.Wait()), stderr: er.String()}
			return then(expect(r, 5, "interrupted"), func() error {
				var rep struct {
					Full []int `json:"full_ids"`
				}
				raw, err := os.ReadFile(out)
				if err != nil {
					return err
				}
				json.Unmarshal(raw, &rep)
				b, err := os.ReadFile(state)
				if err != nil {
					return err
				}
				if n := int(b[24]) | int(b[25])<<8 | int(b[26])<<16 | int(b[27])<<24; n != len(rep.Full) {
					return fmt.Errorf("the state holds %d positions, --out lists %d ids", n, len(rep.Full))
				}
				return nil
			})
		}},
		{ID: "10.2", Name: "Ctrl-C at the chat prompt", Want: "rc5 (was: rc130)", Run: func(e *Env) Result {
			cmd := e.command("chat", e.Demo)
			in, _ := cmd.StdinPipe()
			rd, er := startRead(cmd)
			readUntil(rd, "type a message")
			time.Sleep(50 * time.Millisecond)
			cmd.Process.Signal(os.Interrupt)
			go io.Copy(io.Discard, rd)
			code := exitCode(cmd.Wait())
			in.Close()
			return expect(run{code: code, stderr: er.String()}, 5, "bye")
		}},
	}
}
