//go:build linux || darwin

// Command faults runs k3 against the classes of faults of the reliability
// audit (issue 18): corrupt and truncated shards and headers, packed-trunk
// faults, kill -9 during pack and state saves, a full disk on a small
// tmpfs, two concurrent writers, hub faults against a loopback server, bad
// history lines, bad flags and state files. Every case is a real k3
// process; the table gives, per case, what was expected, what happened and
// the exit code, and the totals. It exits 1 when a case panicked, hung,
// lost data or did not do what was expected.
//
//	go run ./tools/faults            # every case (a few minutes)
//	go run ./tools/faults -quick     # the fast subset CI runs (seconds)
//	go run ./tools/faults -run trunk # cases whose "ID name" matches a regexp
//
// Cases needing root (tmpfs mounts) or FIFOs are skipped, and counted as
// skipped, where the machine cannot do them.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Verdict classifies a case's outcome.
type Verdict string

const (
	Clear Verdict = "OK"      // the expected clear error, documented exit code, nothing lost
	Ran   Verdict = "OK-run"  // the expected non-error outcome (a resume, a recovery, valid input)
	Panic Verdict = "PANIC"   // a Go panic
	Hang  Verdict = "HANG"    // no exit within the time limit
	Loss  Verdict = "LOSS"    // data lost, overwritten, or wrong data recorded or used as good
	Wrong Verdict = "WRONG"   // another exit code or message than expected
	Skip  Verdict = "SKIPPED" // the machine cannot run it (no root for tmpfs, no FIFOs)
)

// Result is what one case did.
type Result struct {
	Verdict Verdict
	Actual  string
	Code    int // exit code of the decisive k3 process, -1 for none
}

// Case is one fault.
type Case struct {
	ID    string
	Name  string
	Want  string // expected, in words
	Quick bool   // part of the CI subset
	Run   func(e *Env) Result
}

