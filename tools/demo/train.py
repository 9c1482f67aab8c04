#!/usr/bin/python3
"""Train the k3 demo model: a small Kimi K3 (the exact tensor graph the engine runs) that
answers in the K3 chat format with sayings from Debian's `fortunes`.

    /usr/bin/python3 tools/demo/train.py            # full run: writes assets/demo/model/,
                                                    # testdata/models/demo/expect.json and
                                                    # tools/demo/training.json
    /usr/bin/python3 tools/demo/train.py --steps 20 --qat-steps 5 --out /tmp/d --no-expect   # smoke run

Needs Debian's python3-torch, python3-numpy, fortunes, wamerican and Go (the corpus is
rendered and tokenized by tools/demo/prep with the engine's own tokenizer and renderer).

The model definition is tools/reference/k3ref.py itself: training runs K3Model.forward in
float32 on batches (KDA in the chunked form, which test_k3ref.py checks against the
token-by-token definition), and the expectations are that same code in float64 over the
checkpoint re-read from disk. Stages:
  1. corpus (corpus.py) -> conversations, split by passage into train / held-out;
  2. tokenizer trained on the rendered training text (prep tokenizer) and every
     conversation encoded as a chat session would send it (prep encode);
  3. float training (AdamW, cosine schedule, loss on the reply tokens only; the MoE router's
     e_score_correction_bias is balanced without an auxiliary loss, by the sign of each
     expert's load);
  4. held-out perplexity of the float model and of its export (BF16 trunk, MXFP4 experts);
  5. fine-tuning with the routed experts fake-quantised to MXFP4 (straight-through), then the
     export and the held-out perplexity again;
  6. expect.json: greedy and teacher-forced float64 reference outputs on chat prompts.
"""
import argparse
import hashlib
import json
import math
import os
import random
import subprocess
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tools", "reference"))
sys.path.insert(0, HERE)
import corpus  # noqa: E402
import tasks  # noqa: E402
import k3ref  # noqa: E402
import make_models  # noqa: E402

SEED = 20261201
NUM_BASE = 2048                       # 256 bytes + 1792 merges; specials at 2048..2303
MERGES = NUM_BASE - 256
VOCAB = NUM_BASE + 256
SHORT_CHARS = 120
N_TRAIN_PASSAGES = 1000
N_HELDOUT_PASSAGES = 100
CANNED = 240                          # greetings, "who are you", thanks
MULTI_TURN = 0.1

TEXT = dict(
    vocab_size=VOCAB, hidden_size=128, num_hidden_layers=4, attn_res_block_size=2,
    num_attention_heads=4, num_key_value_heads=4, q_lora_rank=64, kv_lora_rank=32,
    qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32, mla_use_nope=True, mla_use_output_gate=True,
    intermediate_size=384, first_k_dense_replace=1, moe_layer_freq=1,
    num_experts=8, num_experts_per_token=2, num_shared_experts=1, moe_intermediate_size=128,
    routed_expert_hidden_size=64, latent_moe_use_norm=True, moe_renormalize=True, routed_scaling_factor=1.0,
    moe_router_activation_func="sigmoid", num_expert_group=1, topk_group=1, topk_method="noaux_tc",
    use_grouped_topk=True, hidden_act="situ", activation_situ_beta=4.0, activation_situ_linear_beta=25.0,
    rms_norm_eps=1e-5, tie_word_embeddings=False, max_position_embeddings=4096, num_nextn_predict_layers=0,
    bos_token_id=NUM_BASE, eos_token_id=NUM_BASE + 2, pad_token_id=NUM_BASE + 255,
)
LINEAR = dict(num_heads=4, head_dim=32, short_conv_kernel_size=4, gate_lower_bound=-5.0,
              use_full_rank_gate=True, full_attn_layers=[4])

F32_SUFFIXES = ("conv1d.weight", "A_log", "dt_bias", "o_norm.weight", "e_score_correction_bias")


# --------------------------------------------------------------------------------------
# Config and parameters
# --------------------------------------------------------------------------------------

def build_config():
    top = make_models.build_config(dict(text=TEXT, linear=LINEAR, layout="release"))
    # K3's ids relative to the base vocabulary: bos [BOS] +0, eos <|end_of_msg|> +2 (as the
    # release's config.json), pad [PAD] +255, media placeholder <|media_pad|> +21
    top["media_placeholder_token_id"] = NUM_BASE + 21
    top["_note"] = ("k3 DEMO model: a small Kimi K3 trained on fortune cookies (Debian fortunes) by "
                    "tools/demo/train.py; vision_config is a stub with no tensors")
    return top


