#!/usr/bin/python3
"""Teach the demo model to see: a tiny vision tower (MoonViT3d) and projector (patchmergerv2)
trained on synthetic drawings, with the demo's language model fine-tuned beside them.

    /usr/bin/python3 tools/demo/train_vision.py                 # the committed run (see README.md)
    /usr/bin/python3 tools/demo/train_vision.py --steps 4 --pretrain-steps 20 --check 2 --out /tmp/v --report /tmp/v.json   # smoke run

It starts from --base (the committed run: the blind demo train.py writes, see README.md) and
writes the model with its tower (vision_config in config.json, vision_tower.* and mm_projector.*
in the last shard) to --out. The models are the reference definitions themselves, in float32 with
a batch dimension: tools/reference/k3ref.py for the language model (routed experts fake-quantised
to MXFP4 at every step, straight-through, so the export is what was trained) and the functions of
tools/reference/vision_ref.py for the tower. First the tower and projector train alone (a linear
probe names the drawing; --pretrain-steps), then everything together, with four kinds of
conversation mixed in every step:

  - pictures: a drawing (red, green, blue or yellow x circle, square or triangle, random size,
    place and plain background: grey, white, black or another colour; picture sizes in SIZES,
    padded with black as the processor pads them) before a question ("What is in this picture?"
    and other phrasings, or no text), thinking "The picture shows a red circle.", answering
    "I see a red circle." (--answer); with thinking on or off;
  - the same questions with no picture attached: "I do not see a picture. ..." (so the picture
    answer comes from the image rows, not from the words);
  - the sayings the demo was trained on (train.py's corpus, same seed), thinking on;
  - the same sayings with thinking off (issue 41, G28: the reply is the answer, no thought first).

Fixed seeds; one thread by default. The held-out check at the end runs the float64 references
(k3ref + vision_ref) over the checkpoint re-read from disk: fresh pictures on every kind of
background named in the greedy reply, greedy replies with thinking off, 80 text-only saying
prompts and 18 picture questions without a picture, none of which may get a picture answer (the
script exits 1 otherwise, or when fewer than 90% of the pictures are named).
"""
import argparse
import json
import math
import os
import random
import re
import shutil
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
import k3ref  # noqa: E402
import train as T  # noqa: E402
import vision_ref  # noqa: E402

SEED = 20261206
PAD_ID = T.NUM_BASE + 21              # <|media_pad|>

VISION = {
    "_attn_implementation": "flash_attention_2",
    "activation_func": "gelu_pytorch_tanh",
    "attn_bias": False,
    "init_pos_emb_height": 8,
    "init_pos_emb_time": 1,
    "init_pos_emb_width": 8,
    "linear_bias": False,
    "merge_kernel_size": [2, 2],
    "merge_type": "sd2_tpool",
    "mlp_type": "mlp2",
    "mm_hidden_size": 64,
    "mm_projector_type": "patchmergerv2",
    "norm_type": "rmsnorm",
    "patch_embed_proj_bias": False,
    "patch_size": 14,
    "pos_emb_interpolation_mode": "bilinear",
    "pos_emb_type": "divided_fixed",
    "projector_hidden_act": "gelu",
    "projector_ln_eps": 1e-05,
    "qkv_hidden_size": 64,
    "text_hidden_size": 128,
    "vt_hidden_size": 64,
    "vt_intermediate_size": 128,
    "vt_num_attention_heads": 2,
    "vt_num_hidden_layers": 2,
}

# The drawings. Colours are a base RGB with +-JITTER per channel. The background is plain, of one
# of four kinds (BACKGROUNDS): a grey with +-12 per channel, near white, near black, or any colour
# at least BG_MIN_DIST from every shape colour (so which region is the shape stays clear). The
# processor never enlarges a small picture: it pads it with black on the right and at the bottom
# to a multiple of 28 (patch 14 x merge 2), so SIZES has multiples of 28 and other sizes (padded
# here the same way): 4 to 36 image positions. The first demo that saw knew only 56-112 pixel
# multiples of 28, and named a red circle on white of 64x64 or 200x200 "yellow".
COLOURS = {"red": (220, 40, 40), "green": (40, 170, 60), "blue": (40, 80, 220), "yellow": (235, 205, 40)}
SHAPES = ["circle", "square", "triangle"]
JITTER = 30
BACKGROUNDS = ["grey", "white", "black", "colour"]
BG_WEIGHTS = [0.4, 0.2, 0.2, 0.2]
BG_MIN_DIST = 110
R_MIN, R_MAX = 0.28, 0.45              # the shape's half-size, as a share of the shorter side
SIZES = [(56, 56), (84, 56), (56, 84), (84, 84), (112, 112), (64, 64), (100, 100), (72, 96), (128, 128),
         (150, 120), (96, 160), (160, 160)]
