package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
	"k3/storage/trunk"
)

var tinyFlatF32 = fixture.Path("models/tiny-flat-f32")

// TestPackMeasuresOnlyWhenAsked: a pack times the disk (a write and fsync
// as large again) only with --measure, and then never more than the
// trunk's size (it wrote and fsynced 1 GiB after packing 0.8 MB).
func TestPackMeasuresOnlyWhenAsked(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "trunk")
	code, out, errs := runK3("pack", tinyRelease, dir, "--quiet")
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, out, "packed 11 runs, 831.49 KB in ")
	assert.NotContains(t, out, "disk's own")
	dir = filepath.Join(t.TempDir(), "trunk")
	code, out, errs = runK3("pack", tinyRelease, dir, "--quiet", "--measure")
	require.Equal(t, ExitOK, code, out+errs)
	assert.Regexp(t, `disk's own sequential speed \(measured after packing\): read .* of .*\), write .* \(831\.49 KB \+ fsync`, out)
}

func TestPackCLI(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "trunk")
	code, out, errs := runK3("pack", tinyRelease, dir, "--disk-test-mb", "1", "--quiet")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{
		"11 runs (embed, head, final, 8 layers), 831.49 KB",
		"packed 11 runs, 831.49 KB in ",
		"disk's own sequential speed (measured after packing): read ",
		"the pack ran at ",
		"wrote " + filepath.Join(dir, "trunk.json"),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if errs != "" {
		t.Errorf("stderr with --quiet: %q", errs)
	}
	tr, err := trunk.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := tr.Manifest()
	if m.TotalBytes != 831488 || len(m.Runs) != 11 {
		t.Fatalf("manifest: %d bytes, %d runs", m.TotalBytes, len(m.Runs))
	}
	buf := make([]byte, m.Runs[0].Length)
	if err := tr.VerifyRun(&m.Runs[0], buf); err != nil {
		t.Fatal(err)
	}
	tr.Close()

	// Again: already complete, nothing written, no disk test.
	code, _, errs = runK3("pack", dir, tinyRelease, "--quiet")
	if code != ExitRuntime || !strings.Contains(errs, "no .safetensors files") {
		t.Fatalf("swapped arguments: exit %d, %q", code, errs)
	}
	code, out, _ = runK3("pack", tinyRelease, dir)
	if code != ExitOK || !strings.Contains(out, "is already complete for this checkpoint (831.49 KB); nothing to do") || strings.Contains(out, "disk") {
		t.Fatalf("second pack: exit %d\n%s", code, out)
	}

	// Another checkpoint into the same directory: refused, then forced.
	code, _, errs = runK3("pack", tinyFlatF32, dir, "--disk-test-mb", "0")
	if code != ExitUsage || !strings.Contains(errs, "refused: the trunk directory holds a trunk of a different checkpoint") || !strings.Contains(errs, "--force") {
		t.Fatalf("mismatch: exit %d\n%s", code, errs)
	}
	code, out, errs = runK3("pack", "--force", tinyFlatF32, dir, "--disk-test-mb", "0")
	if code != ExitOK || !strings.Contains(out, "note: discarded the existing trunk (--force)") || !strings.Contains(out, "packed 10 runs") || strings.Contains(out, "disk's own") {
		t.Fatalf("forced: exit %d\n%s\n%s", code, out, errs)
	}
	// Non-terminal progress: at least the first line.
	if !strings.Contains(errs, "packing: 0.00 B of 2.40 MB (0.0%)") {
		t.Fatalf("progress: %q", errs)
	}

	// A corrupt trunk.json is refused (2) until --force.
	os.WriteFile(filepath.Join(dir, "trunk.json"), []byte(`{"format":"k3-trunk","version":9}`), 0o644)
	code, _, errs = runK3("pack", tinyFlatF32, dir, "--disk-test-mb", "0", "--quiet")
	if code != ExitUsage || !strings.Contains(errs, "version 9 is not supported") {
		t.Fatalf("corrupt manifest: exit %d\n%s", code, errs)
	}
}

