#!/usr/bin/env python3
"""ops_vectors.py: independent expected values for the CPU operators of the
causal trunk (src/cpu/), produced by Hugging Face transformers' own
Qwen3.5-MoE modules in float32 on the CPU.

Run once (python3 with torch + transformers 5.x; no GPU needed):

    python3 tools/reference/ops_vectors.py [--out tests/data/ops]

It writes one small file per operator family, read by tests/unit/test_cpu_*.c
through tests/unit/cpu_vectors.h:

    norm.bin       Qwen3_5MoeRMSNorm (weight stored 1 + w, as llama.cpp's
                   converter does) and Qwen3_5MoeRMSNormGated
    rope.bin       Qwen3_5MoeTextRotaryEmbedding inv_freq / cos / sin, and
                   apply_rotary_pos_emb with a partial rotary slice
    attention.bin  Qwen3_5MoeAttention (eager, DynamicCache): a 5-row prompt
                   then 3 more rows over the cache; o_proj is the identity so
                   the output is the gated attention before o_proj
    gdn.bin        Qwen3_5MoeGatedDeltaNet over a DynamicCache (100-row
                   prefill: chunked; 1-row decode: recurrent; 70 rows more:
                   chunked from the cached state and conv ring), out_proj the identity, in
                   HF's grouped value-head order; and the kernels
                   torch_chunk_gated_delta_rule / torch_recurrent_gated_delta_rule
                   on 140 rows with a nonzero initial state
    moe.bin        Qwen3_5MoeSparseMoeBlock and its Qwen3_5MoeTopKRouter

File format (little endian): the 8 bytes "CLVOPS01", then records until the
end: u32 name length, the name padded with NULs to a multiple of 4, u32 dtype
(0 = f32, 1 = i32), u32 ndim, ndim u32 dims (outermost first), then the data
(row-major, 4 bytes per element). Tensors are stored in torch's layout
unless the name says otherwise; the C tests convert to the GGUF layouts.
"""
import argparse
import math
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F
from transformers.cache_utils import DynamicCache
from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe as qm
from transformers.models.qwen3_5_moe.configuration_qwen3_5_moe import Qwen3_5MoeTextConfig


class Writer:
    def __init__(self):
        self.parts = [b"CLVOPS01"]

    def add(self, name, t):
        a = t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
        if a.dtype.kind == "f":
            a, dtype = np.ascontiguousarray(a, dtype="<f4"), 0
        else:
            a, dtype = np.ascontiguousarray(a, dtype="<i4"), 1
        nb = name.encode()
        pad = (-len(nb)) % 4
        self.parts.append(struct.pack("<I", len(nb)) + nb + b"\0" * pad)
        self.parts.append(struct.pack("<II", dtype, a.ndim) + struct.pack(f"<{a.ndim}I", *a.shape))
        self.parts.append(a.tobytes())

    def save(self, path):
        with open(path, "wb") as f:
            f.write(b"".join(self.parts))
        print(f"{path}: {os.path.getsize(path)} bytes")


def text_config(**kw):
    base = dict(vocab_size=32, num_hidden_layers=1, layer_types=["full_attention"], rms_norm_eps=1e-6)
    base.update(kw)
    cfg = Qwen3_5MoeTextConfig(**base)
    cfg._attn_implementation = "eager"
    return cfg


def gen_norm(out):
    w = Writer()
    g = torch.Generator().manual_seed(1)
    # zero-centred RMSNorm: HF weight w (around 0); the file stores 1 + w
    for tag, rows, dim in (("a", 4, 67), ("b", 3, 256)):
        norm = qm.Qwen3_5MoeRMSNorm(dim, eps=1e-6)
        with torch.no_grad():
            norm.weight.copy_(0.1 * torch.randn(dim, generator=g))
        x = 2.0 * torch.randn(rows, dim, generator=g)
        x[0] *= 1e-3  # a small row, where eps matters a little
        w.add(f"rms_{tag}_x", x)
        w.add(f"rms_{tag}_w_stored", 1.0 + norm.weight.float())
        w.add(f"rms_{tag}_y", norm(x))
    # gated RMSNorm: plain weight shared by the heads, times silu(z)
    rows, heads, dim = 3, 4, 24
    gn = qm.Qwen3_5MoeRMSNormGated(dim, eps=1e-6)
    with torch.no_grad():
        gn.weight.copy_(1.0 + 0.2 * torch.randn(dim, generator=g))
    x = torch.randn(rows, heads, dim, generator=g)
    z = 3.0 * torch.randn(rows, heads, dim, generator=g)
    w.add("gated_x", x)
    w.add("gated_z", z)
    w.add("gated_w", gn.weight)
    w.add("gated_y", gn(x.reshape(-1, dim), z.reshape(-1, dim)).reshape(rows, heads, dim))
    w.save(os.path.join(out, "norm.bin"))


