package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunReportDefault: without --out, k3 run writes k3_run.json in the
// working directory, as the C engine does; --out= writes none, and a
// directory that cannot take it costs a note, not the run.
func TestRunReportDefault(t *testing.T) {
	old := defaultRunOut
	t.Cleanup(func() { defaultRunOut = old })
	defaultRunOut = "k3_run.json"
	dir := t.TempDir()
	t.Chdir(dir)
	code, out, errs := runK3("run", tinyRelease, "--ids", "491,109,188", "--gen", "2")
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, out, "wrote k3_run.json\n")
	rep := readRunReport(t, filepath.Join(dir, "k3_run.json"))
	assert.Len(t, rep.GeneratedIDs, 2)

	require.NoError(t, os.Remove(filepath.Join(dir, "k3_run.json")))
	code, out, errs = runK3("run", tinyRelease, "--ids", "491,109,188", "--gen", "1", "--out=")
	require.Equal(t, ExitOK, code, out+errs)
	assert.NoFileExists(t, filepath.Join(dir, "k3_run.json"))
	assert.NotContains(t, out, "wrote ")

	if os.Getuid() != 0 { // root writes anywhere
		ro := filepath.Join(dir, "ro")
		require.NoError(t, os.Mkdir(ro, 0o555))
		t.Chdir(ro)
		code, out, errs = runK3("run", tinyRelease, "--ids", "491,109,188", "--gen", "1")
		require.Equal(t, ExitOK, code, out+errs)
		assert.Contains(t, errs, "note: no report file: k3_run.json cannot be written here")
	}
}

// TestRunReportCFields: the C engine's --out fields with its meaning, the
// teacher-forcing tally, and the report lines it printed.
func TestRunReportCFields(t *testing.T) {
	tmp := t.TempDir()
	ids := "491,109,188,458,164"
	plain := filepath.Join(tmp, "plain.json")
	code, out, errs := runK3("run", tinyRelease, "--ids", ids, "--gen", "6", "--out", plain)
	require.Equal(t, ExitOK, code, out+errs)
	rep := readRunReport(t, plain)
	assert.Equal(t, 8, rep.LayersRequested)
	assert.Equal(t, 8, rep.LayersCompleted)
	assert.False(t, rep.UltraLowMemory)
	assert.Zero(t, rep.EmbeddingBytesRead)
	assert.Zero(t, rep.LMHeadBytesRead)
	assert.Equal(t, -1, rep.StoppedAt)
	assert.Nil(t, rep.TFPositions)
	assert.Regexp(t, `peak RSS after loading weights: [0-9.]+ [KMG]?B \(the plan above is a forecast, this is measured\)\n`, out)
	assert.Regexp(t, `expert cache: \d+ slots x [0-9.]+ [KMG]?B = [0-9.]+ [KMG]?B \([0-9.]+% of the \d+ routed experts in the bound layers, policy layer\+r\)\n`, out)
	assert.Regexp(t, `\nI/O: (O_DIRECT|buffered)`, out)

	// --stop-id: stopped_at names it; --layers: requested and completed
	stop := rep.GeneratedIDs[2]
	cut := filepath.Join(tmp, "cut.json")
	code, out, errs = runK3("run", tinyRelease, "--ids", ids, "--gen", "6", "--stop-id", itoa(stop), "--out", cut)
	require.Equal(t, ExitOK, code, out+errs)
	rep = readRunReport(t, cut)
	assert.Equal(t, stop, rep.StoppedAt)
	assert.Len(t, rep.GeneratedIDs, 3)
	code, out, errs = runK3("run", tinyRelease, "--ids", ids, "--gen", "1", "--layers", "3", "--out", cut)
	require.Equal(t, ExitOK, code, out+errs)
	rep = readRunReport(t, cut)
	assert.Equal(t, 3, rep.LayersRequested)
	assert.Equal(t, 3, rep.LayersCompleted)

	// ultra-low-memory from a packed trunk: the tables' bytes, the trunk lines
	tr := filepath.Join(tmp, "trunk")
	code, out, errs = runK3("pack", tinyRelease, tr, "--disk-test-mb", "0", "--quiet")
	require.Equal(t, ExitOK, code, out+errs)
	ultra := filepath.Join(tmp, "ultra.json")
	code, out, errs = runK3("run", tinyRelease, "--ids", ids, "--gen", "2", "--trunk", tr, "--ultra-low-memory", "--trunk-gb", "0.0001", "--out", ultra)
	require.Equal(t, ExitOK, code, out+errs)
	rep = readRunReport(t, ultra)
	assert.True(t, rep.UltraLowMemory)
	assert.Positive(t, rep.EmbeddingBytesRead)
	assert.Positive(t, rep.LMHeadBytesRead)
	assert.LessOrEqual(t, rep.EmbeddingBytesRead+rep.LMHeadBytesRead, rep.TrunkBytesRead)
	assert.Regexp(t, `trunk hit rate: 0\.0% \(0 of 8 layers pinned, read once; the other 8 are read from .* on every pass\)\n`, out)
	assert.Regexp(t, `trunk reads: [0-9.]+ [KMG]?B of layers in [0-9.]+ s of reading: [0-9.]+ [KMG]?B/s \(the disk's rate\)\n`, out)

	// teacher forcing: the tally, and at least two ids
	tf := filepath.Join(tmp, "tf.json")
	code, out, errs = runK3("run", tinyRelease, "--ids", ids, "--tf-check", "--out", tf)
	require.Equal(t, ExitOK, code, out+errs)
	rep = readRunReport(t, tf)
	require.NotNil(t, rep.TFPositions)
	require.NotNil(t, rep.TFMatches)
	require.NotNil(t, rep.TFAgreement)
	assert.Equal(t, 4, *rep.TFPositions)
	want := 0
	idl := strings.Split(ids, ",")
	for i, p := range rep.TFPred[:4] {
		if itoa(p) == idl[i+1] {
			want++
		}
	}
	assert.Equal(t, want, *rep.TFMatches)
	assert.InDelta(t, float64(want)/4, *rep.TFAgreement, 1e-12)
	code, _, errs = runK3("run", tinyRelease, "--ids", "5", "--tf-check")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, "teacher forcing (--tf-check) needs at least two ids")
}