func TestPackCLIErrors(t *testing.T) {
	tmp := t.TempDir()
	notModel := filepath.Join(tmp, "empty")
	os.Mkdir(notModel, 0o755)
	blocker := filepath.Join(tmp, "file")
	os.WriteFile(blocker, []byte("x"), 0o644)
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"pack"}, ExitUsage, "usage: k3 pack MODEL_DIR TRUNK_DIR"},
		{[]string{"pack", tinyRelease}, ExitUsage, "usage: k3 pack"},
		{[]string{"pack", tinyRelease, tmp, "extra"}, ExitUsage, "usage: k3 pack"},
		{[]string{"pack", "--bogus", tinyRelease, tmp}, ExitUsage, "k3 pack: unknown flag --bogus (k3 pack -h lists them all)"},
		{[]string{"pack", tinyRelease, tmp, "--buffer-mb", "0"}, ExitUsage, "--buffer-mb must be 1..1024"},
		{[]string{"pack", tinyRelease, tmp, "--disk-test-mb", "-1"}, ExitUsage, "--disk-test-mb must be >= 0"},
		{[]string{"pack", filepath.Join(tmp, "missing"), tmp}, ExitUsage, "is not a model directory"},
		{[]string{"pack", notModel, tmp}, ExitRuntime, "no .safetensors files"},
		{[]string{"pack", tinyRelease, filepath.Join(blocker, "sub")}, ExitOutput, "not a directory"},
	}
	for _, c := range cases {
		var o, e bytes.Buffer
		code := run(c.args, &o, &e)
		if code != c.code || !strings.Contains(e.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, e.String(), c.code, c.want)
		}
	}
	if code, out, _ := runK3("pack", "--help"); code != ExitOK || !strings.HasPrefix(out, "usage: k3 pack") {
		t.Errorf("--help: exit %d", code)
	}
}

// TestPackCompressCLI: k3 pack --compress reports the ratio, packing the
// other way into the same folder is refused (exit 2) until --force, and
// k3 run from the compressed trunk says so and gives the same ids and
// first logits as the uncompressed one.
func TestPackCompressCLI(t *testing.T) {
	model := fixture.ModelDir("demo") // trained weights
	plain, packed := filepath.Join(t.TempDir(), "plain"), filepath.Join(t.TempDir(), "packed")
	code, out, errs := runK3("pack", model, packed, "--compress", "--disk-test-mb", "0", "--quiet")
	require.Equal(t, ExitOK, code, "%s\n%s", out, errs)
	for _, want := range []string{
		"7 runs (embed, head, final, 4 layers), 2.59 MB uncompressed, compressed: smaller by a ratio known once packed",
		"compressed: trunk.bin is 2.08 MB, 2.59 MB uncompressed: 1.244x smaller (lossless: the same output)",
		"the 22 kinds of compressed matrices: 2.54 MB -> 2.03 MB, 1.253x",
		"model.embed_tokens.weight",
	} {
		assert.Contains(t, out, want)
	}
	code, out, _ = runK3("pack", model, packed, "--compress", "--quiet")
	require.Equal(t, ExitOK, code)
	assert.Contains(t, out, "is already complete for this checkpoint (compressed, 2.08 MB)")
	code, _, errs = runK3("pack", model, packed, "--disk-test-mb", "0", "--quiet")
	require.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, "holds a compressed trunk of this checkpoint and this pack would write an uncompressed one (pack with --compress to keep it); use --force")
	code, out, errs = runK3("pack", model, plain, "--disk-test-mb", "0", "--quiet")
	require.Equal(t, ExitOK, code, "%s\n%s", out, errs)
	assert.NotContains(t, out, "compressed:")

	var logits [2][]byte
	var reports [2]runReport
	for i, dir := range []string{plain, packed} {
		lg := filepath.Join(t.TempDir(), "logits.f32")
		js := filepath.Join(t.TempDir(), "report.json")
		code, out, errs = runK3("run", model, "--trunk", dir, "--trunk-gb", "0.0005", "--ids", "1,2,3,4,5", "--gen", "4", "--dump-logits", lg, "--out", js)
		require.Equal(t, ExitOK, code, "%s\n%s", out, errs)
		if dir == packed {
			assert.Contains(t, out, "packed   : compressed (BF16C, lossless), trunk.bin 2.08 MB of 2.59 MB uncompressed: 1.244x smaller")
			assert.Contains(t, out, "streamed (compressed BF16C bytes as stored)")
		} else {
			assert.NotContains(t, out, "packed   :")
		}
		var err error
		logits[i], err = os.ReadFile(lg)
		require.NoError(t, err)
		raw, err := os.ReadFile(js)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(raw, &reports[i]))
	}
	assert.Equal(t, logits[0], logits[1], "first logits")
	assert.Equal(t, reports[0].GeneratedIDs, reports[1].GeneratedIDs)
	assert.Equal(t, "", reports[0].TrunkCompression)
	assert.Equal(t, "BF16C", reports[1].TrunkCompression)
	assert.Less(t, reports[1].TrunkBytesRead, reports[0].TrunkBytesRead)
}
