#!/usr/bin/python3
"""Train a small DSpark drafter (docs/DSPARK.md) for the demo or the task model, by distillation.

    /usr/bin/python3 tools/demo/train_draft.py                     # demo: testdata/models/demo/draft/
    /usr/bin/python3 tools/demo/train_draft.py --target task       # task: testdata/models/task/draft/
    /usr/bin/python3 tools/demo/train_draft.py --minutes 2 --out /tmp/d   # smoke run

1. Data: the conversations tools/demo/train.py trains the target on (corpus.py, and tasks.py for
   the task model), encoded with the TARGET's committed tokenizer by tools/demo/prep. Held-out
   conversations are never trained on.
2. The target's own text: one batched float32 forward over each conversation gives the target's
   argmax a[t]; the reply is replaced by a (one Jacobi step towards the target's greedy
   continuation), and a second forward over that text gives the taps (docs/DSPARK.md §2) and a'.
   A label s[t+1] counts only where s[t+1] == a'[t], i.e. the targets are the target's argmax.
3. Training: blocks of --block positions at random anchors in the replies, many per sequence
   packed into one pass with an attention mask (each block sees the context rows before its
   anchor and its own rows: exactly the inference pass of dspark_ref), teacher-forced Markov
   bias, cross-entropy weighted exp(-k/--gamma) over block positions. dspark_ref.py is the model.
4. Export: BF16 config.json + model.safetensors (owned tensors only), fixtures expect.json
   (make_drafts.fixtures over the target's expect.json prompts), and the measured acceptance of
   greedy speculative decoding with the float64 reference on held-out prompts (report JSON).
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tools", "reference"))
sys.path.insert(0, HERE)
import corpus  # noqa: E402
import tasks  # noqa: E402
import k3ref  # noqa: E402
import dspark_ref  # noqa: E402
import make_drafts  # noqa: E402
import train as demo_train  # noqa: E402

TARGETS = {"demo": os.path.join(REPO, "assets", "demo", "model"),
           "task": os.path.join(REPO, "testdata", "models", "task")}
EXPECT = {"demo": os.path.join(REPO, "testdata", "models", "demo", "expect.json"),
          "task": None}
DRAFT = dict(num_hidden_layers=2, num_attention_heads=4, q_lora_rank=64, kv_lora_rank=32, qk_nope_head_dim=32,
             qk_rope_head_dim=16, v_head_dim=32, intermediate_size=384, markov_rank=32,
             target_layer_ids=[1, 2, 3], rope_parameters=make_drafts.RELEASE_ROPE)
MASK_OFFSET = 253            # K3's mask_token_id 163837 = 163584 + 253; here NUM_BASE + 253
# k3 bench spec's chat prompts (ui/cli/benchspec.go): conversations holding one are not trained on,
# so the bench measures the drafter on replies it has not seen (its code and summary tasks are
# kept out of the task model's own training by tasks.py)
BENCH_TURNS = {"Tell me a saying about love.", "Do you know a saying about time?"}


def build_conversations(kind, seed):
    """The target's training and held-out conversations (as tools/demo/train.py prepare())."""
    S = demo_train
    dic = corpus.load_dict()
    psg = corpus.passages(dic)
    cand = [i for i, (_, t) in enumerate(psg) if len(t) <= S.SHORT_CHARS and corpus.dict_ratio(t, dic) == 1.0]
    rng = random.Random(seed)
    rng.shuffle(cand)
    train = sorted(cand[:S.N_TRAIN_PASSAGES])
    held = sorted(cand[S.N_TRAIN_PASSAGES:S.N_TRAIN_PASSAGES + S.N_HELDOUT_PASSAGES])
    conv_train = corpus.conversations([psg[i] for i in train], dic, seed, canned=S.CANNED, multi_turn=S.MULTI_TURN)
    conv_held = corpus.conversations([psg[i] for i in held], dic, seed + 1, canned=0, multi_turn=0.0)
    if kind == "task":
        used = set(train) | set(held)
        sents = tasks.sentences([p for i, p in enumerate(psg) if i not in used])
        cut = len(sents) * 9 // 10
        conv_train += tasks.summaries(sents[:cut], S.N_SUMMARIES, seed + 2) + tasks.code_conversations(S.N_CODE, seed + 3)
        conv_held += (tasks.summaries(sents[cut:], S.N_TASK_HELDOUT, seed + 4)
                      + tasks.code_conversations(S.N_TASK_HELDOUT, seed + 5))
        random.Random(seed + 6).shuffle(conv_train)
    return conv_train, conv_held