func main() {
	quick := flag.Bool("quick", false, "run only the fast subset (what CI runs)")
	filter := flag.String("run", "", "run only cases whose \"ID name\" matches this regular expression")
	bin := flag.String("k3", "", "k3 binary to test (default: build this checkout)")
	keep := flag.Bool("keep", false, "keep the scratch directory")
	flag.Parse()

	work, err := os.MkdirTemp("", "k3-faults-")
	if err != nil {
		fail(err)
	}
	match, err := regexp.Compile(*filter)
	if err != nil {
		fail(err)
	}
	env := &Env{Work: work}
	defer func() { env.cleanup(*keep) }()
	if err := env.setup(*bin); err != nil {
		env.cleanup(*keep)
		fail(err)
	}
	var cases []Case
	for _, c := range allCases() {
		if *quick && !c.Quick {
			continue
		}
		if !match.MatchString(c.ID + " " + c.Name) {
			continue
		}
		cases = append(cases, c)
	}
	totals := map[Verdict]int{}
	clearErrors := 0
	fmt.Printf("%-6s %-58s %-44s %-7s %-5s %s\n", "CASE", "FAULT", "EXPECTED", "VERDICT", "EXIT", "ACTUAL")
	t0 := time.Now()
	for _, c := range cases {
		r := env.runCase(c)
		totals[r.Verdict]++
		if r.Verdict == Clear {
			clearErrors++
		}
		code := "-"
		if r.Code >= 0 {
			code = fmt.Sprint(r.Code)
		}
		fmt.Printf("%-6s %-58s %-44s %-7s %-5s %s\n", c.ID, clip(c.Name, 58), clip(c.Want, 44), r.Verdict, code, clip(oneLine(r.Actual), 160))
	}
	bad := totals[Panic] + totals[Hang] + totals[Loss] + totals[Wrong]
	fmt.Printf("\n%d cases in %.0f s: %d clear errors, %d correct runs, %d panics, %d hangs, %d data lost, %d wrong, %d skipped\n",
		len(cases), time.Since(t0).Seconds(), clearErrors, totals[Ran], totals[Panic], totals[Hang], totals[Loss], totals[Wrong], totals[Skip])
	if bad > 0 {
		env.cleanup(*keep)
		os.Exit(1)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "faults:", err)
	os.Exit(2)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Env is the scratch directory with the binary and pristine models.
type Env struct {
	Work   string
	K3     string
	Demo   string // k3 demo --size random (the small model's shapes, random weights, 9 shards)
	Medium string // k3 demo --size medium
	Tiny   string // testdata/models/tiny-release
	Trunk  string // k3 pack of Demo
	Repo   string // the checkout
	// extraEnv is added to the next k3 processes' environment.
	extraEnv []string
	n        int
	mounts   []string
	cleanup  func(keep bool)
}

func (e *Env) setup(bin string) error {
	e.cleanup = func(keep bool) {
		for _, m := range e.mounts {
			exec.Command("umount", m).Run()
		}
		e.mounts = nil
		if keep {
			fmt.Fprintln(os.Stderr, "scratch directory kept:", e.Work)
		} else {
			os.RemoveAll(e.Work)
		}
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %v", err)
	}
	e.Repo = filepath.Dir(strings.TrimSpace(string(out)))
	e.K3 = bin
	if e.K3 == "" {
		e.K3 = filepath.Join(e.Work, "k3")
		cmd := exec.Command("go", "build", "-o", e.K3, ".")
		cmd.Dir = e.Repo
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v\n%s", err, out)
		}
	}
	e.Tiny = filepath.Join(e.Repo, "testdata", "models", "tiny-release")
	e.Demo = filepath.Join(e.Work, "demo")
	if r := e.k3(nil, "demo", e.Demo, "--size", "random"); r.code != 0 {
		return fmt.Errorf("k3 demo: %s", r.stderr)
	}
	e.Trunk = filepath.Join(e.Work, "trunk")
	if r := e.k3(nil, "pack", e.Demo, e.Trunk, "--disk-test-mb", "0", "--quiet"); r.code != 0 {
		return fmt.Errorf("k3 pack: %s", r.stderr)
	}
	return nil
}

// medium makes the medium demo on first use.
func (e *Env) medium() (string, error) {
	if e.Medium == "" {
		dir := filepath.Join(e.Work, "demo-medium")
		if r := e.k3(nil, "demo", dir, "--size", "medium"); r.code != 0 {
			return "", fmt.Errorf("k3 demo --size medium: %s", r.stderr)
		}
		e.Medium = dir
	}
	return e.Medium, nil
}

// dir returns a fresh directory for one case.
func (e *Env) dir(name string) string {
	e.n++
	d := filepath.Join(e.Work, fmt.Sprintf("c%03d-%s", e.n, name))
	os.MkdirAll(d, 0o755)
	return d
}

// copyDir copies a directory tree (new files, new modification times).
func (e *Env) copyDir(src, name string) string {
	dst := filepath.Join(e.dir(name), filepath.Base(src))
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		panic(err)
	}
	return dst
}

// run is one finished (or killed) k3 process.
type run struct {
	code           int
	stdout, stderr string
	hung           bool
	dur            time.Duration
}

const timeLimit = 90 * time.Second

func (e *Env) k3(stdin io.Reader, args ...string) run {
	return e.k3t(timeLimit, stdin, args...)
}

func (e *Env) command(args ...string) *exec.Cmd {
	cmd := exec.Command(e.K3, args...)
	// in the work folder: k3 run's default report (k3_run.json) lands there,
	// not in the folder the matrix was started from
	cmd.Dir = e.Work
	// no token of the user's reaches the loopback hub
	cmd.Env = append(os.Environ(), "LANG=en_US.UTF-8", "LC_ALL=en_US.UTF-8", "HF_TOKEN=", "HF_TOKEN_PATH="+filepath.Join(e.Work, "no-token"),
		"HF_HOME="+filepath.Join(e.Work, "hf-home"), "HF_ENDPOINT=",
		// a prompt cache of this matrix run's own: nothing of the user's
		// cache is reused (S.12 asks what a second client is told) and
		// nothing is left in it
		"K3_PROMPT_CACHE="+filepath.Join(e.Work, "prompt-cache"))
	cmd.Env = append(cmd.Env, e.extraEnv...)
	return cmd
}

