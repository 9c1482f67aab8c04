#!/usr/bin/python3
"""k3ref: an independent, plain-PyTorch float64 reference of the Kimi K3 text model.

Written from /work/shared/reference/k3-model.md (sections 2 and 3), which transcribes
Moonshot's `modeling_kimi_linear.py` / FlashKDA `torch_kda`.  It is deliberately simple:
every op is a small function, every activation is float64, every stored weight
(BF16 / F32 / F16 / MXFP4) is upcast EXACTLY to float64, and generation re-runs the full
forward over the growing sequence (no caches).

Public API
    cfg   = load_config(model_dir_or_config_json)
    model = K3Model.load(model_dir)           # reads config.json + safetensors (sharded or not)
    logits = model.forward(ids)               # [T, vocab] float64, logits for every position
    ids    = model.generate_greedy(prompt, n) # argmax = first index of the maximum
    logits = model.forward(ids, trace=Trace())  # also records per-layer internals

Per-op functions (all float64 torch tensors; used by test_k3ref.py against seed fixtures):
    rmsnorm, situ_glu, short_conv, kda_gate, l2norm, kda_recurrence, kda_attention,
    mla_attention, attn_res, moe_route, moe_block, dense_mlp, mxfp4_decode
"""
import json
import math
import os
import struct

import numpy as np
import torch

DT = torch.float64

# --------------------------------------------------------------------------------------
# safetensors I/O (format: u64 LE header length N | N bytes JSON header | data)
# --------------------------------------------------------------------------------------

_ST_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16,
              "U8": np.uint8, "I8": np.int8, "I32": np.int32, "I64": np.int64}


def bf16_bits_to_f64(bits):
    """BF16 bit patterns (uint16 array) -> float64, exact (bits << 16 as float32)."""
    u32 = bits.astype(np.uint32) << np.uint32(16)
    return u32.view(np.float32).astype(np.float64)


def f64_to_bf16_bits(x):
    """float64 -> BF16 bit patterns, round-to-nearest-even via float32 (no NaN handling)."""
    f32 = np.asarray(x, dtype=np.float32)
    u = f32.view(np.uint32).astype(np.uint64)
    rounding = ((u >> np.uint64(16)) & np.uint64(1)) + np.uint64(0x7FFF)
    return ((u + rounding) >> np.uint64(16)).astype(np.uint16)


def read_safetensors(path):
    """Return ({name: (dtype_str, shape, raw numpy array)}, metadata)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", None)
    base = 8 + n
    out = {}
    for name, ent in header.items():
        b, e = ent["data_offsets"]
        npdt = _ST_DTYPES[ent["dtype"]]
        shape = list(ent["shape"])
        arr = np.frombuffer(blob, dtype=npdt, count=(e - b) // np.dtype(npdt).itemsize, offset=base + b)
        numel = int(np.prod(shape)) if shape else 1
        assert arr.size == numel, f"{path}:{name}: {arr.size} elements, shape says {numel}"
        out[name] = (ent["dtype"], shape, arr.reshape(shape) if shape else arr.reshape(()))
    return out, meta


def write_safetensors(path, items, metadata=None):
    """items: list of (name, dtype_str, shape, numpy array). Data are written in list order."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    off = 0
    chunks = []
    for name, dtype, shape, arr in items:
        npdt = _ST_DTYPES[dtype]
        raw = np.ascontiguousarray(arr, dtype=npdt).tobytes()
        numel = int(np.prod(shape)) if shape else 1
        assert len(raw) == numel * np.dtype(npdt).itemsize, name
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        chunks.append(raw)
        off += len(raw)
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hj += b" " * ((8 - len(hj) % 8) % 8)          # pad header to 8-byte alignment (spaces)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for c in chunks:
            f.write(c)
    return 8 + len(hj) + off


def to_f64(dtype, arr):
    """Exact upcast of a stored tensor to a float64 torch tensor."""
    if dtype == "BF16":
        a = bf16_bits_to_f64(arr)
    else:
        a = np.asarray(arr).astype(np.float64)
    return torch.from_numpy(np.ascontiguousarray(a))


# --------------------------------------------------------------------------------------
# MXFP4 (compressed-tensors "mxfp4-pack-quantized"): e2m1 nibbles + E8M0 group scales
# --------------------------------------------------------------------------------------

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                 -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], dtype=np.float64)
MX_GROUP = 32