def encode(convs, tokdir, work, name):
    prep = os.path.join(work, "prep")
    if not os.path.exists(prep):
        subprocess.run(["go", "build", "-o", prep, "./tools/demo/prep"], cwd=REPO, check=True)
    conv = os.path.join(work, name + ".conv.jsonl")
    out = os.path.join(work, name + ".enc.jsonl")
    with open(conv, "w") as f:
        for c in convs:
            f.write(json.dumps({"messages": c}) + "\n")
    subprocess.run([prep, "encode", "-tok", tokdir, "-conv", conv, "-out", out], check=True,
                   stdout=subprocess.DEVNULL)
    with open(out) as f:
        return [json.loads(line) for line in f]


def taps_and_argmax(target, ids, layer_ids):
    """One batched forward: concatenated taps [Bt, T, nT*E] and the argmax [Bt, T]."""
    p, cfg = target.params, target.cfg
    P = p["model.embed_tokens.weight"][ids]
    blocks, taps = [], {}
    for i in range(cfg.num_hidden_layers):
        P = k3ref.decoder_layer(i, P, blocks, target.layers[i], cfg, None, target.kda_chunk)
        if i in layer_ids:
            taps[i] = P
    h, _ = k3ref.attn_res(blocks + [P], p["model.output_attn_res_proj.weight"],
                          p["model.output_attn_res_norm.weight"], cfg.rms_norm_eps)
    h = k3ref.rmsnorm(h, p["model.norm.weight"], cfg.rms_norm_eps)
    am = k3ref.linear(h, p["lm_head.weight"]).argmax(-1)
    return torch.cat([taps[i] for i in layer_ids], dim=-1), am


def distill_data(target, data, layer_ids, pad, batch_tokens=3000):
    """Per conversation: s (ids, reply = the target's argmax), taps (float32), ok[t] (s[t+1] == a[t])."""
    order = sorted(range(len(data)), key=lambda i: len(data[i]["ids"]))
    out = [None] * len(data)
    b = []

    def flush(b):
        T = max(len(data[i]["ids"]) for i in b)
        ids = torch.full((len(b), T), pad, dtype=torch.long)
        for r, i in enumerate(b):
            ids[r, :len(data[i]["ids"])] = torch.tensor(data[i]["ids"])
        with torch.no_grad():
            _, a = taps_and_argmax(target, ids, layer_ids)
            s = ids.clone()
            for r, i in enumerate(b):
                pl, L = data[i]["prompt"], len(data[i]["ids"])
                s[r, pl:L] = a[r, pl - 1:L - 1]
            taps, a2 = taps_and_argmax(target, s, layer_ids)
        for r, i in enumerate(b):
            L = len(data[i]["ids"])
            ok = torch.zeros(L, dtype=torch.bool)
            ok[:L - 1] = s[r, 1:L] == a2[r, :L - 1]
            out[i] = {"s": s[r, :L].clone(), "taps": taps[r, :L].clone(), "ok": ok, "prompt": data[i]["prompt"]}

    for i in order:
        b.append(i)
        if len(b) * len(data[i]["ids"]) >= batch_tokens:
            flush(b)
            b = []
    if b:
        flush(b)
    return out