// TestTFCheckCountsMatches: teacher forcing over ids the model itself
// generated agrees at every position after the prompt, so tf_matches counts
// at least those (the tally is not only right when it is 0, as on a prompt
// of random ids), and tf_pred there is the greedy run's ids.
func TestTFCheckCountsMatches(t *testing.T) {
	tmp := t.TempDir()
	prompt := []string{"491", "109", "188", "458", "164"}
	gen := filepath.Join(tmp, "gen.json")
	code, out, errs := runK3("run", tinyRelease, "--ids", strings.Join(prompt, ","), "--gen", "6", "--out", gen)
	require.Equal(t, ExitOK, code, out+errs)
	full := readRunReport(t, gen).FullIDs
	require.Len(t, full, len(prompt)+6)
	ids := make([]string, len(full))
	for i, id := range full {
		ids[i] = itoa(id)
	}
	tf := filepath.Join(tmp, "tf.json")
	code, out, errs = runK3("run", tinyRelease, "--ids", strings.Join(ids, ","), "--tf-check", "--out", tf)
	require.Equal(t, ExitOK, code, out+errs)
	rep := readRunReport(t, tf)
	n := len(full) - 1
	assert.Equal(t, full[len(prompt):], rep.TFPred[len(prompt)-1:n], "the greedy run's ids")
	matches := 0
	for i := range n {
		if rep.TFPred[i] == full[i+1] {
			matches++
		}
	}
	require.NotNil(t, rep.TFPositions)
	require.NotNil(t, rep.TFMatches)
	require.NotNil(t, rep.TFAgreement)
	assert.Equal(t, n, *rep.TFPositions)
	assert.GreaterOrEqual(t, matches, 6)
	assert.Equal(t, matches, *rep.TFMatches)
	assert.InDelta(t, float64(matches)/float64(n), *rep.TFAgreement, 1e-12)
	assert.Contains(t, out, fmt.Sprintf("the argmax matches the next id at %d/%d (", matches, n))
}
