"""Self-distillation rows: the model's own greedy answers as preview targets.

Why (PLAN.md, "Self-distillation"): under the causal-fallback rule a pass fixes
the rows after the committed text whose preview confidence passes the
threshold. Trained on the data's own continuations, a masked row d rows past
the prefix must spread its probability over every continuation the data
allows, so it rarely passes 0.95. The model's own greedy answer is one fixed
continuation of the prompt: trained on it, the preview can become confident
exactly where the causal path would have picked the same tokens, which is what
the rule accepts (the consistency-distillation idea: CLLMs, Kou et al. 2024).

What is here:
* sd_prompts: chat prompts from gen.py (never a held-out prompt), each
  left-padded with `<|endoftext|>` to a block boundary (training's layout, so
  the answer starts a block as at inference).
* Decoder: the causal path one token at a time with a cache (GDN conv ring and
  recurrent state, attention keys and values), the math of model.py's clean
  stream (tests/test_selfdistill.py checks it against model.forward's logits).
  A batch holds prompts of one padded length, so no row needs a mask.
* greedy_answers: batched greedy decoding to `<|im_end|>` (then the template's
  newline), unfinished answers dropped.
* pack_rows: [pad] prompt | answer [pad to the block end] packed greedily into
  rows of `seq`, with `real` (prompt and answer: both losses' targets) and
  `selfgen` (the answer: kept out of the causal loss, so the causal path is not
  trained on its own outputs; the preview and distillation terms use it).
"""
from __future__ import annotations

import os
import random
import sys
import time

import torch
import torch.nn.functional as F
from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import apply_rotary_pos_emb
from transformers.models.qwen3_next.modeling_qwen3_next import l2norm

HERE = os.path.dirname(os.path.abspath(__file__))


def sd_prompts(pack: str, tok, n: int, seed: int, think_p: float, block: int) -> list[list[int]]:
    """n chat prompts from gen.py, each left-padded to a multiple of block."""
    sys.path.insert(0, HERE)
    from gen import Gen, load_corpus
    g = Gen(load_corpus(pack))
    r = random.Random(seed)
    pad = tok.token_to_id("<|endoftext|>")
    texts = [g.sample(r, think_p)[0] for _ in range(n)]
    out = []
    for e in tok.encode_batch(texts):
        p = e.ids
        out.append([pad] * ((-len(p)) % block) + p)
    return out


class Decoder:
    """One token at a time through the causal path of a CloverTrainModel for a
    batch of sequences at the same position. State per layer: GDN the last
    K-1 pre-convolution rows and the recurrent state (float32), attention the
    keys and values so far."""

    def __init__(self, model, batch: int):
        self.model, self.n, self.pos = model, batch, 0
        self.state: list[dict] = [{} for _ in model.lm.model.layers]

    @torch.no_grad()
    def step(self, tok: torch.Tensor) -> torch.Tensor:
        """tok [N] ids at the current position -> next-token logits [N,V]."""
        m = self.model.lm.model
        h = m.embed_tokens(tok)[:, None]                                   # [N,1,H]
        pos = torch.full((3, self.n, 1), self.pos, device=tok.device, dtype=torch.long)
        cos, sin = m.rotary_emb(h, pos)
        for li, layer in enumerate(m.layers):
            x = layer.input_layernorm(h)
            st = self.state[li]
            if layer.block_type == "linear_attention":
                h = h + self._gdn(layer.linear_attn, x, st)
            else:
                h = h + self._attn(layer.self_attn, x, cos, sin, st)
            h = h + self.model.moe(layer.mlp, layer.post_attention_layernorm(h))
        self.pos += 1
        return self.model.lm.lm_head(m.norm(h))[:, 0]

    def _gdn(self, mod, x, st):
        n = x.shape[0]
        nk, nv, dk, dv = mod.num_k_heads, mod.num_v_heads, mod.head_k_dim, mod.head_v_dim
        kk = mod.conv_kernel_size
        w = mod.conv1d.weight[:, 0, :]                                     # [C][K]
        X = mod.in_proj_qkv(x)                                             # [N,1,C]
        if "ring" not in st:   # the sequence start: the convolution's zero padding
            st["ring"] = X.new_zeros(n, kk - 1, X.shape[-1])
            st["S"] = torch.zeros(n, nv, dk, dv, device=x.device, dtype=torch.float32)
        win = torch.cat([st["ring"].to(X.dtype), X], 1)                   # [N,K,C]
        st["ring"] = win[:, 1:]
        y = F.silu((win * w.t()[None].to(win.dtype)).sum(1))              # [N,C]
        q, k, v = torch.split(y, [nk * dk, nk * dk, nv * dv], dim=-1)
        rep = nv // nk
        q = l2norm(q.reshape(n, nk, dk).float(), dim=-1, eps=1e-6).repeat_interleave(rep, 1)
        k = l2norm(k.reshape(n, nk, dk).float(), dim=-1, eps=1e-6).repeat_interleave(rep, 1)
        v = v.reshape(n, nv, dv).float()
        beta = mod.in_proj_b(x)[:, 0].float().sigmoid()                   # [N,h]
        g = -mod.A_log.float().exp() * F.softplus(mod.in_proj_a(x)[:, 0].float() + mod.dt_bias)
        S = st["S"] * g.exp()[..., None, None]
        d = beta[..., None] * (v - torch.einsum("nhkv,nhk->nhv", S, k))
        S = S + k[..., :, None] * d[..., None, :]
        st["S"] = S
        o = torch.einsum("nhkv,nhk->nhv", S, q * dk ** -0.5)              # [N,h,dv]
        z = mod.in_proj_z(x).reshape(-1, dv)
        o = mod.norm(o.reshape(-1, dv).to(z.dtype), z).reshape(n, 1, nv * dv)
        return mod.out_proj(o)

    @staticmethod
    def _attn(mod, x, cos, sin, st):
        n = x.shape[0]
        shp = (n, 1, -1, mod.head_dim)
        q, gate = torch.chunk(mod.q_proj(x).view(n, 1, -1, mod.head_dim * 2), 2, dim=-1)
        q = mod.q_norm(q.reshape(shp)).transpose(1, 2)
        k = mod.k_norm(mod.k_proj(x).view(shp)).transpose(1, 2)
        v = mod.v_proj(x).view(shp).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        if "k" in st:
            k, v = torch.cat([st["k"], k.to(st["k"].dtype)], 2), torch.cat([st["v"], v.to(st["v"].dtype)], 2)
        st["k"], st["v"] = k, v
        rep = q.shape[1] // k.shape[1]
        o = F.scaled_dot_product_attention(q, k.repeat_interleave(rep, 1).to(q.dtype),
                                           v.repeat_interleave(rep, 1).to(q.dtype), scale=mod.scaling)
        return mod.o_proj(o.transpose(1, 2).reshape(n, 1, -1) * torch.sigmoid(gate.reshape(n, 1, -1)))