def generate_data(convs, tdir, work, name, sampled_frac, seed, max_tokens, procs=1):
    """The target's own replies (self-distillation): each conversation's user turns sent to the
    target as a chat session sends them (tools/demo/prep generate, the Go engine), decoded
    greedily, and for a `sampled_frac` share also sampled as k3 bench spec's seeded rows are.
    Returns encode()-like rows: ids = prompt + the target's reply, prompt = its length."""
    prep = os.path.join(work, "prep")
    if not os.path.exists(prep):
        subprocess.run(["go", "build", "-o", prep, "./tools/demo/prep"], cwd=REPO, check=True)
    rng = random.Random(seed)
    turns = os.path.join(work, name + ".turns.jsonl")
    out = os.path.join(work, name + ".gen.jsonl")
    with open(turns, "w") as f:
        for i, c in enumerate(convs):
            t = [m["content"] for m in c if m["role"] == "user"]
            f.write(json.dumps({"turns": t, "seed": 0}) + "\n")
            if rng.random() < sampled_frac:
                f.write(json.dumps({"turns": t, "seed": 1000 + i}) + "\n")
    n = sum(1 for _ in open(turns))
    if not (os.path.exists(out) and sum(1 for _ in open(out)) == n):     # else: generated before, reuse
        # `procs` prep processes on consecutive slices of the turns (one thread each), joined in order
        with open(turns) as f:
            lines = f.readlines()
        step = -(-len(lines) // procs)
        parts = []
        for j in range(0, len(lines), step):
            part = f"{turns}.{j // step}"
            with open(part, "w") as f:
                f.writelines(lines[j:j + step])
            parts.append(part)
        runs = [subprocess.Popen([prep, "generate", "-model", tdir, "-turns", pt, "-out", pt + ".gen", "-max",
                                  str(max_tokens)]) for pt in parts]
        if any(r.wait() != 0 for r in runs):
            raise SystemExit("prep generate failed")
        with open(out + ".tmp", "w") as f:
            for pt in parts:
                with open(pt + ".gen") as g:
                    f.write(g.read())
        os.replace(out + ".tmp", out)
    with open(out) as f, open(turns) as ft:
        rows = [(json.loads(line), json.loads(t)) for line, t in zip(f, ft)]
    return [r for r, t in rows if not BENCH_TURNS & set(t["turns"])]


def distill_own(target, data, layer_ids, pad, batch_tokens=3000):
    """Per generated conversation: s (ids as generated), taps (float32), ok[t] (s[t+1] == the
    target's argmax at t: always for greedy replies, where the sample was the argmax for sampled)."""
    order = sorted(range(len(data)), key=lambda i: len(data[i]["ids"]))
    out = [None] * len(data)
    b = []

    def flush(b):
        T = max(len(data[i]["ids"]) for i in b)
        ids = torch.full((len(b), T), pad, dtype=torch.long)
        for r, i in enumerate(b):
            ids[r, :len(data[i]["ids"])] = torch.tensor(data[i]["ids"])
        with torch.no_grad():
            taps, a = taps_and_argmax(target, ids, layer_ids)
        for r, i in enumerate(b):
            L = len(data[i]["ids"])
            ok = torch.zeros(L, dtype=torch.bool)
            ok[:L - 1] = ids[r, 1:L] == a[r, :L - 1]
            out[i] = {"s": ids[r, :L].clone(), "taps": taps[r, :L].clone(), "ok": ok, "prompt": data[i]["prompt"]}

    for i in order:
        b.append(i)
        if len(b) * len(data[i]["ids"]) >= batch_tokens:
            flush(b)
            b = []
    if b:
        flush(b)
    return out


def make_batch(items, rng, anchors, B, mask_id, gamma, mixed=False):
    """Pack `anchors` blocks per sequence. Returns the tensors of one training pass. mixed: each
    block has a random length 1..B (its rows see only each other), as the engine drafts blocks of
    the length its controller chooses, not always B; otherwise every block has B rows."""
    Bt = len(items)
    T = max(len(x["s"]) for x in items)
    E3 = items[0]["taps"].shape[-1]
    Q = anchors * B
    u = torch.zeros(Bt, T, E3)
    ids = torch.full((Bt, Q), mask_id, dtype=torch.long)
    pos = torch.zeros(Bt, Q, dtype=torch.long)
    prev = torch.zeros(Bt, Q, dtype=torch.long)
    lab = torch.zeros(Bt, Q, dtype=torch.long)
    w = torch.zeros(Bt, Q)
    mask = torch.zeros(Bt, Q, T + Q, dtype=torch.bool)
    ar = torch.arange(T)
    for r, x in enumerate(items):
        L, s, ok = len(x["s"]), x["s"], x["ok"]
        u[r, :L] = x["taps"]
        lo, hi = x["prompt"], L - 2
        ns = [rng.randint(lo, hi) for _ in range(anchors)] if hi >= lo else []
        for j, n in enumerate(ns):
            q0 = j * B
            ids[r, q0] = s[n]
            good = True
            b = rng.randint(1, B) if mixed else B
            for k in range(b, B):                  # rows past this block's length: unused
                mask[r, q0 + k, T + q0 + k] = True
            for k in range(b):
                q = q0 + k
                pos[r, q] = n + k
                mask[r, q, :T] = ar < n
                mask[r, q, T + q0:T + q0 + b] = True
                prev[r, q] = s[n + k] if n + k < L else 0
                good = good and n + k + 1 < L and bool(ok[n + k])
                if good:
                    lab[r, q] = s[n + k + 1]
                    w[r, q] = math.exp(-k / gamma)
        for j in range(len(ns), anchors):          # unused slots: a harmless self-contained block
            for k in range(B):
                mask[r, j * B + k, T + j * B:T + j * B + B] = True
    return u, ids, pos, prev, lab, w, mask


def init_params(cfg, seed):
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, shape in cfg.expected_shapes().items():
        if len(shape) == 1:
            t = torch.ones(shape)
        elif name.startswith("markov_head."):
            t = 0.02 * torch.randn(shape, generator=g)
        else:
            t = torch.randn(shape, generator=g) / shape[1] ** 0.5
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                t = t * 0.5
        out[name] = t.float().requires_grad_(True)
    return out


def widen(prev, fresh, name):
    """A trained tensor in a drafter with a wider MLP (--intermediate above the trained one): the
    trained values in the leading rows and columns, fresh ones in the new gate and up rows, and zeros
    in the new down_proj columns, so the wider drafter starts as the trained one."""
    if prev.shape == fresh.shape:
        return prev.clone()
    if prev.dim() != fresh.dim() or any(a > b for a, b in zip(prev.shape, fresh.shape)):
        raise SystemExit(f"--init-from: {name} has shape {list(prev.shape)}, not within {list(fresh.shape)}")
    out = fresh.clone()
    if name.endswith("down_proj.weight"):
        out[:, prev.shape[1]:] = 0
    out[tuple(slice(0, n) for n in prev.shape)] = prev
    return out


def train(draft, target, dist, args, rng, log):
    params = list(draft.params.values())
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.95), weight_decay=0.01)
    emb = target.params["model.embed_tokens.weight"]
    head = target.params["lm_head.weight"]
    train_items = [x for x in dist if int(x["ok"][x["prompt"]:].sum()) > 0]
    t0 = time.time()
    step = 0
    hist = []
    while True:
        el = time.time() - t0
        if step >= args.steps or el > args.minutes * 60:
            break
        frac = min(1.0, el / (args.minutes * 60)) if args.steps >= 10 ** 8 else step / args.steps
        lr = args.lr * min(1.0, (step + 1) / 30) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for gr in opt.param_groups:
            gr["lr"] = lr
        items = rng.sample(train_items, args.seqs)
        u, ids, pos, prev, lab, w, mask = make_batch(items, rng, args.anchors, args.block, draft.cfg.mask_token_id,
                                                     args.gamma, mixed=args.mixed_blocks)
        T = u.shape[1]
        rows = draft.context_rows(u, torch.arange(T))
        g = draft.block_hidden(emb[ids], pos, rows, mask)
        sel = w > 0
        logits = k3ref.linear(g[sel], head) + draft.markov_bias(prev[sel])
        nll = torch.nn.functional.cross_entropy(logits, lab[sel], reduction="none")
        loss = (nll * w[sel]).sum() / w[sel].sum()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        with torch.no_grad():
            k0 = sel.clone()
            k0[:, [q for q in range(ids.shape[1]) if q % args.block]] = False
            acc0 = float((logits.argmax(-1) == lab[sel])[k0[sel]].float().mean()) if k0.any() else 0.0
        hist.append((float(loss), acc0))
        step += 1
        if step % 20 == 0:
            ml = sum(h[0] for h in hist[-20:]) / 20
            ma = sum(h[1] for h in hist[-20:]) / 20
            log(f"step {step} loss {ml:.3f} first-position accuracy {ma:.3f} lr {lr:.2e} {time.time() - t0:.0f}s")
    return {"steps": step, "seconds": time.time() - t0, "final_loss": sum(h[0] for h in hist[-20:]) / max(1, len(hist[-20:])),
            "final_first_position_accuracy": sum(h[1] for h in hist[-20:]) / max(1, len(hist[-20:]))}


