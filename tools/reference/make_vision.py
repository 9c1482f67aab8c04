#!/usr/bin/env python3
"""Generate testdata/models/tiny-vision: a tiny random MoonViT3d tower + patchmergerv2 projector in the
release's naming (projector in the first shard, tower in the second, as the release keeps them in
shards 95 and 96), a config.json whose vision_config has every released field, and expect.json with
the float64 reference embeddings (vision_ref.py) of deterministic test pictures.

    /usr/bin/python3 tools/reference/make_vision.py
"""

import copy
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k3ref  # noqa: E402
import vision_ref  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "testdata", "models", "tiny-vision")
TEXT = os.path.join(ROOT, "testdata", "models", "tiny-release", "config.json")

VISION_CONFIG = {
    "_attn_implementation": "flash_attention_2",
    "activation_func": "gelu_pytorch_tanh",
    "attn_bias": False,
    "init_pos_emb_height": 4,
    "init_pos_emb_time": 4,
    "init_pos_emb_width": 4,
    "linear_bias": False,
    "merge_kernel_size": [2, 2],
    "merge_type": "sd2_tpool",
    "mlp_type": "mlp2",
    "mm_hidden_size": 32,
    "mm_projector_type": "patchmergerv2",
    "norm_type": "rmsnorm",
    "patch_embed_proj_bias": False,
    "patch_size": 14,
    "pos_emb_interpolation_mode": "bilinear",
    "pos_emb_type": "divided_fixed",
    "projector_hidden_act": "gelu",
    "projector_ln_eps": 1e-05,
    "qkv_hidden_size": 48,
    "text_hidden_size": 64,
    "video_attn_type": "spatial_temporal",
    "vt_hidden_size": 32,
    "vt_intermediate_size": 64,
    "vt_num_attention_heads": 2,
    "vt_num_hidden_layers": 2,
}

# (name, seed, [(t, h, w), ...]): one call per case; the last holds two images.
CASES = [
    ("same-grid", 1, [(1, 4, 4)]),
    ("wide", 2, [(1, 2, 6)]),
    ("large", 3, [(1, 6, 8)]),
    ("two-images", 4, [(1, 2, 2), (1, 4, 2)]),
]


def bf16(x):
    return k3ref.f64_to_bf16_bits(x)


def weights(cfg, rng):
    D, I, Q, p = cfg.hidden, cfg.inter, cfg.qkv, cfg.patch
    M = cfg.hidden * cfg.merge[0] * cfg.merge[1]
    n = rng.standard_normal
    proj = [
        ("mm_projector.post_norm.weight", [cfg.text_hidden], 1 + 0.1 * n(cfg.text_hidden)),
        ("mm_projector.proj.0.weight", [M, M], n((M, M)) / np.sqrt(M)),
        ("mm_projector.proj.2.weight", [cfg.text_hidden, M], n((cfg.text_hidden, M)) / np.sqrt(M)),
    ]
    tower = []
    for i in range(cfg.layers):
        pre = f"vision_tower.encoder.blocks.{i}."
        tower += [
            (pre + "mlp.fc0.weight", [I, D], n((I, D)) / np.sqrt(D)),
            (pre + "mlp.fc1.weight", [D, I], 0.5 * n((D, I)) / np.sqrt(I)),
            (pre + "norm0.weight", [D], 1 + 0.1 * n(D)),
            (pre + "norm1.weight", [D], 1 + 0.1 * n(D)),
            (pre + "wo.weight", [D, Q], 0.5 * n((D, Q)) / np.sqrt(Q)),
            (pre + "wqkv.weight", [3 * Q, D], 2.0 * n((3 * Q, D)) / np.sqrt(D)),
        ]
    tower += [
        ("vision_tower.encoder.final_layernorm.weight", [D], 1 + 0.1 * n(D)),
        ("vision_tower.patch_embed.pos_emb.weight", [cfg.pos_h, cfg.pos_w, D], 0.5 * n((cfg.pos_h, cfg.pos_w, D))),
        ("vision_tower.patch_embed.proj.weight", [D, 3, p, p], n((D, 3, p, p)) / np.sqrt(3 * p * p)),
    ]
    return proj, tower