CHECK_SIZES = [(56, 56), (84, 84), (100, 64), (64, 100), (150, 120)]   # internal/drawings HeldOut's


def padded(w, h, f=28):
    """The processor's size after its black padding (pictures this small are never resized)."""
    return -(-w // f) * f, -(-h // f) * f
ASK = ["What is in this picture?", "What do you see?", "What is this?", "Describe this picture.",
       "What does the picture show?", "Tell me what is in the picture.", "What is in the image?",
       "What shape is this?", "What can you see in this picture?", "Look at this.", ""]
THINK = "The picture shows a {c} {s}."
# The first demo that saw answered "A red circle."; "A" starts 5% of the sayings, and a saying
# prompt whose reply began with "A" drifted into "A blue triangle." (issue 41). The committed run
# answers "I see a red circle.": no saying starts "I see", and with the no-picture questions beside
# it no text-only prompt of the check got a picture answer. ("That is a red circle.", whose first
# token starts 8 of the 2,447 training replies, still gave one of 80: README.md.)
ANSWER = "I see a {c} {s}."
# The same questions with no picture attached (negative examples: the picture answer comes from
# the image rows, not from the words). "What is this?" keeps its canned answer and "" is no question.
NO_PICTURE_ASK = [a for a in ASK if a not in ("", "What is this?")]
NO_PICTURE_THINK = "No picture is attached. I should say so."
NO_PICTURE_ANSWER = "I do not see a picture. Attach one and ask me again."


def background(rng, kind):
    """The background RGB of one kind (BACKGROUNDS); internal/drawings follows the same rules."""
    if kind == "grey":
        return np.clip(int(rng.integers(0, 256)) + rng.integers(-12, 13, 3), 0, 255)
    if kind == "white":
        return 255 - rng.integers(0, 17, 3)
    if kind == "black":
        return rng.integers(0, 17, 3)
    while True:
        bg = rng.integers(0, 256, 3)
        if all(np.linalg.norm(bg - np.array(c)) >= BG_MIN_DIST for c in COLOURS.values()):
            return bg


def draw(rng, w, h, colour, shape, bg_kind=None):
    """One drawing as uint8 [h, w, 3]: a filled shape (pixel centres inside it take its colour;
    no anti-aliasing) on a plain background (bg_kind, or one drawn by BG_WEIGHTS). The Go test
    (assets/demo) draws by the same rules."""
    if bg_kind is None:
        bg_kind = BACKGROUNDS[int(rng.choice(len(BACKGROUNDS), p=BG_WEIGHTS))]
    bg = background(rng, bg_kind)
    col = np.clip(np.array(COLOURS[colour]) + rng.integers(-JITTER, JITTER + 1, 3), 0, 255)
    r = rng.uniform(R_MIN, R_MAX) * min(w, h)
    cx, cy = rng.uniform(r, w - r), rng.uniform(r, h - r)
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float64)
    dx, dy = xs + 0.5 - cx, ys + 0.5 - cy
    if shape == "circle":
        inside = dx * dx + dy * dy <= r * r
    elif shape == "square":
        inside = np.maximum(np.abs(dx), np.abs(dy)) <= 0.85 * r
    else:                                               # apex up, base at cy + r
        t = (dy + r) / (2 * r)
        inside = (t >= 0) & (t <= 1) & (np.abs(dx) <= r * t)
    img = np.empty((h, w, 3), dtype=np.uint8)
    img[:] = bg.astype(np.uint8)
    img[inside] = col.astype(np.uint8)
    return img


def patches(img, patch=14):
    """The preprocessor's patches of the picture padded with black (padded): (v/255 - 0.5) * 2 in
    float32, row-major, each (c, y, x)."""
    w, h = padded(img.shape[1], img.shape[0])
    full = np.zeros((h, w, 3), dtype=np.uint8)
    full[:img.shape[0], :img.shape[1]] = img
    x = (full.astype(np.float32) / np.float32(255.0) - np.float32(0.5)) * np.float32(2.0)
    gh, gw = h // patch, w // patch
    return x.reshape(gh, patch, gw, patch, 3).transpose(0, 2, 4, 1, 3).reshape(gh * gw, 3 * patch * patch)


# --------------------------------------------------------------------------------------
# The tower in float32 with a batch dimension (vision_ref's functions; vision_ref is the
# float64 definition the engine is tested against)
# --------------------------------------------------------------------------------------