def acceptance(target, draft, prompts, n_new, blocks):
    res = {}
    for B in blocks:
        acc = steps = 0
        per_pos = [0] * B
        for pr in prompts:
            r = dspark_ref.spec_greedy(target, draft, pr, n_new, B)
            for st in r["steps"]:
                for k in range(st["accepted"]):
                    per_pos[k] += 1
            acc += r["accepted"]
            steps += len(r["steps"])
        res[str(B)] = {"verify_passes": steps, "mean_accepted_per_block": acc / max(steps, 1),
                       "tokens_per_pass": (acc + steps) / max(steps, 1),
                       "accepted_at_position": [c / max(steps, 1) for c in per_pos]}
    return res


def write_fixtures(target, t64, d64, out):
    """expect.json beside the drafter: float64 fixtures over the target's expect.json prompts."""
    if not EXPECT[target]:
        return
    with open(EXPECT[target]) as f:
        texp = json.load(f)
    tp = [p["prompt_ids"] for p in texp["prompts"]]
    tg = [p["greedy_ids"] for p in texp["prompts"]]
    cases = [(tp[0], tg[0][0]), (tp[1] + tg[1][:4], tg[1][4]), (tp[2] + tg[2][:2], tg[2][2])]
    fx, worst = make_drafts.fixtures(t64, d64, cases, [tp[0], tp[2]], greedy=[tg[0], tg[2]])
    fx_doc = {"note": "float64 fixtures of dspark_ref.py for the trained drafter (docs/DSPARK.md §8); "
                      "written by tools/demo/train_draft.py. Trained weights: margins are NOT enforced; "
                      "min_rel_margin says how close the closest draft choice is.",
              "target": target, "dtype": "BF16", "rope_inv_freq": [float(x) for x in d64.inv],
              "rope_amplitude": d64.A, "softmax_scale": dspark_ref.softmax_scale(d64.cfg),
              "min_rel_margin": worst, **fx}
    with open(os.path.join(out, "expect.json"), "w") as f:
        json.dump(fx_doc, f, indent=1)
        f.write("\n")


