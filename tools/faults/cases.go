//go:build linux || darwin

package main

import (
	"bufio"
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

func allCases() []Case {
	var all []Case
	for _, g := range [][]Case{checkpointCases(), trunkCases(), stateCases(), historyCases(), flagCases(),
		killCases(), diskFullCases(), concurrencyCases(), hubCases(), interruptCases(), relCases(), serveCases(), remoteCases()} {
		all = append(all, g...)
	}
	return all
}

// runIDs is the audit's usual command on a damaged model directory.
func (e *Env) runIDs(dir string, extra ...string) run {
	return e.k3(nil, append([]string{"run", dir, "--ids", "1,2,3", "--gen", "2"}, extra...)...)
}

// damaged returns a case that copies the demo, damages the copy and runs it.
func damaged(id, name, want string, quick bool, code int, msg string, damage func(dir string) error) Case {
	return Case{ID: id, Name: name, Want: want, Quick: quick, Run: func(e *Env) Result {
		dir := e.copyDir(e.Demo, "demo")
		if err := damage(dir); err != nil {
			if strings.HasPrefix(err.Error(), "skip:") {
				return skip(err.Error())
			}
			panic(err)
		}
		return expect(e.runIDs(dir), code, msg)
	}}
}

func checkpointCases() []Case {
	s2 := func(dir string) string { return filepath.Join(dir, S2) }
	bf := func(v uint16) []byte { return []byte{byte(v), byte(v >> 8)} }
	cs := []Case{
		damaged("1.1", "S2 truncated by 1000 bytes", "rc1, names the tensor", true, 1, "end past the end of the file",
			func(d string) error { return truncateBy(s2(d), 1000) }),
		damaged("1.2", "S2 truncated to 4 bytes", "rc1", false, 1, "too short for a header length",
			func(d string) error { return os.Truncate(s2(d), 4) }),
		damaged("1.3", "S2 truncated inside its header", "rc1", false, 1, "exceeds the file size",
			func(d string) error { return os.Truncate(s2(d), 5000) }),
		damaged("1.4", "last shard missing its last byte", "rc1", false, 1, "past the end",
			func(d string) error { return truncateBy(shard(d, 9), 1) }),
		damaged("1.5", "header length 0", "rc1", false, 1, "header length 0 is impossible",
			func(d string) error { return setHeaderLen(s2(d), 0) }),
		damaged("1.6", "header length 0xFFFFFFFFFFFFFFFF", "rc1", false, 1, "exceeds the 104857600-byte limit",
			func(d string) error { return setHeaderLen(s2(d), ^uint64(0)) }),
		damaged("1.7", "header length one byte short (cuts a padding space)", "rc1 (was: every token 0, rc0)", true, 1, "header",
			func(d string) error {
				n, err := headerLen(s2(d))
				if err != nil {
					return err
				}
				return setHeaderLen(s2(d), n-1)
			}),
		damaged("1.8", "header length +8", "rc1", false, 1, "past the end",
			func(d string) error {
				n, err := headerLen(s2(d))
				if err != nil {
					return err
				}
				return setHeaderLen(s2(d), n+8)
			}),
		damaged("1.9", "4 KB of junk after the data region", "rc1: bytes of no tensor", false, 1, "belong to no tensor",
			func(d string) error { return appendBytes(s2(d), randomBytes(4096)) }),
		damaged("1.10", `header {"dtype" changed to {Xdtype`, "rc1", false, 1, "header:",
			func(d string) error { return editHeader(s2(d), `{"dtype"`, `{Xdtype"`) }),
		damaged("1.11", "dtype BF17", "rc1", false, 1, "BF17 is not supported",
			func(d string) error { return editHeader(s2(d), `"BF16"`, `"BF17"`) }),
		damaged("1.12", "shard listed in the index is missing", "rc1", true, 1, "model-00003-of-00009.safetensors is missing: layer 2 needs",
			func(d string) error { return os.Remove(shard(d, 3)) }),
		damaged("1.13", "index is 3000 random bytes", "rc1", false, 1, "index",
			func(d string) error {
				return os.WriteFile(filepath.Join(d, "model.safetensors.index.json"), randomBytes(3000), 0o644)
			}),
		damaged("1.14", "index is empty", "rc1", false, 1, "truncated",
			func(d string) error {
				return os.WriteFile(filepath.Join(d, "model.safetensors.index.json"), nil, 0o644)
			}),
		damaged("1.15", "index names a tensor no shard has", "rc1", false, 1, "not present in this shard",
			func(d string) error {
				return editJSON(filepath.Join(d, "model.safetensors.index.json"), func(m map[string]any) {
					m["weight_map"].(map[string]any)["language_model.model.layers.0.bogus.weight"] = S2
				})
			}),
		damaged("1.16", "BF16 NaN in layer-1 input_layernorm", "rc1 naming layer 1 (was: token 0, rc0)", true, 1, "first appeared in the output of layer 1",
			func(d string) error {
				return patchTensor(d, "language_model.model.layers.1.input_layernorm.weight", 0, bf(0x7FC0))
			}),
		damaged("1.17", "BF16 +Inf in layer-1 o_proj", "rc1 naming layer 1", false, 1, "non-finite values",
			func(d string) error {
				return patchTensor(d, "language_model.model.layers.1.self_attn.o_proj.weight", 0, bf(0x7F80))
			}),
		damaged("1.18", "NaN in the embedding row of a prompt token", "rc1 naming the embedding", false, 1, "the embedding of token id 1",
			func(d string) error {
				return patchTensor(d, "language_model.model.embed_tokens.weight", 2*64, bf(0x7FC0))
			}),
		damaged("1.19", "a shard replaced by a FIFO", "rc1 at once (was: hang)", true, 1, "named pipe",
			func(d string) error {
				if err := os.Remove(s2(d)); err != nil {
					return err
				}
				if err := syscall.Mkfifo(s2(d), 0o644); err != nil {
					return fmt.Errorf("skip: no FIFOs: %v", err)
				}
				return nil
			}),
		damaged("1.20", "config.json replaced by a FIFO", "an error at once", false, 1, "named pipe",
			func(d string) error {
				p := filepath.Join(d, "config.json")
				os.Remove(p)
				if err := syscall.Mkfifo(p, 0o644); err != nil {
					return fmt.Errorf("skip: no FIFOs: %v", err)
				}
				return nil
			}),
		damaged("1.21", "a shard is a directory", "rc1", false, 1, "not a regular file",
			func(d string) error {
				if err := os.Remove(s2(d)); err != nil {
					return err
				}
				return os.Mkdir(s2(d), 0o755)
			}),
		damaged("1.22", "a shard is a symlink loop", "rc1", false, 1, "too many levels of symbolic links",
			func(d string) error {
				if err := os.Remove(s2(d)); err != nil {
					return err
				}
				return os.Symlink(S2, s2(d))
			}),
		damaged("1.23", "empty shard", "rc1", false, 1, "0 bytes",
			func(d string) error { return os.Truncate(s2(d), 0) }),
		damaged("1.24", "config missing hidden_size", "rc2 naming it", true, 2, "missing 1 required field(s): hidden_size",
			func(d string) error {
				return editJSON(filepath.Join(d, "config.json"), func(m map[string]any) { delete(textConfig(m), "hidden_size") })
			}),
		damaged("1.25", "config num_hidden_layers 7, checkpoint has 8", "rc1 (was: layer 8 ignored, rc0)", true, 1, "the checkpoint has weights for 8 layers",
			func(d string) error {
				return editJSON(filepath.Join(d, "config.json"), func(m map[string]any) {
					tc := textConfig(m)
					tc["num_hidden_layers"] = 7
					lc := tc["linear_attn_config"].(map[string]any)
					lc["full_attn_layers"] = []int{3, 6}
					lc["kda_layers"] = []int{1, 2, 4, 5, 7}
				})
			}),
		damaged("1.26", "config with a duplicate hidden_size key", "rc2 naming the key (was: last wins)", true, 2, `duplicate key "text_config.hidden_size"`,
			func(d string) error {
				return replaceIn(filepath.Join(d, "config.json"), `"hidden_size": 64,`, `"hidden_size": 128, "hidden_size": 64,`)
			}),
		damaged("1.27", "non-UTF-8 bytes in config model_type", "rc2 (was: accepted)", false, 2, "invalid UTF-8",
			func(d string) error {
				return replaceIn(filepath.Join(d, "config.json"), `"model_type": "kimi_k3"`, "\"model_type\": \"kimi\xff\xfe\"")
			}),
		damaged("1.28", `config eos_token_id "x"`, "rc2 (was: ignored)", false, 2, "eos_token_id is a string",
			func(d string) error {
				return editJSON(filepath.Join(d, "config.json"), func(m map[string]any) { textConfig(m)["eos_token_id"] = "x" })
			}),
		damaged("1.29", "config eos_token_id 99999 (past the vocabulary)", "rc2 (was: accepted)", false, 2, "outside the vocabulary",
			func(d string) error {
				return editJSON(filepath.Join(d, "config.json"), func(m map[string]any) { textConfig(m)["eos_token_id"] = 99999 })
			}),
		damaged("1.30", "config is 2000 random bytes", "rc2", false, 2, "not a JSON object",
			func(d string) error { return os.WriteFile(filepath.Join(d, "config.json"), randomBytes(2000), 0o644) }),
		damaged("1.31", "config rms_norm_eps 1e300 (past float32)", "rc2", false, 2, "outside the float32 range",
			func(d string) error {
				return editJSON(filepath.Join(d, "config.json"), func(m map[string]any) { textConfig(m)["rms_norm_eps"] = 1e300 })
			}),
		{ID: "1.32", Name: "k3 pack on a shard truncated by 1000 bytes", Want: "rc1", Run: func(e *Env) Result {
			dir := e.copyDir(e.Demo, "demo")
			must(truncateBy(s2(dir), 1000))
			return expect(e.k3(nil, "pack", dir, filepath.Join(e.dir("t"), "T"), "--disk-test-mb", "0", "--quiet"), 1, "end past the end")
		}},
	}
	return cs
}

func trunkCases() []Case {
	// trunkCopy copies the demo's packed trunk and damages it.
	mk := func(id, name, want string, quick bool, code int, msg string, damage func(t string) error) Case {
		return Case{ID: id, Name: name, Want: want, Quick: quick, Run: func(e *Env) Result {
			t := e.copyDir(e.Trunk, "trunk")
			must(damage(t))
			return expect(e.runIDs(e.Demo, "--trunk", t, "--trunk-gb", "0.0005", "--cache-gb", "0.001"), code, msg)
		}}
	}
	tj := func(t string) string { return filepath.Join(t, "trunk.json") }
	editRun := func(t string, i int, fn func(r map[string]any)) error {
		return editJSON(tj(t), func(m map[string]any) { fn(m["runs"].([]any)[i].(map[string]any)) })
	}
	flip := flipRun
	return []Case{
		mk("2.1", "trunk.json is random bytes", "rc1", false, 1, "invalid JSON", func(t string) error { return os.WriteFile(tj(t), randomBytes(500), 0o644) }),
		mk("2.2", "trunk.json truncated", "rc1", true, 1, "truncated JSON", func(t string) error { return truncateBy(tj(t), 300) }),
		mk("2.3", "trunk.json empty", "rc1", false, 1, "empty file", func(t string) error { return os.WriteFile(tj(t), nil, 0o644) }),
		mk("2.4", "unknown field in trunk.json", "rc1", false, 1, `unknown field "extra"`,
			func(t string) error { return editJSON(tj(t), func(m map[string]any) { m["extra"] = 1 }) }),
		mk("2.5", "one run's crc32c changed", "rc1, repack", true, 1, "CRC-32C",
			func(t string) error {
				return editRun(t, 4, func(r map[string]any) { r["crc32c"] = json.Number(fmt.Sprint(mustInt(r["crc32c"]) ^ 1)) })
			}),
		mk("2.6", "a run's offset +4096", "rc1", false, 1, "overlap",
			func(t string) error {
				return editRun(t, 4, func(r map[string]any) { r["offset"] = json.Number(fmt.Sprint(mustInt(r["offset"]) + 4096)) })
			}),
		mk("2.7", "a tensor's dtype BF16 -> F16 in trunk.json", "rc1 (was: other logits, rc0)", true, 1, "in trunk.json",
			func(t string) error {
				return editRun(t, 3, func(r map[string]any) {
					for _, x := range r["tensors"].([]any) {
						if tt := x.(map[string]any); tt["dtype"] == "BF16" {
							tt["dtype"] = "F16"
							return
						}
					}
				})
			}),
		mk("2.8", "trunk.json version 5 (newer than this k3)", "rc1", false, 1, "version 5 is not supported",
			func(t string) error { return editJSON(tj(t), func(m map[string]any) { m["version"] = 5 }) }),
		mk("2.9", "trunk.bin 4 KB short", "rc1", false, 1, "truncated", func(t string) error { return truncateBy(filepath.Join(t, "trunk.bin"), 4096) }),
		mk("2.10", "trunk.bin 4 KB longer", "rc1", false, 1, "total_bytes", func(t string) error { return appendBytes(filepath.Join(t, "trunk.bin"), make([]byte, 4096)) }),
		mk("2.11", "trunk.bin missing", "an error naming it", false, 2, "trunk.bin", func(t string) error { return os.Remove(filepath.Join(t, "trunk.bin")) }),
		mk("2.12", "flipped bit in the embed run", "rc1 CRC", false, 1, "CRC-32C", func(t string) error { return flip(t, "embed") }),
		mk("2.13", "flipped bit in layer.7 (streamed)", "rc1 CRC at first read", true, 1, "CRC-32C", func(t string) error { return flip(t, "layer.7") }),
		{ID: "2.14", Name: "trunk of tiny-release used with demo", Want: "rc1", Run: func(e *Env) Result {
			t := filepath.Join(e.dir("t"), "T")
			must(expectOK(e.k3(nil, "pack", e.Tiny, t, "--disk-test-mb", "0", "--quiet")))
			return expect(e.runIDs(e.Demo, "--trunk", t), 1, "different checkpoint")
		}},
		{ID: "2.15", Name: "fine-tune (same layout, other weights) with the old trunk: run", Want: "rc1 (was: the old model's output, rc0)", Quick: true, Run: func(e *Env) Result {
			ft := fineTune(e)
			return expect(e.runIDs(ft, "--trunk", e.copyDir(e.Trunk, "trunk")), 1, "was modified after the trunk")
		}},
		{ID: "2.16", Name: "fine-tune: k3 pack FT T where T holds demo's trunk", Want: "rc2, repack offered, T unchanged", Quick: true, Run: func(e *Env) Result {
			ft := fineTune(e)
			t := e.copyDir(e.Trunk, "trunk")
			before, _ := os.ReadFile(tj(t))
			r := e.k3(nil, "pack", ft, t, "--disk-test-mb", "0", "--quiet")
			if strings.Contains(r.stdout, "already complete") {
				return Result{Loss, "called the stale trunk complete: " + lastLine(r.stdout), r.code}
			}
			return then(expect(r, 2, "changed after the trunk", "--force"), unchanged(tj(t), before))
		}},
		{ID: "2.17", Name: "checkpoint copied (same bytes, new mtimes): pack compares, keeps", Want: "rc0, trunk.bin kept; then run rc0", Run: func(e *Env) Result {
			cp := e.copyDir(e.Demo, "copy")
			t := e.copyDir(e.Trunk, "trunk")
			bin := filepath.Join(t, "trunk.bin")
			st0, _ := os.Stat(bin)
			r := e.k3(nil, "pack", cp, t, "--disk-test-mb", "0", "--quiet")
			res := expectRan(r, func() error {
				if !strings.Contains(r.stdout, "match the packed ones") {
					return fmt.Errorf("no comparison reported: %s", lastLine(r.stdout))
				}
				st1, _ := os.Stat(bin)
				if !st1.ModTime().Equal(st0.ModTime()) {
					return fmt.Errorf("trunk.bin rewritten")
				}
				return nil
			})
			if res.Verdict != Ran {
				return res
			}
			return expect(e.runIDs(cp, "--trunk", t), 0)
		}},
		{ID: "2.18", Name: "version 1 trunk.json (names and sizes only)", Want: "run rc1; pack checks and upgrades, rc0", Run: func(e *Env) Result {
			t := e.copyDir(e.Trunk, "trunk")
			must(editJSON(tj(t), func(m map[string]any) {
				m["version"] = 1
				for _, f := range m["source"].(map[string]any)["files"].([]any) {
					delete(f.(map[string]any), "mtime_ns")
					delete(f.(map[string]any), "header_sha256")
				}
				delete(m["source"].(map[string]any), "weights_sha256")
			}))
			if res := expect(e.runIDs(e.Demo, "--trunk", t), 1, "written by an older k3"); res.Verdict != Clear {
				return res
			}
			r := e.k3(nil, "pack", e.Demo, t, "--disk-test-mb", "0", "--quiet")
			return expectRan(r, func() error { return sameFile(tj(t), tj(e.Trunk)) })
		}},
		{ID: "2.19", Name: "corrupt trunk.json, then k3 pack", Want: "rc2 without --force, rc0 with it", Run: func(e *Env) Result {
			t := e.copyDir(e.Trunk, "trunk")
			must(truncateBy(tj(t), 200))
			if res := expect(e.k3(nil, "pack", e.Demo, t, "--disk-test-mb", "0", "--quiet"), 2, "--force"); res.Verdict != Clear {
				return res
			}
			return expectRan(e.k3(nil, "pack", e.Demo, t, "--disk-test-mb", "0", "--quiet", "--force"), func() error { return sameFile(tj(t), tj(e.Trunk)) })
		}},
		{ID: "2.20", Name: "trunk.partial.json truncated after a kill", Want: "starts over, identical result", Run: func(e *Env) Result {
			t := filepath.Join(e.dir("t"), "T")
			must(os.MkdirAll(t, 0o755))
			must(os.WriteFile(filepath.Join(t, "trunk.partial.json"), []byte(`{"format":"k3-trunk","ver`), 0o644))
			r := e.k3(nil, "pack", e.Demo, t, "--disk-test-mb", "0", "--quiet")
			return expectRan(r, func() error {
				if err := sameFile(filepath.Join(t, "trunk.bin"), filepath.Join(e.Trunk, "trunk.bin")); err != nil {
					return err
				}
				return sameFile(tj(t), tj(e.Trunk))
			})
		}},
	}
}

func mustInt(v any) int64 {
	n, err := v.(json.Number).Int64()
	must(err)
	return n
}

func expectOK(r run) error {
	if r.code != 0 {
		return fmt.Errorf("rc%d: %s", r.code, lastLine(r.stderr))
	}
	return nil
}

// fineTune is a demo copy with one trunk tensor's weights changed: same
// names, sizes and headers, newer files.
func fineTune(e *Env) string {
	ft := e.copyDir(e.Demo, "finetune")
	must(mapTensor(ft, "language_model.model.layers.2.self_attn.o_proj.weight", func(b []byte) {
		for i := range b {
			b[i] ^= 0x01
		}
	}))
	later := time.Now().Add(time.Minute)
	p, _, _, _, err := tensorAt(ft, "language_model.model.layers.2.self_attn.o_proj.weight")
	must(err)
	must(os.Chtimes(p, later, later))
	return ft
}

func stateCases() []Case {
	saved := func(e *Env) string {
		p := filepath.Join(e.dir("state"), "P")
		must(expectOK(e.k3(nil, "run", e.Demo, "--ids", "1,2,3", "--gen", "0", "--save-state", p)))
		return p
	}
	load := func(e *Env, dir, p string, extra ...string) run {
		return e.k3(nil, append([]string{"run", dir, "--ids", "4,5", "--gen", "2", "--load-state", p}, extra...)...)
	}
	corrupt := func(id, name, msg string, damage func(p string) error) Case {
		return Case{ID: id, Name: name, Want: "rc1", Run: func(e *Env) Result {
			p := saved(e)
			must(damage(p))
			return expect(load(e, e.Demo, p), 1, msg)
		}}
	}
	return []Case{
		{ID: "3.1", Name: "save, then load: same tokens as one run", Want: "rc0, identical ids", Quick: true, Run: func(e *Env) Result {
			p := saved(e)
			d := e.dir("out")
			a, b := filepath.Join(d, "a.json"), filepath.Join(d, "b.json")
			must(expectOK(e.k3(nil, "run", e.Demo, "--ids", "1,2,3,4,5", "--gen", "2", "--out", a)))
			return expectRan(load(e, e.Demo, p, "--out", b), func() error { return sameIDs(a, b) })
		}},
		corrupt("3.2", "state: byte flipped in the middle", "checksum mismatch", func(p string) error {
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 1
			return os.WriteFile(p, b, 0o644)
		}),
		corrupt("3.3", "state: truncated to half", "checksum mismatch", func(p string) error {
			st, _ := os.Stat(p)
			return os.Truncate(p, st.Size()/2)
		}),
		corrupt("3.4", "state: magic byte flipped", "not a k3 state file", func(p string) error {
			b, _ := os.ReadFile(p)
			b[0] ^= 1
			return os.WriteFile(p, b, 0o644)
		}),
		{ID: "3.5", Name: "state from demo-medium loaded into demo", Want: "rc1 another model", Run: func(e *Env) Result {
			med, err := e.medium()
			must(err)
			p := filepath.Join(e.dir("state"), "M")
			must(expectOK(e.k3(nil, "run", med, "--ids", "1,2,3", "--gen", "0", "--save-state", p)))
			return expect(load(e, e.Demo, p), 1, "another model")
		}},
		{ID: "3.6", Name: "same model reached by an absolute path and a copy", Want: "rc0 (was: refused as another model)", Quick: true, Run: func(e *Env) Result {
			p := saved(e)
			rel, err := filepath.Rel(e.Work, e.Demo)
			must(err)
			r := e.command("run", rel, "--ids", "4", "--gen", "1", "--load-state", p)
			r.Dir = e.Work
			out, err := r.CombinedOutput()
			if err != nil {
				return Result{Wrong, "relative path: " + lastLine(string(out)), exitCode(err)}
			}
			if res := expect(load(e, e.copyDir(e.Demo, "moved"), p), 0); res.Verdict != Ran {
				return res
			}
			return expect(load(e, e.Demo, p, "--config", filepath.Join(e.Demo, "config.json")), 0)
		}},
		corrupt("3.8", "state: position count set to 0xFFFFFFFF", "checksum mismatch", func(p string) error {
			b, _ := os.ReadFile(p)
			b[24], b[25], b[26], b[27] = 0xff, 0xff, 0xff, 0xff
			return os.WriteFile(p, b, 0o644)
		}),
		{ID: "3.7", Name: "--save-state into a missing directory", Want: "rc3 before the run", Run: func(e *Env) Result {
			return expect(e.runIDs(e.Demo, "--save-state", filepath.Join(e.Work, "no", "dir", "s")), 3, "cannot write")
		}},
	}
}

func sameIDs(a, b string) error {
	var x, y struct {
		Gen []int `json:"generated_ids"`
	}
	ra, err := os.ReadFile(a)
	if err != nil {
		return err
	}
	rb, err := os.ReadFile(b)
	if err != nil {
		return err
	}
	json.Unmarshal(ra, &x)
	json.Unmarshal(rb, &y)
	if fmt.Sprint(x.Gen) != fmt.Sprint(y.Gen) || len(x.Gen) == 0 {
		return fmt.Errorf("generated %v vs %v", x.Gen, y.Gen)
	}
	return nil
}

func historyCases() []Case {
	good := `{"role":"user","content":"hi"}` + "\n" + `{"role":"assistant","content":"yo"}` + "\n"
	bad := func(id, name, body, msg string, quick bool) Case {
		return Case{ID: id, Name: name, Want: "rc2 with the line number, file unchanged", Quick: quick, Run: func(e *Env) Result {
			h := filepath.Join(e.dir("hist"), "H")
			must(os.WriteFile(h, []byte(body), 0o644))
			r := e.k3(strings.NewReader("hi\n"), "chat", e.Demo, "--history", h, "--gen", "4")
			return then(expect(r, 2, msg), unchanged(h, []byte(body)))
		}}
	}
	return []Case{
		bad("4.1", "history line cut mid-string", good+`{"role":"user","content":"ab`, "line 3", false),
		bad("4.2", "history line with an unknown role", good+`{"role":"wizard","content":"x"}`+"\n", "line 3: unknown role", false),
		bad("4.3", "history line with invalid UTF-8", good+"{\"role\":\"user\",\"content\":\"\xff\xfe\"}\n", "line 3: invalid UTF-8", true),
		bad("4.4", "history line with a duplicate key", good+`{"role":"user","content":"a","content":"b"}`+"\n", `line 3: duplicate key "content"`, true),
		bad("4.5", "history is 4000 random bytes", string(randomBytes(4000)), "line 1", false),
		bad("4.9", "history tool message with no tool call", good+`{"role":"user","content":"x"}`+"\n"+`{"role":"tool","content":"42"}`+"\n", "line 4: tool result without", false),
		{ID: "4.6", Name: "good history: a turn is appended", Want: "rc0, 2 -> 4 lines", Quick: true, Run: func(e *Env) Result {
			h := filepath.Join(e.dir("hist"), "H")
			must(os.WriteFile(h, []byte(good), 0o644))
			return expectRan(e.k3(strings.NewReader("again\n"), "chat", e.Demo, "--history", h, "--gen", "4"), func() error {
				if n, _ := lines(h); n != 4 {
					return fmt.Errorf("%d lines", n)
				}
				return nil
			})
		}},
		{ID: "4.7", Name: "a stdin line over 16 MiB, then 'hi'", Want: "message, the next line still answered", Run: func(e *Env) Result {
			h := filepath.Join(e.dir("hist"), "H")
			in := strings.Repeat("a", 17<<20) + "\nhi\n"
			r := e.k3(strings.NewReader(in), "chat", e.Demo, "--history", h, "--gen", "4")
			return then(expect(r, 0, "longer than 16 MiB and was not sent"), func() error {
				if n, _ := lines(h); n != 2 {
					return fmt.Errorf("the line after it was not answered (%d history lines)", n)
				}
				return nil
			})
		}},
		{ID: "4.8", Quick: true, Name: "model emits <|open|> then <|sep|> (crafted lm_head)", Want: "rc0, the turn kept (was: panic)", Run: func(e *Env) Result {
			dir := e.copyDir(e.Demo, "opensep")
			if _, err := craftOpenSep(dir); err != nil {
				return Result{Wrong, err.Error(), -1}
			}
			h := filepath.Join(e.dir("hist"), "H")
			r := e.k3(strings.NewReader("hello\n"), "chat", dir, "--greedy", "--gen", "64", "--history", h)
			return then(expect(r, 0), func() error {
				if n, _ := lines(h); n != 2 {
					return fmt.Errorf("turn not kept: %d history lines", n)
				}
				return nil
			})
		}},
	}
}

func flagCases() []Case {
	f := func(id, flagText, msg string, quick bool, args ...string) Case {
		return Case{ID: id, Name: "run " + flagText, Want: "rc2 before the run", Quick: quick, Run: func(e *Env) Result {
			return expect(e.k3(nil, append([]string{"run", e.Demo, "--gen", "2"}, args...)...), 2, msg)
		}}
	}
	ids := []string{"--ids", "1,2,3"}
	return []Case{
		f("5.1", "--ids 1,512 (vocab 512)", "outside the vocabulary", false, "--ids", "1,512"),
		f("5.2", "--ids +5", "is not a non-negative integer", true, "--ids", "+5"),
		f("5.3", "--ids 1,-5", "is not a non-negative integer", false, "--ids", "1,-5"),
		f("5.4", "--cache-gb 9.3e9 (int64 overflow)", "budgets are at most", true, append(ids, "--cache-gb", "9.3e9")...),
		f("5.5", "--cache-gb Inf", "want a finite number", true, append(ids, "--cache-gb", "Inf")...),
		f("5.6", "--cache-gb NaN", "want a finite number", false, append(ids, "--cache-gb", "NaN")...),
		f("5.7", "--trunk-gb 1e300", "budgets are at most", false, append(ids, "--trunk-gb", "1e300")...),
		f("5.8", "--threads -3", "--threads -3 must be 0", true, append(ids, "--threads", "-3")...),
		f("5.9", "--layers -1", "--layers -1 must be 0", false, append(ids, "--layers", "-1")...),
		f("5.10", "--layers 1000", "1000 layers asked for, the model has 8", true, append(ids, "--layers", "1000")...),
		f("5.11", "--gen 0x10", "want a decimal integer", false, append(ids[:2:2], "--gen", "0x10")...),
		f("5.12", "--stop-id +5", "want a non-negative integer", false, append(ids, "--stop-id", "+5")...),
		{ID: "5.13", Name: "chat --temperature NaN", Want: "rc2", Run: func(e *Env) Result {
			return expect(e.k3(strings.NewReader("hi\n"), "chat", e.Demo, "--temperature", "NaN"), 2, "want a finite number")
		}},
		{ID: "5.14", Name: "run --dump-cache-trace into a path under a file, with --out", Want: "rc3 before the run (was: --out lost)", Run: func(e *Env) Result {
			file := filepath.Join(e.dir("f"), "plain")
			must(os.WriteFile(file, nil, 0o644))
			return expect(e.runIDs(e.Demo, "--dump-cache-trace", filepath.Join(file, "t"), "--out", filepath.Join(e.Work, "o.json")), 3, "--dump-cache-trace")
		}},
	}
}

// sameTrunk compares a packed trunk with the reference pack of the same
// checkpoint.
func sameTrunk(t, ref string) error {
	for _, f := range []string{"trunk.bin", "trunk.json"} {
		if err := sameFile(filepath.Join(t, f), filepath.Join(ref, f)); err != nil {
			return err
		}
	}
	if _, err := os.Stat(filepath.Join(t, "trunk.partial.json")); err == nil {
		return fmt.Errorf("trunk.partial.json left")
	}
	return nil
}

// leftovers lists temporary files of k3's naming in dir.
func leftovers(dir string) []string {
	var out []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, ".") && (strings.Contains(n, ".tmp") || strings.HasPrefix(n, ".k3-disktest-")) {
			out = append(out, n)
		}
	}
	return out
}