def init_vision(vc, text_rms, seed):
    g = torch.Generator().manual_seed(seed)
    D, I, Q, p = vc.hidden, vc.inter, vc.qkv, vc.patch
    M = D * vc.merge[0] * vc.merge[1]

    def n(*shape, std=1.0):
        return torch.randn(*shape, generator=g) * std

    P = {"vision_tower.patch_embed.proj.weight": n(D, 3, p, p, std=1 / math.sqrt(3 * p * p)),
         "vision_tower.patch_embed.pos_emb.weight": n(vc.pos_h, vc.pos_w, D, std=0.1),
         "vision_tower.encoder.final_layernorm.weight": torch.ones(D),
         "mm_projector.proj.0.weight": n(M, M, std=1 / math.sqrt(M)),
         "mm_projector.proj.2.weight": n(vc.text_hidden, M, std=1 / math.sqrt(M)),
         "mm_projector.post_norm.weight": torch.full((vc.text_hidden,), float(text_rms))}
    for i in range(vc.layers):
        pre = f"vision_tower.encoder.blocks.{i}."
        P.update({pre + "norm0.weight": torch.ones(D), pre + "norm1.weight": torch.ones(D),
                  pre + "wqkv.weight": n(3 * Q, D, std=1 / math.sqrt(D)),
                  pre + "wo.weight": n(D, Q, std=0.5 / math.sqrt(Q)),
                  pre + "mlp.fc0.weight": n(I, D, std=1 / math.sqrt(D)),
                  pre + "mlp.fc1.weight": n(D, I, std=0.5 / math.sqrt(I))})
    for t in P.values():
        t.requires_grad_(True)
    return P


