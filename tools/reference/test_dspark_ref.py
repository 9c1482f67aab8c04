#!/usr/bin/python3
"""Self-checks of dspark_ref.py (docs/DSPARK.md).

    /usr/bin/python3 tools/reference/test_dspark_ref.py -v

1. Rotary tables: the released YaRN parameters give the documented correction range, frequencies
   and softmax scale; the rotation is the interleaved-pair rotation, scales norms by the amplitude
   and (amplitude 1) depends only on relative positions.
2. The vectorised MLA block attention equals a naive per-head, per-query loop written separately.
3. Markov bias, non-causal block, and that packing many blocks with a mask (training) equals
   drafting each block alone (inference).
4. Taps: causal (a prefix's taps equal the prefix of a longer sequence's taps, which is why
   context rows may come from different passes), and equal to k3ref's traced prefix sums.
5. Refusals: missing config fields named, a drafter for another target, unknown/NaN tensors.
6. The committed fixtures (testdata/models/*/draft/expect.json) reproduce.
"""
import copy
import json
import math
import os
import sys
import tempfile
import unittest

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import k3ref  # noqa: E402
import dspark_ref  # noqa: E402
import make_drafts  # noqa: E402

REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
MODELS = os.path.join(REPO, "testdata", "models")
TARGET_DIRS = {"demo": os.path.join(REPO, "assets", "demo", "model")}

RELEASE_CONFIG = {
    "model_type": "k3_dspark", "hidden_size": 7168, "intermediate_size": 14336, "num_hidden_layers": 5,
    "num_attention_heads": 64, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "v_head_dim": 128, "mla_use_nope": False, "mla_use_output_gate": False,
    "vocab_size": 163840, "rms_norm_eps": 1e-05, "rope_theta": 50000.0, "num_target_layers": 5,
    "target_hidden_size": 7168, "target_num_hidden_layers": 93, "target_layer_ids": [2, 23, 47, 71, 89],
    "mask_token_id": 163837, "markov_rank": 256, "draft_vocab_size": 163840,
    "rope_parameters": dict(make_drafts.RELEASE_ROPE)}

_cache = {}


def target(name):
    if name not in _cache:
        _cache[name] = k3ref.K3Model.load(TARGET_DIRS.get(name, os.path.join(MODELS, name)))
    return _cache[name]


def draft(name):
    key = "draft:" + name
    if key not in _cache:
        _cache[key] = dspark_ref.DSparkDraft.load(os.path.join(MODELS, name, "draft"))
    return _cache[key]


