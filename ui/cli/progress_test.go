package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/doctor"
)

// Audit 4.28 (issue 31): k3 chat shows how much of a long message it has
// read after every prefill chunk, on one line it rewrites and ends when
// the message is read.
func TestChatShowsReadingProgress(t *testing.T) {
	dir := demoModel(t)
	long := strings.Repeat("a long message about penguins. ", 8) // ~250 bytes: many 8-position chunks
	stdin = strings.NewReader(long + "\n/exit\n")
	defer func() { stdin = nil }()
	code, out, errs := runK3("chat", dir, "--gen", "2", "--chunk", "8")
	require.Equal(t, ExitOK, code, errs)
	re := regexp.MustCompile(`\r\[reading your message: (\d+)/(\d+) positions, pass (\d+)/(\d+), [0-9.]+ s(, about \d+ s left)?\]`)
	ms := re.FindAllStringSubmatch(out, -1)
	require.NotEmpty(t, ms, out)
	total, _ := strconv.Atoi(ms[0][2])
	require.Greater(t, total, len(long), "the transcript holds the message")
	prev := 0
	for i, m := range ms {
		done, _ := strconv.Atoi(m[1])
		n, _ := strconv.Atoi(m[2])
		assert.Equal(t, total, n)
		pass, _ := strconv.Atoi(m[3])
		passes, _ := strconv.Atoi(m[4])
		assert.Equal(t, i+1, pass, "the passes count up")
		assert.GreaterOrEqual(t, passes, (total+7)/8, "the passes a message of %d positions takes at 8 a pass", total)
		assert.Equal(t, pass < passes, m[5] != "", "an estimate while passes are left: %q", m[0])
		assert.Greater(t, done, prev, "it moves forward")
		assert.LessOrEqual(t, done-prev, 8, "a line after every chunk of 8")
		prev = done
	}
	assert.Equal(t, total, prev, "it ends at the whole transcript")
	assert.Contains(t, out, fmt.Sprintf("%d/%d positions", total, total))
	assert.Equal(t, 1, strings.Count(out, "[reading your message: "+strconv.Itoa(total)+"/"), "the last line once")
}

// passLine prints the one prefill estimator's status (doctor.PrefillClock):
// the estimate only while passes are left.
func TestPassLine(t *testing.T) {
	assert.Equal(t, "24/100 positions, pass 3/13, 1.50 s, about 5 s left",
		passLine(doctor.PrefillStatus{Done: 24, Total: 100, Pass: 3, Passes: 13, Elapsed: 1.5, Left: 5}))
	assert.Equal(t, "100/100 positions, pass 13/13, 6.52 s", passLine(doctor.PrefillStatus{Done: 100, Total: 100, Pass: 13, Passes: 13, Elapsed: 6.517}))
}

// Audit 5.20 (issue 31): k3 run prints prefill progress after every chunk,
// not every tenth of the prompt.
func TestRunPrintsPrefillProgressPerChunk(t *testing.T) {
	dir := demoModel(t)
	ids := make([]string, 100)
	for i := range ids {
		ids[i] = strconv.Itoa(1 + i%50)
	}
	code, out, errs := runK3("run", dir, "--ids", strings.Join(ids, ","), "--gen", "1", "--chunk", "8")
	require.Equal(t, ExitOK, code, errs)
	re := regexp.MustCompile(`prefill  : (\d+)/100 positions`)
	ms := re.FindAllStringSubmatch(out, -1)
	var done []int
	for _, m := range ms {
		d, _ := strconv.Atoi(m[1])
		done = append(done, d)
	}
	want := []int{8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 100}
	assert.Equal(t, want, done, out)
}

// Issue 37: --out says how the prompt was read: prefill_chunk positions
// per pass in prefill_passes passes; with no --chunk the memory plan's
// chunk reads the 100-position prompt in one pass, to the same ids.
func TestRunOutPrefillChunk(t *testing.T) {
	dir := demoModel(t)
	ids := make([]string, 100)
	for i := range ids {
		ids[i] = strconv.Itoa(1 + i%50)
	}
	type rep struct {
		Full    []int `json:"full_ids"`
		Chunk   int   `json:"prefill_chunk"`
		Passes  int   `json:"prefill_passes"`
		Forward int64 `json:"forward_passes"`
	}
	read := func(args ...string) (rep, string) {
		out := filepath.Join(t.TempDir(), "o.json")
		code, stdout, errs := runK3(append([]string{"run", dir, "--ids", strings.Join(ids, ","), "--gen", "3", "--out", out, "--spec", "off"}, args...)...)
		require.Equal(t, ExitOK, code, errs)
		b, err := os.ReadFile(out)
		require.NoError(t, err)
		var r rep
		require.NoError(t, json.Unmarshal(b, &r))
		return r, stdout
	}
	forced, _ := read("--chunk", "8")
	assert.Equal(t, 8, forced.Chunk)
	assert.Equal(t, 13, forced.Passes, "100 positions at 8 a pass")
	assert.Equal(t, int64(13+2), forced.Forward, "13 prefill passes and 2 decode steps")
	auto, stdout := read()
	assert.Equal(t, 1, auto.Passes, "the plan's chunk holds the whole prompt")
	assert.GreaterOrEqual(t, auto.Chunk, 100)
	assert.Equal(t, forced.Full, auto.Full)
	assert.Contains(t, stdout, "positions per pass, ")
	assert.Contains(t, stdout, "prefill  : 100/100 positions, pass 1/1")
}