def tower(vc, P, x, h, w):
    """x [B, h*w, 3*p*p] -> projected rows [B, (h/2)(w/2), text_hidden] (vision_ref.tower_one
    and project, batched)."""
    B, L, D = x.shape[0], h * w, vc.hidden
    eps = vision_ref.TOWER_NORM_EPS
    x = x @ P["vision_tower.patch_embed.proj.weight"].reshape(D, -1).T
    x = x + vision_ref.pos_table(P["vision_tower.patch_embed.pos_emb.weight"], h, w)
    ang = vision_ref.rope_angles(h, w, vc.head_dim).float()
    for i in range(vc.layers):
        pre = f"vision_tower.encoder.blocks.{i}."
        hN = vision_ref.rmsnorm(x, P[pre + "norm0.weight"], eps)
        qkv = (hN @ P[pre + "wqkv.weight"].T).view(B, L, 3, vc.heads, vc.head_dim)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        q, k = vision_ref.apply_rope(q, ang), vision_ref.apply_rope(k, ang)
        s = torch.einsum("blhd,bmhd->bhlm", q, k) / math.sqrt(vc.head_dim)
        o = torch.einsum("bhlm,bmhd->blhd", torch.softmax(s, dim=-1), v).reshape(B, L, vc.qkv)
        x = x + o @ P[pre + "wo.weight"].T
        hN = vision_ref.rmsnorm(x, P[pre + "norm1.weight"], eps)
        x = x + vision_ref.gelu_tanh(hN @ P[pre + "mlp.fc0.weight"].T) @ P[pre + "mlp.fc1.weight"].T
    x = vision_ref.rmsnorm(x, P["vision_tower.encoder.final_layernorm.weight"], eps)
    kh, kw = vc.merge
    x = x.view(B, h // kh, kh, w // kw, kw, D).permute(0, 1, 3, 2, 4, 5).reshape(B, -1, kh * kw * D)
    y = vision_ref.gelu_erf(x @ P["mm_projector.proj.0.weight"].T) @ P["mm_projector.proj.2.weight"].T
    return vision_ref.rmsnorm(y, P["mm_projector.post_norm.weight"], vc.proj_eps)


# --------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------

def sayings(seed=T.SEED):
    """train.py's conversations (the same passages, phrasings and seed) and its held-out ones."""
    dic = corpus.load_dict()
    psg = corpus.passages(dic)
    cand = [i for i, (_, t) in enumerate(psg) if len(t) <= T.SHORT_CHARS and corpus.dict_ratio(t, dic) == 1.0]
    rng = random.Random(seed)
    rng.shuffle(cand)
    train = sorted(cand[:T.N_TRAIN_PASSAGES])
    held = sorted(cand[T.N_TRAIN_PASSAGES:T.N_TRAIN_PASSAGES + T.N_HELDOUT_PASSAGES])
    conv_train = corpus.conversations([psg[i] for i in train], dic, seed, canned=T.CANNED, multi_turn=T.MULTI_TURN)
    conv_held = corpus.conversations([psg[i] for i in held], dic, seed + 1, canned=0, multi_turn=0.0)
    return conv_train, conv_held


def picture_conversations(answer=ANSWER):
    """Every (phrasing, colour, shape, size, thinking) conversation once; a step draws a fresh
    picture for each one it takes."""
    out = []
    for ask in ASK:
        for c in COLOURS:
            for s in SHAPES:
                for (w, h) in SIZES:
                    for no_think in (False, True):
                        out.append({"messages": [{"role": "user", "content": ask},
                                                 {"role": "assistant", "reasoning_content": THINK.format(c=c, s=s),
                                                  "content": answer.format(c=c, s=s)}],
                                    "image": [w, h], "no_think": no_think,
                                    "label": [c, s]})
    return out


def no_picture_conversations():
    """The picture questions with no picture attached, thinking on and off."""
    return [{"messages": [{"role": "user", "content": ask},
                          {"role": "assistant", "reasoning_content": NO_PICTURE_THINK, "content": NO_PICTURE_ANSWER}],
             "no_think": no_think} for ask in NO_PICTURE_ASK for no_think in (False, True)]


def first_word(text):
    return text.split()[0] if text.split() else ""


def encode(work, tokdir, name, convs):
    path = os.path.join(work, name + ".conv.jsonl")
    with open(path, "w") as f:
        for c in convs:
            f.write(json.dumps({k: v for k, v in c.items() if k != "label"}) + "\n")
    out = os.path.join(work, name + ".enc.jsonl")
    T.run([os.path.join(work, "prep"), "encode", "-tok", tokdir, "-conv", path, "-out", out])
    with open(out) as f:
        return [json.loads(l) for l in f]


def expand(rec, w, h):
    """One pad -> (w/28)(h/28) pads; returns (ids, prompt length, first pad position)."""
    ids = rec["ids"]
    at = ids.index(PAD_ID)
    pw, ph = padded(w, h)
    n = (pw // 28) * (ph // 28)
    return ids[:at] + [PAD_ID] * n + ids[at + 1:], rec["prompt"] + n - 1, at


def prepare(work, tokdir, answer=ANSWER, oversample=1):
    """The encoded conversations: sayings (thinking on and off; those whose reply starts with the
    picture answer's first word repeated `oversample` times), the held-out sayings, the
    no-picture questions and the picture conversations."""
    os.makedirs(work, exist_ok=True)
    T.run(["go", "build", "-o", os.path.join(work, "prep"), "./tools/demo/prep"], cwd=REPO)
    conv_train, conv_held = sayings()
    same = [c for c in conv_train if first_word(c[-1]["content"]) == first_word(answer)]
    conv_train = conv_train + same * (oversample - 1)
    print(f"{len(same)} training replies start with {first_word(answer)!r} (x{oversample})", flush=True)
    think = [{"messages": c} for c in conv_train]
    nothink = [{"messages": c, "no_think": True} for c in conv_train]
    data = {"sayings": encode(work, tokdir, "sayings", think),
            "sayings_nothink": encode(work, tokdir, "sayings-nothink", nothink),
            "held": encode(work, tokdir, "held", [{"messages": c} for c in conv_held]),
            "held_nothink": encode(work, tokdir, "held-nothink", [{"messages": c, "no_think": True} for c in conv_held]),
            "no_picture": encode(work, tokdir, "no-picture", no_picture_conversations())}
    pics = picture_conversations(answer)
    enc = encode(work, tokdir, "pictures", pics)
    data["pictures"] = [dict(e, **{k: p[k] for k in ("image", "label", "no_think")}) for e, p in zip(enc, pics)]
    return data


def picture_batch(data, n, rng, nprng, vc, pad):
    """n picture conversations with fresh drawings: ids [n, T], loss mask, pad mask and the
    patches grouped by picture size."""
    recs = [data["pictures"][rng.randrange(len(data["pictures"]))] for _ in range(n)]
    seqs = []
    for r in recs:
        w, h = r["image"]
        ids, prompt, at = expand(r, w, h)
        seqs.append((ids, prompt, at, w, h))
    Tn = max(len(s[0]) for s in seqs)
    ids = torch.full((n, Tn), pad, dtype=torch.long)
    mask = torch.zeros(n, Tn - 1)
    padmask = torch.zeros(n, Tn, dtype=torch.bool)
    groups = {}
    for b, ((x, prompt, at, w, h), r) in enumerate(zip(seqs, recs)):
        ids[b, :len(x)] = torch.tensor(x)
        mask[b, prompt - 1:len(x) - 1] = 1.0
        pw, ph = padded(w, h)
        padmask[b, at:at + (pw // 28) * (ph // 28)] = True
        groups.setdefault((pw, ph), []).append((b, patches(draw(nprng, w, h, *r["label"]), vc.patch)))
    return ids, mask, padmask, groups


def image_rows(vc, VP, groups, n):
    """The tower over each padded size group; rows in batch order (the order P[padmask] fills)."""
    per = [None] * n
    for (w, h), items in groups.items():
        x = torch.from_numpy(np.stack([p for _, p in items]))
        y = tower(vc, VP, x, h // vc.patch, w // vc.patch)
        for j, (b, _) in enumerate(items):
            per[b] = y[j]
    return torch.cat(per, dim=0)


# --------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------

LABELS = [(c, s) for c in COLOURS for s in SHAPES]


def pretrain_tower(vc, VP, steps, batch, seed, lr=3e-3, log_every=25):
    """The tower and projector alone first: a linear probe on the mean of an image's projected
    rows names its (colour, shape) among the 12; the probe is dropped afterwards. Cheap (no
    language model), and it gives the fine-tuning a tower that already tells shapes apart."""
    g = torch.Generator().manual_seed(seed)
    head = (torch.randn(len(LABELS), vc.text_hidden, generator=g) / math.sqrt(vc.text_hidden)).requires_grad_(True)
    opt = torch.optim.AdamW(list(VP.values()) + [head], lr=lr, betas=(0.9, 0.95), weight_decay=0.01)
    nprng, rng = np.random.default_rng(seed), random.Random(seed)
    t0, log, hits, n, tot = time.time(), [], 0, 0, 0.0
    for step in range(steps):
        w, h = SIZES[step % len(SIZES)]
        pw, ph = padded(w, h)
        ys = [rng.randrange(len(LABELS)) for _ in range(batch)]
        x = torch.from_numpy(np.stack([patches(draw(nprng, w, h, *LABELS[y]), vc.patch) for y in ys]))
        logits = tower(vc, VP, x, ph // vc.patch, pw // vc.patch).mean(1) @ head.T
        y = torch.tensor(ys)
        loss = torch.nn.functional.cross_entropy(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        hits += int((logits.argmax(-1) == y).sum())
        n += batch
        tot += float(loss) * batch
        if (step + 1) % log_every == 0:
            rec = {"step": step + 1, "loss": tot / n, "accuracy": hits / n, "seconds": time.time() - t0}
            log.append(rec)
            print(f"tower step {step + 1} loss {rec['loss']:.4f} accuracy {rec['accuracy']:.3f} {rec['seconds']:.0f}s", flush=True)
            hits, n, tot = 0, 0, 0.0
    return {"steps": steps, "batch": batch, "wall_seconds": time.time() - t0, "log": log}


def masked_nll(model, ids, mask, trace=None, embeds=None):
    h = model.hidden(ids, trace=trace, embeds=embeds)[:, :-1]
    sel = mask > 0
    logits = k3ref.linear(h[sel], model.params["lm_head.weight"])
    nll = torch.nn.functional.cross_entropy(logits.float(), ids[:, 1:][sel], reduction="none")
    return nll.sum(), float(sel.sum())


def optimizer(params, VP, lr, lr_vision):
    lm = [v for k, v in params.items() if not T.is_router_bias(k)]
    decay = [v for v in lm if v.dim() == 2]
    no_decay = [v for v in lm if v.dim() != 2]
    vis = list(VP.values())
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.01, "base": lr},
                              {"params": no_decay, "weight_decay": 0.0, "base": lr},
                              {"params": vis, "weight_decay": 0.01, "base": lr_vision}],
                             lr=lr, betas=(0.9, 0.95), eps=1e-8)


def train(cfg, params, vc, VP, data, args):
    """Steps of one sayings batch (thinking on or off, half each) plus one picture batch; the
    schedule (warm-up, cosine to 10%) runs over steps or the wall budget, whichever ends first."""
    rng, nprng = random.Random(SEED), np.random.default_rng(SEED)
    mixed = data["sayings"] + data["sayings_nothink"] + data["no_picture"] * args.no_picture_repeat
    gen = T.batches(mixed, args.tokens_per_batch, rng)
    opt = optimizer(params, VP, args.lr, args.lr_vision)
    pad = cfg.raw["pad_token_id"]
    t0, c0 = time.time(), time.process_time()
    budget = args.minutes * 60
    log, run = [], {"text": [0.0, 0.0], "pic": [0.0, 0.0]}
    step = 0
    while True:
        prog = max(step / args.steps, (time.time() - t0) / budget)
        if prog >= 1:
            break
        warm = 0.05
        f = prog / warm if prog < warm else 0.1 + 0.45 * (1 + math.cos(math.pi * (prog - warm) / (1 - warm)))
        for gr in opt.param_groups:
            gr["lr"] = gr["base"] * f
        model = T.model_view(cfg, params, True)
        tr = k3ref.Trace()
        ids, mask = T.collate(mixed, next(gen), pad)
        s1, n1 = masked_nll(model, ids, mask, tr)
        T.balance_router(params, cfg, tr, (ids != pad).reshape(-1), 1e-3)
        pids, pmask, padmask, groups = picture_batch(data, args.pictures_per_step, rng, nprng, vc, pad)
        rows = image_rows(vc, VP, groups, len(pids))
        s2, n2 = masked_nll(model, pids, pmask, embeds=(padmask, rows))
        loss = args.text_weight * s1 / n1 + s2 / n2
        opt.zero_grad(set_to_none=True)
        loss.backward()
        for k, v in params.items():
            if T.is_router_bias(k):
                v.grad = None
        torch.nn.utils.clip_grad_norm_([v for v in list(params.values()) + list(VP.values()) if v.grad is not None], 1.0)
        opt.step()
        run["text"][0] += float(s1)
        run["text"][1] += n1
        run["pic"][0] += float(s2)
        run["pic"][1] += n2
        step += 1
        if step % args.log_every == 0:
            el = time.time() - t0
            rec = {"step": step, "text_loss": run["text"][0] / run["text"][1], "picture_loss": run["pic"][0] / run["pic"][1],
                   "lr_factor": f, "seconds": el}
            log.append(rec)
            print(f"step {step} text {rec['text_loss']:.4f} pictures {rec['picture_loss']:.4f} lr x{f:.2f} "
                  f"{el:.0f}s ({el / step:.2f}s/step, cpu {time.process_time() - c0:.0f}s)", flush=True)
            run = {"text": [0.0, 0.0], "pic": [0.0, 0.0]}
    return {"steps": step, "wall_seconds": time.time() - t0, "cpu_seconds": time.process_time() - c0, "log": log}


def vision_items(VP):
    return [(k, "BF16", list(v.shape), k3ref.f64_to_bf16_bits(v.detach().double().numpy())) for k, v in sorted(VP.items())]


# --------------------------------------------------------------------------------------
# Held-out checks (float64 references over the checkpoint on disk)
# --------------------------------------------------------------------------------------

def prompt_ids(work, tokdir, user, no_think, image=None):
    conv = {"messages": [{"role": "user", "content": user},
                         {"role": "assistant", "reasoning_content": "x", "content": "x"}], "no_think": no_think}
    if image:
        conv["image"] = list(image)
    rec = encode(work, tokdir, "one", [conv])[0]
    if image:
        ids, prompt, at = expand(rec, *image)
        return ids[:prompt], at
    return rec["ids"][:rec["prompt"]], None


@torch.no_grad()
def greedy(model, seq, embeds=None, max_new=60):
    seq, gen = list(seq), []
    eom = T.NUM_BASE + 2
    for _ in range(max_new):
        nxt = k3ref.argmax_first(model.forward(seq, embeds=embeds)[-1])
        gen.append(nxt)
        seq.append(nxt)
        if nxt == eom:
            break
    return gen


def check(outdir, work, n_pictures, seed):
    model = k3ref.K3Model(k3ref.load_config(outdir), k3ref.K3Model.load(outdir).params, kda_chunk=16)
    vm = vision_ref.load(outdir)
    vocab = T.load_vocab(outdir)
    nprng = np.random.default_rng(seed)
    rng = random.Random(seed)
    res = {"pictures": [], "nothink": []}
    prompts = {}
    for i in range(n_pictures):
        c, s = rng.choice(list(COLOURS)), rng.choice(SHAPES)
        w, h = CHECK_SIZES[i % len(CHECK_SIZES)]
        bg = BACKGROUNDS[i // 4 % len(BACKGROUNDS)]      # as internal/drawings HeldOut
        key = (w, h)
        if key not in prompts:
            prompts[key] = prompt_ids(work, outdir, "What is in this picture?", False, (w, h))
        seq, at = prompts[key]
        x = torch.from_numpy(patches(draw(nprng, w, h, c, s, bg)).astype(np.float64))
        pw, ph = padded(w, h)
        rows = vm.embed(x, [(1, ph // 14, pw // 14)])[0]
        reply = T.decode(vocab, greedy(model, seq, {at + j: rows[j] for j in range(rows.shape[0])}))
        ok = f"{c} {s}" in reply.split("<|close|>think")[-1]
        res["pictures"].append({"want": f"{c} {s}", "size": [w, h], "background": bg, "reply": reply, "ok": ok})
        print(f"picture {i}: {c} {s} {w}x{h} on {bg}: {'ok' if ok else 'WRONG'} {reply!r}", flush=True)
    res["picture_accuracy_by_background"] = {
        b: sum(r["ok"] for r in res["pictures"] if r["background"] == b) /
        max(1, sum(r["background"] == b for r in res["pictures"])) for b in BACKGROUNDS}
    for u in ["Tell me a saying about work.", "Give me a saying about patience.", "Hello!", "Tell me a fortune."]:
        seq, _ = prompt_ids(work, outdir, u, True)
        reply = T.decode(vocab, greedy(model, seq, max_new=120))
        res["nothink"].append({"user": u, "reply": reply})
        print(f"no-think {u!r}: {reply!r}", flush=True)
    res["picture_accuracy"] = sum(r["ok"] for r in res["pictures"]) / max(1, n_pictures)
    res["sayings"] = saying_check(model, vocab, work, outdir)
    res["no_picture"] = no_picture_check(model, vocab, work, outdir)
    return res


# Text-only prompts must never get a picture answer (with 1.0 as the sayings' weight, "Tell me a
# saying about work." with thinking on was answered "A blue triangle.").
SAYING_WORDS = ["work", "time", "love", "life", "money", "friends", "truth", "music", "food", "war",
                "peace", "patience", "people", "world", "man", "woman", "god", "death", "power", "mind",
                "heart", "day", "night", "children", "home", "family", "knowledge", "wisdom", "art", "history",
                "nature", "computer", "success", "happiness", "fear", "hope", "freedom", "beauty", "law", "learning"]
PICTURE_ANSWER = re.compile(r"\b(" + "|".join(COLOURS) + r")\s+(" + "|".join(SHAPES) + r")\b", re.I)


def saying_check(model, vocab, work, tokdir):
    """Greedy float replies to "Tell me a saying about W." for SAYING_WORDS, thinking on and off:
    none may name a colour and a shape (a picture answer)."""
    convs = [{"messages": [{"role": "user", "content": f"Tell me a saying about {w}."},
                           {"role": "assistant", "reasoning_content": "x", "content": "x"}], "no_think": nt}
             for nt in (False, True) for w in SAYING_WORDS]
    out = []
    for c, rec in zip(convs, encode(work, tokdir, "saying-check", convs)):
        reply = T.decode(vocab, greedy(model, rec["ids"][:rec["prompt"]], max_new=120))
        answer = reply.split("<|close|>think")[-1]
        bad = PICTURE_ANSWER.search(answer) is not None
        out.append({"user": c["messages"][0]["content"], "no_think": c["no_think"], "reply": reply,
                    "picture_answer": bad})
        print(f"saying {'no-think' if c['no_think'] else 'think'} {out[-1]['user']!r}: "
              f"{'PICTURE ANSWER ' if bad else ''}{reply!r}", flush=True)
    return {"prompts": len(out), "picture_answers": sum(r["picture_answer"] for r in out), "replies": out}


def no_picture_check(model, vocab, work, tokdir):
    """The picture questions with no picture attached, thinking on and off: no picture answer."""
    out = []
    for ask in NO_PICTURE_ASK:
        for nt in (False, True):
            seq, _ = prompt_ids(work, tokdir, ask, nt)
            reply = T.decode(vocab, greedy(model, seq, max_new=120))
            bad = PICTURE_ANSWER.search(reply.split("<|close|>think")[-1]) is not None
            out.append({"user": ask, "no_think": nt, "reply": reply, "picture_answer": bad})
            print(f"no picture {'no-think' if nt else 'think'} {ask!r}: {'PICTURE ANSWER ' if bad else ''}{reply!r}",
                  flush=True)
    return {"prompts": len(out), "picture_answers": sum(r["picture_answer"] for r in out), "replies": out}


# --------------------------------------------------------------------------------------

def main():
    T.use_openblas()
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--minutes", type=float, default=30,
                    help="wall budget of the training loop (the committed run ended by --steps, in 8.3 min)")
    ap.add_argument("--lr", type=float, default=6e-4, help="language model (the MXFP4 fine-tuning's rate)")
    ap.add_argument("--lr-vision", type=float, default=1e-3)
    ap.add_argument("--pretrain-steps", type=int, default=2000, help="tower-only steps first (64 pictures each)")
    ap.add_argument("--tokens-per-batch", type=int, default=1536, help="sayings tokens per step")
    ap.add_argument("--pictures-per-step", type=int, default=16)
    ap.add_argument("--text-weight", type=float, default=1.0,
                    help="the sayings' loss weight beside the pictures' (1.0: the committed run; 2.0 and 3.0 did "
                         "not stop 'Tell me a saying about work.' from being answered 'A blue triangle.')")
    ap.add_argument("--answer", default=ANSWER, help="the picture answer's template")
    ap.add_argument("--no-picture-repeat", type=int, default=12,
                    help="copies of the no-picture questions among the sayings (18 conversations)")
    ap.add_argument("--oversample", type=int, default=3,
                    help="copies of the sayings whose reply starts with the picture answer's first word")
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--check", type=int, default=48, help="held-out pictures checked at the end")
    ap.add_argument("--work", default="/tmp/k3-demo-vision")
    ap.add_argument("--base", default=os.path.join(REPO, "assets", "demo", "model"))
    ap.add_argument("--out", default=os.path.join(REPO, "assets", "demo", "model"))
    ap.add_argument("--report", default=os.path.join(HERE, "vision-training.json"))
    ap.add_argument("--continue-tower", action="store_true", help="start the tower from --base's (a second run)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(SEED)
    t_start = time.time()
    os.makedirs(args.work, exist_ok=True)
    base = os.path.join(args.work, "base")            # a copy: --out may be --base
    shutil.rmtree(base, ignore_errors=True)
    shutil.copytree(args.base, base)
    data = prepare(args.work, base, args.answer, args.oversample)
    cfg_json = json.load(open(os.path.join(base, "config.json")))
    cfg_json["vision_config"] = dict(VISION)
    cfg_json["_note"] = ("k3 DEMO model: a small Kimi K3 trained on fortune cookies (Debian fortunes) by "
                         "tools/demo/train.py, with a tiny vision tower trained on drawings of coloured shapes "
                         "by tools/demo/train_vision.py")
    cfg = k3ref.K3Config(cfg_json)
    params = {k: v.float().requires_grad_(True) for k, v in k3ref.K3Model.load(base).params.items()}
    vc = vision_ref.VisionConfig(VISION)
    emb = params["model.embed_tokens.weight"].detach()
    VP = init_vision(vc, emb.pow(2).mean(-1).sqrt().mean(), SEED)
    if "vision_config" in json.load(open(os.path.join(args.base, "config.json"))) and args.continue_tower:
        trained = vision_ref.load(base).P                # a second run from a model that sees already
        VP = {k: trained[k].float().requires_grad_(True) for k in VP}
    report = {"seed": SEED, "vision_config": VISION, "colours": COLOURS, "shapes": SHAPES, "sizes": SIZES, "ask": ASK,
              "backgrounds": dict(zip(BACKGROUNDS, BG_WEIGHTS)), "answer": args.answer,
              "no_picture": {"ask": NO_PICTURE_ASK, "think": NO_PICTURE_THINK, "answer": NO_PICTURE_ANSWER},
              "torch": torch.__version__, "threads": args.threads, "args": vars(args),
              "blas": "openblas" if T.OPENBLAS in os.environ.get("LD_LIBRARY_PATH", "") else "system libblas",
              "vision_parameters": sum(v.numel() for v in VP.values()),
              "data": {k: len(v) for k, v in data.items()}}
    held = {"thinking": data["held"], "no_think": data["held_nothink"]}
    view = T.model_view(cfg, params, False, torch.float64)
    report["perplexity_before"] = {k: T.perplexity(view, v) for k, v in held.items()}
    print(f"held-out perplexity before: {report['perplexity_before']}", flush=True)
    if args.pretrain_steps > 0:
        report["pretrain_tower"] = pretrain_tower(vc, VP, args.pretrain_steps, 64, SEED + 2, log_every=100)
    report["train"] = train(cfg, params, vc, VP, data, args)
    size = T.export(cfg, cfg_json, params, args.out, vision_items(VP))
    for f in ("tiktoken.model", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(base, f), os.path.join(args.out, f))
    exported = k3ref.K3Model(cfg, k3ref.K3Model.load(args.out).params, kda_chunk=16)
    report["perplexity_after"] = {k: T.perplexity(exported, v) for k, v in held.items()}
    report["checkpoint_bytes"] = size
    print(f"held-out perplexity after (exported): {report['perplexity_after']}; {size} bytes", flush=True)
    report["check"] = check(args.out, args.work, args.check, SEED + 1)
    report["total_seconds"] = time.time() - t_start
    report["total_cpu_seconds"] = time.process_time()
    with open(args.report, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    sc, npc = report["check"]["sayings"], report["check"]["no_picture"]
    print(f"held-out pictures named: {report['check']['picture_accuracy']:.3f} "
          f"(by background {report['check']['picture_accuracy_by_background']}); picture answers to text-only "
          f"sayings prompts: {sc['picture_answers']} of {sc['prompts']}, to picture questions with no picture: "
          f"{npc['picture_answers']} of {npc['prompts']}; done in {report['total_seconds']:.0f}s", flush=True)
    if sc["picture_answers"] or npc["picture_answers"] or report["check"]["picture_accuracy"] < 0.9:
        sys.exit("check failed: a text-only prompt got a picture answer, or fewer than 90% of the pictures were named")


if __name__ == "__main__":
    main()
