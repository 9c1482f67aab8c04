#!/usr/bin/python3
"""dspark_ref: float64 PyTorch reference of the DSpark block drafter (docs/DSPARK.md).

Written from docs/DSPARK.md (itself written from the public vLLM/ATOM DSpark code, facts only).
Every op is a small function on float64 tensors (or float32 with autograd: tools/demo/train_draft.py
trains drafters with this same code), with optional leading batch dimensions.

Public API
    d = DSparkDraft.load(draft_dir)               # config.json + model.safetensors (owned tensors)
    u = target_taps(target, ids, d.cfg.target_layer_ids)   # [T, nT*Et] target hidden states (P after layer i)
    r = d.draft(target, seq, anchor, B)           # dict: draft ids, base logits U, logits (with Markov bias)
    run = spec_greedy(target, d, prompt, n_new, B)  # greedy speculative decoding, per-step record

`target` is a k3ref.K3Model (its embed_tokens and lm_head are the drafter's).
"""
import json
import math
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import k3ref  # noqa: E402
from k3ref import linear, rmsnorm, argmax_first  # noqa: E402,F401

REQUIRED = ["model_type", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
            "vocab_size", "rms_norm_eps", "target_hidden_size", "num_target_layers", "target_layer_ids",
            "mask_token_id", "markov_rank"]
YARN_FIELDS = ["factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "mscale",
               "mscale_all_dim"]
LAYER_TENSORS = ["input_layernorm.weight", "post_attention_layernorm.weight",
                 "self_attn.q_a_proj.weight", "self_attn.q_a_layernorm.weight", "self_attn.q_b_proj.weight",
                 "self_attn.kv_a_proj_with_mqa.weight", "self_attn.kv_a_layernorm.weight",
                 "self_attn.kv_b_proj.weight", "self_attn.o_proj.weight",
                 "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"]
IGNORED_PREFIXES = ("embed_tokens.", "confidence_head.")


