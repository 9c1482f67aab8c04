package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/doctor"
	"k3/internal/fixture"
)

type storeFakeMem struct{ total, avail uint64 }

func (f storeFakeMem) Memory(context.Context) (uint64, uint64, error) { return f.total, f.avail, nil }

// fakeDoctor makes k3 doctor see a one-core machine with total bytes of
// memory, avail of them available (the returned memory's avail, read at
// each run), and skip its disk and compute tests, until t ends.
func fakeDoctor(t *testing.T, total, avail uint64) *storeFakeMem {
	orig := doctorOptions
	t.Cleanup(func() { doctorOptions = orig })
	mem := &storeFakeMem{total, avail}
	doctorOptions = func(o doctor.Options) doctor.Options {
		o.Root = fstest.MapFS{"proc/cpuinfo": {Data: []byte("processor : 0\nmodel name : Fake\nphysical id : 0\ncore id : 0\n")}}
		o.Memory = *mem
		o.SkipDisk, o.SkipCompute = true, true
		return o
	}
	return mem
}

func TestDoctorCommand(t *testing.T) {
	mem := fakeDoctor(t, 32e9, 30e9)
	dir := t.TempDir()
	code, out, errs := storeRun("doctor", "--json", "--dir", dir)
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("not JSON: %v\n%s\n%s", err, out, errs)
	}
	// A temp dir has no room for 1.56 TB, every other check passes: a
	// warning, exit 0 (as the C doctor)
	if code != ExitOK || m["can_run"] != false || m["no_space_only"] != true || m["preset"].(map[string]any)["name"] != "laptop" {
		t.Fatalf("doctor --json: %d %v", code, m)
	}
	code, out, _ = storeRun("doctor", "--dir", dir)
	if code != ExitOK || !strings.Contains(out, "can run Kimi K3 with preset laptop") || !strings.Contains(out, "once it has the disk space:\n  - warning: no directory given has room") ||
		!strings.Contains(out, "Fake, 1 physical / 1 logical") {
		t.Fatalf("doctor text: %d\n%s", code, out)
	}
	mem.avail = 1e9
	code, out, _ = storeRun("doctor", "--dir", dir)
	if code != ExitRuntime || !strings.Contains(out, "even the ultra preset") {
		t.Fatalf("1 GB: %d\n%s", code, out)
	}
	if code, _, _ := storeRun("doctor", "--bogus"); code != ExitUsage {
		t.Fatalf("bad flag: %d", code)
	}
}

// TestDoctorReportsCompressedTrunk: a directory holding a compressed
// trunk is reported with its ratio, and the predictions say they use the
// uncompressed sizes.
func TestDoctorReportsCompressedTrunk(t *testing.T) {
	fakeDoctor(t, 32e9, 30e9)
	empty := t.TempDir()
	_, out, _ := storeRun("doctor", "--dir", empty)
	require.Contains(t, out, "note: trunk sizes in the predictions are those of an uncompressed pack; k3 pack --compress stores it losslessly smaller")
	require.NotContains(t, out, "packed trunk:")

	dir := filepath.Join(t.TempDir(), "trunk")
	code, out, errs := runK3("pack", fixture.ModelDir("demo"), dir, "--compress", "--disk-test-mb", "0", "--quiet")
	require.Equal(t, ExitOK, code, "%s\n%s", out, errs)
	_, out, _ = storeRun("doctor", "--dir", dir)
	assert.Contains(t, out, "packed trunk: 4 layers, compressed (BF16C, lossless): 2.08 MB, 2.59 MB uncompressed, 1.244x smaller")
	assert.Contains(t, out, "is compressed (BF16C, lossless): 2.08 MB, 1.244x smaller than its 2.59 MB uncompressed; the predictions use the uncompressed sizes")
	_, js, _ := storeRun("doctor", "--json", "--dir", dir)
	var rep doctor.Report
	require.NoError(t, json.Unmarshal([]byte(js), &rep))
	require.NotNil(t, rep.Disks[0].Trunk)
	assert.Equal(t, "BF16C", rep.Disks[0].Trunk.Compression)
	assert.Less(t, rep.Disks[0].Trunk.Bytes, rep.Disks[0].Trunk.UncompressedBytes)
}