def rotary(head_dim, theta, partial):
    cfg = text_config(hidden_size=64, num_attention_heads=2, num_key_value_heads=1, head_dim=head_dim,
                      rope_parameters={"rope_type": "default", "rope_theta": theta,
                                       "partial_rotary_factor": partial})
    return qm.Qwen3_5MoeTextRotaryEmbedding(cfg)


def gen_rope(out):
    w = Writer()
    # inv_freq exactly as the model computes it, for several (theta, rot)
    cases = [(1e7, 256, 0.25), (1e6, 256, 0.5), (1e4, 128, 0.25), (5e6, 384, 0.25), (1e7, 80, 0.25),
             (5e5, 128, 0.5), (1e7, 256, 1.0)]
    for i, (theta, hd, partial) in enumerate(cases):
        rope = rotary(hd, theta, partial)
        w.add(f"inv_freq_{i}_theta", torch.tensor([theta], dtype=torch.float32))
        w.add(f"inv_freq_{i}_rot", torch.tensor([int(hd * partial)], dtype=torch.int32))
        w.add(f"inv_freq_{i}", rope.inv_freq)
    # cos / sin of the real model's rotary (theta 1e7, head 256, 25%) at far positions
    rope = rotary(256, 1e7, 0.25)
    pos = torch.tensor([0, 1, 7, 1000, 32767, 100000, 262143], dtype=torch.long)
    x = torch.zeros(1, len(pos), 8)
    cos, sin = rope(x, pos[None, None, :].expand(3, 1, -1))
    w.add("cs_pos", pos.int())
    w.add("cs_cos", cos[0])  # [n][64] = cat(f, f)
    w.add("cs_sin", sin[0])
    # apply_rotary_pos_emb on q [3 heads] and k [1 head], head 32, rot 8
    rope = rotary(32, 1e4, 0.25)
    g = torch.Generator().manual_seed(2)
    pos = torch.tensor([0, 5, 17, 1234], dtype=torch.long)
    q = torch.randn(1, 3, len(pos), 32, generator=g)
    k = torch.randn(1, 1, len(pos), 32, generator=g)
    cos, sin = rope(q, pos[None, None, :].expand(3, 1, -1))
    qe, ke = qm.apply_rotary_pos_emb(q, k, cos, sin)
    w.add("ap_pos", pos.int())
    w.add("ap_q", q[0].transpose(0, 1))  # [n][heads][32]
    w.add("ap_k", k[0].transpose(0, 1))
    w.add("ap_q_out", qe[0].transpose(0, 1))
    w.add("ap_k_out", ke[0].transpose(0, 1))
    w.save(os.path.join(out, "rope.bin"))


def causal_mask(n_q, past):
    m = torch.full((n_q, past + n_q), float("-inf"))
    for r in range(n_q):
        m[r, : past + r + 1] = 0.0
    return m[None, None]