def end_to_end(model, cfg, n_gen=6):
    """tiny-release's language model reading one image (case "same-grid") at its pad positions:
    greedy ids and the logits that chose the first one, re-running the whole forward each step."""
    text = k3ref.K3Model.load(os.path.join(ROOT, "testdata", "models", "tiny-release"))
    pad = json.load(open(TEXT))["media_placeholder_token_id"]
    name, seed, grids = CASES[0]
    rows = model.embed(torch.from_numpy(vision_ref.test_pixels(grids[0][1], grids[0][2], cfg.patch, seed)
                                        .astype(np.float64)), grids)[0]
    before, after = [11, 42, 7, 300], [19, 250, 3]
    prompt = before + [pad] * rows.shape[0] + after
    at = len(before)
    embeds = {at + i: rows[i] for i in range(rows.shape[0])}
    seq, first, margins = list(prompt), None, []
    for _ in range(n_gen):
        lg = text.forward(seq, embeds=embeds)[-1]
        top = torch.sort(lg, descending=True).values
        margins.append(float(top[0] - top[1]))
        if first is None:
            first = lg.tolist()
        seq.append(k3ref.argmax_first(lg))
    plain = [k3ref.argmax_first(text.forward(prompt)[-1])]
    return {"case": name, "prompt_ids": prompt, "media_at": at, "greedy_ids": seq[len(prompt):],
            "first_logits": first, "min_margin": min(margins), "first_id_without_image": plain[0]}


def main():
    os.makedirs(OUT, exist_ok=True)
    with open(TEXT) as f:
        config = json.load(f)
    config = copy.deepcopy(config)
    config["vision_config"] = VISION_CONFIG
    config["_note"] = ("tiny random K3 vision tower + projector (tools/reference/make_vision.py); text_config is "
                       "tiny-release's, whose shards are not copied here")
    cfg = vision_ref.VisionConfig(VISION_CONFIG)
    rng = np.random.default_rng(4040)
    proj, tower = weights(cfg, rng)
    files = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    wmap, total = {}, 0
    for fn, items in zip(files, (proj, tower)):
        k3ref.write_safetensors(os.path.join(OUT, fn), [(nm, "BF16", sh, bf16(v)) for nm, sh, v in items],
                                {"format": "pt"})
        for nm, sh, _ in items:
            wmap[nm] = fn
            total += 2 * int(np.prod(sh))
    with open(os.path.join(OUT, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": {k: wmap[k] for k in sorted(wmap)}}, f, indent=2)
        f.write("\n")
    with open(os.path.join(OUT, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")

    model = vision_ref.load(OUT)          # re-read from disk
    cases = []
    for name, seed, grids in CASES:
        pix = np.concatenate([vision_ref.test_pixels(h, w, cfg.patch, seed + 10 * k)
                              for k, (_t, h, w) in enumerate(grids)])
        trace = {}
        outs = model.embed(torch.from_numpy(pix.astype(np.float64)), grids, trace)
        cases.append({
            "name": name, "seeds": [seed + 10 * k for k in range(len(grids))],
            "grids": [list(g) for g in grids],
            "tokens": [o.shape[0] for o in outs],
            "embeddings": [o.tolist() for o in outs],
            "last_image_after_patch_embed_row0": trace["embed"][0].tolist(),
        })
    e2e = end_to_end(model, cfg)
    expect = {
        "end_to_end": e2e,
        "note": "float64 reference embeddings of tools/reference/vision_ref.py; pixels from vision_ref.test_pixels",
        "tower_norm_eps": vision_ref.TOWER_NORM_EPS,
        "cases": cases,
    }
    with open(os.path.join(OUT, "expect.json"), "w") as f:
        json.dump(expect, f)
        f.write("\n")
    print("wrote", OUT, [c["tokens"] for c in cases])


if __name__ == "__main__":
    main()
