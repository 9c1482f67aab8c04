#!/usr/bin/env python3
"""Float64 reference of Kimi K3's vision tower (MoonViT3d) and projector (patchmergerv2).

Written from docs/VISION.md (the facts and their sources); not a port of any engine.
All activations are float64; stored weights (BF16/F32) are upcast exactly.

    vision_ref.load(model_dir) -> VisionModel
    VisionModel.embed(patches [N, 3*p*p] float64, grids [(t, h, w), ...]) -> [(h/2)(w/2) rows per image, text_hidden]

`patches` is what the preprocessor hands over: each image's patches in row-major grid order, each
patch flattened as (channel, row, column).
"""

import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k3ref  # noqa: E402

TOWER_NORM_EPS = 2.0 ** -7          # nn.RMSNorm(dim) in bf16: finfo(bfloat16).eps (docs/VISION.md §3.4)
ROPE_THETA = 10000.0

REQUIRED = {
    "vt_hidden_size": int, "vt_intermediate_size": int, "vt_num_hidden_layers": int,
    "vt_num_attention_heads": int, "qkv_hidden_size": int, "patch_size": int,
    "init_pos_emb_height": int, "init_pos_emb_width": int, "merge_kernel_size": list,
    "mm_hidden_size": int, "text_hidden_size": int, "projector_ln_eps": float,
}
FIXED = {
    "pos_emb_type": "divided_fixed", "pos_emb_interpolation_mode": "bilinear", "merge_type": "sd2_tpool",
    "norm_type": "rmsnorm", "mlp_type": "mlp2", "activation_func": "gelu_pytorch_tanh",
    "mm_projector_type": "patchmergerv2", "projector_hidden_act": "gelu",
    "attn_bias": False, "linear_bias": False, "patch_embed_proj_bias": False,
}


class VisionConfig:
    def __init__(self, raw):
        missing = [k for k in list(REQUIRED) + list(FIXED) if k not in raw]
        if missing:
            raise ValueError("vision_config lacks " + ", ".join(missing))
        bad = [f"{k}={raw[k]!r} (want {v!r})" for k, v in FIXED.items() if raw[k] != v]
        if bad:
            raise ValueError("unsupported vision_config: " + ", ".join(bad))
        self.hidden = raw["vt_hidden_size"]
        self.inter = raw["vt_intermediate_size"]
        self.layers = raw["vt_num_hidden_layers"]
        self.heads = raw["vt_num_attention_heads"]
        self.qkv = raw["qkv_hidden_size"]
        self.head_dim = self.qkv // self.heads
        self.patch = raw["patch_size"]
        self.pos_h = raw["init_pos_emb_height"]
        self.pos_w = raw["init_pos_emb_width"]
        self.merge = tuple(raw["merge_kernel_size"])
        self.mm_hidden = raw["mm_hidden_size"]
        self.text_hidden = raw["text_hidden_size"]
        self.proj_eps = float(raw["projector_ln_eps"])
        assert self.qkv % self.heads == 0 and self.head_dim % 4 == 0
        assert self.mm_hidden == self.hidden