class DSparkConfig:
    """Parsed and checked DSpark config.json (docs/DSPARK.md §1.2)."""

    def __init__(self, raw):
        missing = [k for k in REQUIRED if k not in raw]
        rp = raw.get("rope_parameters")
        if rp is None:
            if "rope_theta" not in raw:
                missing.append("rope_parameters (or rope_theta)")
            rp = {"rope_type": "default", "rope_theta": raw.get("rope_theta")}
        else:
            for k in ["rope_type", "rope_theta"]:
                if k not in rp:
                    missing.append("rope_parameters." + k)
            if rp.get("rope_type") == "yarn":
                missing += ["rope_parameters." + k for k in YARN_FIELDS if k not in rp]
        if missing:
            raise ValueError("DSpark config is missing: " + ", ".join(missing))
        if raw["model_type"] != "k3_dspark":
            raise ValueError(f"DSpark config model_type is {raw['model_type']!r}, want 'k3_dspark'")
        if raw.get("hidden_act", "silu") != "silu":
            raise ValueError("DSpark hidden_act must be silu")
        for k in ["mla_use_nope", "mla_use_output_gate", "mla_use_qk_norm"]:
            if raw.get(k, False):
                raise ValueError(f"DSpark {k} must be false")
        if rp["rope_type"] not in ("default", "yarn"):
            raise ValueError(f"DSpark rope_type {rp['rope_type']!r} is not supported")
        self.raw = raw
        for k in REQUIRED[1:]:
            setattr(self, k, raw[k])
        self.rms_norm_eps = float(raw["rms_norm_eps"])
        self.target_layer_ids = [int(i) for i in raw["target_layer_ids"]]
        if int(raw.get("draft_vocab_size", self.vocab_size)) != self.vocab_size:
            raise ValueError("DSpark draft_vocab_size must equal vocab_size")
        if self.num_target_layers != len(self.target_layer_ids) or not self.target_layer_ids:
            raise ValueError("DSpark num_target_layers must equal len(target_layer_ids) > 0")
        if any(b <= a for a, b in zip(self.target_layer_ids, self.target_layer_ids[1:])):
            raise ValueError("DSpark target_layer_ids must be strictly increasing")
        self.rope = dict(rp)
        self.rope["rope_theta"] = float(rp["rope_theta"])

    def check_target(self, tcfg):
        """Refuse a drafter made for another target (k3ref.K3Config)."""
        errs = []
        if self.vocab_size != tcfg.vocab_size:
            errs.append(f"vocab_size {self.vocab_size} != target {tcfg.vocab_size}")
        if self.target_hidden_size != tcfg.hidden_size:
            errs.append(f"target_hidden_size {self.target_hidden_size} != target {tcfg.hidden_size}")
        if self.hidden_size != tcfg.hidden_size:
            errs.append(f"hidden_size {self.hidden_size} != target {tcfg.hidden_size} (embedding and lm_head are shared)")
        if min(self.target_layer_ids) < 0 or max(self.target_layer_ids) >= tcfg.num_hidden_layers:
            errs.append(f"target_layer_ids {self.target_layer_ids} outside 0..{tcfg.num_hidden_layers - 1}")
        tn = self.raw.get("target_num_hidden_layers")
        if tn is not None and tn != tcfg.num_hidden_layers:
            errs.append(f"target_num_hidden_layers {tn} != target {tcfg.num_hidden_layers}")
        if not 0 <= self.mask_token_id < tcfg.vocab_size:
            errs.append(f"mask_token_id {self.mask_token_id} outside the vocabulary")
        if errs:
            raise ValueError("DSpark drafter does not fit this target: " + "; ".join(errs))

    def expected_shapes(self):
        E, I, N = self.hidden_size, self.intermediate_size, self.num_attention_heads
        dn, dr, dv = self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim
        rq, rkv, V, r = self.q_lora_rank, self.kv_lora_rank, self.vocab_size, self.markov_rank
        s = {"context_proj.weight": [E, self.num_target_layers * self.target_hidden_size],
             "context_norm.weight": [E], "final_norm.weight": [E],
             "markov_head.markov_w1.weight": [V, r], "markov_head.markov_w2.weight": [V, r]}
        per = {"input_layernorm.weight": [E], "post_attention_layernorm.weight": [E],
               "self_attn.q_a_proj.weight": [rq, E], "self_attn.q_a_layernorm.weight": [rq],
               "self_attn.q_b_proj.weight": [N * (dn + dr), rq],
               "self_attn.kv_a_proj_with_mqa.weight": [rkv + dr, E], "self_attn.kv_a_layernorm.weight": [rkv],
               "self_attn.kv_b_proj.weight": [N * (dn + dv), rkv], "self_attn.o_proj.weight": [E, N * dv],
               "mlp.gate_proj.weight": [I, E], "mlp.up_proj.weight": [I, E], "mlp.down_proj.weight": [E, I]}
        for i in range(self.num_hidden_layers):
            for k, v in per.items():
                s[f"layers.{i}.{k}"] = v
        return s


# --------------------------------------------------------------------------------------
# Rotary embedding (DeepSeek YaRN, interleaved pairs) and the softmax scale
# --------------------------------------------------------------------------------------

def yarn_mscale(factor, m):
    return 1.0 if factor <= 1 else 0.1 * m * math.log(factor) + 1.0


