package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k3/storage/verify"
)

func storeRun(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestVerifyCommand(t *testing.T) {
	dir := t.TempDir()
	for _, s := range verify.ReleasedShards {
		if err := writeSparseShard(filepath.Join(dir, s.Name), s.Size); err != nil {
			t.Skip("no sparse files here: ", err)
		}
	}
	for _, n := range verify.TokenizerFiles {
		os.WriteFile(filepath.Join(dir, n), []byte("{}"), 0o644)
	}
	copyReleasedConfig(t, dir)
	code, out, errs := storeRun("verify", dir)
	if code != ExitOK || !strings.Contains(out, "99 of 99 required files ok, 1.561 of 1.561 TB") || !strings.Contains(out, "COMPLETE") {
		t.Fatalf("complete: %d\n%s\n%s", code, out, errs)
	}
	os.Remove(filepath.Join(dir, "model-00042-of-000096.safetensors"))
	os.Truncate(filepath.Join(dir, "model-00007-of-000096.safetensors"), 5)
	code, out, _ = storeRun("verify", dir, "--json")
	var rep verify.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != ExitRuntime || rep.Missing != 1 || rep.WrongSize != 1 || rep.Complete {
		t.Fatalf("damaged --json: %d %v %+v", code, err, rep)
	}
	code, out, _ = storeRun("verify", "--sha256", dir)
	_ = out
	if code != ExitRuntime {
		t.Fatalf("--sha256 without manifest: %d", code)
	}
	code, out, _ = storeRun("verify", dir)
	if code != ExitRuntime || !strings.Contains(out, "missing       model-00042-of-000096.safetensors") || !strings.Contains(out, "wrong-size    model-00007-of-000096.safetensors: 5 bytes") || !strings.Contains(out, "INCOMPLETE") {
		t.Fatalf("damaged: %d\n%s", code, out)
	}
	if code, _, _ := storeRun("verify"); code != ExitUsage {
		t.Fatalf("no dir: %d", code)
	}
	if code, _, errs := storeRun("verify", filepath.Join(dir, "nope")); code != ExitRuntime || !strings.Contains(errs, "nope") {
		t.Fatalf("missing dir: %d %s", code, errs)
	}
}
