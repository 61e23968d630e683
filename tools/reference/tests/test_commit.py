"""The commit path IS transformers' forward with its cache; these tests pin
what the preview relies on: chunking does not matter, the cache path equals a
cache-free forward, and the cache's conv ring / recurrent state are what
TRUNK.md 4 says (checked against an independent float64 recurrence).

Chunked, cached and cache-free runs are the same mathematics in another
float32 order: they agree within TRUNK_REL (1e-4) of the scale, the bound the
engine is held to; clover_ref/tolerance.py says why that holds on any x86 CPU
and still catches a wrong state or position."""
import numpy as np
import pytest
import torch

from clover_ref.session import Session
from clover_ref.tolerance import TRUNK_REL, scale_error


def assert_scale_close(a, ref, what):
    err = scale_error(a, ref)
    assert err <= TRUNK_REL, f"{what}: {err:.2e} of the scale (tolerance {TRUNK_REL:g})"


@pytest.mark.parametrize("model", ["clover", "ar"])
def test_commit_in_chunks_equals_one_call(model, request, prompt_ids):
    cm = request.getfixturevalue(model)
    one = Session(cm)
    a = one.commit(prompt_ids, want_logits=True)
    for chunks in ([5, 1, 7], [1] * 6, [len(prompt_ids) - 1]):
        s = Session(cm)
        parts, i = [], 0
        for n in chunks:
            parts.append(s.commit(prompt_ids[i:i + n], want_logits=True))
            i += n
        parts.append(s.commit(prompt_ids[i:], want_logits=True))
        b = np.concatenate(parts)
        assert_scale_close(b, a, f"logits, chunks {chunks}")
        for li in range(cm.config.num_hidden_layers):
            if cm.config.layer_types[li] == "linear_attention":
                r1, s1 = one.gdn_state(li)
                r2, s2 = s.gdn_state(li)
                assert_scale_close(r2, r1, f"layer {li} conv ring, chunks {chunks}")
                assert_scale_close(s2, s1, f"layer {li} state, chunks {chunks}")
            else:
                k1, v1 = one.kv(li)
                k2, v2 = s.kv(li)
                assert_scale_close(k2, k1, f"layer {li} keys, chunks {chunks}")
                assert_scale_close(v2, v1, f"layer {li} values, chunks {chunks}")


@pytest.mark.parametrize("model", ["clover", "ar"])
def test_commit_equals_transformers_forward(model, request, prompt_ids):
    cm = request.getfixturevalue(model)
    with torch.no_grad():
        ref = cm.model(input_ids=torch.tensor([prompt_ids]), use_cache=False).logits[0].numpy()
    s = Session(cm)
    s.commit(prompt_ids[:9])
    rest = s.commit(prompt_ids[9:], want_logits=True)
    assert_scale_close(rest, ref[9:], "9 tokens then the rest vs the cache-free forward")
    # a decode step (the recurrent path) equals the full forward's last row
    s2 = Session(cm)
    s2.commit(prompt_ids[:-1])
    last = s2.commit(prompt_ids[-1:], want_logits=True)
    assert_scale_close(last[0], ref[-1], "decode step vs the full forward's last row")


def gdn_reference_f64(mod, x):
    """TRUNK.md 4.2-4.6 in float64 numpy, token by token, from zero state:
    returns the pre-conv rows (for the ring) and the final state S [nv][dk][dv]."""
    w = {n: p.detach().double().numpy() for n, p in mod.named_parameters()}
    nk, nv, dk, dv = mod.num_k_heads, mod.num_v_heads, mod.head_k_dim, mod.head_v_dim
    kk = mod.conv_kernel_size
    x = x.astype(np.float64)
    mixed = x @ w["in_proj_qkv.weight"].T                     # [n][conv_dim]
    b = x @ w["in_proj_b.weight"].T
    a = x @ w["in_proj_a.weight"].T
    cw = w["conv1d.weight"][:, 0, :]                          # [conv_dim][K]
    n = x.shape[0]
    pad = np.concatenate([np.zeros((kk - 1, mixed.shape[1])), mixed])
    S = np.zeros((nv, dk, dv))
    for t in range(n):
        conv = sum(cw[:, j] * pad[t + j] for j in range(kk))
        y = conv / (1 + np.exp(-conv))
        q, k, v = y[:nk * dk].reshape(nk, dk), y[nk * dk:2 * nk * dk].reshape(nk, dk), \
            y[2 * nk * dk:].reshape(nv, dv)
        k = k / np.sqrt((k * k).sum(-1, keepdims=True) + 1e-6)
        beta = 1 / (1 + np.exp(-b[t]))
        u = a[t] + w["dt_bias"]
        sp = np.where(u > 20, u, np.log1p(np.exp(np.minimum(u, 20))))
        g = -np.exp(w["A_log"]) * sp
        for h in range(nv):
            kh = k[h // (nv // nk)]
            S[h] *= np.exp(g[h])
            kv_mem = kh @ S[h]
            S[h] += np.outer(kh, beta[h] * (v[h] - kv_mem))
    return mixed, S


@pytest.mark.parametrize("model", ["clover", "ar"])
def test_cache_holds_the_ring_and_state_of_trunk_md(model, request, prompt_ids):
    cm = request.getfixturevalue(model)
    inputs = {}
    hooks = [layer.linear_attn.register_forward_hook(
        lambda mod, args, kwargs, out, li=li: inputs.__setitem__(
            li, kwargs["hidden_states"][0].detach().numpy().copy()),
        with_kwargs=True) for li, layer in enumerate(cm.model.model.layers)
        if layer.block_type == "linear_attention"]
    s = Session(cm)
    try:
        s.commit(prompt_ids)
    finally:
        for h in hooks:
            h.remove()
    kk = cm.config.linear_conv_kernel_dim
    for li, x in inputs.items():
        mixed, S = gdn_reference_f64(cm.model.model.layers[li].linear_attn, x)
        ring, state = s.gdn_state(li)
        assert np.allclose(ring.numpy(), mixed[-(kk - 1):], atol=1e-5)
        assert np.allclose(state.numpy(), S, atol=2e-5 * max(1.0, np.abs(S).max()))


def test_fresh_session_reads_zero_state(clover):
    s = Session(clover)
    ring, state = s.gdn_state(0)
    assert not ring.any() and not state.any()
    assert s.kv(2) == (None, None)


def test_the_reference_runs_on_one_thread(clover_dir):
    # Two threads sum MKL / ATen reductions in another order (the fixture
    # logits move by ~1e-5 of their scale); every CloverModel pins one.
    torch.set_num_threads(2)
    from clover_ref.checkpoint import CloverModel
    CloverModel(clover_dir)
    assert torch.get_num_threads() == 1