func (e *Env) k3t(limit time.Duration, stdin io.Reader, args ...string) run {
	cmd := e.command(args...)
	var o, er bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &er
	if stdin != nil {
		cmd.Stdin = stdin
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return run{code: -1, stderr: err.Error()}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return run{code: exitCode(err), stdout: o.String(), stderr: er.String(), dur: time.Since(t0)}
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		return run{code: -1, stdout: o.String(), stderr: er.String(), hung: true, dur: time.Since(t0)}
	}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return -1
}

func panicked(r run) bool {
	return strings.Contains(r.stderr, "panic:") || strings.Contains(r.stderr, "goroutine ") && strings.Contains(r.stderr, "[running]")
}

// runCase runs c, turning a panic of the harness itself into a WRONG row.
func (e *Env) runCase(c Case) (res Result) {
	defer func() {
		if p := recover(); p != nil {
			buf := make([]byte, 4096)
			buf = buf[:runtime.Stack(buf, false)]
			res = Result{Wrong, fmt.Sprintf("harness error: %v %s", p, buf), -1}
		}
	}()
	return c.Run(e)
}

// expect classifies a run that should fail with code and a stderr holding
// every one of msgs.
func expect(r run, code int, msgs ...string) Result {
	switch {
	case r.hung:
		return Result{Hang, fmt.Sprintf("no exit after %s", r.dur.Round(time.Second)), -1}
	case panicked(r):
		return Result{Panic, firstLine(r.stderr, "panic:"), r.code}
	}
	ok := r.code == code
	for _, m := range msgs {
		ok = ok && strings.Contains(r.stderr+r.stdout, m)
	}
	v := Wrong
	if ok {
		v = Clear
		if code == 0 {
			v = Ran
		}
	}
	actual := lastLine(r.stderr)
	if len(msgs) > 0 && ok {
		actual = firstLine(r.stderr+"\n"+r.stdout, msgs[0])
	} else if actual == "" {
		actual = lastLine(r.stdout)
	}
	return Result{v, actual, r.code}
}

// expectRan classifies a run that should succeed and then satisfy check;
// a failed check is data lost (or wrong data kept).
func expectRan(r run, check func() error) Result {
	res := expect(r, 0)
	if res.Verdict != Ran {
		return res
	}
	if check != nil {
		if err := check(); err != nil {
			return Result{Loss, err.Error(), r.code}
		}
	}
	return res
}

// then runs check after a result that is right so far: a failed check
// turns it into LOSS.
func then(res Result, check func() error) Result {
	if res.Verdict != Clear && res.Verdict != Ran {
		return res
	}
	if err := check(); err != nil {
		return Result{Loss, err.Error(), res.Code}
	}
	return res
}

func skip(why string) Result { return Result{Skip, why, -1} }

func firstLine(s, with string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, with) {
			return l
		}
	}
	return lastLine(s)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && !strings.Contains(l, "Fyne error") {
			return l
		}
	}
	return ""
}

func sameFile(a, b string) error {
	x, err := os.ReadFile(a)
	if err != nil {
		return err
	}
	y, err := os.ReadFile(b)
	if err != nil {
		return err
	}
	if !bytes.Equal(x, y) {
		return fmt.Errorf("%s differs from %s", a, b)
	}
	return nil
}

func unchanged(path string, before []byte) func() error {
	return func() error {
		now, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.Equal(now, before) {
			return fmt.Errorf("%s was changed", path)
		}
		return nil
	}
}