def init_params(cfg, seed):
    """float32 leaf tensors, names as k3ref uses them (no `language_model.` prefix)."""
    g = torch.Generator().manual_seed(seed)
    E, V, L = cfg.hidden_size, cfg.vocab_size, cfg.num_hidden_layers
    H, D, Kc = cfg.kda_num_heads, cfg.kda_head_dim, cfg.short_conv_kernel_size
    Hm, dn, dr, dv = cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim
    lat, mi = cfg.routed_expert_hidden_size, cfg.moe_intermediate_size
    p = {}

    def normal(name, shape, std):
        p[name] = torch.randn(*shape, generator=g) * std

    def lin(name, out, inp, gain=1.0):
        normal(name, (out, inp), gain / math.sqrt(inp))

    def ones(name, n):
        p[name] = torch.ones(n)

    for i in range(L):
        pre = f"model.layers.{i}."
        for n in ("input_layernorm", "post_attention_layernorm", "self_attention_res_norm", "mlp_res_norm"):
            ones(pre + n + ".weight", E)
        p[pre + "self_attention_res_proj.weight"] = torch.zeros(1, E)
        p[pre + "mlp_res_proj.weight"] = torch.zeros(1, E)
        a = pre + "self_attn."
        if cfg.is_kda(i):
            P = H * D
            for n in ("q_proj", "k_proj", "v_proj", "g_proj"):
                lin(a + n + ".weight", P, E)
            for n in ("q_conv1d", "k_conv1d", "v_conv1d"):
                w = (torch.rand(P, 1, Kc, generator=g) * 2 - 1) / math.sqrt(Kc)
                w[:, 0, Kc - 1] += 1.0                      # start near the identity
                p[a + n + ".weight"] = w
            lin(a + "f_a_proj.weight", D, E)
            lin(a + "f_b_proj.weight", P, D)
            lin(a + "b_proj.weight", H, E)
            p[a + "A_log"] = torch.cat([torch.zeros(H), torch.zeros(D - H)])      # padded to head_dim
            p[a + "dt_bias"] = -1.0 - 5.0 * torch.rand(P, generator=g)          # slow and fast decay
            ones(a + "o_norm.weight", D)
            lin(a + "o_proj.weight", E, P, 0.5)
        else:
            lin(a + "q_a_proj.weight", cfg.q_lora_rank, E)
            ones(a + "q_a_layernorm.weight", cfg.q_lora_rank)
            lin(a + "q_b_proj.weight", Hm * (dn + dr), cfg.q_lora_rank)
            lin(a + "kv_a_proj_with_mqa.weight", cfg.kv_lora_rank + dr, E)
            ones(a + "kv_a_layernorm.weight", cfg.kv_lora_rank)
            lin(a + "kv_b_proj.weight", Hm * (dn + dv), cfg.kv_lora_rank)
            lin(a + "g_proj.weight", Hm * dv, E)
            lin(a + "o_proj.weight", E, Hm * dv, 0.5)
        if cfg.is_dense(i):
            I = cfg.intermediate_size
            lin(pre + "mlp.gate_proj.weight", I, E)
            lin(pre + "mlp.up_proj.weight", I, E)
            lin(pre + "mlp.down_proj.weight", E, I, 0.5)
        else:
            m = pre + "block_sparse_moe."
            lin(m + "gate.weight", cfg.num_experts, E, 0.5)
            p[m + "gate.e_score_correction_bias"] = torch.zeros(cfg.num_experts)
            lin(m + "routed_expert_down_proj.weight", lat, E)
            lin(m + "routed_expert_up_proj.weight", E, lat, 0.5)
            ones(m + "routed_expert_norm.weight", lat)
            SI = cfg.num_shared_experts * mi
            lin(m + "shared_experts.gate_proj.weight", SI, E)
            lin(m + "shared_experts.up_proj.weight", SI, E)
            lin(m + "shared_experts.down_proj.weight", E, SI, 0.5)
            for e in range(cfg.num_experts):
                lin(m + f"experts.{e}.w1.weight", mi, lat)
                lin(m + f"experts.{e}.w3.weight", mi, lat)
                lin(m + f"experts.{e}.w2.weight", lat, mi, 0.5)
    normal("model.embed_tokens.weight", (V, E), 1.0)
    ones("model.norm.weight", E)
    ones("model.output_attn_res_norm.weight", E)
    p["model.output_attn_res_proj.weight"] = torch.zeros(1, E)
    lin("lm_head.weight", V, E)
    for t in p.values():
        t.requires_grad_(True)
    return p