def naive_mla(x, pos, lp, cfg, ctx, inv, A):
    """Loop version of the block attention (no einsum, no batching), float64."""
    N, dn, dr, dv = cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim
    r, eps = cfg.kv_lora_rank, cfg.rms_norm_eps

    def norm(v, w):
        return w * v / math.sqrt(float((v * v).mean()) + eps)

    def rot(v, p):
        out = v.clone()
        for i in range(dr // 2):
            th = p * float(inv[i])
            c, s = A * math.cos(th), A * math.sin(th)
            out[2 * i] = v[2 * i] * c - v[2 * i + 1] * s
            out[2 * i + 1] = v[2 * i + 1] * c + v[2 * i] * s
        return out
    keys = []                                   # (lat, kpe) rows: context then block
    for j in range(ctx[0].shape[0]):
        keys.append((ctx[0][j], ctx[1][j]))
    for t in range(x.shape[0]):
        kv = lp["self_attn.kv_a_proj_with_mqa.weight"] @ x[t]
        keys.append((norm(kv[:r], lp["self_attn.kv_a_layernorm.weight"]), rot(kv[r:], int(pos[t]))))
    scale = dspark_ref.softmax_scale(cfg)
    out = torch.zeros(x.shape[0], N * dv, dtype=torch.float64)
    for t in range(x.shape[0]):
        qa = norm(lp["self_attn.q_a_proj.weight"] @ x[t], lp["self_attn.q_a_layernorm.weight"])
        q = (lp["self_attn.q_b_proj.weight"] @ qa).reshape(N, dn + dr)
        for h in range(N):
            qh = torch.cat([q[h, :dn], rot(q[h, dn:], int(pos[t]))])
            sc, vs = [], []
            for lat, kpe in keys:
                kvb = (lp["self_attn.kv_b_proj.weight"] @ lat).reshape(N, dn + dv)[h]
                sc.append(scale * float(qh @ torch.cat([kvb[:dn], kpe])))
                vs.append(kvb[dn:])
            m = max(sc)
            e = [math.exp(s - m) for s in sc]
            z = sum(e)
            out[t, h * dv:(h + 1) * dv] = sum(ei / z * v for ei, v in zip(e, vs))
    return out @ lp["self_attn.o_proj.weight"].t()


class TestRope(unittest.TestCase):
    def test_release_tables(self):
        cfg = dspark_ref.DSparkConfig(RELEASE_CONFIG)
        inv, A = dspark_ref.rope_tables(cfg)
        self.assertEqual(A, 1.0)
        self.assertEqual(inv.shape, (32,))
        for i in range(32):
            extra = 50000.0 ** (-2 * i / 64)
            if i <= 15:                               # low = floor(15.06) = 15: unscaled
                self.assertAlmostEqual(float(inv[i]) / extra, 1.0, places=12)
            elif i >= 26:                             # high = ceil(25.31) = 26: interpolated by 32
                self.assertAlmostEqual(float(inv[i]) / (extra / 32), 1.0, places=12)
            else:                                     # linear ramp in between
                ramp = (i - 15) / 11
                self.assertAlmostEqual(float(inv[i]), extra / 32 * ramp + extra * (1 - ramp), places=15)
        self.assertAlmostEqual(dspark_ref.softmax_scale(cfg), 192 ** -0.5 * (1 + 0.1 * math.log(32)) ** 2, places=15)
        self.assertAlmostEqual(dspark_ref.softmax_scale(cfg), 0.1308608, places=7)

    def test_amplitude_when_mscales_differ(self):
        c = dict(RELEASE_CONFIG, rope_parameters=dict(make_drafts.RELEASE_ROPE, mscale_all_dim=0.5))
        cfg = dspark_ref.DSparkConfig(c)
        _, A = dspark_ref.rope_tables(cfg)
        self.assertAlmostEqual(A, (1 + 0.1 * math.log(32)) / (1 + 0.05 * math.log(32)), places=15)
        self.assertAlmostEqual(dspark_ref.softmax_scale(cfg), 192 ** -0.5 * (1 + 0.05 * math.log(32)) ** 2, places=15)
        d = dict(RELEASE_CONFIG)
        d.pop("rope_parameters")
        cfg = dspark_ref.DSparkConfig(d)              # rope_theta only: plain RoPE
        inv, A = dspark_ref.rope_tables(cfg)
        self.assertEqual(A, 1.0)
        self.assertAlmostEqual(float(inv[5]), 50000.0 ** (-10 / 64), places=15)
        self.assertAlmostEqual(dspark_ref.softmax_scale(cfg), 192 ** -0.5, places=15)

    def test_interleaved_rotation(self):
        inv = torch.tensor([1.0, 0.25], dtype=torch.float64)
        x = torch.tensor([[1.0, 2.0, 3.0, 4.0]], dtype=torch.float64)
        y = dspark_ref.rope(x, torch.tensor([3]), inv, 1.5)[0]
        c0, s0, c1, s1 = math.cos(3), math.sin(3), math.cos(0.75), math.sin(0.75)
        want = [1.5 * (1 * c0 - 2 * s0), 1.5 * (2 * c0 + 1 * s0), 1.5 * (3 * c1 - 4 * s1), 1.5 * (4 * c1 + 3 * s1)]
        for g, w in zip(y.tolist(), want):
            self.assertAlmostEqual(g, w, places=14)
        self.assertAlmostEqual(float(y.norm()), 1.5 * float(x.norm()), places=12)

    def test_relative_positions(self):
        cfg = dspark_ref.DSparkConfig(RELEASE_CONFIG)
        inv, A = dspark_ref.rope_tables(cfg)
        g = torch.Generator().manual_seed(1)
        q, k = torch.randn(1, 64, generator=g, dtype=torch.float64), torch.randn(1, 64, generator=g, dtype=torch.float64)
        a = float(dspark_ref.rope(q, torch.tensor([40]), inv, A) @ dspark_ref.rope(k, torch.tensor([7]), inv, A).t())
        b = float(dspark_ref.rope(q, torch.tensor([1040]), inv, A) @ dspark_ref.rope(k, torch.tensor([1007]), inv, A).t())
        c = float(dspark_ref.rope(q, torch.tensor([41]), inv, A) @ dspark_ref.rope(k, torch.tensor([7]), inv, A).t())
        self.assertAlmostEqual(a, b, places=9)
        self.assertGreater(abs(a - c), 1e-6)


class TestBlock(unittest.TestCase):
    def test_mla_equals_naive_loops(self):
        for name in ("tiny-release", "tiny-flat-f32"):
            d = draft(name)
            cfg = d.cfg
            g = torch.Generator().manual_seed(5)
            x = torch.randn(3, cfg.hidden_size, generator=g, dtype=torch.float64)
            u = torch.randn(4, cfg.num_target_layers * cfg.target_hidden_size, generator=g, dtype=torch.float64)
            rows = d.context_rows(u, torch.arange(4))
            pos = torch.tensor([4, 5, 6])
            for li, lp in enumerate(d.layers):
                got = dspark_ref.mla_block(x, pos, lp, cfg, rows[li], d.inv, d.A)
                want = naive_mla(x, pos, lp, cfg, (rows[li][0], rows[li][1]), d.inv, d.A)
                self.assertLess(float((got - want).abs().max()), 1e-12 * (1 + float(want.abs().max())), name)

    def test_context_rows_skip_input_layernorm(self):
        d = draft("tiny-release")
        u = torch.randn(2, d.cfg.num_target_layers * d.cfg.target_hidden_size, dtype=torch.float64)
        rows = d.context_rows(u, torch.tensor([3, 9]))
        c = k3ref.rmsnorm(u @ d.params["context_proj.weight"].t(), d.params["context_norm.weight"], 1e-5)
        lp = d.layers[1]
        kv = c @ lp["self_attn.kv_a_proj_with_mqa.weight"].t()
        r = d.cfg.kv_lora_rank
        self.assertLess(float((rows[1][0] - k3ref.rmsnorm(kv[:, :r], lp["self_attn.kv_a_layernorm.weight"], 1e-5)).abs().max()), 1e-13)
        self.assertLess(float((rows[1][1] - dspark_ref.rope(kv[:, r:], torch.tensor([3, 9]), d.inv, d.A)).abs().max()), 1e-13)

    def test_markov_bias_and_greedy_chain(self):
        tg, d = target("tiny-release"), draft("tiny-release")
        seq, anchor = [5, 17, 99, 3, 250], 42
        r = d.draft(tg, seq, anchor, 4)
        w1, w2 = d.params["markov_head.markov_w1.weight"], d.params["markov_head.markov_w2.weight"]
        prev = [anchor] + r["draft"][:-1]
        for k in range(4):
            bias = w2 @ w1[prev[k]]
            self.assertLess(float((r["logits"][k] - r["U"][k] - bias).abs().max()), 1e-12)
            self.assertEqual(r["draft"][k], k3ref.argmax_first(r["logits"][k]))

    def test_block_is_non_causal(self):
        tg, d = target("tiny-release"), draft("tiny-release")
        seq, anchor = [5, 17, 99, 3, 250], 42
        U1 = d.draft(tg, seq, anchor, 1)["U"]
        U3 = d.draft(tg, seq, anchor, 3)["U"]
        self.assertGreater(float((U1[0] - U3[0]).abs().max()), 1e-6)   # position 0 sees the later mask rows

    def test_packed_blocks_equal_single_blocks(self):
        """Training packs blocks with a mask; each must equal the inference pass of its own block."""
        tg, d = target("tiny-flat-f32"), draft("tiny-flat-f32")
        seq = [7, 30, 200, 15, 9, 88, 61, 4]
        taps = dspark_ref.target_taps(tg, seq, d.cfg.target_layer_ids)
        T, B = len(seq), 3
        rows = d.context_rows(taps, torch.arange(T))
        emb, head = tg.params["model.embed_tokens.weight"], tg.params["lm_head.weight"]
        anchors = [(3, 77), (6, 150)]                 # (position n, anchor id): context rows < n
        ids, pos = [], []
        mask = torch.zeros(len(anchors) * B, T + len(anchors) * B, dtype=torch.bool)
        for j, (n, a) in enumerate(anchors):
            for k in range(B):
                ids.append(a if k == 0 else d.cfg.mask_token_id)
                pos.append(n + k)
                mask[j * B + k, :n] = True
                mask[j * B + k, T + j * B:T + j * B + B] = True
        U = k3ref.linear(d.block_hidden(emb[torch.tensor(ids)], torch.tensor(pos), rows, mask), head)
        for j, (n, a) in enumerate(anchors):
            single = d.draft_from_rows(emb, head, [(lat[:n], kpe[:n]) for lat, kpe in rows], n, a, B)["U"]
            self.assertLess(float((U[j * B:(j + 1) * B] - single).abs().max()), 1e-12)

    def test_mixed_length_training_blocks_equal_inference(self):
        """tools/demo/train_draft.py's packed pass with blocks of random lengths (the engine drafts
        the length its controller chooses): each block equals the inference pass at its own length,
        so a drafter trained only on full-length blocks is not what k = 1 or 2 runs."""
        sys.path.insert(0, os.path.join(REPO, "tools", "demo"))
        import train_draft  # noqa: E402
        import random
        tg, d = target("tiny-flat-f32"), draft("tiny-flat-f32")
        seq = [7, 30, 200, 15, 9, 88, 61, 4, 120, 33, 71, 5, 250, 19]
        taps = dspark_ref.target_taps(tg, seq, d.cfg.target_layer_ids)
        item = {"s": torch.tensor(seq), "taps": taps, "ok": torch.ones(len(seq), dtype=torch.bool), "prompt": 2}
        B, anchors = 4, 6
        u, ids, pos, prev, lab, w, mask = train_draft.make_batch([item], random.Random(3), anchors, B,
                                                                 d.cfg.mask_token_id, 4.0, mixed=True)
        T = u.shape[1]
        rows = d.context_rows(u[0].double(), torch.arange(T))     # make_batch packs float32 taps
        emb, head = tg.params["model.embed_tokens.weight"], tg.params["lm_head.weight"]
        U = k3ref.linear(d.block_hidden(emb[ids[0]], pos[0], rows, mask[0]), head)
        lengths = []
        for j in range(anchors):
            q0 = j * B
            b = int(mask[0, q0, T + q0:T + q0 + B].sum())        # the block's rows the anchor row sees
            n = int(pos[0, q0])
            lengths.append(b)
            self.assertEqual([bool(x) for x in mask[0, q0, :T]], [t < n for t in range(T)])
            self.assertTrue(all(float(w[0, q0 + k]) == 0 for k in range(b, B)))   # rows past it: no loss
            single = d.draft_from_rows(emb, head, [(lat[:n], kpe[:n]) for lat, kpe in rows], n, int(ids[0, q0]), b)
            self.assertLess(float((U[q0:q0 + b] - single["U"]).abs().max()), 1e-12)
            self.assertEqual([int(x) for x in lab[0, q0:q0 + b]], seq[n + 1:n + 1 + b])
        self.assertLess(min(lengths), B)
        self.assertGreater(len(set(lengths)), 1)

    def test_widened_drafter_drafts_as_the_trained_one(self):
        """tools/demo/train_draft.py --init-from with a wider --intermediate: the trained weights in
        the leading rows and columns and zero new down_proj columns give the same block logits, so a
        wider drafter starts where the trained one is; a narrower one is refused."""
        sys.path.insert(0, os.path.join(REPO, "tools", "demo"))
        import train_draft  # noqa: E402
        tg, d = target("tiny-flat-f32"), draft("tiny-flat-f32")
        I = d.cfg.intermediate_size
        wide_cfg = copy.copy(d.cfg)
        wide_cfg.intermediate_size = 2 * I + 3
        fresh = {k: v.detach().double() for k, v in train_draft.init_params(wide_cfg, 5).items()}
        wide = {k: train_draft.widen(d.params[k], fresh[k], k) for k in fresh}
        self.assertEqual(list(wide["layers.0.mlp.gate_proj.weight"].shape), [2 * I + 3, d.cfg.hidden_size])
        self.assertFalse(torch.equal(wide["layers.0.mlp.gate_proj.weight"][I:], torch.zeros_like(wide["layers.0.mlp.gate_proj.weight"][I:])))
        w = dspark_ref.DSparkDraft(wide_cfg, wide)
        seq = [7, 30, 200, 15, 9, 88, 61, 4]
        a = d.draft(tg, seq, 120, 4)
        b = w.draft(tg, seq, 120, 4)
        self.assertEqual(a["draft"], b["draft"])
        self.assertLess(float((a["U"] - b["U"]).abs().max()), 1e-12)
        with self.assertRaises(SystemExit):
            train_draft.widen(fresh["layers.0.mlp.gate_proj.weight"], d.params["layers.0.mlp.gate_proj.weight"],
                              "layers.0.mlp.gate_proj.weight")


class TestTaps(unittest.TestCase):
    def test_taps_are_causal(self):
        tg, d = target("tiny-release"), draft("tiny-release")
        seq = [3, 14, 15, 92, 65, 35, 89, 79, 32, 38]
        full = dspark_ref.target_taps(tg, seq, d.cfg.target_layer_ids)
        part = dspark_ref.target_taps(tg, seq[:6], d.cfg.target_layer_ids)
        self.assertLess(float((full[:6] - part).abs().max()), 1e-12)

    def test_taps_are_traced_prefix_sums(self):
        tg = target("tiny-release")
        seq = [3, 14, 15, 92, 65]
        tr = k3ref.Trace()
        tg.forward(seq, trace=tr)
        taps = dspark_ref.target_taps(tg, seq, [1, 5, 7])
        E = tg.cfg.hidden_size
        for j, i in enumerate([1, 5, 7]):
            self.assertTrue(torch.equal(taps[:, j * E:(j + 1) * E], tr.layers[i]["prefix_out"]))


class TestRefusals(unittest.TestCase):
    def test_missing_fields_are_named(self):
        c = dict(RELEASE_CONFIG)
        for k in ("mask_token_id", "markov_rank", "target_layer_ids"):
            c.pop(k)
        c["rope_parameters"] = {"rope_type": "yarn", "rope_theta": 50000.0, "factor": 32.0}
        with self.assertRaises(ValueError) as e:
            dspark_ref.DSparkConfig(c)
        msg = str(e.exception)
        for k in ("mask_token_id", "markov_rank", "target_layer_ids", "rope_parameters.beta_fast",
                  "rope_parameters.mscale_all_dim", "rope_parameters.original_max_position_embeddings"):
            self.assertIn(k, msg)
        for bad in ({"mla_use_nope": True}, {"hidden_act": "situ"}, {"draft_vocab_size": 1000},
                    {"num_target_layers": 4}, {"target_layer_ids": [2, 2, 47, 71, 89]}):
            with self.assertRaises(ValueError):
                dspark_ref.DSparkConfig(dict(RELEASE_CONFIG, **bad))

    def test_other_target_refused(self):
        d = draft("tiny-flat-f32")
        with self.assertRaises(ValueError) as e:
            d.cfg.check_target(target("tiny-release").cfg)
        self.assertIn("vocab_size", str(e.exception))
        c = dict(d.cfg.raw, target_layer_ids=[0, 3, 7])
        with self.assertRaises(ValueError) as e:
            dspark_ref.DSparkConfig(c).check_target(target("tiny-flat-f32").cfg)
        self.assertIn("target_layer_ids", str(e.exception))

    def test_bad_checkpoints_refused(self):
        src = os.path.join(MODELS, "tiny-release", "draft")
        raw, _ = k3ref.read_safetensors(os.path.join(src, "model.safetensors"))
        with open(os.path.join(src, "config.json")) as f:
            config = json.load(f)
        cases = {"nan": None, "extra": "layers.0.self_attn.g_proj.weight", "missing": "final_norm.weight"}
        for what, name in cases.items():
            with tempfile.TemporaryDirectory() as td:
                items = []
                for n, (dt, sh, arr) in sorted(raw.items()):
                    a = np.array(arr)
                    if what == "missing" and n == name:
                        continue
                    if what == "nan" and n == "layers.1.mlp.up_proj.weight":
                        a = a.copy()
                        a.flat[7] = 0x7FC0                   # BF16 NaN
                    items.append((n, dt, sh, a))
                if what == "extra":
                    items.append((name, "BF16", [4, 4], np.zeros((4, 4), np.uint16)))
                k3ref.write_safetensors(os.path.join(td, "model.safetensors"), items)
                with open(os.path.join(td, "config.json"), "w") as f:
                    json.dump(config, f)
                with self.assertRaises(ValueError, msg=what):
                    dspark_ref.DSparkDraft.load(td)
        with tempfile.TemporaryDirectory() as td:                 # ignored tensors are accepted
            items = [(n, dt, sh, np.array(a)) for n, (dt, sh, a) in sorted(raw.items())]
            items.append(("embed_tokens.weight", "BF16", [512, 64], np.zeros((512, 64), np.uint16)))
            items.append(("confidence_head.proj.bias", "F32", [1], np.zeros(1, np.float32)))
            k3ref.write_safetensors(os.path.join(td, "model.safetensors"), items)
            with open(os.path.join(td, "config.json"), "w") as f:
                json.dump(config, f)
            self.assertEqual(set(dspark_ref.DSparkDraft.load(td).params), set(draft("tiny-release").params))


class TestFixtures(unittest.TestCase):
    def test_committed_fixtures_reproduce(self):
        found = 0
        for name in sorted(os.listdir(MODELS)):
            path = os.path.join(MODELS, name, "draft", "expect.json")
            if not os.path.exists(path):
                continue
            found += 1
            with open(path) as f:
                e = json.load(f)
            tg = target(name) if name != "demo" else target("demo")
            d = draft(name)
            self.assertEqual(e["rope_inv_freq"], [float(x) for x in d.inv])
            c = e["cases"][0]
            for B, want in c["blocks"].items():
                r = d.draft(tg, c["seq"], c["anchor"], int(B))
                self.assertEqual(r["draft"], want["draft"], name)
                got = [float(x) for x in r["logits"][-1][:8]]
                for g, w in zip(got, want["logits_head"][-1]):
                    self.assertAlmostEqual(g, w, delta=1e-9 * (1 + abs(w)))
            run = e["spec_runs"][0]
            r = dspark_ref.spec_greedy(tg, d, run["prompt"], run["n_new"], run["block"])
            self.assertEqual(r["ids"], run["ids"])
            self.assertEqual([s["accepted"] for s in r["steps"]], [s["accepted"] for s in run["steps"]])
        self.assertGreaterEqual(found, 2)


if __name__ == "__main__":
    unittest.main()