@torch.no_grad()
def greedy_answers(model, prompts: list[list[int]], tok, max_new: int, batch: int,
                   autocast: tuple[str, bool] = ("cpu", False),
                   time_limit: float | None = None) -> list[list[int] | None]:
    """Each prompt's greedy answer up to and including `<|im_end|>` and the
    template's newline after it; None where no stop came within max_new, or
    for the prompts of the batches not started within time_limit seconds (a
    device call's minutes are few: the rows made by then are enough)."""
    t0 = time.time()
    dev = next(model.parameters()).device
    im_end, eot = tok.token_to_id("<|im_end|>"), tok.token_to_id("<|endoftext|>")
    nl = tok.encode("\n").ids
    out: list[list[int] | None] = [None] * len(prompts)
    by_len: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        by_len.setdefault(len(p), []).append(i)
    was = model.training
    model.eval()
    for plen, idx in sorted(by_len.items()):
        for lo in range(0, len(idx), batch):
            if time_limit is not None and time.time() - t0 > time_limit:
                break
            sel = idx[lo:lo + batch]
            ids = torch.tensor([prompts[i] for i in sel], device=dev)
            dec = Decoder(model, len(sel))
            with torch.autocast(autocast[0], dtype=torch.bfloat16, enabled=autocast[1]):
                for t in range(plen):
                    logits = dec.step(ids[:, t])
                ans = []
                done = torch.zeros(len(sel), dtype=torch.bool, device=dev)
                for _ in range(max_new):
                    nxt = logits.float().argmax(-1)
                    ans.append(nxt)
                    done |= (nxt == im_end) | (nxt == eot)
                    if bool(done.all()):
                        break
                    logits = dec.step(nxt)
            A = torch.stack(ans, 1).tolist()
            for i, a in zip(sel, A):
                if im_end in a:
                    out[i] = a[:a.index(im_end) + 1] + nl
    model.train(was)
    return out


def pack_rows(prompts: list[list[int]], answers: list[list[int] | None], seq: int, block: int,
              pad: int):
    """The finished (prompt, answer) pairs as training rows: ids [M,seq] long,
    real [M,seq] bool (prompt and answer, not the pads), selfgen [M,seq] bool
    (the answer)."""
    segs = []
    for p, a in zip(prompts, answers):
        if a is None:
            continue
        p1 = 0
        while p1 < len(p) and p[p1] == pad:
            p1 += 1
        s = p + a + [pad] * ((-len(a)) % block)
        if len(s) <= seq:
            segs.append((s, p1, len(p), len(p) + len(a)))
    rows, cur = [], []
    at = 0
    for s, p1, pe, ae in segs:
        if at + len(s) > seq:
            rows.append(cur)
            cur, at = [], 0
        cur.append((at, s, p1, pe, ae))
        at += len(s)
    if cur:
        rows.append(cur)
    m = len(rows)
    ids = torch.full((m, seq), pad, dtype=torch.long)
    real = torch.zeros((m, seq), dtype=torch.bool)
    selfgen = torch.zeros((m, seq), dtype=torch.bool)
    for i, row in enumerate(rows):
        for at, s, p1, pe, ae in row:
            ids[i, at:at + len(s)] = torch.tensor(s)
            real[i, at + p1:at + ae] = True
            selfgen[i, at + pe:at + ae] = True
    return ids, real, selfgen