def is_expert(name):
    return ".experts." in name


def is_router_bias(name):
    return name.endswith("e_score_correction_bias")


# --------------------------------------------------------------------------------------
# MXFP4 (the encoder; k3ref.mxfp4_decode is the decoder the reference and the engine share)
# --------------------------------------------------------------------------------------

E2M1_POS = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=torch.float64)
E2M1_MID = (E2M1_POS[1:] + E2M1_POS[:-1]) / 2


def mxfp4_encode(w):
    """w [rows, K] (K a multiple of 32) -> (packed U8 [rows, K/2], scale U8 [rows, K/32]).
    Per group of 32: the E8M0 exponent is floor(log2(amax)) - 2 (OCP MX) or one more, whichever
    gives the smaller squared error; elements round to the nearest E2M1 value (clamped at 6)."""
    w = w.detach().to(torch.float64)
    rows, K = w.shape
    g = w.reshape(rows, K // 32, 32)
    amax = g.abs().amax(-1)
    e0 = torch.floor(torch.log2(torch.where(amax > 0, amax, torch.ones_like(amax)))) - 2
    best_err, best_codes, best_e = None, None, None
    for de in (0, 1):
        e = e0 + de
        x = g / torch.pow(2.0, e).unsqueeze(-1)
        mag = torch.bucketize(x.abs().clamp(max=6.0), E2M1_MID)       # nearest of the 8 magnitudes
        val = E2M1_POS[mag] * torch.sign(x)
        err = ((val * torch.pow(2.0, e).unsqueeze(-1) - g) ** 2).sum(-1)
        codes = mag | ((x < 0) & (mag > 0)).long() << 3
        if best_err is None:
            best_err, best_codes, best_e = err, codes, e.clone()
        else:
            better = err < best_err
            best_err = torch.where(better, err, best_err)
            best_codes = torch.where(better.unsqueeze(-1), codes, best_codes)
            best_e = torch.where(better, e, best_e)
    best_e = torch.where(amax > 0, best_e, torch.full_like(best_e, -127))
    assert float(best_e.min()) >= -127 and float(best_e.max()) <= 127
    codes = best_codes.reshape(rows, K).to(torch.uint8).numpy()
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    scale = (best_e + 127).to(torch.uint8).numpy()
    return packed, scale


def fake_mxfp4(w):
    """Straight-through MXFP4: the forward sees the decoded export, the gradient passes to w."""
    q = k3ref.mxfp4_decode(*mxfp4_encode(w)).to(w.dtype)
    return w + (q - w).detach()


def bf16_round(w):
    return torch.from_numpy(k3ref.bf16_bits_to_f64(k3ref.f64_to_bf16_bits(w.detach().double().numpy())))


# --------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------

def run(cmd, **kw):
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)


# the task model (--tasks): conversations of the two extra tasks, and the bench's texts they
# must not contain
N_SUMMARIES, N_CODE, N_TASK_HELDOUT = 2400, 1600, 100
BENCH_TEXTS = ["The town council met on Tuesday", "SumCSV"]


