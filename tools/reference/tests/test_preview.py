"""SPEC 2: the preview pass. It must leave the cache exactly as it found it,
its GDN operator must be SPEC 2.1 (checked against a float64 loop written
from the SPEC text and against transformers' own recurrence in the
history-only limit), its attention must be transformers' attention without a
mask, and its MoE must reduce to the trunk's when the coreset keeps all."""
import copy
import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import (
    causal_conv1d_fn, torch_recurrent_gated_delta_rule)

from clover_ref.checkpoint import GdnExtra
from clover_ref.gdn_block import gdn_block
from clover_ref.preview import attention_block, preview
from clover_ref.session import Session

GDN = 0      # a GDN layer of the tiny Clover model
ATTN = 2     # its first attention layer


def committed(cm, ids):
    s = Session(cm)
    s.commit(ids)
    return s


def a_block(cm, n=None):
    rec = cm.record
    n = n or rec.block_size
    blk = [rec.mask_token_id] * n
    blk[1], blk[min(4, n - 1)] = 17, 42
    return blk


def same(snap, after):
    assert snap.keys() == after.keys()
    for k in snap:
        if isinstance(snap[k], torch.Tensor):
            assert torch.equal(snap[k], after[k]), k
        else:
            assert snap[k] == after[k], k


def test_preview_leaves_the_cache_untouched(clover, prompt_ids):
    s = committed(clover, prompt_ids)
    snap = s.snapshot()
    for blk, top_p in ((a_block(clover), "record"), (a_block(clover), None),
                       (a_block(clover, 4), "record"), ([clover.record.mask_token_id], "record")):
        preview(clover, s, blk, coreset_top_p=top_p)
        same(snap, s.snapshot())
    # and the next commit sees exactly what it would have seen
    after = s.commit([5, 6, 7], want_logits=True)
    fresh = committed(clover, prompt_ids).commit([5, 6, 7], want_logits=True)
    assert np.array_equal(after, fresh)


def test_preview_is_deterministic_and_unmasked(clover, prompt_ids):
    s = committed(clover, prompt_ids)
    blk = a_block(clover)
    a = preview(clover, s, blk)
    assert np.array_equal(a, preview(clover, s, blk))
    # no causal mask inside the block: the last row changes the first row's logits
    blk2 = list(blk)
    blk2[-1] = 99
    assert not np.allclose(a[0], preview(clover, s, blk2)[0])


def spec_2_1_f64(mod, extra, x, ring, state, big_b):
    """SPEC 2.1, literally, in float64 with loops."""
    P = {n: p.detach().double().numpy() for n, p in mod.named_parameters()}
    nk, nv, dk, dv = mod.num_k_heads, mod.num_v_heads, mod.head_k_dim, mod.head_v_dim
    K = mod.conv_kernel_size
    x = x.double().numpy()
    R = ring.double().numpy()
    S = state.double().numpy()
    b = x.shape[0]
    X = x @ P["in_proj_qkv.weight"].T
    Zg = x @ P["in_proj_z.weight"].T
    A = x @ P["in_proj_a.weight"].T
    W = P["conv1d.weight"][:, 0, :]
    Wr = extra.conv_right.double().numpy()
    E = np.concatenate([R, X])
    Xz = lambda j: X[j] if j < b else np.zeros(X.shape[1])  # noqa: E731
    Y = np.zeros_like(X)
    for i in range(b):
        acc = sum(W[:, t] * E[i + t] for t in range(K)) + \
            sum(Wr[:, t - 1] * Xz(i + t) for t in range(1, K))
        Y[i] = acc / (1 + np.exp(-acc))
    q = Y[:, :nk * dk].reshape(b, nk, dk)
    k = Y[:, nk * dk:2 * nk * dk].reshape(b, nk, dk)
    v = Y[:, 2 * nk * dk:].reshape(b, nv, dv)
    q = q / np.sqrt((q * q).sum(-1, keepdims=True) + 1e-6)
    k = k / np.sqrt((k * k).sum(-1, keepdims=True) + 1e-6)
    ls, hb, hc = (t.double().numpy() for t in (extra.logit_scale, extra.history_bias, extra.history_c))
    o = np.zeros((b, nv, dv))
    for i in range(b):
        for h in range(nv):
            kh = h // (nv // nk)
            u_ = A[i, h] + P["dt_bias"][h]
            g = -math.exp(P["A_log"][h]) * (u_ if u_ > 20 else math.log1p(math.exp(u_)))
            s = [ls[h] * (q[i, kh] @ k[j, kh]) for j in range(b)]
            s.append(hb[h] + hc[h] * g + math.log(b / big_b))
            s = np.array(s)
            p = np.exp(s - s.max())
            p /= p.sum()
            u = S[h].T @ (q[i, kh] / math.sqrt(dk))
            o[i, h] = sum(p[j] * v[j, h] for j in range(b)) + p[b] * u
    # gated RMSNorm per value head, then out_proj
    on = o / np.sqrt((o * o).mean(-1, keepdims=True) + mod.norm.variance_epsilon)
    z = Zg.reshape(b, nv, dv)
    y = on * P["norm.weight"] * (z / (1 + np.exp(-z)))
    return y.reshape(b, nv * dv) @ P["out_proj.weight"].T