// clean is a check that runs checks in turn, then finds no temporary
// file of k3's naming left in dir.
func clean(dir string, checks ...func() error) func() error {
	return func() error {
		for _, c := range checks {
			if err := c(); err != nil {
				return err
			}
		}
		if l := leftovers(dir); len(l) > 0 {
			return fmt.Errorf("left behind: %v", l)
		}
		return nil
	}
}

// chatProc is a k3 chat kept running on a history, fed turn by turn.
type chatProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	rd  *bufio.Reader
}

// holdChat starts k3 chat on history h, generating gen tokens a turn.
func (e *Env) holdChat(h, gen string) *chatProc {
	a := e.command("chat", e.Demo, "--history", h, "--gen", gen)
	in, err := a.StdinPipe()
	must(err)
	out, err := a.StdoutPipe()
	must(err)
	must(a.Start())
	return &chatProc{cmd: a, in: in, rd: bufio.NewReader(out)}
}

// turn sends msg and reads until a line says "prompt positions reused"
// (the turn is answered and saved) or the output ends.
func (c *chatProc) turn(msg string) {
	io.WriteString(c.in, msg+"\n")
	readUntil(c.rd, "prompt positions reused")
}

// startRead starts cmd with its output read line by line from the
// returned reader and its errors kept in the returned builder.
func startRead(cmd *exec.Cmd) (*bufio.Reader, *strings.Builder) {
	so, err := cmd.StdoutPipe()
	must(err)
	er := &strings.Builder{}
	cmd.Stderr = er
	must(cmd.Start())
	return bufio.NewReader(so), er
}

// readUntil reads lines from rd until one contains s or the output ends.
func readUntil(rd *bufio.Reader, s string) {
	for {
		l, err := rd.ReadString('\n')
		if strings.Contains(l, s) || err != nil {
			return
		}
	}
}

// close ends the chat's input and waits for it to exit.
func (c *chatProc) close() {
	c.in.Close()
	c.cmd.Wait()
}

func (c *chatProc) kill() { c.cmd.Process.Kill() }

// flipRun flips one bit 100 bytes into trunk t's run called run.
func flipRun(t, run string) error {
	var m struct {
		Runs []struct {
			Name   string
			Offset int64
		}
	}
	raw, _ := os.ReadFile(filepath.Join(t, "trunk.json"))
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	for _, r := range m.Runs {
		if r.Name == run {
			f, err := os.OpenFile(filepath.Join(t, "trunk.bin"), os.O_RDWR, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			b := []byte{0}
			f.ReadAt(b, r.Offset+100)
			b[0] ^= 0x10
			_, err = f.WriteAt(b, r.Offset+100)
			return err
		}
	}
	return fmt.Errorf("no run %s", run)
}