def prepare(work, seed, with_tasks=False):
    dic = corpus.load_dict()
    psg = corpus.passages(dic)
    # a small set the model can learn by heart (short, every word in the dictionary), and
    # held-out passages of the same kind it never sees
    cand = [i for i, (_, t) in enumerate(psg) if len(t) <= SHORT_CHARS and corpus.dict_ratio(t, dic) == 1.0]
    rng = random.Random(seed)
    rng.shuffle(cand)
    train = sorted(cand[:N_TRAIN_PASSAGES])
    held = sorted(cand[N_TRAIN_PASSAGES:N_TRAIN_PASSAGES + N_HELDOUT_PASSAGES])
    conv_train = corpus.conversations([psg[i] for i in train], dic, seed, canned=CANNED, multi_turn=MULTI_TURN)
    conv_held = corpus.conversations([psg[i] for i in held], dic, seed + 1, canned=0, multi_turn=0.0)
    if with_tasks:
        # summaries of texts made of sentences from the passages the sayings do not use (the
        # held-out ones from their own share), and code; shuffled in among the sayings
        used = set(train) | set(held)
        sents = tasks.sentences([p for i, p in enumerate(psg) if i not in used])
        cut = len(sents) * 9 // 10
        conv_train += tasks.summaries(sents[:cut], N_SUMMARIES, seed + 2) + tasks.code_conversations(N_CODE, seed + 3)
        conv_held += tasks.summaries(sents[cut:], N_TASK_HELDOUT, seed + 4) + tasks.code_conversations(N_TASK_HELDOUT, seed + 5)
        random.Random(seed + 6).shuffle(conv_train)
        tasks.held_out_check(conv_train + conv_held, BENCH_TEXTS)
    os.makedirs(work, exist_ok=True)
    digest = hashlib.sha256()
    for name, convs in (("train", conv_train), ("heldout", conv_held)):
        with open(os.path.join(work, name + ".conv.jsonl"), "w") as f:
            for c in convs:
                line = json.dumps({"messages": c}) + "\n"
                f.write(line)
                digest.update(line.encode())
    prep = os.path.join(work, "prep")
    run(["go", "build", "-o", prep, "./tools/demo/prep"], cwd=REPO)
    with open(prep, "rb") as f:
        digest.update(f.read())
    tokdir = os.path.join(work, "tok")
    stamp = os.path.join(work, "stamp")
    fresh = os.path.exists(stamp) and open(stamp).read() == digest.hexdigest()
    if not fresh:     # the same conversations and tools give the same tokenizer and ids: reuse them
        run([prep, "tokenizer", "-conv", os.path.join(work, "train.conv.jsonl"), "-merges", str(MERGES),
             "-numbase", str(NUM_BASE), "-out", tokdir])
    data = {}
    for name in ("train", "heldout"):
        out = os.path.join(work, name + ".enc.jsonl")
        if not fresh:
            run([prep, "encode", "-tok", tokdir, "-conv", os.path.join(work, name + ".conv.jsonl"), "-out", out])
        with open(out) as f:
            data[name] = [json.loads(l) for l in f]
    with open(stamp, "w") as f:
        f.write(digest.hexdigest())
    info = {"passages": len(psg), "short_passages": len(cand), "train_passages": len(train), "heldout_passages": len(held),
            "train_conversations": len(conv_train), "heldout_conversations": len(conv_held),
            "train_tokens": sum(len(x["ids"]) for x in data["train"]),
            "train_reply_tokens": sum(len(x["ids"]) - x["prompt"] for x in data["train"]),
            "heldout_reply_tokens": sum(len(x["ids"]) - x["prompt"] for x in data["heldout"]),
            "fortunes_files_sha256": corpus.file_digests()}
    return data, tokdir, info


def batches(data, tokens_per_batch, rng):
    """Endless batches of similar-length conversations, about tokens_per_batch tokens each."""
    while True:
        idx = list(range(len(data)))
        rng.shuffle(idx)
        out = []
        for s in range(0, len(idx), 512):
            grp = sorted(idx[s:s + 512], key=lambda i: len(data[i]["ids"]))
            b = []
            for i in grp:
                b.append(i)
                if len(b) * len(data[b[-1]]["ids"]) >= tokens_per_batch:
                    out.append(b)
                    b = []
            if b:
                out.append(b)
        rng.shuffle(out)
        yield from out


def collate(data, b, pad):
    T = max(len(data[i]["ids"]) for i in b)
    ids = torch.full((len(b), T), pad, dtype=torch.long)
    mask = torch.zeros(len(b), T - 1)
    for r, i in enumerate(b):
        x = data[i]["ids"]
        ids[r, :len(x)] = torch.tensor(x)
        mask[r, data[i]["prompt"] - 1:len(x) - 1] = 1.0       # predict every reply token
    return ids, mask


# --------------------------------------------------------------------------------------
# Training and evaluation
# --------------------------------------------------------------------------------------

def model_view(cfg, params, quant, dtype=None, chunk=16):
    """A k3ref model over the parameters: routed experts fake-quantised to MXFP4 if quant."""
    view = {}
    for k, v in params.items():
        w = fake_mxfp4(v) if quant and is_expert(k) and k.endswith(".weight") else v
        view[k] = w if dtype is None else w.to(dtype)
    return k3ref.K3Model(cfg, view, kda_chunk=chunk)


def loss_of(model, ids, mask, trace=None):
    """Mean NLL of the tokens where mask is set (mask[b, t]: predict ids[b, t+1]); the lm_head
    runs only at those positions. Returns (loss, summed NLL, count)."""
    h = model.hidden(ids, trace=trace)[:, :-1]
    sel = mask > 0
    logits = k3ref.linear(h[sel], model.params["lm_head.weight"])
    nll = torch.nn.functional.cross_entropy(logits.float(), ids[:, 1:][sel], reduction="none")
    return nll.mean(), float(nll.detach().double().sum()), float(sel.sum())