def mxfp4_decode(packed, scale, swap_nibbles=False):
    """packed U8 [rows, K/2] (low nibble = even element), scale U8 [rows, K/32] (E8M0,
    2^(s-127); s == 255 is NaN by the spec and is treated as 0: the group contributes 0).
    Returns the dense float64 weight [rows, K] as a torch tensor."""
    packed = np.asarray(packed, dtype=np.uint8)
    scale = np.asarray(scale, dtype=np.uint8)
    rows, half = packed.shape
    K = 2 * half
    lo = packed & 0x0F
    hi = packed >> 4
    if swap_nibbles:                      # deliberately wrong order, for negative tests only
        lo, hi = hi, lo
    codes = np.empty((rows, K), dtype=np.uint8)
    codes[:, 0::2] = lo
    codes[:, 1::2] = hi
    vals = E2M1[codes]
    ngroups = scale.shape[1]
    assert ngroups * MX_GROUP >= K and (ngroups - 1) * MX_GROUP < K, (scale.shape, packed.shape)
    mult = np.ldexp(1.0, scale.astype(np.int64) - 127)          # exact powers of two in float64
    mult = np.where(scale == 255, 0.0, mult)
    mult_full = np.repeat(mult, MX_GROUP, axis=1)[:, :K]
    return torch.from_numpy(vals * mult_full)


# --------------------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------------------

class K3Config:
    """Normalised text-model config. Accepts the released nested shape (top-level
    KimiK3Config with `text_config`, `linear_attn_config` inside it) and a plain
    KimiLinear text config (fields at the root)."""

    def __init__(self, raw):
        self.raw = raw
        tc = raw.get("text_config", raw)
        lac = tc.get("linear_attn_config", raw.get("linear_attn_config", {})) or {}
        self.nested = "text_config" in raw

        def get(name, *alts, default=KeyError):
            for obj in (lac, tc, raw) if name in ("num_heads", "head_dim") else (tc, lac, raw):
                for k in (name,) + alts:
                    if k in obj:
                        return obj[k]
            if default is KeyError:
                raise KeyError(f"config field {name!r} missing")
            return default

        self.vocab_size = int(get("vocab_size"))
        self.hidden_size = int(get("hidden_size"))
        self.num_hidden_layers = int(get("num_hidden_layers"))
        self.rms_norm_eps = float(get("rms_norm_eps"))
        self.attn_res_block_size = int(get("attn_res_block_size"))
        self.hidden_act = get("hidden_act", default="situ")
        assert self.hidden_act == "situ", self.hidden_act
        self.situ_beta = float(get("activation_situ_beta", "situ_beta"))
        self.situ_linear_beta = float(get("activation_situ_linear_beta", "situ_linear_beta"))
        # KDA
        self.kda_num_heads = int(get("num_heads", "kda_num_heads"))
        self.kda_head_dim = int(get("head_dim", "kda_head_dim"))
        self.short_conv_kernel_size = int(get("short_conv_kernel_size"))
        self.gate_lower_bound = float(get("gate_lower_bound"))
        self.use_full_rank_gate = bool(get("use_full_rank_gate", default=True))
        assert self.use_full_rank_gate, "only use_full_rank_gate=true (K3) is implemented"
        # MLA
        self.num_attention_heads = int(get("num_attention_heads"))
        self.q_lora_rank = int(get("q_lora_rank"))
        self.kv_lora_rank = int(get("kv_lora_rank"))
        self.qk_nope_head_dim = int(get("qk_nope_head_dim"))
        self.qk_rope_head_dim = int(get("qk_rope_head_dim"))
        self.v_head_dim = int(get("v_head_dim"))
        self.mla_use_nope = bool(get("mla_use_nope", default=True))
        assert self.mla_use_nope, "only NoPE MLA (K3) is implemented"
        self.mla_use_output_gate = bool(get("mla_use_output_gate", default=True))
        # MLP / MoE
        self.intermediate_size = int(get("intermediate_size"))
        self.first_k_dense_replace = int(get("first_k_dense_replace"))
        self.moe_layer_freq = int(get("moe_layer_freq", default=1))
        assert self.moe_layer_freq == 1
        self.num_experts = int(get("num_experts"))
        self.num_experts_per_token = int(get("num_experts_per_token"))
        self.num_shared_experts = int(get("num_shared_experts"))
        self.moe_intermediate_size = int(get("moe_intermediate_size"))
        self.routed_expert_hidden_size = int(get("routed_expert_hidden_size"))
        self.latent_moe_use_norm = bool(get("latent_moe_use_norm", default=True))
        self.moe_renormalize = bool(get("moe_renormalize", default=True))
        self.routed_scaling_factor = float(get("routed_scaling_factor"))
        self.moe_router_activation_func = get("moe_router_activation_func", default="sigmoid")
        assert self.moe_router_activation_func == "sigmoid"
        self.num_expert_group = int(get("num_expert_group", default=1))
        self.topk_group = int(get("topk_group", default=1))
        assert self.num_expert_group == 1, "group-limited routing is a no-op for K3 and not implemented"
        self.tie_word_embeddings = bool(get("tie_word_embeddings", default=False))
        assert not self.tie_word_embeddings
        # layer map: ONE-based lists in the config
        L = self.num_hidden_layers
        full = [int(x) for x in get("full_attn_layers")]
        kda = get("kda_layers", default=None)
        assert all(1 <= x <= L for x in full), "full_attn_layers is one-based"
        self.mla_layers = sorted(x - 1 for x in full)
        if kda is not None:
            kda = [int(x) for x in kda]
            assert sorted(set(kda) | set(full)) == list(range(1, L + 1)) and not set(kda) & set(full), \
                "kda_layers and full_attn_layers must partition 1..num_hidden_layers"
        self.layer_kind = ["mla" if i in self.mla_layers else "kda" for i in range(L)]

    def is_kda(self, i):
        return self.layer_kind[i] == "kda"

    def is_dense(self, i):
        return i < self.first_k_dense_replace

    def summary(self):
        return {k: v for k, v in self.__dict__.items() if k != "raw"}