def gen_attention(out):
    w = Writer()
    nh, nkv, hd = 4, 2, 32
    cfg = text_config(hidden_size=nh * hd, num_attention_heads=nh, num_key_value_heads=nkv, head_dim=hd,
                      rope_parameters={"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.25})
    g = torch.Generator().manual_seed(3)
    attn = qm.Qwen3_5MoeAttention(cfg, 0).eval()
    with torch.no_grad():
        for lin in (attn.q_proj, attn.k_proj, attn.v_proj):
            lin.weight.copy_(torch.randn(lin.weight.shape, generator=g) / math.sqrt(nh * hd))
        attn.o_proj.weight.copy_(torch.eye(nh * hd))
        attn.q_norm.weight.copy_(0.2 * torch.randn(hd, generator=g))
        attn.k_norm.weight.copy_(0.2 * torch.randn(hd, generator=g))
    rope = qm.Qwen3_5MoeTextRotaryEmbedding(cfg)
    n1, n2 = 5, 3
    x = torch.randn(1, n1 + n2, nh * hd, generator=g)
    cache = DynamicCache(config=cfg)
    outs = []
    with torch.no_grad():
        for start, n in ((0, n1), (n1, n2)):
            xs = x[:, start:start + n]
            pos = torch.arange(start, start + n)[None, None, :].expand(3, 1, -1)
            cos, sin = rope(xs, pos)
            o, _ = attn(xs, (cos, sin), causal_mask(n, start), past_key_values=cache)
            outs.append(o[0])
        w.add("dims", torch.tensor([nh, nkv, hd, int(hd * 0.25), n1, n2], dtype=torch.int32))
        w.add("theta", torch.tensor([1e4], dtype=torch.float32))
        w.add("q_proj_out", attn.q_proj(x[0]))  # [n][nh][2*hd]: q then gate per head
        w.add("k_proj_out", attn.k_proj(x[0]))  # [n][nkv*hd]
        w.add("v_proj_out", attn.v_proj(x[0]))
        w.add("q_norm_stored", 1.0 + attn.q_norm.weight.float())
        w.add("k_norm_stored", 1.0 + attn.k_norm.weight.float())
        w.add("out", torch.cat(outs, 0))  # [n][nh*hd], gated, before o_proj
    w.save(os.path.join(out, "attention.bin"))


def gen_gdn(out):
    w = Writer()
    nk, nv, dk, dv, K = 2, 4, 8, 8, 4
    cfg = text_config(hidden_size=nv * dv, linear_num_key_heads=nk, linear_num_value_heads=nv,
                      linear_key_head_dim=dk, linear_value_head_dim=dv, linear_conv_kernel_dim=K,
                      layer_types=["linear_attention"], num_attention_heads=2, num_key_value_heads=1, head_dim=16)
    g = torch.Generator().manual_seed(4)
    m = qm.Qwen3_5MoeGatedDeltaNet(cfg, 0).eval()
    hid = nv * dv
    with torch.no_grad():
        for lin in (m.in_proj_qkv, m.in_proj_z, m.in_proj_b, m.in_proj_a):
            lin.weight.copy_(torch.randn(lin.weight.shape, generator=g) / math.sqrt(hid))
        m.out_proj.weight.copy_(torch.eye(hid))
        m.conv1d.weight.copy_(0.5 * torch.randn(m.conv1d.weight.shape, generator=g))
        m.A_log.copy_(torch.log(torch.empty(nv).uniform_(0.01, 16, generator=g)))
        m.dt_bias.copy_(torch.randn(nv, generator=g))
        m.norm.weight.copy_(1.0 + 0.2 * torch.randn(dv, generator=g))
    runs = (100, 1, 70)
    x = torch.randn(1, sum(runs), hid, generator=g)
    cache = DynamicCache(config=cfg)
    outs = []
    with torch.no_grad():
        start = 0
        for n in runs:
            outs.append(m(x[:, start:start + n], cache_params=cache)[0])
            start += n
        w.add("dims", torch.tensor([nk, nv, dk, dv, K] + list(runs), dtype=torch.int32))
        w.add("mixed", m.in_proj_qkv(x[0]))  # [n][conv_dim]: q | k | v, grouped order
        w.add("z", m.in_proj_z(x[0]))  # [n][nv*dv]
        w.add("b", m.in_proj_b(x[0]))  # [n][nv]
        w.add("a", m.in_proj_a(x[0]))  # [n][nv]
        w.add("conv_w", m.conv1d.weight[:, 0, :])  # [conv_dim][K], as GGUF squeezes it
        w.add("ssm_a", -torch.exp(m.A_log.float()))  # what llama.cpp's converter stores
        w.add("dt_bias", m.dt_bias)
        w.add("norm_w", m.norm.weight)
        w.add("out", torch.cat(outs, 0))  # [n][nv*dv], before out_proj
        layer = cache.layers[0]
        w.add("final_conv_state", layer.conv_states[0][0].transpose(0, 1))  # [K][conv_dim], oldest first
        w.add("final_state", layer.recurrent_states[0][0])  # [nv][dk][dv]

    # the two kernels on the same inputs, nonzero initial state, 140 rows (3 chunks)
    T, nk, nv, dk, dv = 140, 2, 4, 8, 8
    q = torch.randn(1, T, nk, dk, generator=g)
    k = torch.randn(1, T, nk, dk, generator=g)
    v = torch.randn(1, T, nv, dv, generator=g)
    gg = -torch.rand(1, T, nv, generator=g) * 0.5
    beta = torch.rand(1, T, nv, generator=g)
    s0 = 0.3 * torch.randn(1, nv, dk, dv, generator=g)
    r = nv // nk
    qr, kr = q.repeat_interleave(r, dim=2), k.repeat_interleave(r, dim=2)
    oc, sc = qm.torch_chunk_gated_delta_rule(qr, kr, v, gg, beta, initial_state=s0.clone(),
                                             output_final_state=True, use_qk_l2norm_in_kernel=True)
    orr, sr = qm.torch_recurrent_gated_delta_rule(qr, kr, v, gg, beta, initial_state=s0.clone(),
                                                  output_final_state=True, use_qk_l2norm_in_kernel=True)
    w.add("k_dims", torch.tensor([T, nk, nv, dk, dv], dtype=torch.int32))
    w.add("k_q", q[0])  # [T][nk][dk], raw (the kernels L2-normalise and scale)
    w.add("k_k", k[0])
    w.add("k_v", v[0])  # [T][nv][dv]
    w.add("k_g", gg[0])  # [T][nv]
    w.add("k_beta", beta[0])
    w.add("k_s0", s0[0])  # [nv][dk][dv]
    w.add("k_chunk_out", oc[0])
    w.add("k_chunk_state", sc[0])
    w.add("k_rec_out", orr[0])
    w.add("k_rec_state", sr[0])
    w.save(os.path.join(out, "gdn.bin"))


def gen_moe(out):
    w = Writer()
    H, E, k, I, Is, n = 24, 8, 3, 12, 10, 5
    cfg = text_config(hidden_size=H, num_experts=E, num_experts_per_tok=k, moe_intermediate_size=I,
                      shared_expert_intermediate_size=Is, num_attention_heads=2, num_key_value_heads=1, head_dim=12)
    g = torch.Generator().manual_seed(5)
    m = qm.Qwen3_5MoeSparseMoeBlock(cfg).eval()
    with torch.no_grad():
        m.gate.weight.copy_(torch.randn(E, H, generator=g) / math.sqrt(H) * 2.0)
        m.experts.gate_up_proj.copy_(torch.randn(E, 2 * I, H, generator=g) / math.sqrt(H))
        m.experts.down_proj.copy_(torch.randn(E, H, I, generator=g) / math.sqrt(I))
        for lin in (m.shared_expert.gate_proj, m.shared_expert.up_proj, m.shared_expert.down_proj,
                    m.shared_expert_gate):
            lin.weight.copy_(torch.randn(lin.weight.shape, generator=g) / math.sqrt(lin.weight.shape[1]))
        x = torch.randn(n, H, generator=g)
        logits, scores, idx = m.gate(x)
        y = m(x[None])[0]
    w.add("dims", torch.tensor([H, E, k, I, Is, n], dtype=torch.int32))
    w.add("x", x)
    w.add("router_w", m.gate.weight)  # [E][H]
    w.add("gate_up", m.experts.gate_up_proj)  # [E][2I][H]: gate rows first, then up
    w.add("down", m.experts.down_proj)  # [E][H][I]
    w.add("sh_gate", m.shared_expert.gate_proj.weight)  # [Is][H]
    w.add("sh_up", m.shared_expert.up_proj.weight)
    w.add("sh_down", m.shared_expert.down_proj.weight)  # [H][Is]
    w.add("sh_gate_inp", m.shared_expert_gate.weight[0])  # [H]
    w.add("router_logits", logits)  # [n][E]
    w.add("route_w", scores)  # [n][k], torch.topk order (descending)
    w.add("route_idx", idx.int())
    w.add("y", y)
    w.save(os.path.join(out, "moe.bin"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "..", "tests", "data", "ops"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)
    for fn in (gen_norm, gen_rope, gen_attention, gen_gdn, gen_moe):
        fn(args.out)


if __name__ == "__main__":
    main()