def balance_router(params, cfg, trace, mask_tokens, gamma):
    """Aux-loss-free balancing: move each expert's selection bias against its load."""
    for L in trace.layers:
        if "moe_idx" not in L:
            continue
        idx = L["moe_idx"].reshape(-1, cfg.num_experts_per_token)[mask_tokens]
        load = torch.bincount(idx.reshape(-1), minlength=cfg.num_experts).float()
        b = params[f"model.layers.{L['layer']}.block_sparse_moe.gate.e_score_correction_bias"]
        with torch.no_grad():
            b += gamma * torch.sign(load.mean() - load)


def train(cfg, params, data, steps, lr, quant, seed, tokens_per_batch, log_every=50, label="float"):
    rng = random.Random(seed)
    gen = batches(data, tokens_per_batch, rng)
    decay = [v for k, v in params.items() if v.dim() == 2 and "norm" not in k]
    no_decay = [v for k, v in params.items() if not (v.dim() == 2 and "norm" not in k) and not is_router_bias(k)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.95), eps=1e-8)
    for t in params.values():
        if t.grad is not None:
            t.grad = None
    warm = min(100, steps // 10)
    t0, c0 = time.time(), time.process_time()
    run_loss, run_n = 0.0, 0.0
    pad = cfg.raw["pad_token_id"]
    for step in range(steps):
        f = (step + 1) / warm if step < warm else 0.1 + 0.45 * (1 + math.cos(math.pi * (step - warm) / max(1, steps - warm)))
        for gr in opt.param_groups:
            gr["lr"] = lr * f
        ids, mask = collate(data, next(gen), pad)
        tr = k3ref.Trace()
        model = model_view(cfg, params, quant)
        loss, s, n = loss_of(model, ids, mask, tr)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        for k, v in params.items():
            if is_router_bias(k):
                v.grad = None
        torch.nn.utils.clip_grad_norm_([v for v in params.values() if v.grad is not None], 1.0)
        opt.step()
        balance_router(params, cfg, tr, (ids != pad).reshape(-1), 1e-3)
        run_loss += s
        run_n += n
        if (step + 1) % log_every == 0 or step + 1 == steps:
            el = time.time() - t0
            print(f"[{label}] step {step + 1}/{steps} loss {run_loss / run_n:.4f} lr {lr * f:.2e} "
                  f"{el:.0f}s ({el / (step + 1):.2f}s/step, cpu {time.process_time() - c0:.0f}s)", flush=True)
            run_loss, run_n = 0.0, 0.0
    return {"wall_seconds": time.time() - t0, "cpu_seconds": time.process_time() - c0}


@torch.no_grad()
def perplexity(model, data, tokens_per_batch=6000):
    """exp(mean NLL) over the reply tokens, batches in a fixed order."""
    order = sorted(range(len(data)), key=lambda i: len(data[i]["ids"]))
    tot, n = 0.0, 0.0
    b = []
    pad = model.cfg.raw["pad_token_id"]
    for i in order + [None]:
        if i is not None:
            b.append(i)
        if b and (i is None or len(b) * len(data[b[-1]]["ids"]) >= tokens_per_batch):
            ids, mask = collate(data, b, pad)
            _, s, c = loss_of(model, ids, mask)
            tot += s
            n += c
            b = []
    return math.exp(tot / n)


# --------------------------------------------------------------------------------------
# Export (released layout)
# --------------------------------------------------------------------------------------

def export(cfg, cfg_json, params, out, extra=()):
    """Write config.json + 3 shards + index: BF16 trunk, F32 conv/A_log/dt_bias/o_norm/bias,
    MXFP4 routed experts (six tensors of an expert back-to-back). Shard 1: layers 0-1,
    shard 2: the other layers, shard 3: embeddings, final norms and lm_head, then the extra
    items (name, dtype, shape, array) as given: the vision tower and projector
    (train_vision.py), in the last shard as the release keeps them."""
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        if f.endswith(".safetensors") or f == "model.safetensors.index.json":
            os.remove(os.path.join(out, f))
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg_json, f, indent=2)
        f.write("\n")
    pre = "language_model."
    L = cfg.num_hidden_layers
    shards = [[], [], []]
    for name, v in params.items():
        if is_expert(name):
            continue
        arr = v.detach().double().numpy()
        if name.endswith(F32_SUFFIXES):
            item = (pre + name, "F32", list(arr.shape), arr.astype(np.float32))
        else:
            item = (pre + name, "BF16", list(arr.shape), k3ref.f64_to_bf16_bits(arr))
        if name.startswith("model.layers."):
            i = int(name.split(".")[2])
            shards[0 if i < 2 else 1].append(item)
        else:
            shards[2].append(item)
    for i in range(L):
        if cfg.is_dense(i):
            continue
        for e in range(cfg.num_experts):
            base = f"model.layers.{i}.block_sparse_moe.experts.{e}"
            for wn in ("w1", "w2", "w3"):
                packed, scale = mxfp4_encode(params[f"{base}.{wn}.weight"])
                shards[0 if i < 2 else 1].append((f"{pre}{base}.{wn}.weight_packed", "U8", list(packed.shape), packed))
                shards[0 if i < 2 else 1].append((f"{pre}{base}.{wn}.weight_scale", "U8", list(scale.shape), scale))
    shards[2].extend(extra)
    wmap, total, names = {}, 0, []
    for k, sh in enumerate(shards):
        fn = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
        names.append(fn)
        k3ref.write_safetensors(os.path.join(out, fn), sh, {"format": "pt"})
        for it in sh:
            wmap[it[0]] = fn
            total += len(np.ascontiguousarray(it[3]).tobytes())
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": {k: wmap[k] for k in sorted(wmap)}}, f, indent=2)
        f.write("\n")
    return sum(os.path.getsize(os.path.join(out, n)) for n in names)