def load_config(path):
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    with open(path) as f:
        return K3Config(json.load(f))


# --------------------------------------------------------------------------------------
# Per-op functions (float64)
# --------------------------------------------------------------------------------------

def linear(x, w):
    """y = x @ W^T, W stored [out, in] (no bias anywhere in K3)."""
    return x @ w.t()


def rmsnorm(x, weight, eps):
    """KimiRMSNorm: weight * x * rsqrt(mean(x^2) + eps) over the last dim."""
    return weight * (x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps))


def situ_glu(gate, up, beta, linear_beta):
    """SiTU-GLU: (beta*tanh(gate/beta)*sigmoid(gate)) * (linear_beta*tanh(up/linear_beta))."""
    a = beta * torch.tanh(gate / beta) * torch.sigmoid(gate)
    u = linear_beta * torch.tanh(up / linear_beta)
    return a * u


def dense_mlp(x, w_gate, w_up, w_down, beta, linear_beta):
    """KimiMLP (dense layer MLP and the fused shared experts)."""
    return linear(situ_glu(linear(x, w_gate), linear(x, w_up), beta, linear_beta), w_down)


def short_conv(x, weight, history=None):
    """Causal depthwise conv + SiLU (fla ShortConvolution, no bias).
    x [..., T, C]; weight [C, 1, K] or [C, K] (tap K-1 multiplies the current token);
    history [..., C, K-1] = the K-1 previous pre-conv inputs, oldest first (zeros at start).
    Returns (y [..., T, C], new_history [..., C, K-1])."""
    w = weight.reshape(weight.shape[0], -1)
    C, K = w.shape
    T = x.shape[-2]
    lead = x.shape[:-2]
    if history is None:
        history = torch.zeros(*lead, C, K - 1, dtype=x.dtype)
    xp = torch.cat([history.transpose(-1, -2), x], dim=-2)      # [..., K-1+T, C]
    acc = torch.zeros(*lead, T, C, dtype=x.dtype)
    for j in range(K):
        acc = acc + w[:, j] * xp[..., j:j + T, :]               # xp[t+j] == x[t-(K-1)+j]
    y = acc * torch.sigmoid(acc)
    new_hist = xp[..., T:, :].transpose(-1, -2).contiguous() if K > 1 else torch.zeros(*lead, C, 0, dtype=x.dtype)
    return y, new_hist


def kda_gate(f, A_log, dt_bias, lower_bound):
    """Per-channel log-decay g = lower_bound * sigmoid(exp(A_log[h]) * (f + dt_bias)).
    f [..., T, H, D]; A_log [H] (per HEAD); dt_bias [H*D] or [H, D]. Returns g [..., T, H, D] in (lb, 0)."""
    H, D = f.shape[-2:]
    a = torch.exp(A_log[:H]).reshape(H, 1)
    return lower_bound * torch.sigmoid(a * (f + dt_bias.reshape(H, D)))


