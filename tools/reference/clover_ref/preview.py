"""One denoising pass of SPEC 2 over a session's committed state, read only.

Built from the model's own modules: the same embeddings, norms, attention
projections / q-k norms / RoPE, experts and head as the causal trunk; only
the three operators SPEC 2 changes differ: attention sees every committed key
and the whole block (no mask), GDN layers run the block operator (2.1), and
the MoE routes inside the block's expert coreset (2.2). Row r's logits
predict the token AT row r (no shift).
"""
from __future__ import annotations

import numpy as np
import torch
from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import (
    apply_rotary_pos_emb, eager_attention_forward)

from .coreset import coreset_from_totals, coreset_totals, route_restricted
from .gdn_block import gdn_block


@torch.no_grad()
def attention_block(mod, x: torch.Tensor, cos, sin, keys, values) -> torch.Tensor:
    """Qwen3_5MoeAttention over cached keys/values plus the block, unmasked.
    x [1][b][H]; keys/values [1][nkv][T][hd] or None. Returns [1][b][H]."""
    input_shape = x.shape[:-1]
    hidden_shape = (*input_shape, -1, mod.head_dim)
    q, gate = torch.chunk(mod.q_proj(x).view(*input_shape, -1, mod.head_dim * 2), 2, dim=-1)
    gate = gate.reshape(*input_shape, -1)
    q = mod.q_norm(q.view(hidden_shape)).transpose(1, 2)                   # [1][nh][b][hd]
    k = mod.k_norm(mod.k_proj(x).view(hidden_shape)).transpose(1, 2)       # [1][nkv][b][hd]
    v = mod.v_proj(x).view(hidden_shape).transpose(1, 2)
    q, k = apply_rotary_pos_emb(q, k, cos, sin)
    if keys is not None:
        k = torch.cat([keys, k], dim=-2)                                   # [1][nkv][T+b][hd]
        v = torch.cat([values, v], dim=-2)
    out, _ = eager_attention_forward(mod, q, k, v, None, scaling=mod.scaling)
    out = out.reshape(*input_shape, -1).contiguous()
    out = out * torch.sigmoid(gate)
    return mod.o_proj(out)


@torch.no_grad()
def moe_block(mlp, x: torch.Tensor, coreset_top_p, trace: dict | None = None) -> torch.Tensor:
    """Qwen3_5MoeSparseMoeBlock with every row routed inside the block's
    coreset (coreset_top_p None: the module's own routing). x [b][H]."""
    if coreset_top_p is None:
        return mlp(x[None])[0]
    router = mlp.gate
    logits = torch.nn.functional.linear(x, router.weight)               # [b][E]
    totals = coreset_totals(logits.cpu().numpy().astype(np.float32), router.top_k)
    allowed = coreset_from_totals(totals, coreset_top_p)
    index, weight = route_restricted(logits, allowed, router.top_k)
    routed = mlp.experts(x, index, weight)
    shared = torch.sigmoid(mlp.shared_expert_gate(x)) * mlp.shared_expert(x)
    if trace is not None:
        trace["router_logits"] = logits.cpu().numpy().astype(np.float32)
        trace["totals"] = totals
        trace["allowed"] = allowed
        trace["index"] = index.cpu().numpy()
    return routed + shared


@torch.no_grad()
def preview(cm, session, block_ids, record_block_size: int | None = None,
            coreset_top_p="record", trace: dict | None = None) -> np.ndarray:
    """Logits float32 [b][V] of a block at positions length..length+b-1.

    record_block_size: the B of ln(b/B) (default: the record's).
    coreset_top_p: "record" = the record's setting, None = off, or a value.
    trace, when a dict, receives per-layer details: 'hidden' (the residual
    stream: embeddings then each layer's output, [L+1][b][H]) and
    'layers' (per layer: coreset totals / kept experts, GDN history mass)."""
    rec = cm.record
    if record_block_size is None:
        record_block_size = rec.block_size
    if coreset_top_p == "record":
        coreset_top_p = rec.coreset_top_p if rec is not None and rec.coreset_enabled else None
    m = cm.model
    dev = cm.device
    b = len(block_ids)
    pos = session.length
    ids = torch.tensor([[int(t) for t in block_ids]], dtype=torch.long, device=dev)
    h = m.model.embed_tokens(ids)                                          # [1][b][H]
    position_ids = torch.arange(pos, pos + b, device=dev).view(1, 1, -1).expand(3, 1, -1)
    cos, sin = m.model.rotary_emb(h, position_ids)
    hidden = [h[0].cpu().numpy().copy()]
    layer_traces = []
    for li, layer in enumerate(m.model.layers):
        lt = {}
        x = layer.input_layernorm(h)
        if layer.block_type == "linear_attention":
            ring, state = session.gdn_state(li)
            mix = gdn_block(layer.linear_attn, cm.extras[li], x[0], ring, state,
                            record_block_size, lt)[None]
        else:
            keys, values = session.kv(li)
            mix = attention_block(layer.self_attn, x, cos, sin, keys, values)
        h = h + mix
        x = layer.post_attention_layernorm(h)
        h = h + moe_block(layer.mlp, x[0], coreset_top_p, lt)[None]
        hidden.append(h[0].cpu().numpy().copy())
        layer_traces.append(lt)
    h = m.model.norm(h)
    logits = m.lm_head(h)[0].to(torch.float32).cpu().numpy()
    if trace is not None:
        trace["hidden"] = np.stack(hidden)
        trace["layers"] = layer_traces
    return logits