# --------------------------------------------------------------------------------------
# Expectations (float64 reference over the checkpoint on disk)
# --------------------------------------------------------------------------------------

# (user text, thinking off, system message): chat prompts as a session sends them, two with the
# default options (the long thinking-effort system message first) and two with thinking off
# (short). The thinking-off ones have a system message of their own: without one they all begin
# "<|open|>user<|sep|>", where the model's guess of the user's first token (never trained: the
# loss is on replies) had a margin of 7.05e-4 after train_vision.py, under the rule's 1e-3.
EXPECT_PROMPTS = [("Tell me a saying about love.", False, None), ("Hello!", False, None),
                  ("Who are you?", True, "You are a helpful assistant."),
                  ("Tell me a fortune.", True, "You are a helpful assistant."),
                  ("Do you know a saying about work?", False, None), ("Give me a fortune about time.", True, "Be kind."),
                  ("What is a good quote about life?", False, None), ("Thanks!", True, "Be kind.")]
# When no thinking-on prompt passes (write_expect): thinking-off prompts only, sayings first (the
# engine's spec tests sample Prompts[0] and draft from its repeats, so it should not be a canned reply).
EXPECT_NO_THINK_ONLY = [("Tell me a saying about love.", True, "You are a helpful assistant."),
                        ("Do you know a saying about work?", True, "Be kind."),
                        ("Give me a fortune about time.", True, "Be kind."),
                        ("What is a good quote about life?", True, "You are a helpful assistant."),
                        ("Who are you?", True, "You are a helpful assistant."),
                        ("Tell me a fortune.", True, "You are a helpful assistant."),
                        ("Thanks!", True, "Be kind.")]


def chat_prompt_ids(work, tokdir, user, no_think=False, system=None):
    conv = os.path.join(work, "expect.conv.jsonl")
    msgs = [{"role": "system", "content": system}] if system else []
    msgs += [{"role": "user", "content": user}, {"role": "assistant", "reasoning_content": "x", "content": "x"}]
    with open(conv, "w") as f:
        f.write(json.dumps({"messages": msgs, "no_think": no_think}) + "\n")
    out = os.path.join(work, "expect.enc.jsonl")
    subprocess.run([os.path.join(work, "prep"), "encode", "-tok", tokdir, "-conv", conv, "-out", out], check=True)
    with open(out) as f:
        e = json.loads(f.readline())
    return e["ids"][:e["prompt"]]


