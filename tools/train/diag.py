"""Issue 26 diagnosis tools (PLAN.md, "Diagnosis at step 1257"): why block
diffusion answers diverge from the causal path's.

* `preview_at`: the preview of ONE block that starts right after an unpadded
  prefix, as clover computes it (SPEC 2: clean trunk over the prefix, the block
  operator over the block). model.forward needs blocks on multiples of B
  (training's layout); clover starts the first block right after the prompt, so
  this re-states the same arithmetic for one block at any offset. It is checked
  against model.forward on an aligned prefix (tests/test_diag.py).
* `trace`: SPEC 3's rule pass by pass (every pending row above the threshold,
  else the single most confident), recording every pending row's pick and
  confidence in every pass.
* `engine_masks`: the mask patterns the engine's rule produces, with the rows
  it fixes filled by the TRUE tokens (so correctness stays defined), for
  calibration under inference-like patterns.

    python3 tools/train/diag.py trace --ckpt .gpu-train/ckpt -p "What is the capital of France?"
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import ckpt as ckpt_io  # noqa: E402
from evaluate import chat_prompt  # noqa: E402
from model import CloverTrainModel, text_config  # noqa: E402


def load(ckpt: str, tok_dir: str = os.path.join(HERE, "tok"), geometry: str = "demo"):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))
    cfg = text_config(geometry, tok.get_vocab_size(), tok.token_to_id("<|endoftext|>"),
                      tok.token_to_id("<|im_end|>"))
    model = CloverTrainModel(cfg)
    step, _, _ = ckpt_io.load(model, ckpt)
    model.eval()
    return model, tok, step


@torch.no_grad()
def preview_at(model: CloverTrainModel, prefix: list[int], rows: list[int]) -> torch.Tensor:
    """Preview logits [B, V] of the block `rows` at positions len(prefix)...,
    over the clean prefix (any length >= 1)."""
    return preview_block(model, prefix_cache(model, prefix), rows)


@torch.no_grad()
def prefix_cache(model: CloverTrainModel, prefix: list[int]) -> dict:
    """What every preview of a block after `prefix` reads of the clean prefix,
    per layer (GDN: the conv ring and the state; attention: the keys and
    values), computed once: a block's passes all share it (SPEC 3 commits
    nothing to the prefix until the block is done)."""
    m = model.lm.model
    L = len(prefix)
    dev = next(model.parameters()).device
    hc = m.embed_tokens(torch.tensor([prefix], device=dev))
    pos = torch.arange(L, device=dev).view(1, 1, -1).expand(3, 1, -1)
    cos, sin = m.rotary_emb(hc, pos)
    layers = []
    for li, layer in enumerate(m.layers):
        xc = layer.input_layernorm(hc)
        if layer.block_type == "linear_attention":
            a, c = _gdn_prefix(layer.linear_attn, xc)
        else:
            a, c = _attn_prefix(layer.self_attn, xc, cos, sin)
        layers.append(c)
        hc = hc + a
        hc = hc + model.moe(layer.mlp, layer.post_attention_layernorm(hc))
    return {"L": L, "layers": layers}


@torch.no_grad()
def preview_block(model: CloverTrainModel, cache: dict, rows: list[int]) -> torch.Tensor:
    """Preview logits [B, V] of the block `rows` right after the prefix that
    `cache` (prefix_cache) holds."""
    m = model.lm.model
    L, B = cache["L"], len(rows)
    dev = next(model.parameters()).device
    hn = m.embed_tokens(torch.tensor([rows], device=dev))
    pos = torch.arange(L, L + B, device=dev).view(1, 1, -1).expand(3, 1, -1)
    cos, sin = m.rotary_emb(hn, pos)
    for li, layer in enumerate(m.layers):
        xn = layer.input_layernorm(hn)
        c = cache["layers"][li]
        if layer.block_type == "linear_attention":
            b = _gdn_block(model, li, layer.linear_attn, c, xn)
        else:
            b = _attn_block(layer.self_attn, c, xn, cos, sin)
        hn = hn + b
        hn = hn + model.moe(layer.mlp, layer.post_attention_layernorm(hn))
    return model.lm.lm_head(m.norm(hn))[0]


def _gdn_qkv(mod, y, t):
    from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import l2norm
    nk, nv, dk, dv = mod.num_k_heads, mod.num_v_heads, mod.head_k_dim, mod.head_v_dim
    rep = nv // nk
    q, k, v = torch.split(y, [nk * dk, nk * dk, nv * dv], dim=-1)
    q = l2norm(q.reshape(1, t, nk, dk), dim=-1, eps=1e-6).repeat_interleave(rep, 2)
    k = l2norm(k.reshape(1, t, nk, dk), dim=-1, eps=1e-6).repeat_interleave(rep, 2)
    return q, k, v.reshape(1, t, nv, dv)


def _gdn_out(mod, o, x, t):
    dv = mod.head_v_dim
    z = mod.in_proj_z(x).reshape(-1, dv)
    return mod.out_proj(mod.norm(o.reshape(-1, dv), z).reshape(1, t, mod.num_v_heads * dv))


def _gdn_prefix(mod, xc):
    L = xc.shape[1]
    dk, kk = mod.head_k_dim, mod.conv_kernel_size
    w = mod.conv1d.weight[:, 0, :]
    Xc = mod.in_proj_qkv(xc)
    C = Xc.shape[-1]
    Xcp = torch.cat([Xc.new_zeros(1, kk - 1, C), Xc], 1)
    yc = F.silu(sum(w[:, j] * Xcp[:, j:j + L] for j in range(kk)))
    ring = Xcp[:, L:L + kk - 1]                                   # the last K-1 prefix rows
    q, k, v = _gdn_qkv(mod, yc, L)
    beta = mod.in_proj_b(xc).sigmoid()
    g = -mod.A_log.float().exp() * F.softplus(mod.in_proj_a(xc).float() + mod.dt_bias)
    # chunk 1 over the prefix plus one dummy row: the state after the prefix is
    # the state at the start of that row
    pad = lambda x: torch.cat([x, x[:, -1:]], 1)  # noqa: E731
    oc, states = CloverTrainModel.chunk_delta(pad(q) * dk ** -0.5, pad(k), pad(v), pad(beta),
                                              pad(g), 1)
    oc, s = oc[:, :L], states[:, L]                               # [1,h,dk,dv]
    return _gdn_out(mod, oc, xc, L), {"ring": ring, "s": s}


def _gdn_block(model, li, mod, c, xn):
    B = xn.shape[1]
    dk, kk = mod.head_k_dim, mod.conv_kernel_size
    w = mod.conv1d.weight[:, 0, :]
    Xb = mod.in_proj_qkv(xn)
    C = Xb.shape[-1]
    e = torch.cat([c["ring"], Xb], 1)
    xpad = torch.cat([Xb, Xb.new_zeros(1, kk - 1, C)], 1)
    wr = model.conv_right[str(li)]
    yb = F.silu(sum(w[:, j] * e[:, j:j + B] for j in range(kk)) +
                sum(wr[:, j - 1] * xpad[:, j:j + B] for j in range(1, kk)))
    q, k, v = _gdn_qkv(mod, yb, B)
    gn = -mod.A_log.float().exp() * F.softplus(mod.in_proj_a(xn).float() + mod.dt_bias)
    qb, kb, vb = (x.transpose(1, 2) for x in (q, k, v))            # [1,h,B,d]
    gb = gn.transpose(1, 2)                                        # [1,h,B]
    ls = model.logit_scale[str(li)][:, None, None]
    s_block = ls * (qb @ kb.transpose(-1, -2))
    s_hist = model.history_bias[str(li)][:, None] + model.history_c[str(li)][:, None] * gb
    p = torch.softmax(torch.cat([s_block, s_hist[..., None]], -1).float(), -1)
    u = (qb * dk ** -0.5) @ c["s"]
    on = (p[..., :B] @ vb + p[..., B:] * u).transpose(1, 2)
    return _gdn_out(mod, on, xn, B)


def _attn_proj(mod, x, c, s):
    from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import apply_rotary_pos_emb
    t = x.shape[1]
    shp = (1, t, -1, mod.head_dim)
    q, gate = torch.chunk(mod.q_proj(x).view(1, t, -1, mod.head_dim * 2), 2, dim=-1)
    q = mod.q_norm(q.reshape(shp)).transpose(1, 2)
    k = mod.k_norm(mod.k_proj(x).view(shp)).transpose(1, 2)
    v = mod.v_proj(x).view(shp).transpose(1, 2)
    q, k = apply_rotary_pos_emb(q, k, c, s)
    return q, k, v, gate.reshape(1, t, -1)


def _attn_out(mod, o, g, t):
    return mod.o_proj(o.transpose(1, 2).reshape(1, t, -1) * torch.sigmoid(g))


def _attn_prefix(mod, xc, cos, sin):
    qc, kc, vc, gc = _attn_proj(mod, xc, cos, sin)
    rep = qc.shape[1] // kc.shape[1]
    kc, vc = kc.repeat_interleave(rep, 1), vc.repeat_interleave(rep, 1)
    oc = F.scaled_dot_product_attention(qc, kc, vc, is_causal=True, scale=mod.scaling)
    return _attn_out(mod, oc, gc, xc.shape[1]), {"k": kc, "v": vc}


def _attn_block(mod, c, xn, cos, sin):
    qn, kn, vn, gn = _attn_proj(mod, xn, cos, sin)
    rep = qn.shape[1] // kn.shape[1]
    kn, vn = kn.repeat_interleave(rep, 1), vn.repeat_interleave(rep, 1)
    on = F.scaled_dot_product_attention(qn, torch.cat([c["k"], kn], 2), torch.cat([c["v"], vn], 2),
                                        scale=mod.scaling)
    return _attn_out(mod, on, gn, xn.shape[1])


def pick(logits: torch.Tensor, mask_id: int):
    """SPEC 3: the mask id forbidden, greedy pick (first maximum), its softmax
    probability as the confidence. Returns (conf [B], pick [B], probs [B,V])."""
    lg = logits.float().clone()
    lg[..., mask_id] = -float("inf")
    p = F.softmax(lg, -1)
    conf, ids = p.max(-1)
    return conf, ids, p


def threshold_fixes(fixed: list[bool], above: list[bool],
                    max_distance: int | None = None) -> list[int]:
    """The rows one pass fixes by the threshold (above[r]: row r's confidence is above
    it): every pending row above it
    (SPEC 3), or, with max_distance K (PLAN.md item 1's experiment, not SPEC),
    only those at most K rows right of the nearest row to their left that is
    fixed or that this pass fixes (the committed prefix counts as row -1).
    The chain is read left to right, so K = 1 fixes runs of confident rows
    that grow out of fixed text and never leaves a gap; K >= the block size is
    SPEC 3. The fallback (no row fixed here) is the caller's, unchanged."""
    out, last = [], -1
    for r, f in enumerate(fixed):
        if f:
            last = r
        elif above[r] and (max_distance is None or r - last <= max_distance):
            out.append(r)
            last = r
    return out


def window_rows(fixed: list[bool], max_distance: int) -> list[int]:
    """Pending rows at most max_distance right of a fixed row (or the prefix,
    row -1): never empty while a row is pending (the first pending row is
    adjacent to one)."""
    out, last = [], -1
    for r, f in enumerate(fixed):
        if f:
            last = r
        elif r - last <= max_distance:
            out.append(r)
    return out


@torch.no_grad()
def trace(model, tok, prompt_ids: list[int], threshold: float, max_tokens: int = 96,
          block: int = 32, topk: int = 3, fallback: str = "best",
          max_distance: int | None = None, window_fallback: bool = False) -> dict:
    """SPEC 3's loop with every pass recorded: for each block, per pass the
    pending rows' (row, pick, conf, top-k) and the rows fixed. fallback "best"
    is SPEC 3 (no row above the threshold: the most confident pending row);
    "leftmost" (an experiment, not the engine) fixes the first pending row
    instead, as --ar would; "causal" (an experiment, not the engine) fixes the
    first pending row with the causal path's greedy token there (one AR step,
    counted in causal_steps). max_distance K (an experiment, not SPEC; None or
    >= block: SPEC 3): see threshold_fixes; the fallback stays SPEC's (any
    pending row, so a far row above the threshold can still be fixed by it, one
    a pass) unless window_fallback, which limits it to the rows within K of a
    fixed row (window_rows)."""
    mask_id = tok.token_to_id("<|mask|>")
    stops = {tok.token_to_id("<|im_end|>"), tok.token_to_id("<|endoftext|>")}
    prefix, answer, blocks = list(prompt_ids), [], []
    n_causal = 0
    while True:
        rows = [mask_id] * block
        fixed = [False] * block
        passes, fixed_in = [], [None] * block
        cache = prefix_cache(model, prefix)
        while not all(fixed):
            conf, ids, p = pick(preview_block(model, cache, rows), mask_id)
            pend = [r for r in range(block) if not fixed[r]]
            fix = threshold_fixes(fixed, (conf > threshold).tolist(), max_distance)
            by_fallback = not fix
            causal = {}
            if by_fallback:
                cand = pend
                if window_fallback and max_distance is not None:
                    cand = window_rows(fixed, max_distance)
                fix = [cand[0]] if fallback in ("leftmost", "causal") else \
                    [max(cand, key=lambda r: (float(conf[r]), -r))]
                if fallback == "causal":
                    # the leftmost pending row has every row before it fixed: the
                    # causal path's greedy pick there is one AR step (not SPEC)
                    lg = causal_logits(model, prefix + rows[:fix[0]])[-1].float()
                    lg[mask_id] = -float("inf")
                    causal[fix[0]] = int(lg.argmax())
                    n_causal += 1
            tk = p.topk(topk, -1)
            passes.append({"pending": [{"row": r, "pick": int(ids[r]), "conf": round(float(conf[r]), 4),
                                        "top": [[int(i), round(float(v), 4)] for v, i in
                                                zip(tk.values[r], tk.indices[r])]} for r in pend],
                           "fixed": fix, "by_fallback": by_fallback,
                           **({"causal_pick": causal} if causal else {})})
            for r in fix:
                rows[r], fixed[r], fixed_in[r] = causal.get(r, int(ids[r])), True, len(passes)
        blocks.append({"start": len(prefix), "rows": rows, "fixed_in": fixed_in, "passes": passes})
        stop = False
        for t in rows:
            if len(answer) >= max_tokens:
                stop = True
                break
            answer.append(t)
            if t in stops:
                stop = True
                break
        if stop or len(answer) >= max_tokens:
            break
        prefix += rows
    return {"answer": answer, "blocks": blocks, "passes": sum(len(b["passes"]) for b in blocks),
            "causal_steps": n_causal}


def show_trace(tok, tr: dict, out=sys.stdout) -> None:
    """Per block: each row's token, the pass it was fixed in and its confidence then."""
    for bi, b in enumerate(tr["blocks"]):
        print(f"block {bi} at {b['start']}: {len(b['passes'])} passes", file=out)
        conf_at = {}
        for pi, ps in enumerate(b["passes"], 1):
            for e in ps["pending"]:
                if e["row"] in ps["fixed"]:
                    conf_at[e["row"]] = e["conf"]
        for pi, ps in enumerate(b["passes"], 1):
            fx = ", ".join(f"r{r}={tok.decode([b['rows'][r]])!r}@{conf_at[r]:.3f}" for r in ps["fixed"])
            best_rest = sorted((e for e in ps["pending"] if e["row"] not in ps["fixed"]),
                               key=lambda e: -e["conf"])[:3]
            rest = ", ".join(f"r{e['row']}:{tok.decode([e['pick']])!r}@{e['conf']:.3f}" for e in best_rest)
            print(f"  pass {pi:2d}: fixed {fx}   | next best {rest}", file=out)


# ---- mask patterns for calibration ----

def engine_masks(model, ids: torch.Tensor, block: int, threshold: float, mask_id: int,
                 max_passes: int | None = None, init: torch.Tensor | None = None):
    """The patterns SPEC 3's rule makes on aligned rows `ids` [N,T] when every
    fixed row gets its TRUE token (so a pass's picks can be scored). All blocks
    of a row are denoised at once (each over its clean prefix, as training's
    preview is). Yields (pass, noisy [N,T], masked [N,T], logits [N,T,V])."""
    n, t = ids.shape
    masked = torch.ones(n, t, dtype=torch.bool) if init is None else init.clone()
    k = 0
    while masked.any() and (max_passes is None or k < max_passes):
        noisy = torch.where(masked, torch.full_like(ids, mask_id), ids)
        _, ln = model(ids, noisy, block)
        k += 1
        yield k, noisy, masked.clone(), ln
        conf, _, _ = pick(ln, mask_id)
        conf = torch.where(masked, conf, torch.full_like(conf, -1.0)).view(n, t // block, block)
        fix = conf > threshold
        best = conf.argmax(-1, keepdim=True)
        none = (conf > -1).any(-1, keepdim=True) & ~fix.any(-1, keepdim=True)
        fix |= torch.zeros_like(fix).scatter(-1, best, True) & none
        masked &= ~fix.view(n, t)


def dist_from_fixed(masked: torch.Tensor, block: int) -> torch.Tensor:
    """For each row: rows since the last fixed row to its left within its block
    (the clean prefix counts as fixed at row -1): 1 = adjacent."""
    n, t = masked.shape
    mb = masked.view(n, t // block, block)
    idx = torch.arange(block).expand_as(mb)
    last = torch.where(~mb, idx, torch.full_like(idx, -1)).cummax(-1).values
    return (idx - last).view(n, t)


@torch.no_grad()
def causal_logits(model, ids: list[int], block: int = 32) -> torch.Tensor:
    """Causal-path logits [len(ids), V] (right-padded to a block multiple)."""
    t = -(-len(ids) // block) * block
    x = torch.tensor([ids + [ids[-1]] * (t - len(ids))])
    lc, _ = model(x, None, block)
    return lc[0, :len(ids)]


@torch.no_grad()
def ar_answer(model, tok, prompt_ids: list[int], max_tokens: int = 96) -> list[int]:
    stops = {tok.token_to_id("<|im_end|>"), tok.token_to_id("<|endoftext|>")}
    seq, out = list(prompt_ids), []
    while len(out) < max_tokens:
        t = int(causal_logits(model, seq)[-1].argmax())
        seq.append(t)
        out.append(t)
        if t in stops:
            break
    return out


def token_nll(model, prompt_ids: list[int], answer: list[int], top: bool = False):
    """Each answer token's NLL under the causal path given the prompt and the
    answer before it (what `clover ppl` and eval.py sum); top: also the causal
    path's own greedy pick there and its probability."""
    lp = F.log_softmax(causal_logits(model, prompt_ids + answer).float(), -1)
    L = len(prompt_ids)
    nll = [float(-lp[L - 1 + i, t]) for i, t in enumerate(answer)]
    if not top:
        return nll
    mx = lp[L - 1:L - 1 + len(answer)].max(-1)
    return nll, mx.indices.tolist(), mx.values.exp().tolist()


def fix_events(tr: dict, threshold: float) -> list[dict]:
    """One record per emitted row: the pass it was fixed in, its confidence then,
    whether the rule's fallback fixed it (no row above the threshold), rows since
    the last fixed row to its left at that moment (1: adjacent; the prefix counts
    as fixed), rows to the first fixed row on its right (0: none), how many rows
    the same pass fixed."""
    ev = []
    for b in tr["blocks"]:
        fixed = set()
        for pi, ps in enumerate(b["passes"], 1):
            confs = {e["row"]: e for e in ps["pending"]}
            for r in ps["fixed"]:
                left = max([x for x in fixed if x < r], default=-1)
                right = min([x for x in fixed if x > r], default=r)
                ev.append({"block_start": b["start"], "row": r, "pass": pi, "conf": confs[r]["conf"],
                           "fallback": ps.get("by_fallback", confs[r]["conf"] <= threshold),
                           "dist": r - left,
                           "right": right - r, "top2": confs[r]["top"][1],
                           "n_fixed": len(ps["fixed"]), "tok": b["rows"][r]})
            fixed |= set(ps["fixed"])
    ev.sort(key=lambda e: (e["block_start"], e["row"]))
    return ev[:len(tr["answer"])]


def stutters(tok, ans: list[int], ar: list[int], ev: list[dict]) -> list[dict]:
    """A word token repeated 1 or 2 rows later where the AR answer never has the
    same span: which twin was fixed first, in which pass, and how."""
    out, ar_s = [], ",".join(map(str, ar))
    for j in range(len(ans)):
        for i in (j - 1, j - 2):
            if i < 0 or ans[i] != ans[j] or not tok.decode([ans[j]]).strip().isalpha():
                continue
            span = ",".join(map(str, ans[i:j + 1]))
            if span in ar_s:
                continue
            a, b = ev[i], ev[j]
            same_block = a["block_start"] == b["block_start"]
            first, second = (a, b) if (a["block_start"], a["pass"]) <= (b["block_start"], b["pass"]) else (b, a)
            out.append({"word": tok.decode([ans[j]]), "gap": j - i,
                        "same_pass": same_block and a["pass"] == b["pass"],
                        "second": {k: second[k] for k in ("row", "pass", "conf", "fallback", "dist")},
                        "first": {k: first[k] for k in ("row", "pass", "conf", "fallback", "dist")}})
    return out


def traces_cmd(a, model, tok, step) -> None:
    from evaluate import heldout
    if a.source == "gen":     # generated exchanges (training's distribution, unseen seed)
        import random
        from gen import Gen, load_corpus
        g, r = Gen(load_corpus(a.pack)), random.Random(a.seed)
        prompts = [g.sample(r, 0.0)[0] for _ in range(a.limit or 20)]
        render = lambda p: p  # noqa: E731
    else:
        prompts = [p["prompt"] for p in heldout(None, os.path.join(HERE, "heldout.txt"))][:a.limit]
        render = chat_prompt
    res = {"step": step, "source": a.source, "thresholds": a.thresholds, "fallback": a.fallback,
           "max_distance": a.max_distance, "window_fallback": a.window_fallback, "prompts": []}
    # --ar-from: the AR answers and their NLL from an earlier traces file of the
    # same checkpoint (they do not depend on the rule; saves their cost)
    ar_prev = {}
    if a.ar_from:
        with open(a.ar_from) as f:
            prev = json.load(f)
        if prev["step"] != step:
            raise SystemExit(f"diag: --ar-from {a.ar_from} is step {prev['step']}, the checkpoint {step}")
        ar_prev = {r["prompt"]: r for r in prev["prompts"]}
    for p in prompts:
        ids = tok.encode(render(p)).ids
        if p in ar_prev:
            rec = {"prompt": p, "ar": ar_prev[p]["ar"], "ar_nll": ar_prev[p]["ar_nll"], "runs": {}}
        else:
            ar = ar_answer(model, tok, ids, a.max_tokens)
            rec = {"prompt": p, "ar": ar, "ar_nll": token_nll(model, ids, ar), "runs": {}}
        ar = rec["ar"]
        for th in a.thresholds:
            tr = trace(model, tok, ids, th, a.max_tokens, fallback=a.fallback,
                       max_distance=a.max_distance, window_fallback=a.window_fallback)
            ev = fix_events(tr, th)
            for e, v, ct, cp in zip(ev, *token_nll(model, ids, tr["answer"], top=True)):
                e["nll"], e["causal_top"], e["causal_p"] = round(v, 4), ct, round(cp, 4)
            rec["runs"][str(th)] = {"answer": tr["answer"], "passes": tr["passes"],
                                    "causal_steps": tr["causal_steps"], "events": ev,
                                    "stutters": stutters(tok, tr["answer"], ar, ev)}
            print(f"{th}: {p!r} -> {tok.decode(tr['answer'])[:100]!r} {tr['passes']} passes", flush=True)
        res["prompts"].append(rec)
    with open(a.json, "w") as f:
        json.dump(res, f)


# ---- calibration ----

BINS = [0.0, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0001]
DIST_BINS = [(1, 1), (2, 2), (3, 3), (4, 7), (8, 15), (16, 32)]


def layout(prompt: list[int], comp: list[int], block: int, pad: int):
    """data.py's layout for one exchange: [pad*P1] prompt | completion [pad*P2]
    (the completion on a block boundary); returns (ids, first completion row,
    completion length)."""
    p1, p2 = (-len(prompt)) % block, (-len(comp)) % block
    return [pad] * p1 + prompt + comp + [pad] * p2, p1 + len(prompt), len(comp)


def batch_rows(rows, pad: int, block: int):
    """rows: (ids, comp_start, comp_len) -> (ids [N,T], comp [N,T]: the completion
    blocks (masked at inference, the end pads included), real [N,T]: the
    completion's own tokens (the stop and its newline included; what is scored))."""
    t = max(len(r) for r, _, _ in rows)
    ids = torch.full((len(rows), t), pad)
    comp = torch.zeros(len(rows), t, dtype=torch.bool)
    real = torch.zeros(len(rows), t, dtype=torch.bool)
    for i, (r, c0, n) in enumerate(rows):
        ids[i, :len(r)] = torch.tensor(r)
        comp[i, c0:len(r)] = True
        real[i, c0:c0 + n] = True
    return ids, comp, real


def patterns(ids, comp, block: int, mask_id: int, gen: torch.Generator):
    """Mask patterns over the completion blocks (every other row clean; each
    block is previewed over its clean prefix, so the blocks are independent):
    all (inference's first pass), prefix (rows < j clean, j ~ U{0..B-1}: a
    left-to-right decode), train (training's mask_batch: U(0.05, 1), a quarter
    fully masked)."""
    from train import mask_batch
    n, t = ids.shape
    out = {"all": comp.clone()}
    j = torch.randint(0, block, (n, t // block, 1), generator=gen)
    pre = (torch.arange(block).view(1, 1, -1) >= j).view(n, t)
    out["prefix"] = pre & comp
    _, m = mask_batch(ids, block, 1.0, mask_id, gen, 0.25, 0.05)
    out["train"] = m & comp
    return out


class Tally:
    """Reliability of the max probability: per (pattern, distance bin,
    right-context, confidence bin): count, confidences summed, correct summed,
    NLL of the target summed."""

    def __init__(self):
        self.t = {}

    def add(self, name, conf, correct, nll, dist, right):
        for (lo, hi) in DIST_BINS:
            dm = (dist >= lo) & (dist <= hi)
            for rc in (False, True):
                m0 = dm & (right == rc)
                for bi in range(len(BINS) - 1):
                    m = m0 & (conf >= BINS[bi]) & (conf < BINS[bi + 1])
                    c = int(m.sum())
                    if not c:
                        continue
                    key = (name, f"{lo}-{hi}", rc, bi)
                    a = self.t.setdefault(key, [0, 0.0, 0.0, 0.0])
                    a[0] += c
                    a[1] += float(conf[m].sum())
                    a[2] += float(correct[m].sum())
                    a[3] += float(nll[m].sum())

    def rows(self):
        return [{"pattern": k[0], "dist": k[1], "right_fixed": k[2], "bin": [BINS[k[3]], min(BINS[k[3] + 1], 1.0)],
                 "n": v[0], "conf": v[1], "correct": v[2], "nll": v[3]} for k, v in sorted(self.t.items())]


def right_fixed(masked: torch.Tensor, block: int) -> torch.Tensor:
    """Rows with a fixed (unmasked) row to their right within their block."""
    n, t = masked.shape
    mb = (~masked).view(n, t // block, block).flip(-1).int().cumsum(-1).flip(-1)
    after = torch.cat([mb[..., 1:], torch.zeros_like(mb[..., :1])], -1)
    return (after > 0).view(n, t)


@torch.no_grad()
def score(model, ids, noisy, masked, block: int, mask_id: int):
    _, ln = model(ids, noisy, block)
    conf, pk, p = pick(ln, mask_id)
    nll = -torch.log(p.gather(-1, ids[..., None])[..., 0].clamp_min(1e-30))
    return ln, conf, pk == ids, nll


def exchange_rows(a, tok, block: int, pad: int, what: str) -> list:
    """The laid-out (prompt, answer) rows calib and agree score: generated
    exchanges from an unseen seed (training's is 26: stream.py), or the held-out
    prompts with the causal path's greedy answers (--ar-from, a traces JSON)."""
    rows = []
    if a.source == "gen":
        import random
        from gen import Gen, load_corpus
        g, r = Gen(load_corpus(a.pack)), random.Random(a.seed)
        for _ in range(a.n):
            p, c = g.sample(r, 0.0)
            rows.append(layout(tok.encode(p).ids, tok.encode(c).ids, block, pad))
        return rows
    if not a.ar_from:
        raise SystemExit(f"diag: {what} needs --ar-from TRACES.json (or --source gen)")
    with open(a.ar_from) as f:
        for rec in json.load(f)["prompts"]:
            rows.append(layout(tok.encode(chat_prompt(rec["prompt"])).ids, rec["ar"], block, pad))
    return rows


@torch.no_grad()
def tally_causal(model, ids, real, block: int, tally) -> None:
    """The causal path's next-token prediction of every completion row (the
    preview at distance 1 with nothing fixed to its right has the same context),
    tallied as "causal" at distance 1."""
    lc, _ = model(ids, None, block)
    pc = F.softmax(lc[:, :-1].float(), -1)
    cconf, cpk = pc.max(-1)
    cnll = -torch.log(pc.gather(-1, ids[:, 1:, None])[..., 0].clamp_min(1e-30))
    cm = real[:, 1:]
    one = torch.ones_like(cconf[cm], dtype=torch.long)
    tally.add("causal", cconf[cm], (cpk == ids[:, 1:])[cm].float(), cnll[cm], one, one == 0)


@torch.no_grad()
def calib_cmd(a, model, tok, step) -> None:
    block, mask_id, pad = 32, tok.token_to_id("<|mask|>"), tok.token_to_id("<|endoftext|>")
    rows = exchange_rows(a, tok, block, pad, "calib --source heldout-ar")
    tally, gen = Tally(), torch.Generator().manual_seed(a.seed)
    for b0 in range(0, len(rows), a.batch):
        ids, comp, real = batch_rows(rows[b0:b0 + a.batch], pad, block)
        tally_causal(model, ids, real, block, tally)
        for name, masked in patterns(ids, comp, block, mask_id, gen).items():
            noisy = torch.where(masked, torch.full_like(ids, mask_id), ids)
            _, conf, ok, nll = score(model, ids, noisy, masked, block, mask_id)
            sc = masked & real
            tally.add(name, conf[sc], ok[sc].float(), nll[sc],
                      dist_from_fixed(masked, block)[sc], right_fixed(masked, block)[sc])
        for th in a.thresholds:
            for k, noisy, masked, ln in engine_masks(model, ids, block, th, mask_id, init=comp):
                conf, pk, p = pick(ln, mask_id)
                nll = -torch.log(p.gather(-1, ids[..., None])[..., 0].clamp_min(1e-30))
                sc = masked & real
                tally.add(f"engine{th}", conf[sc], (pk == ids)[sc].float(), nll[sc],
                          dist_from_fixed(masked, block)[sc], right_fixed(masked, block)[sc])
        print(f"calib: {min(b0 + a.batch, len(rows))}/{len(rows)} exchanges", flush=True)
    with open(a.json, "w") as f:
        json.dump({"step": step, "source": a.source, "seed": a.seed, "n": len(rows),
                   "bins": BINS, "tally": tally.rows()}, f)


@torch.no_grad()
def agree_cmd(a, model, tok, step) -> None:
    """Every left-to-right state of every answer block: rows < j fixed to the
    target, rows >= j masked (j = 0..B-1), on the held-out prompts with the
    causal path's greedy answers as targets (--ar-from, a traces JSON) or on
    generated exchanges. Row j then has exactly the causal path's context, so
    its preview pick should equal the causal pick; rows past it show how far
    the preview reaches. Tallied by rows since the last fixed row."""
    block, mask_id, pad = 32, tok.token_to_id("<|mask|>"), tok.token_to_id("<|endoftext|>")
    rows = exchange_rows(a, tok, block, pad, "agree")
    tally = Tally()
    for b0 in range(0, len(rows), a.batch):
        ids, comp, real = batch_rows(rows[b0:b0 + a.batch], pad, block)
        n, t = ids.shape
        tally_causal(model, ids, real, block, tally)
        col = torch.arange(t) % block
        for j in range(block):
            masked = comp & (col >= j)[None]
            noisy = torch.where(masked, torch.full_like(ids, mask_id), ids)
            _, conf, ok, nll = score(model, ids, noisy, masked, block, mask_id)
            sc = masked & real
            tally.add("left-to-right", conf[sc], ok[sc].float(), nll[sc],
                      dist_from_fixed(masked, block)[sc], right_fixed(masked, block)[sc])
        print(f"agree: {min(b0 + a.batch, len(rows))}/{len(rows)}", flush=True)
    with open(a.json, "w") as f:
        json.dump({"step": step, "source": a.source, "n": len(rows), "bins": BINS,
                   "tally": tally.rows()}, f)


@torch.no_grad()
def engine_cmd(a, model, tok, step) -> None:
    """What train.py's engine masks (--engine-mask-p) put the preview loss on,
    and how the checkpoint does there: generated exchanges (an unseen seed) or
    the held-out prompts with --ar-from's answers, every block masked by
    train.engine_masks (SPEC 3 at --threshold, stopped after s ~ U{1..
    --engine-passes} passes, fixed rows true), the answer rows still masked
    tallied as "engine" (by distance and right context: right_fixed = a gap),
    beside training's random masks ("train") on the same rows. The figure a
    training call with engine masks should move: accuracy and NLL of the
    engine rows with a fixed row to their right (diag_report.py calib)."""
    from train import engine_masks, mask_batch
    block, mask_id, pad = 32, tok.token_to_id("<|mask|>"), tok.token_to_id("<|endoftext|>")
    rows = exchange_rows(a, tok, block, pad, "engine")
    tally, gen = Tally(), torch.Generator().manual_seed(a.seed)
    share = [0, 0, 0]
    for b0 in range(0, len(rows), a.batch):
        ids, comp, real = batch_rows(rows[b0:b0 + a.batch], pad, block)
        _, em, _, _ = engine_masks(model, ids, block, mask_id, gen, threshold=a.threshold,
                                   max_pass=a.engine_passes)
        _, tm = mask_batch(ids, block, 1.0, mask_id, gen, 0.25, 0.05)
        for name, masked in (("engine", em), ("train", tm)):
            noisy = torch.where(masked, torch.full_like(ids, mask_id), ids)
            _, conf, ok, nll = score(model, ids, noisy, masked, block, mask_id)
            sc = masked & real
            tally.add(name, conf[sc], ok[sc].float(), nll[sc],
                      dist_from_fixed(masked, block)[sc], right_fixed(masked, block)[sc])
        share[0] += int(real.sum())
        share[1] += int((em & real).sum())
        share[2] += int((em & real & right_fixed(em, block)).sum())
        print(f"engine: {min(b0 + a.batch, len(rows))}/{len(rows)}", flush=True)
    print(f"engine masks: {share[1] / share[0]:.0%} of the answer rows masked, "
          f"{share[2] / max(share[1], 1):.0%} of those with a fixed row to their right")
    with open(a.json, "w") as f:
        json.dump({"step": step, "source": a.source, "seed": a.seed, "n": len(rows), "bins": BINS,
                   "threshold": a.threshold, "engine_passes": a.engine_passes,
                   "masked_share": share[1] / share[0], "gap_share": share[2] / max(share[1], 1),
                   "tally": tally.rows()}, f)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["trace", "traces", "calib", "agree", "engine"])
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("-p", "--prompt", action="append")
    ap.add_argument("--threshold", type=float, default=0.9)
    ap.add_argument("--thresholds", type=float, nargs="+", default=[0.9, 0.99])
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--fallback", choices=["best", "leftmost", "causal"], default="best",
                    help="traces: SPEC 3's fallback, or (experiments) the first pending row with "
                         "the preview's pick (leftmost) or the causal path's (causal: an AR step)")
    ap.add_argument("--max-distance", type=int, default=None,
                    help="traces/trace (experiment, not SPEC): the threshold fixes only rows within "
                         "K rows of a fixed row to their left (threshold_fixes); default: SPEC 3")
    ap.add_argument("--window-fallback", action="store_true",
                    help="with --max-distance: the fallback too picks only among rows within K")
    ap.add_argument("--source", choices=["gen", "heldout", "heldout-ar"], default="heldout",
                    help="traces: heldout.txt or generated prompts; calib: gen or heldout-ar")
    ap.add_argument("--pack", default=os.path.join(HERE, "..", "..", ".gpu-train", "corpus"))
    ap.add_argument("--ar-from", default=None,
                    help="calib heldout-ar, agree: a diag traces JSON; traces: reuse its AR answers")
    ap.add_argument("--seed", type=int, default=1257_000, help="calib: not training's 26")
    ap.add_argument("--n", type=int, default=128, help="calib gen: exchanges")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--engine-passes", type=int, default=8, help="engine: train.py's --engine-passes")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("DIAG_THREADS", "2")))
    model, tok, step = load(a.ckpt)
    if a.what == "traces":
        return traces_cmd(a, model, tok, step)
    if a.what == "calib":
        return calib_cmd(a, model, tok, step)
    if a.what == "agree":
        return agree_cmd(a, model, tok, step)
    if a.what == "engine":
        return engine_cmd(a, model, tok, step)
    res = []
    for p in a.prompt:
        ids = tok.encode(chat_prompt(p)).ids
        tr = trace(model, tok, ids, a.threshold, a.max_tokens, fallback=a.fallback,
                   max_distance=a.max_distance, window_fallback=a.window_fallback)
        print(f"== step {step}, th {a.threshold}: {p!r} -> {tok.decode(tr['answer'])!r} "
              f"({len(tr['answer'])} tokens, {tr['passes']} passes)")
        show_trace(tok, tr)
        res.append({"prompt": p, "threshold": a.threshold, **tr})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f)


if __name__ == "__main__":
    main()