def l2norm(x, eps=1e-6):
    """x / sqrt(sum(x^2) + eps) over the last dim (eps inside the sqrt)."""
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + eps)


def kda_recurrence(q, k, v, alpha, beta, state=None):
    """Gated delta rule, token by token (the definition).  q,k [..., T,H,Dk] (q already scaled),
    v [..., T,H,Dv], alpha = exp(g) [..., T,H,Dk], beta [..., T,H]; state S [..., H, Dv, Dk] (zeros at start).
        S <- S * diag(alpha_t);  u = beta_t * (v_t - S k_t);  S <- S + u k_t^T;  o_t = S q_t
    Returns (o [..., T,H,Dv], S)."""
    T, H, Dk = k.shape[-3:]
    Dv = v.shape[-1]
    lead = k.shape[:-3]
    S = torch.zeros(*lead, H, Dv, Dk, dtype=q.dtype) if state is None else state.clone()
    outs = []
    for t in range(T):
        S = S * alpha[..., t, :, :].unsqueeze(-2)                      # decay key columns
        u = beta[..., t, :].unsqueeze(-1) * (v[..., t, :, :] - torch.einsum("...hvk,...hk->...hv", S, k[..., t, :, :]))
        S = S + u.unsqueeze(-1) * k[..., t, :, :].unsqueeze(-2)
        outs.append(torch.einsum("...hvk,...hk->...hv", S, q[..., t, :, :]))   # from the UPDATED state
    return torch.stack(outs, -3), S