def rope_tables(cfg):
    """Returns (inv_freq float64 [d/2], amplitude A) per docs/DSPARK.md §4.2."""
    d = cfg.qk_rope_head_dim
    rp = cfg.rope
    base = rp["rope_theta"]
    i = torch.arange(d // 2, dtype=torch.float64)
    f = base ** (2 * i / d)
    extra = 1.0 / f
    if rp["rope_type"] == "default":
        return extra, 1.0
    factor = float(rp["factor"])
    L0 = float(rp["original_max_position_embeddings"])

    def corr(r):
        return d * math.log(L0 / (2 * math.pi * r)) / (2 * math.log(base))
    low = max(math.floor(corr(float(rp["beta_fast"]))), 0)
    high = min(math.ceil(corr(float(rp["beta_slow"]))), d - 1)
    if low == high:
        high += 0.001
    ramp = ((i - low) / (high - low)).clamp(0, 1)
    mask = 1 - ramp
    inv = (1.0 / (factor * f)) * (1 - mask) + extra * mask
    A = yarn_mscale(factor, float(rp["mscale"])) / yarn_mscale(factor, float(rp["mscale_all_dim"]))
    return inv, A


def softmax_scale(cfg):
    s = (cfg.qk_nope_head_dim + cfg.qk_rope_head_dim) ** -0.5
    if cfg.rope["rope_type"] == "yarn":
        m = yarn_mscale(float(cfg.rope["factor"]), float(cfg.rope["mscale_all_dim"]))
        s = s * m * m
    return s


def rope(x, pos, inv_freq, A, heads=False):
    """x [..., T, d] (heads=False) or [..., T, H, d]; pos: int tensor [T] (or [..., T]).
    Interleaved pairs (x[2i], x[2i+1]) rotated by pos*inv_freq[i], amplitude A."""
    theta = pos.to(torch.float64).unsqueeze(-1) * inv_freq            # [..., T, d/2]
    c, s = (A * torch.cos(theta)).to(x.dtype), (A * torch.sin(theta)).to(x.dtype)
    if heads:
        c, s = c.unsqueeze(-2), s.unsqueeze(-2)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).flatten(-2)


# --------------------------------------------------------------------------------------
# The drafter
# --------------------------------------------------------------------------------------

def latent_rows(x, lp, cfg, pos, inv, A):
    """MLA latent rows of inputs x [..., T, E] at positions pos: (lat [..., T, Rkv], kpe [..., T, Dr])."""
    r = cfg.kv_lora_rank
    kv = linear(x, lp["self_attn.kv_a_proj_with_mqa.weight"])
    lat = rmsnorm(kv[..., :r], lp["self_attn.kv_a_layernorm.weight"], cfg.rms_norm_eps)
    return lat, rope(kv[..., r:], pos, inv, A)


def mla_block(x, pos, lp, cfg, ctx, inv, A, mask=None):
    """Draft MLA for block rows x [..., Q, E] at positions pos [Q] over keys = context rows
    ctx = (lat [..., C, Rkv], kpe [..., C, Dr]) followed by the block's own rows.
    mask: None (every query sees every key: non-causal block) or bool [(Bt,) Q, C+Q] (True = visible;
    used by training to pack many blocks, each with its own context prefix, into one pass)."""
    N, dn, dr, dv = cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim
    lead = x.shape[:-1]
    q = linear(rmsnorm(linear(x, lp["self_attn.q_a_proj.weight"]), lp["self_attn.q_a_layernorm.weight"],
                       cfg.rms_norm_eps), lp["self_attn.q_b_proj.weight"]).reshape(*lead, N, dn + dr)
    q = torch.cat([q[..., :dn], rope(q[..., dn:], pos, inv, A, heads=True)], dim=-1)
    blat, bkpe = latent_rows(x, lp, cfg, pos, inv, A)
    lat = torch.cat([ctx[0], blat], dim=-2)
    kpe = torch.cat([ctx[1], bkpe], dim=-2)
    S = lat.shape[-2]
    kv = linear(lat, lp["self_attn.kv_b_proj.weight"]).reshape(*lat.shape[:-1], N, dn + dv)
    k = torch.cat([kv[..., :dn], kpe.unsqueeze(-2).expand(*kpe.shape[:-1], N, dr)], dim=-1)
    v = kv[..., dn:]
    scores = torch.einsum("...qhd,...shd->...hqs", q, k) * softmax_scale(cfg)
    if mask is not None:
        assert mask.shape[-1] == S
        scores = scores.masked_fill(~(mask if mask.dim() == 2 else mask.unsqueeze(-3)), float("-inf"))
    p = torch.softmax(scores, dim=-1)
    o = torch.einsum("...hqs,...shd->...qhd", p, v).reshape(*lead, N * dv)
    return linear(o, lp["self_attn.o_proj.weight"])


