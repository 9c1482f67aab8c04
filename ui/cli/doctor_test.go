package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/fstest"

	"k3/doctor"
)

type storeFakeMem struct{ total, avail uint64 }

func (f storeFakeMem) Memory(context.Context) (uint64, uint64, error) { return f.total, f.avail, nil }

func TestDoctorCommand(t *testing.T) {
	orig := doctorOptions
	defer func() { doctorOptions = orig }()
	avail := uint64(30e9)
	doctorOptions = func(o doctor.Options) doctor.Options {
		o.Root = fstest.MapFS{"proc/cpuinfo": {Data: []byte("processor : 0\nmodel name : Fake\nphysical id : 0\ncore id : 0\n")}}
		o.Memory = storeFakeMem{32e9, avail}
		o.SkipDisk, o.SkipCompute = true, true
		return o
	}
	dir := t.TempDir()
	code, out, errs := storeRun("doctor", "--json", "--dir", dir)
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("not JSON: %v\n%s\n%s", err, out, errs)
	}
	// A temp dir has no room for 1.56 TB: cannot run -> exit 1.
	if code != ExitRuntime || m["can_run"] != false || m["preset"].(map[string]any)["name"] != "laptop" {
		t.Fatalf("doctor --json: %d %v", code, m)
	}
	code, out, _ = storeRun("doctor", "--dir", dir)
	if code != ExitRuntime || !strings.Contains(out, "cannot run Kimi K3") || !strings.Contains(out, "Fake, 1 physical / 1 logical") {
		t.Fatalf("doctor text: %d\n%s", code, out)
	}
	avail = 1e9
	code, out, _ = storeRun("doctor", "--dir", dir)
	if code != ExitRuntime || !strings.Contains(out, "even the ultra preset") {
		t.Fatalf("1 GB: %d\n%s", code, out)
	}
	if code, _, _ := storeRun("doctor", "--bogus"); code != ExitUsage {
		t.Fatalf("bad flag: %d", code)
	}
}