def write_expect(outdir, expdir, work, tokdir, n_gen=12, n_prompts=4):
    model = k3ref.K3Model.load(outdir)              # float64, token-by-token KDA: the definition
    eos = model.cfg.raw["eos_token_id"]
    seen = {}

    def pick(cands, want):
        recs = []
        for user, no_think, system in cands:
            if want[no_think] == 0:
                continue
            if (user, no_think, system) not in seen:
                prompt = chat_prompt_ids(work, tokdir, user, no_think, system)
                rec, ok, why = make_models.evaluate_prompt(model, prompt, n_gen)
                print(f"expect: {user!r} (no_think {no_think}, system {system!r}): "
                      f"{'ok' if ok else 'rejected: ' + why}", flush=True)
                rec.update(user=user, no_think=no_think)
                if system:
                    rec["system"] = system
                seen[(user, no_think, system)] = rec if ok else None
            if seen[(user, no_think, system)]:
                recs.append(seen[(user, no_think, system)])
                want[no_think] -= 1
        return recs, want

    recs, want = pick(EXPECT_PROMPTS, {False: n_prompts // 2, True: n_prompts - n_prompts // 2})
    if not any(not r["no_think"] for r in recs):
        # Every thinking-on prompt begins with the same thinking-effort system message; where one
        # position of it is a near tie (the demo of issue 41: 1.79e-4 of max|logit| where it guesses
        # the next template token), no thinking-on prompt can pass.
        print("expect: no thinking-on prompt passed; thinking-off prompts only", flush=True)
        recs, want = pick(EXPECT_NO_THINK_ONLY, {False: 0, True: n_prompts})
    assert not any(want.values()), "not enough prompts with safe margins"
    expect = {
        "note": ("float64 reference outputs of tools/reference/k3ref.py for the trained demo model "
                 "(assets/demo/model). prompt_ids = a chat session's prompt for `user` (default options, or "
                 "thinking off if no_think, after the system message `system` if set), "
                 "greedy_ids = the first n_generated argmax tokens (no eos stop), tf_pred[i] = argmax at "
                 "position i of one forward over full_ids, first_logits = logits at the last prompt "
                 "position. Margins as in make_models.py: top1-top2 >= 1e-3*max|logit| at every step "
                 "and position, routing margin >= 1e-5."),
        "case": "demo",
        "generator": "tools/demo/train.py",
        "n_generated": n_gen,
        "eos_token_id": eos,
        "layer_kinds": model.cfg.layer_kind,
        "margins": {
            "min_logit_margin": min(r["min_logit_margin"] for r in recs),
            "min_logit_margin_rel": min(r["min_logit_margin_rel"] for r in recs),
            "min_routing_margin": min(r["min_routing_margin"] for r in recs),
        },
        "prompts": recs,
    }
    os.makedirs(expdir, exist_ok=True)
    with open(os.path.join(expdir, "expect.json"), "w") as f:
        json.dump(expect, f, indent=1)
        f.write("\n")


@torch.no_grad()
def sample_replies(model, work, tokdir, users, max_new=200):
    """Greedy replies (float64 reference, KDA chunked) decoded with the trained vocabulary."""
    from_tok = load_vocab(tokdir)
    eom = NUM_BASE + 2
    out = []
    for u in users:
        seq = chat_prompt_ids(work, tokdir, u)
        gen = []
        for _ in range(max_new):
            nxt = k3ref.argmax_first(model.forward(seq)[-1])
            gen.append(nxt)
            seq.append(nxt)
            if nxt == eom:
                break
        out.append({"user": u, "reply": decode(from_tok, gen), "tokens": len(gen), "ended": gen[-1] == eom})
    return out


def load_vocab(tokdir):
    import base64
    toks = {}
    with open(os.path.join(tokdir, "tiktoken.model")) as f:
        for line in f:
            b, r = line.split()
            toks[int(r)] = base64.b64decode(b)
    with open(os.path.join(tokdir, "tokenizer_config.json")) as f:
        for k, v in json.load(f)["added_tokens_decoder"].items():
            toks[int(k)] = v["content"].encode()
    return toks


def decode(toks, ids):
    return b"".join(toks.get(i, b"<?>") for i in ids).decode("utf-8", errors="replace")


# --------------------------------------------------------------------------------------

OPENBLAS = "/usr/lib/x86_64-linux-gnu/openblas-pthread"


def use_openblas():
    """Debian's torch calls the system libblas.so.3; its reference BLAS is ~10x slower than
    OpenBLAS on these matrices. If libopenblas0-pthread is installed, re-run with it first on
    the library path (for this process only: the system's BLAS choice is left alone)."""
    if os.path.isdir(OPENBLAS) and OPENBLAS not in os.environ.get("LD_LIBRARY_PATH", ""):
        env = dict(os.environ, LD_LIBRARY_PATH=OPENBLAS + ":" + os.environ.get("LD_LIBRARY_PATH", ""),
                   OPENBLAS_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE")
        os.execve(sys.executable, [sys.executable] + sys.argv, env)


def main():
    use_openblas()
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=800)
    ap.add_argument("--qat-steps", type=int, default=150)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--tokens-per-batch", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--work", default="/tmp/k3-demo-train")
    ap.add_argument("--out", default=os.path.join(REPO, "assets", "demo", "model"))
    ap.add_argument("--expect-dir", default=os.path.join(REPO, "testdata", "models", "demo"))
    ap.add_argument("--report", default=os.path.join(HERE, "training.json"))
    ap.add_argument("--no-expect", action="store_true")
    ap.add_argument("--tasks", action="store_true",
                    help="train the task model instead: the sayings plus summaries and Go code (tasks.py); "
                         "needs --out, --report and implies --no-expect")
    ap.add_argument("--expect-only", action="store_true",
                    help="only (re)write expect.json for the checkpoint already in --out")
    args = ap.parse_args()
    if args.tasks:
        if args.out == ap.get_default("out") or args.report == ap.get_default("report"):
            raise SystemExit("--tasks writes another model: give it --out and --report")
        args.no_expect = True
        if args.work == ap.get_default("work"):
            args.work = "/tmp/k3-task-train"
    torch.set_num_threads(args.threads)
    torch.manual_seed(SEED)
    if args.expect_only:
        _, tokdir, _ = prepare(args.work, SEED)
        write_expect(args.out, args.expect_dir, args.work, tokdir)
        return
    t_start = time.time()
    data, tokdir, info = prepare(args.work, SEED, args.tasks)
    print(json.dumps({k: v for k, v in info.items() if k != "fortunes_files_sha256"}), flush=True)
    cfg_json = build_config()
    cfg = k3ref.K3Config(cfg_json)
    params = init_params(cfg, SEED)
    n_params = sum(v.numel() for v in params.values())
    print(f"parameters: {n_params} ({sum(v.numel() for k, v in params.items() if is_expert(k))} in routed experts)")
    report = {"tasks": args.tasks, "seed": SEED, "config": {"text": TEXT, "linear": LINEAR}, "parameters": n_params, "data": info,
              "torch": torch.__version__, "threads": args.threads,
              "blas": "openblas" if OPENBLAS in os.environ.get("LD_LIBRARY_PATH", "") else "system libblas", "steps": args.steps, "qat_steps": args.qat_steps}

    report["float_train"] = train(cfg, params, data["train"], args.steps, args.lr, False, SEED,
                                          args.tokens_per_batch)
    held = data["heldout"]
    trainsub = data["train"][:len(held)]
    ppl = {}
    ppl["float"] = perplexity(model_view(cfg, params, False, torch.float64), held)
    ppl["float_train_subset"] = perplexity(model_view(cfg, params, False, torch.float64), trainsub)
    size = export(cfg, cfg_json, params, args.out)
    ppl["exported_before_qat"] = perplexity(k3ref.K3Model(cfg, k3ref.K3Model.load(args.out).params, kda_chunk=16), held)
    print(f"held-out perplexity: float {ppl['float']:.3f}, exported {ppl['exported_before_qat']:.3f}", flush=True)
    if args.qat_steps > 0:
        report["qat_train"] = train(cfg, params, data["train"], args.qat_steps, args.lr * 0.2, True,
                                            SEED + 1, args.tokens_per_batch, label="mxfp4")
        size = export(cfg, cfg_json, params, args.out)
        ppl["float_after_qat"] = perplexity(model_view(cfg, params, False, torch.float64), held)
    exported = k3ref.K3Model(cfg, k3ref.K3Model.load(args.out).params, kda_chunk=16)
    ppl["exported"] = perplexity(exported, held)
    ppl["exported_train_subset"] = perplexity(exported, trainsub)
    report["perplexity_heldout_reply_tokens"] = ppl
    report["checkpoint_bytes"] = size
    print(f"held-out perplexity: {json.dumps(ppl)}; checkpoint {size} bytes", flush=True)
    for f in ("tiktoken.model", "tokenizer_config.json"):
        with open(os.path.join(tokdir, f), "rb") as src, open(os.path.join(args.out, f), "wb") as dst:
            dst.write(src.read())
    users = ["Hello!", "Tell me a saying about love.", "Do you know a saying about work?"]
    report["samples"] = sample_replies(exported, args.work, tokdir, users)
    for s in report["samples"]:
        print(json.dumps(s), flush=True)
    if not args.no_expect:
        write_expect(args.out, args.expect_dir, args.work, tokdir)
    report["total_seconds"] = time.time() - t_start
    report["total_cpu_seconds"] = time.process_time()
    with open(args.report, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    print(f"done in {report['total_seconds']:.0f}s", flush=True)


if __name__ == "__main__":
    main()