class DSparkDraft:
    def __init__(self, cfg, params):
        """params: {checkpoint name: tensor} for the owned tensors (docs/DSPARK.md §1.3)."""
        self.cfg = cfg
        self.params = params
        self.layers = []
        for i in range(cfg.num_hidden_layers):
            pre = f"layers.{i}."
            self.layers.append({k[len(pre):]: v for k, v in params.items() if k.startswith(pre)})
        self.inv, self.A = rope_tables(cfg)

    @staticmethod
    def load(draft_dir):
        with open(os.path.join(draft_dir, "config.json")) as f:
            cfg = DSparkConfig(json.load(f))
        raw, _ = k3ref.read_safetensors(os.path.join(draft_dir, "model.safetensors"))
        want = cfg.expected_shapes()
        params = {}
        for name, (dtype, shape, arr) in raw.items():
            if name.startswith(IGNORED_PREFIXES):
                continue
            if name not in want:
                raise ValueError(f"DSpark checkpoint has an unknown tensor {name}")
            if list(shape) != want[name]:
                raise ValueError(f"DSpark tensor {name} has shape {shape}, want {want[name]}")
            t = k3ref.to_f64(dtype, arr)
            if not torch.isfinite(t).all():
                raise ValueError(f"DSpark tensor {name} is not finite")
            params[name] = t
        missing = sorted(set(want) - set(params))
        if missing:
            raise ValueError("DSpark checkpoint is missing: " + ", ".join(missing))
        return DSparkDraft(cfg, params)

    # ---- context rows --------------------------------------------------------------
    def project_context(self, u):
        """u: concatenated taps [..., T, nT*Et] -> c [..., T, E]."""
        p = self.params
        return rmsnorm(linear(u, p["context_proj.weight"]), p["context_norm.weight"], self.cfg.rms_norm_eps)

    def context_rows(self, u, pos):
        """Per draft layer (lat, kpe) for context positions pos [T] (the same c for every layer)."""
        c = self.project_context(u)
        return [latent_rows(c, lp, self.cfg, pos, self.inv, self.A) for lp in self.layers]

    # ---- block pass ----------------------------------------------------------------
    def block_hidden(self, h, pos, rows, mask=None):
        """h: embedded block [..., Q, E] at positions pos [Q]; rows: context_rows(...).
        Returns final_norm(h) [..., Q, E]."""
        cfg = self.cfg
        eps = cfg.rms_norm_eps
        for lp, ctx in zip(self.layers, rows):
            x = rmsnorm(h, lp["input_layernorm.weight"], eps)
            h = h + mla_block(x, pos, lp, cfg, ctx, self.inv, self.A, mask)
            y = rmsnorm(h, lp["post_attention_layernorm.weight"], eps)
            g = linear(y, lp["mlp.gate_proj.weight"])
            h = h + linear(g * torch.sigmoid(g) * linear(y, lp["mlp.up_proj.weight"]), lp["mlp.down_proj.weight"])
        return rmsnorm(h, self.params["final_norm.weight"], eps)

    def markov_bias(self, prev_ids):
        """[..., V] bias for the position after token(s) prev_ids."""
        w1 = self.params["markov_head.markov_w1.weight"]
        return linear(w1[prev_ids], self.params["markov_head.markov_w2.weight"])

    def draft_from_rows(self, embed, lm_head, rows, n, anchor, B):
        """Greedy block draft: anchor at position n, B drafted tokens."""
        ids = torch.tensor([anchor] + [self.cfg.mask_token_id] * (B - 1), dtype=torch.long)
        pos = torch.arange(n, n + B)
        g = self.block_hidden(embed[ids], pos, rows)
        U = linear(g, lm_head)                                             # [B, V]
        x = anchor
        out, logits = [], []
        for k in range(B):
            lg = U[k] + self.markov_bias(torch.tensor(x))
            x = argmax_first(lg)
            out.append(x)
            logits.append(lg)
        return {"draft": out, "U": U, "logits": torch.stack(logits)}

    def draft(self, target, seq, anchor, B, taps=None):
        """seq: the ids the target has processed (positions 0..n-1, n >= 1); anchor at position n."""
        self.cfg.check_target(target.cfg)
        n = len(seq)
        if taps is None:
            taps = target_taps(target, seq, self.cfg.target_layer_ids)
        rows = self.context_rows(taps, torch.arange(n))
        tp = target.params
        return self.draft_from_rows(tp["model.embed_tokens.weight"], tp["lm_head.weight"], rows, n, anchor, B)