def kda_chunked(q, k, v, g, beta, state=None, chunk=16):
    """The same gated delta rule as kda_recurrence, evaluated chunk by chunk (WY form), for
    training speed: within a chunk of C tokens with cumulative log-decay G_t,
        u = (I + diag(beta) A)^-1 diag(beta) (V - (e^G * K) S0^T),  A_ij = sum_d k_id k_jd e^(G_id - G_jd) (j < i)
        o_t = (e^G_t * q_t) S0^T + sum_{i<=t} (sum_d q_td k_id e^(G_td - G_id)) u_i
        S   = S0 diag(e^G_C) + sum_i u_i (k_i * e^(G_C - G_i))^T
    A and the q-k products are matmuls of k * e^(G - R) and k * e^(R - G), R the cumulative
    decay at the chunk's middle, so every exponent stays within C/2 * |gate_lower_bound|
    (40 for C = 16 and K3's bound -5: finite in float32). g is the LOG decay [..., T,H,Dk]
    (alpha = exp(g)). Equal to kda_recurrence up to rounding (test_k3ref checks it in float64)."""
    T, H, Dk = k.shape[-3:]
    Dv = v.shape[-1]
    lead = k.shape[:-3]
    C = chunk
    N = (T + C - 1) // C
    pad = N * C - T

    def prep(x):       # [..., T, H, X] -> [..., H, N, C, X]; padded tokens have k=v=q=g=beta=0
        x = x.movedim(-2, -3)
        if pad:
            x = torch.cat([x, torch.zeros(*x.shape[:-2], pad, x.shape[-1], dtype=x.dtype)], dim=-2)
        return x.reshape(*x.shape[:-2], N, C, x.shape[-1])

    q_, k_, v_, g_ = prep(q), prep(k), prep(v), prep(g)
    b_ = prep(beta.unsqueeze(-1)).squeeze(-1)                           # [..., H, N, C]
    G = torch.cumsum(g_, dim=-2)                                        # [..., H, N, C, Dk]
    R = G[..., (C - 1) // 2:(C - 1) // 2 + 1, :]
    up, down = torch.exp(G - R), torch.exp(R - G)
    Km = k_ * down
    A = ((k_ * up) @ Km.transpose(-1, -2)).tril(-1)                     # A_ij, j < i
    Bq = ((q_ * up) @ Km.transpose(-1, -2)).tril(0)                     # q_t . k_i e^(G_t - G_i), i <= t
    eye = torch.eye(C, dtype=q.dtype)
    L = eye + b_.unsqueeze(-1) * A                                      # unit lower triangular
    eG = torch.exp(G)
    Kh, Qh = eG * k_, eG * q_
    rhs = b_.unsqueeze(-1) * torch.cat([v_, Kh], dim=-1)
    W = torch.linalg.solve_triangular(L, rhs, upper=False, unitriangular=True)
    W1, W2 = W[..., :Dv], W[..., Dv:]                                   # u = W1 - W2 S0^T
    Kt = k_ * torch.exp(G[..., -1:, :] - G)                             # k_i * e^(G_C - G_i)
    eGC = eG[..., -1, :]                                                # [..., H, N, Dk]
    S = torch.zeros(*lead, H, Dv, Dk, dtype=q.dtype) if state is None else state
    outs = []
    for n in range(N):
        u = W1[..., n, :, :] - W2[..., n, :, :] @ S.transpose(-1, -2)    # [..., H, C, Dv]
        outs.append(Qh[..., n, :, :] @ S.transpose(-1, -2) + Bq[..., n, :, :] @ u)
        S = S * eGC[..., n, :].unsqueeze(-2) + u.transpose(-1, -2) @ Kt[..., n, :, :]
    o = torch.stack(outs, -3).reshape(*lead, H, N * C, Dv)[..., :T, :]
    return o.movedim(-3, -2), S


class KDAState:
    """Recurrent state of one KDA layer (only needed for incremental use / fixtures)."""

    def __init__(self, S=None, conv_q=None, conv_k=None, conv_v=None):
        self.S, self.conv_q, self.conv_k, self.conv_v = S, conv_q, conv_k, conv_v


def kda_attention(x, p, cfg, state=None, trace=None, chunk=0):
    """KimiDeltaAttention. x = input_layernorm(h) [..., T, E]; p = dict of `self_attn.*` weights
    (names without the `self_attn.` prefix); chunk > 0 evaluates the recurrence with kda_chunked.
    Returns (out [..., T, E], new KDAState)."""
    lead_t = x.shape[:-1]
    H, D = cfg.kda_num_heads, cfg.kda_head_dim
    st = state or KDAState()
    q, cq = short_conv(linear(x, p["q_proj.weight"]), p["q_conv1d.weight"], st.conv_q)
    k, ck = short_conv(linear(x, p["k_proj.weight"]), p["k_conv1d.weight"], st.conv_k)
    v, cv = short_conv(linear(x, p["v_proj.weight"]), p["v_conv1d.weight"], st.conv_v)
    f = linear(linear(x, p["f_a_proj.weight"]), p["f_b_proj.weight"]).reshape(*lead_t, H, D)
    A_log = p["A_log"].reshape(-1)[:H]                  # stored padded to head_dim: first H only
    g = kda_gate(f, A_log, p["dt_bias"], cfg.gate_lower_bound)
    beta = torch.sigmoid(linear(x, p["b_proj.weight"]))          # [..., T, H]
    qh = l2norm(q.reshape(*lead_t, H, D)) * (D ** -0.5)
    kh = l2norm(k.reshape(*lead_t, H, D))
    vh = v.reshape(*lead_t, H, D)
    if chunk > 0:
        o, S = kda_chunked(qh, kh, vh, g, beta, st.S, chunk)
    else:
        o, S = kda_recurrence(qh, kh, vh, torch.exp(g), beta, st.S)
    gate = linear(x, p["g_proj.weight"]).reshape(*lead_t, H, D)
    o = rmsnorm(o, p["o_norm.weight"], cfg.rms_norm_eps) * torch.sigmoid(gate)   # norm, then gate
    out = linear(o.reshape(*lead_t, H * D), p["o_proj.weight"])
    if trace is not None:
        trace.note(kda_g=g, kda_beta=beta)
    return out, KDAState(S, cq, ck, cv)


def mla_attention(x, p, cfg, trace=None):
    """KimiMLAAttention, NoPE, causal over the whole sequence x [..., T, E]. Returns [..., T, E]."""
    lead_t = x.shape[:-1]
    T = x.shape[-2]
    H = cfg.num_attention_heads
    dn, dr, dv, r = cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim, cfg.kv_lora_rank
    q = linear(rmsnorm(linear(x, p["q_a_proj.weight"]), p["q_a_layernorm.weight"], cfg.rms_norm_eps),
               p["q_b_proj.weight"]).reshape(*lead_t, H, dn + dr)
    ckv = linear(x, p["kv_a_proj_with_mqa.weight"])                # [..., T, r + dr]
    c, k_rot = ckv[..., :r], ckv[..., r:]                          # k_rot: NOT normalised, NOT rotated
    c = rmsnorm(c, p["kv_a_layernorm.weight"], cfg.rms_norm_eps)
    kv = linear(c, p["kv_b_proj.weight"]).reshape(*lead_t, H, dn + dv)
    k_nope, v = kv[..., :dn], kv[..., dn:]
    k = torch.cat([k_nope, k_rot.unsqueeze(-2).expand(*lead_t, H, dr)], dim=-1)   # shared by all heads
    scores = torch.einsum("...thd,...shd->...hts", q, k) * ((dn + dr) ** -0.5)
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    scores = scores.masked_fill(mask, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    o = torch.einsum("...hts,...shd->...thd", probs, v).reshape(*lead_t, H * dv)
    if cfg.mla_use_output_gate:
        o = o * torch.sigmoid(linear(x, p["g_proj.weight"]))
    return linear(o, p["o_proj.weight"])


def attn_res(sources, proj_w, norm_w, eps):
    """Attention Residual aggregation. sources: list of [..., T, E] (completed blocks..., prefix);
    keys = RMS-normalised sources (no weight); query = norm_w * proj_w; values = RAW sources.
    Returns (out [..., T, E], mixture weights [..., T, N])."""
    V = torch.stack(sources, dim=-2)                               # [..., T, N, E]
    Kn = V * torch.rsqrt((V * V).mean(-1, keepdim=True) + eps)
    w = norm_w.reshape(-1) * proj_w.reshape(-1)
    s = Kn @ w                                                     # [..., T, N]
    pmix = torch.softmax(s, dim=-1)
    return (pmix.unsqueeze(-1) * V).sum(-2), pmix


def moe_route(x, w_gate, bias, top_k, renormalize=True, scaling=1.0):
    """Sigmoid router (noaux_tc, one group). Selection by score + bias (ties -> lowest id),
    weights = UNBIASED scores of the selected experts, renormalised /(sum + 1e-20), * scaling.
    x [N, E]. Returns (idx [N,k] long, weights [N,k], routing margin per token [N] (k-th minus
    (k+1)-th biased score; +inf if k == num_experts))."""
    scores = torch.sigmoid(linear(x, w_gate))
    choice = scores + bias.reshape(1, -1)
    srt, order = torch.sort(choice.detach(), dim=-1, descending=True, stable=True)
    idx = order[:, :top_k]
    w = scores.gather(1, idx)
    if renormalize:
        w = w / (w.sum(-1, keepdim=True) + 1e-20)
    w = w * scaling
    if top_k < choice.shape[1]:
        margin = srt[:, top_k - 1] - srt[:, top_k]
    else:
        margin = torch.full((x.shape[0],), float("inf"), dtype=x.dtype)
    return idx, w, margin


def moe_block(x, p, cfg, trace=None):
    """KimiSparseMoeBlock with latent routed experts. x = post_attention_layernorm(h) [..., T, E].
    p: `block_sparse_moe.*` weights without that prefix; routed experts are DENSE
    `experts.{e}.w{1,2,3}.weight` (MXFP4 already decoded at load). Each expert runs once on the
    tokens that selected it; its output, times the token's routing weight, is added to the
    token's latent aggregate."""
    b1, b2 = cfg.situ_beta, cfg.situ_linear_beta
    lead = x.shape[:-1]
    xf = x.reshape(-1, x.shape[-1])
    idx, w, margin = moe_route(xf, p["gate.weight"], p["gate.e_score_correction_bias"],
                               cfg.num_experts_per_token, cfg.moe_renormalize, cfg.routed_scaling_factor)
    z = linear(xf, p["routed_expert_down_proj.weight"])                # [N, latent]
    acc = torch.zeros_like(z)
    for e in range(cfg.num_experts):
        sel = idx == e                                                 # [N, k]
        rows = sel.any(-1).nonzero().squeeze(-1)
        if rows.numel() == 0:
            continue
        we = (w * sel).sum(-1)[rows]
        y = dense_mlp(z[rows], p[f"experts.{e}.w1.weight"], p[f"experts.{e}.w3.weight"],
                      p[f"experts.{e}.w2.weight"], b1, b2)
        acc = acc.index_add(0, rows, we.unsqueeze(-1) * y)
    if cfg.latent_moe_use_norm:
        acc = rmsnorm(acc, p["routed_expert_norm.weight"], cfg.rms_norm_eps)
    out = linear(acc, p["routed_expert_up_proj.weight"])
    if cfg.num_shared_experts > 0:
        out = out + dense_mlp(xf, p["shared_experts.gate_proj.weight"], p["shared_experts.up_proj.weight"],
                              p["shared_experts.down_proj.weight"], b1, b2)
    if trace is not None:
        trace.note(moe_idx=idx.reshape(*lead, -1), moe_w=w.reshape(*lead, -1), moe_margin=margin.reshape(lead))
    return out.reshape(*lead, out.shape[-1])


# --------------------------------------------------------------------------------------
# Decoder layer and model
# --------------------------------------------------------------------------------------

class Trace:
    """Collects per-layer internals during a forward (all positions; slice as needed)."""

    def __init__(self):
        self.layers = []
        self.cur = None
        self.final = {}

    def begin(self, i, kind, dense):
        self.cur = {"layer": i, "kind": kind, "dense": dense}
        self.layers.append(self.cur)

    def note(self, **kw):
        self.cur.update(kw)


def decoder_layer(i, P, blocks, lp, cfg, trace=None, kda_chunk=0):
    """One K3 decoder layer with Attention Residuals (no plain residual add).
    P: prefix sum since the last block boundary [..., T, E]; blocks: list of completed block
    vectors (mutated). lp: this layer's weights (names after `model.layers.{i}.`).
    kda_chunk > 0: KDA recurrence in chunked form (kda_chunked). Returns the new prefix sum."""
    eps = cfg.rms_norm_eps
    kind = cfg.layer_kind[i]
    if trace is not None:
        trace.begin(i, kind, cfg.is_dense(i))
    # 1. pre-attention aggregation (skipped only when no block exists yet, i.e. layer 0)
    if blocks:
        h_in, mix_a = attn_res(blocks + [P], lp["self_attention_res_proj.weight"],
                               lp["self_attention_res_norm.weight"], eps)
    else:
        h_in, mix_a = P, None
    # 2. block boundary (0-based): push the prefix, start a new one
    if i % cfg.attn_res_block_size == 0:
        blocks.append(P)
        P = None
    # 3. attention
    x = rmsnorm(h_in, lp["input_layernorm.weight"], eps)
    sa = {k[len("self_attn."):]: v for k, v in lp.items() if k.startswith("self_attn.")}
    if kind == "kda":
        a, _ = kda_attention(x, sa, cfg, trace=trace, chunk=kda_chunk)
    else:
        a = mla_attention(x, sa, cfg, trace=trace)
    P = a if P is None else P + a
    # 4. pre-MLP aggregation (always)
    h_mlp, mix_m = attn_res(blocks + [P], lp["mlp_res_proj.weight"], lp["mlp_res_norm.weight"], eps)
    # 5. MLP / MoE
    x2 = rmsnorm(h_mlp, lp["post_attention_layernorm.weight"], eps)
    if cfg.is_dense(i):
        m = dense_mlp(x2, lp["mlp.gate_proj.weight"], lp["mlp.up_proj.weight"], lp["mlp.down_proj.weight"],
                      cfg.situ_beta, cfg.situ_linear_beta)
    else:
        bp = {k[len("block_sparse_moe."):]: v for k, v in lp.items() if k.startswith("block_sparse_moe.")}
        m = moe_block(x2, bp, cfg, trace=trace)
    P = P + m
    if trace is not None:
        trace.note(h_in=h_in, a=a, h_mlp=h_mlp, m=m, prefix_out=P, n_blocks=len(blocks),
                   mix_attn=mix_a, mix_mlp=mix_m)
    return P


class K3Model:
    def __init__(self, cfg, params, kda_chunk=0):
        """params: {name without `language_model.` prefix: float64 tensor}, e.g.
        `model.embed_tokens.weight`, `model.layers.3.self_attn.q_proj.weight`, `lm_head.weight`,
        `model.layers.2.block_sparse_moe.experts.5.w1.weight` (dense, decoded from MXFP4)."""
        self.cfg = cfg
        self.params = params
        self.kda_chunk = kda_chunk          # 0: token-by-token KDA (the definition); >0: kda_chunked
        self.layers = []
        for i in range(cfg.num_hidden_layers):
            pre = f"model.layers.{i}."
            self.layers.append({k[len(pre):]: v for k, v in params.items() if k.startswith(pre)})

    @staticmethod
    def load(model_dir):
        cfg = load_config(model_dir)
        raw = load_checkpoint(model_dir)
        return K3Model(cfg, checkpoint_to_params(raw))

    def forward(self, ids, trace=None, embeds=None):
        """Full causal forward over ids (list/1-D tensor [T], or a batch [B, T] of equal-length
        sequences). Returns logits [(B,) T, vocab] in the dtype of the parameters. embeds
        ({position: row}, 1-D ids only) replaces those positions' token embeddings (an image's
        projected rows at its pad positions, docs/VISION.md §5); for a batch it is a pair
        (mask [B, T] bool, rows [mask.sum(), hidden]) filling the masked positions in order."""
        logits = linear(self.hidden(ids, trace, embeds), self.params["lm_head.weight"])
        if trace is not None:
            trace.final["logits"] = logits
        return logits

    def hidden(self, ids, trace=None, embeds=None):
        """The forward up to the final norm: the lm_head inputs [(B,) T, hidden]."""
        cfg, p = self.cfg, self.params
        ids = torch.as_tensor(ids if torch.is_tensor(ids) else list(ids), dtype=torch.long)
        assert ids.numel() > 0 and int(ids.min()) >= 0 and int(ids.max()) < cfg.vocab_size
        P = p["model.embed_tokens.weight"][ids]            # no scaling
        if isinstance(embeds, tuple):                      # batched: (mask [B, T] bool, rows [n, hidden])
            mask, rows = embeds
            P = P.clone()
            P[mask] = rows.to(P.dtype)
        elif embeds:
            P = P.clone()
            for pos, row in embeds.items():
                P[pos] = row.to(P.dtype)
        blocks = []
        for i in range(cfg.num_hidden_layers):
            P = decoder_layer(i, P, blocks, self.layers[i], cfg, trace, self.kda_chunk)
        h, mix = attn_res(blocks + [P], p["model.output_attn_res_proj.weight"],
                          p["model.output_attn_res_norm.weight"], cfg.rms_norm_eps)
        if trace is not None:
            trace.final = {"h_final": h, "mix_final": mix, "n_blocks": len(blocks)}
        return rmsnorm(h, p["model.norm.weight"], cfg.rms_norm_eps)

    def generate_greedy(self, prompt, n_new):
        """Greedy decode by re-running the full forward on the growing sequence.
        Returns (generated ids, list of last-position logits per step)."""
        seq = list(prompt)
        gen, step_logits = [], []
        for _ in range(n_new):
            lg = self.forward(seq)[-1]
            nxt = argmax_first(lg)
            step_logits.append(lg)
            gen.append(nxt)
            seq.append(nxt)
        return gen, step_logits


def argmax_first(v):
    """Index of the first maximum (numpy argmax semantics)."""
    return int(np.argmax(np.asarray(v, dtype=np.float64)))


# --------------------------------------------------------------------------------------
# Checkpoint loading
# --------------------------------------------------------------------------------------

def load_checkpoint(model_dir):
    """Read all tensors of a model directory. Uses model.safetensors.index.json when present,
    else every *.safetensors file. Returns {full name: (dtype, shape, numpy array)}."""
    idx = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx) as f:
            wm = json.load(f)["weight_map"]
        files = sorted(set(wm.values()))
    else:
        wm = None
        files = sorted(f for f in os.listdir(model_dir) if f.endswith(".safetensors"))
    out = {}
    for fn in files:
        tens, _ = read_safetensors(os.path.join(model_dir, fn))
        for name, v in tens.items():
            assert name not in out, f"duplicate tensor {name}"
            if wm is not None:
                assert wm.get(name) == fn, f"index says {name} is in {wm.get(name)}, found in {fn}"
            out[name] = v
    if wm is not None:
        assert set(wm) == set(out), "index and shards disagree"
    return out


def checkpoint_to_params(raw):
    """Strip an optional `language_model.` prefix, upcast everything to float64 and decode
    MXFP4 expert pairs (`*.weight_packed` + `*.weight_scale`) into dense `*.weight`."""
    prefix = "language_model." if any(k.startswith("language_model.") for k in raw) else ""
    params = {}
    for name, (dtype, shape, arr) in raw.items():
        if not name.startswith(prefix):
            continue                                   # e.g. vision tower / projector
        short = name[len(prefix):]
        if short.endswith(".weight_scale"):
            continue
        if short.endswith(".weight_packed"):
            base = name[: -len(".weight_packed")]
            sdt, _, sarr = raw[base + ".weight_scale"]
            assert dtype == "U8" and sdt == "U8", name
            params[short[: -len("_packed")]] = mxfp4_decode(arr, sarr)
            continue
        params[short] = to_f64(dtype, arr)
    return params


if __name__ == "__main__":
    import sys
    m = K3Model.load(sys.argv[1])
    ids = [int(x) for x in sys.argv[2].split(",")] if len(sys.argv) > 2 else [1, 2, 3, 4, 5]
    gen, _ = m.generate_greedy(ids, int(sys.argv[3]) if len(sys.argv) > 3 else 8)
    print("prompt", ids, "->", gen)
