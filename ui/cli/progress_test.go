package cli

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	re := regexp.MustCompile(`\r\[reading your message: (\d+)/(\d+) positions, [0-9.]+ s\]`)
	ms := re.FindAllStringSubmatch(out, -1)
	require.NotEmpty(t, ms, out)
	total, _ := strconv.Atoi(ms[0][2])
	require.Greater(t, total, len(long), "the transcript holds the message")
	prev := 0
	for _, m := range ms {
		done, _ := strconv.Atoi(m[1])
		n, _ := strconv.Atoi(m[2])
		assert.Equal(t, total, n)
		assert.Greater(t, done, prev, "it moves forward")
		assert.LessOrEqual(t, done-prev, 8, "a line after every chunk of 8")
		prev = done
	}
	assert.Equal(t, total, prev, "it ends at the whole transcript")
	assert.Contains(t, out, fmt.Sprintf("%d/%d positions", total, total))
	assert.Equal(t, 1, strings.Count(out, "[reading your message: "+strconv.Itoa(total)+"/"), "the last line once")
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