def target_taps(target, ids, layer_ids):
    """Concatenated target hidden states at layer_ids: P (the AttnRes running block sum) after
    each listed layer, docs/DSPARK.md §2. ids [T] or [Bt, T] -> [(Bt,) T, len*E]."""
    p = target.params
    ids = torch.as_tensor(ids if torch.is_tensor(ids) else list(ids), dtype=torch.long)
    P = p["model.embed_tokens.weight"][ids]
    blocks, out = [], {}
    for i in range(max(layer_ids) + 1):
        P = k3ref.decoder_layer(i, P, blocks, target.layers[i], target.cfg, None, target.kda_chunk)
        if i in layer_ids:
            out[i] = P
    return torch.cat([out[i] for i in layer_ids], dim=-1)


def spec_greedy(target, draft, prompt, n_new, B):
    """Greedy speculative decoding with the reference (full target forward per step, no caches).
    Returns {"ids": generated ids (== plain greedy), "steps": [{anchor, draft, accepted}], ...}."""
    seq = list(prompt)
    lg = target.forward(seq)[-1]
    anchor = argmax_first(lg)
    gen = [anchor]
    steps = []
    while len(gen) < n_new:
        k = min(B, n_new - len(gen))
        d = draft.draft(target, seq, anchor, k)["draft"]
        full = seq + [anchor] + d
        logits = target.forward(full)
        acc = 0
        nxt = None
        for j in range(k + 1):
            pred = argmax_first(logits[len(seq) + j])
            if j < k and pred == d[j]:
                acc += 1
                continue
            nxt = pred
            break
        steps.append({"anchor": anchor, "draft": d, "accepted": acc})
        seq = seq + [anchor] + d[:acc]
        gen += d[:acc] + [nxt]
        anchor = nxt
    gen = gen[:n_new]
    return {"ids": gen, "steps": steps, "drafted": sum(len(s["draft"]) for s in steps),
            "accepted": sum(s["accepted"] for s in steps), "passes": 1 + len(steps)}


def mean_accepted(target, draft, prompts, n_new, B):
    """Mean tokens per verify pass (accepted + 1) over greedy speculative runs."""
    acc = passes = 0
    for pr in prompts:
        r = spec_greedy(target, draft, pr, n_new, B)
        acc += r["accepted"] + len(r["steps"])
        passes += len(r["steps"])
    return acc / max(passes, 1)


if __name__ == "__main__":
    tgt = k3ref.K3Model.load(sys.argv[1])
    dr = DSparkDraft.load(sys.argv[2])
    ids = [int(x) for x in sys.argv[3].split(",")] if len(sys.argv) > 3 else [1, 2, 3, 4, 5]
    for Bl in (1, 2, 4):
        r = spec_greedy(tgt, dr, ids, 12, Bl)
        print("B", Bl, "ids", r["ids"], "accepted", r["accepted"], "of", r["drafted"], "passes", r["passes"])
