"""The GDN block operator of SPEC 2.1: what a Gated DeltaNet layer computes
in a preview, on top of the layer's own transformers module and weights.

The committed conv ring and state are only read. Every step follows the
SPEC's numbered list; the pieces that must match the causal path exactly
(projections, conv taps, L2 norm, decay gate, gated norm, out_proj) are the
module's own, and the history read-out scales q by dk^-0.5 the way
transformers' chunked path does (`query * dk**-0.5`).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import l2norm


@torch.no_grad()
def gdn_block(mod, extra, x: torch.Tensor, ring: torch.Tensor, state: torch.Tensor,
              record_block_size: int, trace: dict | None = None) -> torch.Tensor:
    """mod: Qwen3_5MoeGatedDeltaNet; extra: GdnExtra; x = norm_in(h) [b][H];
    ring [K-1][conv_dim] (oldest first); state [nv][dk][dv].
    Returns the mixer output [b][H] (before the residual add)."""
    b = x.shape[0]
    nk, nv = mod.num_k_heads, mod.num_v_heads
    dk, dv = mod.head_k_dim, mod.head_v_dim
    kk = mod.conv_kernel_size

    # 1. projections
    xq = mod.in_proj_qkv(x)                      # X  [b][conv_dim]
    zg = mod.in_proj_z(x)                        # Zg [b][nv*dv]
    a = mod.in_proj_a(x)                         # A  [b][nv]

    # 2. convolution: left taps over E = [R; X] (the causal conv), right taps
    #    over the block's following rows, X[j] = 0 for j >= b.
    w = mod.conv1d.weight[:, 0, :]               # [conv_dim][K]
    wr = extra.conv_right                        # [conv_dim][K-1]
    e = torch.cat([ring.to(xq.dtype), xq], dim=0)  # [K-1+b][conv_dim]
    xpad = torch.cat([xq, xq.new_zeros(kk - 1, xq.shape[1])], dim=0)  # [b+K-1][conv_dim]
    acc = xq.new_zeros(b, xq.shape[1])
    for t in range(kk):
        acc = acc + w[:, t] * e[t:t + b]
    for t in range(1, kk):
        acc = acc + wr[:, t - 1] * xpad[t:t + b]
    y = F.silu(acc)                              # Y [b][conv_dim]

    # 3. split q, k, v (causal order), L2 norm per key head, heads to values
    q, k, v = torch.split(y, [nk * dk, nk * dk, nv * dv], dim=-1)
    q = l2norm(q.reshape(b, nk, dk), dim=-1, eps=1e-6)   # [b][nk][dk]
    k = l2norm(k.reshape(b, nk, dk), dim=-1, eps=1e-6)
    v = v.reshape(b, nv, dv)                              # [b][nv][dv]
    rep = nv // nk
    q = q.repeat_interleave(rep, dim=1)                   # [b][nv][dk]
    k = k.repeat_interleave(rep, dim=1)

    # 4. decay gate, exactly as the causal path computes it
    g = -mod.A_log.float().exp() * F.softplus(a.float() + mod.dt_bias)  # [b][nv]

    # 5. scores: b block slots and one history slot per row and head
    s_block = extra.logit_scale[None, :, None] * torch.einsum("ihd,jhd->ihj", q, k)  # [b][nv][b]
    ln_ratio = float(torch.tensor(math.log(b / record_block_size), dtype=torch.float32))
    s_hist = extra.history_bias[None, :] + extra.history_c[None, :] * g + ln_ratio      # [b][nv]
    scores = torch.cat([s_block, s_hist[:, :, None]], dim=-1)                          # [b][nv][b+1]

    # 6. softmax over the b+1 slots; history value = causal read-out of S
    p = torch.softmax(scores.float(), dim=-1)
    qs = q * (dk ** -0.5)
    u = torch.einsum("hkv,ihk->ihv", state.to(qs.dtype), qs)                       # [b][nv][dv]
    o = torch.einsum("ihj,jhv->ihv", p[:, :, :b], v) + p[:, :, b:] * u              # [b][nv][dv]

    # 7. output as the causal path: gated RMSNorm with Zg, then out_proj
    o = mod.norm(o.reshape(-1, dv), zg.reshape(-1, dv)).reshape(b, nv * dv)
    if trace is not None:
        trace["history_mass"] = p[:, :, b].detach().cpu().numpy()
    return mod.out_proj(o)