@pytest.mark.parametrize("b", [8, 4, 1])
def test_gdn_block_is_spec_2_1(clover, prompt_ids, b):
    s = committed(clover, prompt_ids)
    torch.manual_seed(1)
    for li, extra in clover.extras.items():
        mod = clover.model.model.layers[li].linear_attn
        x = torch.randn(b, clover.config.hidden_size)
        ring, state = s.gdn_state(li)
        got = gdn_block(mod, extra, x, ring, state, 8).numpy()
        ref = spec_2_1_f64(mod, extra, x, ring, state, 8)
        assert np.allclose(got, ref, rtol=1e-4, atol=1e-5 * np.abs(ref).max())


def test_gdn_history_only_limit_is_the_causal_read_out(clover, prompt_ids):
    s = committed(clover, prompt_ids)
    torch.manual_seed(2)
    for li, extra in clover.extras.items():
        mod = clover.model.model.layers[li].linear_attn
        nv = mod.num_v_heads
        limit = GdnExtra(torch.zeros_like(extra.conv_right), torch.zeros(nv),
                         torch.full((nv,), 1e4), extra.history_c)
        b = 8
        x = torch.randn(b, clover.config.hidden_size)
        ring, state = s.gdn_state(li)
        got = gdn_block(mod, limit, x, ring, state, 8)
        # The causal read-out, with transformers' own pieces: the causal conv over
        # [ring; X], then the recurrence with beta = 0 (no write) and g = 0 (no
        # decay) from the committed state, the gated norm and out_proj.
        with torch.no_grad():
            xq = mod.in_proj_qkv(x)
            seq = torch.cat([ring, xq])[None].transpose(1, 2)
            y = causal_conv1d_fn(seq, mod.conv1d.weight.squeeze(1), None, activation="silu")
            y = y[0, :, -b:].transpose(0, 1)
            q, k, v = torch.split(y, [mod.key_dim, mod.key_dim, mod.value_dim], dim=-1)
            rep = nv // mod.num_k_heads
            q = q.reshape(1, b, -1, mod.head_k_dim).repeat_interleave(rep, dim=2)
            k = k.reshape(1, b, -1, mod.head_k_dim).repeat_interleave(rep, dim=2)
            v = v.reshape(1, b, nv, mod.head_v_dim)
            zero = torch.zeros(1, b, nv)
            o, s_after = torch_recurrent_gated_delta_rule(q, k, v, g=zero, beta=zero,
                                                          initial_state=state[None].clone(),
                                                          output_final_state=True,
                                                          use_qk_l2norm_in_kernel=True)
            assert torch.allclose(s_after[0], state)          # nothing was written
            z = mod.in_proj_z(x).reshape(-1, mod.head_v_dim)
            ref = mod.out_proj(mod.norm(o.reshape(-1, mod.head_v_dim), z).reshape(b, -1))
        assert torch.allclose(got, ref, rtol=1e-5, atol=1e-6), li


def test_ln_b_over_B_is_a_history_bias_shift(clover, prompt_ids):
    s = committed(clover, prompt_ids)
    torch.manual_seed(3)
    for li, extra in clover.extras.items():
        mod = clover.model.model.layers[li].linear_attn
        x = torch.randn(4, clover.config.hidden_size)
        ring, state = s.gdn_state(li)
        a = gdn_block(mod, extra, x, ring, state, 8)
        shifted = replace(extra, history_bias=extra.history_bias + math.log(0.5))
        c = gdn_block(mod, shifted, x, ring, state, 4)
        assert torch.allclose(a, c, rtol=1e-5, atol=1e-6)


def test_attention_block_is_transformers_attention_without_mask(clover, prompt_ids):
    s = committed(clover, prompt_ids)
    attn = clover.model.model.layers[ATTN].self_attn
    b, pos = 8, s.length
    torch.manual_seed(4)
    x = torch.randn(1, b, clover.config.hidden_size)
    position_ids = torch.arange(pos, pos + b).view(1, 1, -1).expand(3, 1, -1)
    cos, sin = clover.model.model.rotary_emb(x, position_ids)
    keys, values = s.kv(ATTN)
    got = attention_block(attn, x, cos, sin, keys, values)
    cache = copy.deepcopy(s.cache)
    zero_mask = torch.zeros(1, 1, b, pos + b)     # additive mask: nothing masked
    with torch.no_grad():
        ref, _ = attn(hidden_states=x, position_embeddings=(cos, sin), attention_mask=zero_mask,
                      past_key_values=cache)
    assert torch.allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_coreset_keeping_every_expert_is_the_trunk_moe(clover, prompt_ids):
    s = committed(clover, prompt_ids)
    blk = a_block(clover)
    a = preview(clover, s, blk, coreset_top_p=None)
    b = preview(clover, s, blk, coreset_top_p=2.0)
    assert np.allclose(a, b, rtol=1e-5, atol=1e-5)
    c = preview(clover, s, blk)                    # the record's 0.8 drops experts
    assert not np.allclose(a, c, atol=1e-3)


def test_preview_trace_names_the_coreset(clover, prompt_ids):
    s = committed(clover, prompt_ids)
    trace = {}
    preview(clover, s, a_block(clover), trace=trace)
    assert trace["hidden"].shape == (clover.config.num_hidden_layers + 1, 8, 64)
    for lt in trace["layers"]:
        kept = np.nonzero(lt["allowed"])[0]
        assert 1 <= len(kept) <= clover.config.num_experts
        assert set(np.unique(lt["index"])) <= set(kept.tolist())
