"""The trainable Clover model: transformers' own Qwen3_5MoeForCausalLM (the
modules tools/reference runs, so what is trained is what the reference and
clover compute) plus the four block-diffusion tensors per GDN layer, and one
differentiable forward that gives both paths of SPEC 2 for a whole batch:

* the causal stream: every row through the ordinary trunk (logits shifted:
  row r predicts r+1);
* the preview stream: the same sequence cut into blocks of B rows, block k
  masked at some rows and previewed over the *clean* prefix 0..kB-1, every
  block at once: attention sees the clean keys before the block and the whole
  block (no mask inside it), GDN layers run the block operator (SPEC 2.1) on
  the clean stream's conv ring and state at the block's start, the MoE routes
  as the trunk does (the record ships with the coreset off, so training and
  inference agree). Row r predicts the token AT r.

The clean stream's GDN is a chunked delta rule with chunk = B (so the state at
every block start falls out) in a WY form solved with one triangular solve
per chunk; only the chunk-to-chunk carry is a loop (T/B steps).
tests/test_model.py checks both streams against transformers' forward and
clover_ref.preview.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from transformers import Qwen3_5MoeForCausalLM, Qwen3_5MoeTextConfig
from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import apply_rotary_pos_emb, l2norm

# Geometries. "small" is the one issue 16 trains on the H200: about 18M
# parameters, 36 MB in bf16, so that a checkpoint travels to the device beside
# the corpus (64 MiB a call) and the Q8_0 GGUF is about 20 MB; small enough that
# a few minutes of the H200 see it through several epochs of the corpus.
# "tiny" is the CPU smoke run's and the tests'.
GEOMETRIES = {
    "small": dict(hidden_size=320, num_hidden_layers=6, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=64, linear_num_key_heads=4,
                  linear_num_value_heads=8, linear_key_head_dim=48, linear_value_head_dim=40,
                  num_experts=16, num_experts_per_tok=4, moe_intermediate_size=96,
                  shared_expert_intermediate_size=256, full_attention_interval=3),
    # "demo" is issue 26's default-model candidate: the Qwen3.5 layout (attention
    # every 4th layer), 27.6M parameters, 55 MB in bf16 / 29 MB as 8-bit
    # checkpoint shards (train.py --ckpt-int8): small enough to carry to the
    # device beside the 5 MiB source pack within a call's 64 MiB.
    "demo": dict(hidden_size=384, num_hidden_layers=8, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=64, linear_num_key_heads=4,
                 linear_num_value_heads=8, linear_key_head_dim=64, linear_value_head_dim=48,
                 num_experts=16, num_experts_per_tok=4, moe_intermediate_size=96,
                 shared_expert_intermediate_size=256, full_attention_interval=4),
    "tiny": dict(hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, linear_num_key_heads=2,
                 linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=8,
                 num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                 shared_expert_intermediate_size=48, full_attention_interval=2),
}


def text_config(geometry: str, vocab: int, bos: int, eos: int) -> Qwen3_5MoeTextConfig:
    g = dict(GEOMETRIES[geometry])
    every = g.pop("full_attention_interval")
    n = g["num_hidden_layers"]
    g["layer_types"] = ["full_attention" if (i + 1) % every == 0 else "linear_attention"
                        for i in range(n)]
    return Qwen3_5MoeTextConfig(
        vocab_size=vocab, linear_conv_kernel_dim=4, rms_norm_eps=1e-6,
        max_position_embeddings=4096, tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000000.0,
                         "partial_rotary_factor": 0.25, "mrope_section": [2, 1, 1] if
                         g["head_dim"] == 16 else [6, 5, 5], "mrope_interleaved": True},
        bos_token_id=bos, eos_token_id=eos, pad_token_id=None,
        attn_implementation="eager", **g)


class CloverTrainModel(torch.nn.Module):
    def __init__(self, cfg: Qwen3_5MoeTextConfig, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.lm = Qwen3_5MoeForCausalLM(cfg)
        self.cfg = cfg
        nk, nv = cfg.linear_num_key_heads, cfg.linear_num_value_heads
        conv_dim = 2 * nk * cfg.linear_key_head_dim + nv * cfg.linear_value_head_dim
        k = cfg.linear_conv_kernel_dim
        self.gdn_layers = [i for i, t in enumerate(cfg.layer_types) if t == "linear_attention"]
        # Extras start where a preview is a causal-ish read: small right taps,
        # a history slot that holds about half the mass.
        self.conv_right = torch.nn.ParameterDict()
        self.logit_scale = torch.nn.ParameterDict()
        self.history_bias = torch.nn.ParameterDict()
        self.history_c = torch.nn.ParameterDict()
        for li in self.gdn_layers:
            s = str(li)
            self.conv_right[s] = torch.nn.Parameter(0.02 * torch.randn(conv_dim, k - 1))
            self.logit_scale[s] = torch.nn.Parameter(torch.full((nv,), 4.0))
            self.history_bias[s] = torch.nn.Parameter(torch.full((nv,), 2.0))
            self.history_c[s] = torch.nn.Parameter(torch.full((nv,), 0.5))

    # ---- Gated DeltaNet ----

    @staticmethod
    def chunk_delta(q, k, v, beta, g, chunk: int):
        """Chunked gated delta rule, q/k L2-normed, q already scaled.
        q,k [N,T,h,dk]; v [N,T,h,dv]; beta,g [N,T,h]; T % chunk == 0.
        Returns out [N,T,h,dv] and the state at every chunk start [N,T/chunk,h,dk,dv].
        Per chunk, with G the in-chunk cumulative log decay and S0 the carried state,
        the deltas d_t = beta_t (v_t - e^{G_t} S0^T k_t - sum_{s<t} e^{G_t-G_s}(k_t.k_s) d_s)
        solve one unit lower-triangular system; then
        o_t = e^{G_t} S0^T q_t + sum_{s<=t} e^{G_t-G_s}(q_t.k_s) d_s."""
        n, t, h, dk = k.shape
        dv = v.shape[-1]
        c = chunk
        m = t // c
        f = lambda x: x.reshape(n, m, c, h, *x.shape[3:]).transpose(2, 3)  # noqa: E731  [N,m,h,c,..]
        q, k, v = f(q), f(k), f(v)
        beta, g = f(beta), f(g)                                        # [N,m,h,c]
        gc = g.cumsum(-1)
        diff = gc[..., :, None] - gc[..., None, :]                     # G_t - G_s
        lower = torch.tril(torch.ones(c, c, dtype=torch.bool, device=q.device))
        strict = torch.tril(lower, -1)
        decay = torch.where(lower, diff, diff.new_full((), -math.inf)).exp()  # [N,m,h,c,c]
        kk = k @ k.transpose(-1, -2)
        a = torch.where(strict, beta[..., None] * decay * kk, kk.new_zeros(()))
        eye = torch.eye(c, dtype=q.dtype, device=q.device)
        qk_dec = (q @ k.transpose(-1, -2)) * decay                     # [N,m,h,c,c] (s<=t)
        eg = gc.exp()[..., None]                                       # e^{G_t}
        s = q.new_zeros(n, h, dk, dv)
        outs, states = [], []
        for j in range(m):
            states.append(s)
            rhs = beta[:, j, ..., None] * (v[:, j] - eg[:, j] * (k[:, j] @ s))
            d = torch.linalg.solve_triangular(eye + a[:, j], rhs, upper=False, unitriangular=True)
            outs.append(eg[:, j] * (q[:, j] @ s) + qk_dec[:, j] @ d)
            last = gc[:, j, :, -1]                                     # G_C  [N,h]
            wk = (last[..., None] - gc[:, j]).exp()[..., None] * k[:, j]   # e^{G_C-G_s} k_s
            s = last.exp()[..., None, None] * s + wk.transpose(-1, -2) @ d
        out = torch.stack(outs, 1).transpose(2, 3).reshape(n, t, h, dv)
        return out, torch.stack(states, 1)

    def _gdn(self, li, mod, xc, xn, block, cache: dict | None = None):
        """Both streams of one GDN layer. xc: norm_in(h) [N,T,H]; xn [rN,T,H]: r
        noisy views of the same rows (complementary masks), each previewed over
        the clean stream's ring and states. cache (preview_cached): an empty
        dict is filled with the ring and the states; a filled one stands in for
        the clean stream (xc None: its output is None)."""
        reuse = cache is not None and "ring" in cache
        n, t = (cache["ring"].shape[0], xn.shape[1]) if reuse else xc.shape[:2]
        nn_ = xn.shape[0]
        r = nn_ // n
        nk, nv, dk, dv = mod.num_k_heads, mod.num_v_heads, mod.head_k_dim, mod.head_v_dim
        kk = mod.conv_kernel_size
        m = t // block
        rep = nv // nk
        w = mod.conv1d.weight[:, 0, :]                                 # [C][K]
        Xn = mod.in_proj_qkv(xn)
        C = Xn.shape[-1]
        if reuse:
            ring = cache["ring"]
        else:
            Xc = mod.in_proj_qkv(xc)                                   # [N,T,C]
            # causal conv on the clean stream
            Xcp = torch.cat([Xc.new_zeros(n, kk - 1, C), Xc], 1)       # [N,T+K-1,C]
            yc = sum(w[:, j] * Xcp[:, j:j + t] for j in range(kk))
            yc = F.silu(yc)
            # the block conv: left taps over [ring; block], right taps inside the block
            idx = (torch.arange(m, device=xc.device) * block)[:, None] + \
                torch.arange(kk - 1, device=xc.device)[None]           # ring rows in Xcp
            ring = Xcp[:, idx]                                         # [N,m,K-1,C]
        if r > 1:
            ring = ring.repeat(r, 1, 1, 1)
        Xb = Xn.reshape(nn_, m, block, C)
        e = torch.cat([ring, Xb], 2)
        xpad = torch.cat([Xb, Xb.new_zeros(nn_, m, kk - 1, C)], 2)
        wr = self.conv_right[str(li)]
        yb = sum(w[:, j] * e[:, :, j:j + block] for j in range(kk)) + \
            sum(wr[:, j - 1] * xpad[:, :, j:j + block] for j in range(1, kk))
        yn = F.silu(yb).reshape(nn_, t, C)

        def qkv(y):
            n = y.shape[0]
            q, k, v = torch.split(y, [nk * dk, nk * dk, nv * dv], dim=-1)
            q = l2norm(q.reshape(n, t, nk, dk), dim=-1, eps=1e-6).repeat_interleave(rep, 2)
            k = l2norm(k.reshape(n, t, nk, dk), dim=-1, eps=1e-6).repeat_interleave(rep, 2)
            return q, k, v.reshape(n, t, nv, dv)

        if reuse:
            states = cache["states"]
        else:
            # clean: the causal recurrence, chunked at the block size
            q, k, v = qkv(yc)
            beta = mod.in_proj_b(xc).sigmoid()
            g = -mod.A_log.float().exp() * F.softplus(mod.in_proj_a(xc).float() + mod.dt_bias)
            oc, states = self.chunk_delta(q * dk ** -0.5, k, v, beta, g, block)
            if cache is not None:
                cache["ring"], cache["states"] = ring, states
        # noisy: the block operator of SPEC 2.1 (ln(b/B) = 0 at the trained size)
        q, k, v = qkv(yn)
        gn = -mod.A_log.float().exp() * F.softplus(mod.in_proj_a(xn).float() + mod.dt_bias)
        qb = q.reshape(nn_, m, block, nv, dk).transpose(2, 3)          # [rN,m,h,b,dk]
        kb = k.reshape(nn_, m, block, nv, dk).transpose(2, 3)
        vb = v.reshape(nn_, m, block, nv, dv).transpose(2, 3)
        gb = gn.reshape(nn_, m, block, nv).transpose(2, 3)             # [rN,m,h,b]
        if r > 1:
            states = states.repeat(r, 1, 1, 1, 1)
        ls = self.logit_scale[str(li)][:, None, None]
        s_block = ls * (qb @ kb.transpose(-1, -2))                     # [N,m,h,b,b]
        s_hist = self.history_bias[str(li)][:, None] + self.history_c[str(li)][:, None] * gb
        p = torch.softmax(torch.cat([s_block, s_hist[..., None]], -1).float(), -1)
        u = (qb * dk ** -0.5) @ states                                 # S^T q  [N,m,h,b,dv]
        on = p[..., :block] @ vb + p[..., block:] * u
        on = on.transpose(2, 3).reshape(nn_, t, nv, dv)

        def out(o, x):
            z = mod.in_proj_z(x).reshape(-1, dv)
            return mod.out_proj(mod.norm(o.reshape(-1, dv), z).reshape(x.shape[0], t, nv * dv))
        return (None if reuse else out(oc, xc)), out(on, xn)

    # ---- sparse MoE ----

    grouped = False        # set by the trainer on CUDA: experts by one grouped GEMM

    def moe(self, mlp, x):
        """transformers' Qwen3_5MoeSparseMoeBlock without its per-expert host
        syncs. Routing as the reference: float softmax, top-k, renormalised.
        grouped=False: a loop over experts (CPU; tests compare it with
        transformers' module); grouped=True: rows sorted by expert and two
        torch grouped GEMMs in bf16 (its backward needs bf16 and 16-byte rows),
        checked against the loop on the device before training."""
        shp = x.shape
        x = x.reshape(-1, shp[-1])
        ex = mlp.experts
        logits = F.linear(x.float(), mlp.gate.weight.float())
        top_w, top_i = torch.topk(torch.softmax(logits, -1), mlp.gate.top_k, dim=-1)
        top_w = (top_w / top_w.sum(-1, keepdim=True)).to(x.dtype)
        kk = top_i.shape[-1]
        flat = top_i.reshape(-1)
        eid, perm = torch.sort(flat, stable=True)
        tok = perm // kk
        xs = x[tok]
        if self.grouped:
            # group ends from the sorted ids: static shapes, no host sync (compiles)
            ends = torch.arange(1, ex.num_experts + 1, device=x.device, dtype=eid.dtype)
            offs = torch.searchsorted(eid, ends).to(torch.int32)
            bf = torch.bfloat16
            gu = F.grouped_mm(xs.to(bf), ex.gate_up_proj.to(bf).transpose(-2, -1), offs=offs)
            gate, up = gu.chunk(2, dim=-1)
            hmid = F.silu(gate) * up
            ys = F.grouped_mm(hmid, ex.down_proj.to(bf).transpose(-2, -1), offs=offs).to(x.dtype)
        else:
            counts = torch.bincount(eid, minlength=ex.num_experts).tolist()
            parts, lo = [], 0
            for e, c in enumerate(counts):
                if c:
                    gate, up = F.linear(xs[lo:lo + c], ex.gate_up_proj[e]).chunk(2, dim=-1)
                    parts.append(F.linear(F.silu(gate) * up, ex.down_proj[e]))
                lo += c
            ys = torch.cat(parts, 0)
        ys = ys * top_w.reshape(-1)[perm, None]
        out = torch.zeros_like(x).index_add_(0, tok, ys.to(x.dtype))
        sh = mlp.shared_expert(x)
        out = out + torch.sigmoid(mlp.shared_expert_gate(x)) * sh
        return out.reshape(shp)

    # ---- gated full attention ----

    @staticmethod
    def _attn(mod, xc, xn, cos, sin, block, cache: dict | None = None):
        """Both streams of one attention layer; cache as in _gdn (the clean
        keys and values)."""
        reuse = cache is not None and "k" in cache
        n, t = (cache["k"].shape[0], xn.shape[1]) if reuse else xc.shape[:2]
        r = xn.shape[0] // n

        def proj(x):
            n = x.shape[0]
            shp = (n, t, -1, mod.head_dim)
            q, gate = torch.chunk(mod.q_proj(x).view(n, t, -1, mod.head_dim * 2), 2, dim=-1)
            q = mod.q_norm(q.reshape(shp)).transpose(1, 2)
            k = mod.k_norm(mod.k_proj(x).view(shp)).transpose(1, 2)
            v = mod.v_proj(x).view(shp).transpose(1, 2)
            q, k = apply_rotary_pos_emb(q, k, cos if cos.shape[0] == n else cos.repeat(r, 1, 1),
                                        sin if sin.shape[0] == n else sin.repeat(r, 1, 1))
            return q, k, v, gate.reshape(n, t, -1)

        qn, kn, vn, gn = proj(xn)
        rep = qn.shape[1] // kn.shape[1]
        if reuse:
            kc, vc = cache["k"], cache["v"]
        else:
            qc, kc, vc, gc = proj(xc)
            kc, vc = (x.repeat_interleave(rep, 1) for x in (kc, vc))
            oc = F.scaled_dot_product_attention(qc, kc, vc, is_causal=True, scale=mod.scaling)
            if cache is not None:
                cache["k"], cache["v"] = kc, vc
        kn, vn = (x.repeat_interleave(rep, 1) for x in (kn, vn))
        blk = torch.arange(t, device=xn.device) // block
        seen = torch.cat([blk[None, :] < blk[:, None],                 # clean keys before the block
                          blk[None, :] == blk[:, None]], 1)            # the whole block
        if r > 1:
            kc, vc = kc.repeat(r, 1, 1, 1), vc.repeat(r, 1, 1, 1)
        on = F.scaled_dot_product_attention(qn, torch.cat([kc, kn], 2), torch.cat([vc, vn], 2),
                                            attn_mask=seen, scale=mod.scaling)
        f = lambda o, g: mod.o_proj(o.transpose(1, 2).reshape(o.shape[0], t, -1) *  # noqa: E731
                                    torch.sigmoid(g))
        return (None if reuse else f(oc, gc)), f(on, gn)

    def forward(self, ids: torch.Tensor, noisy: torch.Tensor | None, block: int):
        """ids [N,T] (T % block == 0); noisy [rN,T]: r views of the same rows with
        masked rows (r = 2: complementary masks), or None for the causal stream
        alone. Returns (causal logits [N,T,V], preview logits [rN,T,V])."""
        m = self.lm.model
        n, t = ids.shape
        hc = m.embed_tokens(ids)
        hn = m.embed_tokens(noisy) if noisy is not None else None
        pos = torch.arange(t, device=ids.device).view(1, 1, -1).expand(3, n, -1)
        cos, sin = m.rotary_emb(hc, pos)
        for li, layer in enumerate(m.layers):
            xc = layer.input_layernorm(hc)
            xn = layer.input_layernorm(hn) if hn is not None else xc
            if layer.block_type == "linear_attention":
                a, b = self._gdn(li, layer.linear_attn, xc, xn, block)
            else:
                a, b = self._attn(layer.self_attn, xc, xn, cos, sin, block)
            hc = hc + a
            if hn is None:
                hc = hc + self.moe(layer.mlp, layer.post_attention_layernorm(hc))
            else:
                # both streams through the MoE in one call: twice the rows per expert
                hn = hn + b
                y = self.moe(layer.mlp, layer.post_attention_layernorm(torch.cat([hc, hn], 0)))
                hc, hn = hc + y[:n], hn + y[n:]
        lc = self.lm.lm_head(m.norm(hc))
        ln = self.lm.lm_head(m.norm(hn)) if hn is not None else None
        return lc, ln

    # ---- repeated previews of the same rows (train.py's engine masks) ----

    @torch.no_grad()
    def clean_cache(self, ids: torch.Tensor, block: int) -> dict:
        """The clean stream of ids [N,T] once, keeping per layer what the
        preview reads of it (GDN: the conv ring and the state at every block
        start; attention: the keys and values): preview_cached then runs only
        the noisy stream, about half a forward, for each of the engine's
        passes over the same rows. (The layers' noisy halves run on the clean
        input too and are dropped: _gdn and _attn compute both.)"""
        m = self.lm.model
        n, t = ids.shape
        hc = m.embed_tokens(ids)
        pos = torch.arange(t, device=ids.device).view(1, 1, -1).expand(3, n, -1)
        cos, sin = m.rotary_emb(hc, pos)
        layers = []
        for li, layer in enumerate(m.layers):
            xc = layer.input_layernorm(hc)
            c = {}
            if layer.block_type == "linear_attention":
                a, _ = self._gdn(li, layer.linear_attn, xc, xc, block, c)
            else:
                a, _ = self._attn(layer.self_attn, xc, xc, cos, sin, block, c)
            layers.append(c)
            hc = hc + a
            hc = hc + self.moe(layer.mlp, layer.post_attention_layernorm(hc))
        return {"layers": layers, "cos": cos, "sin": sin, "block": block}

    @torch.no_grad()
    def preview_cached(self, cache: dict, noisy: torch.Tensor) -> torch.Tensor:
        """Preview logits [N,T,V] of noisy [N,T] (one view of the rows that
        clean_cache saw): forward(ids, noisy, block)[1] without recomputing the
        clean stream (equal up to rounding: the MoE runs the noisy rows alone)."""
        m = self.lm.model
        hn = m.embed_tokens(noisy)
        for li, layer in enumerate(m.layers):
            xn = layer.input_layernorm(hn)
            c = cache["layers"][li]
            if layer.block_type == "linear_attention":
                _, b = self._gdn(li, layer.linear_attn, None, xn, cache["block"], c)
            else:
                _, b = self._attn(layer.self_attn, None, xn, cache["cos"], cache["sin"],
                                  cache["block"], c)
            hn = hn + b
            hn = hn + self.moe(layer.mlp, layer.post_attention_layernorm(hn))
        return self.lm.lm_head(m.norm(hn))
