package cli

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/doctor"
	"k3/engine/expertcache"
	"k3/engine/plan"
)

// TestCachePolicyFlag: --cache-policy offers and accepts exactly the expert
// cache registry's names; anything else is a usage error naming them all.
func TestCachePolicyFlag(t *testing.T) {
	for _, args := range [][]string{
		{"run", tinyRelease, "--ids", "1", "--cache-policy", "bogus"},
		{"chat", tinyRelease, "--cache-policy", "bogus"},
	} {
		code, _, stderr := runK3(args...)
		assert.Equal(t, ExitUsage, code, "%v: %s", args, stderr)
		assert.Contains(t, stderr, "k3 "+args[0]+`: --cache-policy "bogus" is not layer+r, layer, lru or s3fifo`)
		for _, n := range expertcache.Names() {
			assert.Contains(t, stderr, n)
		}

		code, stdout, _ := runK3(args[0], "-h")
		assert.Equal(t, ExitOK, code)
		assert.Contains(t, stdout, `expert cache replacement: layer+r, layer, lru or s3fifo (k3 sim-cache compares them) (default "layer+r")`)
	}

	// Every registry name passes resolve, in any case.
	for _, n := range append(expertcache.Names(), "LRU", "Layer+R") {
		fs := newFlags("run", io.Discard)
		mf := addModelFlags(fs, "run")
		require.NoError(t, fs.Parse([]string{"--cache-policy", n}))
		assert.Equal(t, -1, mf.resolve(fs, io.Discard, io.Discard), n)
	}

	assert.Equal(t, "a", orList([]string{"a"}))
	assert.Equal(t, "a or b", orList([]string{"a", "b"}))
	assert.Equal(t, "a, b or c", orList([]string{"a", "b", "c"}))
}

func resolveArgs(t *testing.T, args ...string) (*modelFlags, int, string, string) {
	t.Helper()
	var out, errs bytes.Buffer
	fs := newFlags("run", &errs)
	mf := addModelFlags(fs, "run")
	require.NoError(t, fs.Parse(args))
	code := mf.resolve(fs, &out, &errs)
	return mf, code, out.String(), errs.String()
}

// --preset goes through plan.Resolve: the budgets, ultra mode with the
// ultra preset, explicit budgets winning, auto from this machine's memory.
func TestResolvePreset(t *testing.T) {
	mf, code, _, _ := resolveArgs(t, "--preset", "desktop")
	require.Equal(t, -1, code)
	assert.Equal(t, 16.0, *mf.trunkGB)
	assert.Equal(t, 10.0, *mf.cacheGB)
	assert.False(t, *mf.ultra)

	mf, code, _, _ = resolveArgs(t, "--preset", "ultra", "--trunk", "/t", "--cache-gb", "1")
	require.Equal(t, -1, code)
	assert.True(t, *mf.ultra, "--preset ultra without ultra mode")
	assert.Equal(t, 2.5, *mf.trunkGB)
	assert.Equal(t, 1.0, *mf.cacheGB, "an explicit --cache-gb wins")

	_, code, _, errs := resolveArgs(t, "--preset", "ultra")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, "give --trunk DIR")

	// no speculation at ultra (as the C engine): a forced draft length is
	// refused with one line; auto and off run (auto drafts nothing there),
	// and a draft model is planned and counted
	_, code, _, errs = resolveArgs(t, "--preset", "ultra", "--trunk", "/t", "--spec", "4")
	assert.Equal(t, ExitUsage, code)
	assert.Equal(t, "k3 run: --spec 4: ultra plans no speculative decoding (its memory floor keeps no verification pass's record); leave --spec out or pick --preset laptop\n", errs)
	for _, ok := range [][]string{{"--spec", "auto"}, {"--spec", "off"}, {"--spec", "4", "--draft", "/d"}} {
		_, code, _, errs = resolveArgs(t, append([]string{"--trunk", "/t", "--ultra-low-memory"}, ok...)...)
		assert.Equal(t, -1, code, "%v: %s", ok, errs)
	}

	_, code, _, errs = resolveArgs(t, "--preset", "huge")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, `unknown preset "huge"`)
	assert.Contains(t, errs, "presets (trunk / expert-cache")

	// auto: what the doctor would choose on this machine's memory now
	mem, err := doctor.ReadMemory()
	if err != nil {
		t.Skip("memory not readable here:", err)
	}
	want, werr := plan.Resolve("auto", &mem, doctor.Need)
	mf, code, out, errs := resolveArgs(t, "--preset", "auto", "--trunk", "/t")
	if werr != nil {
		assert.Equal(t, ExitUsage, code)
		assert.Contains(t, errs, "--preset auto: ")
		return
	}
	require.Equal(t, -1, code, errs)
	assert.Contains(t, out, "auto: preset "+want.Preset)
	assert.Equal(t, want.TrunkGB, *mf.trunkGB)
	assert.Equal(t, want.Ultra, *mf.ultra)
}

// TestTrunkBudgetWithoutTrunkNoted: a trunk budget with no packed trunk to
// stream from is not used (every layer is bound from the checkpoint); k3
// says so once, where it used to say nothing (review 2026-12-06, "as in C").
func TestTrunkBudgetWithoutTrunkNoted(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--preset", "laptop"}, "note: --preset laptop's trunk budget (3.00 GB) is for streaming layers from a packed trunk: "},
		{[]string{"--preset", "laptop", "--trunk-gb", "0.5"}, "note: --trunk-gb 0.5 is for streaming layers from a packed trunk: "},
		{[]string{"--trunk-ring", "4"}, "note: --trunk-ring 4 is for streaming layers from a packed trunk: "},
	} {
		_, code, _, errs := resolveArgs(t, c.args...)
		require.Equal(t, -1, code, c.args)
		assert.Equal(t, c.want+"without --trunk DIR (see k3 pack) every layer is bound from the checkpoint and held in memory\n", errs, c.args)
	}
	for _, args := range [][]string{nil, {"--cache-gb", "1"}, {"--preset", "laptop", "--trunk", "/t"}} {
		_, code, _, errs := resolveArgs(t, args...)
		require.Equal(t, -1, code, args)
		assert.Empty(t, errs, args)
	}
}