def main():
    demo_train.use_openblas()          # OpenBLAS for this process only when installed (see README)
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", choices=list(TARGETS), default="demo")
    ap.add_argument("--out", default=None, help="drafter directory (default testdata/models/<target>/draft)")
    ap.add_argument("--report", default=None, help="default tools/demo/draft-<target>.json")
    ap.add_argument("--work", default=None)
    ap.add_argument("--minutes", type=float, default=12.0, help="training wall-clock budget")
    ap.add_argument("--steps", type=int, default=10 ** 9)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seqs", type=int, default=12)
    ap.add_argument("--anchors", type=int, default=12)
    ap.add_argument("--block", type=int, default=8)
    ap.add_argument("--gamma", type=float, default=4.0)
    ap.add_argument("--train-convs", type=int, default=900)
    ap.add_argument("--eval-prompts", type=int, default=8)
    ap.add_argument("--eval-new", type=int, default=48)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--init-from", default=None, help="start from this drafter directory instead of random weights")
    ap.add_argument("--self-distill", type=int, default=1,
                    help="1: train on the target's own replies to the training prompts (prep generate); "
                         "0: on the training replies with the target's argmax put in (one Jacobi step)")
    ap.add_argument("--sampled-frac", type=float, default=0.5, help="self-distill: share of prompts also sampled")
    ap.add_argument("--gen-max", type=int, default=320, help="self-distill: reply cap in tokens")
    ap.add_argument("--gen-procs", type=int, default=2, help="self-distill: prep processes generating at once")
    ap.add_argument("--corpus", type=int, default=1,
                    help="self-distill: also train on the training conversations' own replies with the target's "
                         "argmax put in (every saying the target learnt, not only those its replies to the "
                         "training prompts hold)")
    ap.add_argument("--mixed-blocks", type=int, default=1, help="1: blocks of random length 1..--block")
    ap.add_argument("--layers", type=int, default=DRAFT["num_hidden_layers"])
    ap.add_argument("--intermediate", type=int, default=DRAFT["intermediate_size"])
    ap.add_argument("--expect-only", action="store_true",
                    help="only (re)write --out's expect.json for the drafter already there (after the target changed)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.expect_only:
        out = args.out or os.path.join(REPO, "testdata", "models", args.target, "draft")
        t = k3ref.K3Model.load(TARGETS[args.target])
        write_fixtures(args.target, k3ref.K3Model(t.cfg, t.params, kda_chunk=16), dspark_ref.DSparkDraft.load(out), out)
        return
    t_start = time.time()
    out = args.out or os.path.join(REPO, "testdata", "models", args.target, "draft")
    report_path = args.report or os.path.join(HERE, f"draft-{args.target}.json")
    work = args.work or f"/tmp/k3-draft-{args.target}"
    os.makedirs(work, exist_ok=True)

    def log(msg):
        print(f"[{time.time() - t_start:6.0f}s] {msg}", flush=True)

    tdir = TARGETS[args.target]
    target64 = k3ref.K3Model.load(tdir)
    tcfg = target64.cfg
    target = k3ref.K3Model(tcfg, {k: v.float() for k, v in target64.params.items()}, kda_chunk=16)
    conv_train, conv_held = build_conversations(args.target, demo_train.SEED)
    rng = random.Random(demo_train.SEED + 77)
    conv_all = [c for c in conv_train if not BENCH_TURNS & {m["content"] for m in c if m["role"] == "user"}]
    conv_train = rng.sample(conv_train, min(args.train_convs, len(conv_train)))
    held = encode(conv_held, tdir, work, "heldout")
    t0 = time.time()
    if args.self_distill:
        data = generate_data(conv_train, tdir, work, f"train-{len(conv_train)}", args.sampled_frac,
                             demo_train.SEED + 78, args.gen_max, args.gen_procs)
    else:
        data = encode(conv_train, tdir, work, "train")
    t_gen = time.time() - t0
    log(f"{len(data)} training conversations ({sum(len(x['ids']) for x in data)} tokens; "
        f"{'the target generated them in %.0fs' % t_gen if args.self_distill else 'corpus replies'}), "
        f"{len(held)} held out")

    DRAFT.update(num_hidden_layers=args.layers, intermediate_size=args.intermediate)
    d = dict(DRAFT, mask_token_id=demo_train.NUM_BASE + MASK_OFFSET)
    config = make_drafts.draft_config(tcfg, d)
    cfg = dspark_ref.DSparkConfig(config)
    cfg.check_target(tcfg)
    t0 = time.time()
    pad = demo_train.NUM_BASE + 255

    def cached(name, fn, rows):                    # same conversations, same target: reuse
        path = os.path.join(work, f"{name}-{len(rows)}.pt")
        if os.path.exists(path):
            return torch.load(path)
        d = fn(target, rows, cfg.target_layer_ids, pad)
        torch.save(d, path + ".tmp")
        os.replace(path + ".tmp", path)
        return d

    if args.self_distill:
        dist = cached("distill-own", distill_own, data)
    else:
        dist = cached("distill", distill_data, data)
    if args.self_distill and args.corpus:          # and the corpus replies, Jacobi step as --self-distill 0
        corp = encode(conv_all, tdir, work, "corpus")
        dist = dist + cached("distill-corpus", distill_data, corp)
        log(f"and {len(corp)} corpus conversations ({sum(len(x['ids']) for x in corp)} tokens)")
    t_data = time.time() - t0
    agree = sum(int(x["ok"][x["prompt"]:].sum()) for x in dist) / sum(len(x["s"]) - x["prompt"] for x in dist)
    log(f"distillation data in {t_data:.0f}s; target argmax == its own reply text at {agree:.3f} of reply positions")

    params = init_params(cfg, 7)
    if args.init_from:                             # continue from an exported drafter (BF16 weights)
        prev = dspark_ref.DSparkDraft.load(args.init_from)
        params = {k: widen(prev.params[k].float(), params[k].detach(), k).requires_grad_(True) for k in params}
    draft = dspark_ref.DSparkDraft(cfg, params)
    tr = train(draft, target, dist, args, random.Random(11), log)
    make_drafts.write_draft(out, config, {k: v.detach() for k, v in draft.params.items()}, "BF16")
    size = os.path.getsize(os.path.join(out, "model.safetensors"))
    log(f"trained {tr['steps']} steps in {tr['seconds']:.0f}s; wrote {out} ({size} bytes)")

    # evaluation and fixtures with the float64 reference over the files on disk
    d64 = dspark_ref.DSparkDraft.load(out)
    t64 = k3ref.K3Model(tcfg, target64.params, kda_chunk=16)
    def pick(xs, n):
        return [x["ids"][:x["prompt"]] for x in xs[:: max(1, len(xs) // n)][:n]]
    if args.target == "task":    # held = sayings, then summaries, then Go code (build_conversations)
        nt = demo_train.N_TASK_HELDOUT
        groups = {"code": pick(held[-nt:], args.eval_prompts // 2),
                  "summaries": pick(held[-2 * nt:-nt], args.eval_prompts // 2)}
    else:
        groups = {"sayings": pick(held, args.eval_prompts)}
    t0 = time.time()
    acc = {g: acceptance(t64, d64, ps, args.eval_new, (4, 8)) for g, ps in groups.items()}
    prompts = [p for ps in groups.values() for p in ps]
    log(f"held-out acceptance: {json.dumps(acc)} ({time.time() - t0:.0f}s)")
    write_fixtures(args.target, t64, d64, out)
    report = {"target": args.target, "draft_config": DRAFT, "parameters": sum(v.numel() for v in draft.params.values()),
              "checkpoint_bytes": size, "train_conversations": len(data),
              "train_tokens": sum(len(x["ids"]) for x in data), "target_agreement_with_reply_text": agree,
              "generate_seconds": t_gen, "distill_seconds": t_data, "train": tr, "args": vars(args),
              "heldout_prompts": len(prompts), "heldout_new_tokens": args.eval_new, "acceptance_greedy": acc,
              "total_seconds": time.time() - t_start, "torch": torch.__version__}
    with open(report_path, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    log(f"report {report_path}")


if __name__ == "__main__":
    main()