def rmsnorm(x, w, eps):
    return w * (x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def pos_table(weight, h, w):
    """The learned [H0, W0, D] table resampled to [h*w, D] (bilinear, align_corners=False)."""
    if (h, w) == tuple(weight.shape[:2]):
        return weight.reshape(h * w, -1)
    out = F.interpolate(weight.permute(2, 0, 1).unsqueeze(0), size=(h, w), mode="bilinear",
                        align_corners=False)
    return out.squeeze(0).permute(1, 2, 0).reshape(h * w, -1)


def rope_angles(h, w, head_dim):
    """[h*w, head_dim/2] angles: pair 2j turns by x*f_j, pair 2j+1 by y*f_j."""
    n = head_dim // 4
    f = 1.0 / (ROPE_THETA ** (torch.arange(0, head_dim, 4, dtype=torch.float64)[:n] / head_dim))
    ys, xs = torch.meshgrid(torch.arange(h, dtype=torch.float64), torch.arange(w, dtype=torch.float64),
                            indexing="ij")
    ang = torch.stack([xs.reshape(-1, 1) * f, ys.reshape(-1, 1) * f], dim=-1)  # [hw, n, 2]
    return ang.reshape(h * w, 2 * n)


def apply_rope(x, ang):
    """x [L, heads, d]; interleaved pairs (2m, 2m+1) turn by ang[:, m]."""
    a = x[..., 0::2]
    b = x[..., 1::2]
    c = torch.cos(ang).unsqueeze(1)
    s = torch.sin(ang).unsqueeze(1)
    out = torch.empty_like(x)
    out[..., 0::2] = a * c - b * s
    out[..., 1::2] = a * s + b * c
    return out


class VisionModel:
    def __init__(self, cfg, P):
        self.cfg = cfg
        self.P = P

    def block(self, i, x, ang):
        c, P = self.cfg, self.P
        pre = f"vision_tower.encoder.blocks.{i}."
        L = x.shape[0]
        hN = rmsnorm(x, P[pre + "norm0.weight"], TOWER_NORM_EPS)
        qkv = hN @ P[pre + "wqkv.weight"].T
        qkv = qkv.view(L, 3, c.heads, c.head_dim)
        q, k, v = qkv[:, 0], qkv[:, 1], qkv[:, 2]
        q, k = apply_rope(q, ang), apply_rope(k, ang)
        s = torch.einsum("lhd,mhd->hlm", q, k) / math.sqrt(c.head_dim)
        p = torch.softmax(s, dim=-1)
        o = torch.einsum("hlm,mhd->lhd", p, v).reshape(L, c.qkv)
        x = x + o @ P[pre + "wo.weight"].T
        hN = rmsnorm(x, P[pre + "norm1.weight"], TOWER_NORM_EPS)
        x = x + gelu_tanh(hN @ P[pre + "mlp.fc0.weight"].T) @ P[pre + "mlp.fc1.weight"].T
        return x

    def tower_one(self, patches, t, h, w, trace=None):
        c, P = self.cfg, self.P
        assert t == 1, "images only"
        wp = P["vision_tower.patch_embed.proj.weight"].reshape(c.hidden, -1)
        x = patches @ wp.T
        x = x + pos_table(P["vision_tower.patch_embed.pos_emb.weight"], h, w)
        if trace is not None:
            trace["embed"] = x.clone()
        ang = rope_angles(h, w, c.head_dim)
        for i in range(c.layers):
            x = self.block(i, x, ang)
            if trace is not None:
                trace[f"block{i}"] = x.clone()
        x = rmsnorm(x, P["vision_tower.encoder.final_layernorm.weight"], TOWER_NORM_EPS)
        kh, kw = c.merge
        x = x.view(t, h // kh, kh, w // kw, kw, c.hidden).permute(0, 1, 3, 2, 4, 5).mean(dim=0)
        return x.reshape((h // kh) * (w // kw), kh * kw * c.hidden)

    def project(self, x):
        P = self.P
        y = gelu_erf(x @ P["mm_projector.proj.0.weight"].T) @ P["mm_projector.proj.2.weight"].T
        return rmsnorm(y, P["mm_projector.post_norm.weight"], self.cfg.proj_eps)

    def embed(self, patches, grids, trace=None):
        outs, off = [], 0
        for (t, h, w) in grids:
            n = t * h * w
            merged = self.tower_one(patches[off:off + n], t, h, w, trace)
            outs.append(self.project(merged))
            off += n
        assert off == patches.shape[0]
        return outs


def load(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        raw = json.load(f)
    cfg = VisionConfig(raw["vision_config"])
    P = {}
    for fn in sorted(os.listdir(model_dir)):
        if not fn.endswith(".safetensors"):
            continue
        tensors, _ = k3ref.read_safetensors(os.path.join(model_dir, fn))
        for name, (dt, _shape, arr) in tensors.items():
            if name.startswith("vision_tower.") or name.startswith("mm_projector."):
                P[name] = k3ref.to_f64(dt, arr)
    return VisionModel(cfg, P)


def test_pixels(grid_h, grid_w, patch, seed):
    """Deterministic normalised pixels [h*w, 3*p*p] (float32 values, as the preprocessor makes them):
    u8 = (seed*131 + 7919*i + 104729*c) mod 256 over pixel index i in the (h*p, w*p) image and channel c,
    x = (u8/255 - 0.5)/0.5 in float32; then patchified (row-major patches, each (c, row, col))."""
    H, W = grid_h * patch, grid_w * patch
    i = np.arange(H * W, dtype=np.int64).reshape(H, W, 1)
    ch = np.arange(3, dtype=np.int64).reshape(1, 1, 3)
    u8 = ((seed * 131 + 7919 * i + 104729 * ch) % 256).astype(np.uint8)
    x = u8.astype(np.float32) / np.float32(255.0)
    x = (x - np.float32(0.5)) * np.float32(2.0)
    x = x.reshape(grid_h, patch, grid_w, patch, 3).transpose(0, 2, 4, 1, 3).reshape(grid_h * grid_w, 3 * patch * patch)
    return x
