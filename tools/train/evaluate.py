"""Tokens per pass and answer NLL on the held-out prompts, batched, with the
training model itself (fast enough to run during training on the device).

Block diffusion follows SPEC 3's rule: a block of B masks after the prompt;
each pass previews the block, forbids the mask id, takes each pending row's
greedy pick and its softmax probability as the confidence, fixes every row
above the threshold (the single most confident if none); a resolved block is
emitted up to and including the first stop. Tokens per pass = emitted / passes,
summed over prompts. The only difference from clover: the prompts of a batch
are left-padded with `<|endoftext|>` to a common block boundary (training's
layout), where clover starts a block right after an unpadded prompt; the final
figures are clover's own (tools/train/measure.py).

NLL: each answer's mean NLL per token (stop included) under the causal path,
the prompt unpadded, as clover's causal trunk scores it.
"""
from __future__ import annotations

import json
import os

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


def heldout(n: int | None = None, path: str | None = None) -> list[dict]:
    """The held-out prompts: issue 16's heldout_prompts.json, or a text file of
    one prompt a line (issue 26's heldout.txt; '#' lines are comments)."""
    path = path or os.path.join(HERE, "heldout_prompts.json")
    if path.endswith(".txt"):
        with open(path, encoding="utf-8") as f:
            ps = [{"prompt": ln.strip()} for ln in f if ln.strip() and not ln.startswith("#")]
        return ps[:n]
    with open(path) as f:
        return json.load(f)["prompts"][:n]


def chat_prompt(text: str) -> str:
    """clover's chat template with --no-think."""
    return (f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"
            "<think>\n\n</think>\n\n")


def _dev(model):
    return next(model.parameters()).device


def block_diffusion(model, prompts: list[list[int]], block: int, threshold: float,
                    max_tokens: int, mask_id: int, pad: int, stops: set[int]):
    """Returns (answers: list of token lists, passes per prompt)."""
    dev = _dev(model)
    n = len(prompts)
    width = -(-max(len(p) for p in prompts) // block) * block
    cur = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=dev)
    answers = [[] for _ in range(n)]
    passes = [0] * n
    active = torch.ones(n, dtype=torch.bool, device=dev)
    while active.any():
        rows = torch.full((n, block), mask_id, device=dev)
        fixed = ~active[:, None].expand(n, block).clone()
        while not fixed.all():
            x = torch.cat([cur, rows], 1)
            _, ln = model(x, x, block)
            lg = ln[:, -block:].float()
            lg[..., mask_id] = -float("inf")
            conf, pick = F.softmax(lg, -1).max(-1)
            pending = ~fixed
            fix = pending & (conf > threshold)
            none = pending.any(1) & ~fix.any(1)
            best = torch.where(pending, conf, torch.full_like(conf, -1.0)).argmax(1)
            fix[none, best[none]] = True
            for i in torch.nonzero(pending.any(1)).flatten().tolist():
                passes[i] += 1
            rows = torch.where(fix, pick, rows)
            fixed |= fix
        cur = torch.cat([cur, rows], 1)
        for i in torch.nonzero(active).flatten().tolist():
            for t in rows[i].tolist():
                if len(answers[i]) >= max_tokens:
                    break
                answers[i].append(t)
                if t in stops:
                    break
            if answers[i][-1] in stops or len(answers[i]) >= max_tokens:
                active[i] = False
    return answers, passes


def causal_greedy(model, prompts: list[list[int]], max_tokens: int, block: int, pad: int,
                  stops: set[int]):
    """Autoregressive greedy answers under the causal path (clover --ar)."""
    dev = _dev(model)
    seqs = [list(p) for p in prompts]
    answers = [[] for _ in prompts]
    live = list(range(len(prompts)))
    for _ in range(max_tokens):
        if not live:
            break
        width = -(-max(len(seqs[i]) for i in live) // block) * block
        x = torch.tensor([seqs[i] + [pad] * (width - len(seqs[i])) for i in live], device=dev)
        lc, _ = model(x, None, block)
        nxt = []
        for r, i in enumerate(live):
            t = int(lc[r, len(seqs[i]) - 1].float().argmax())
            seqs[i].append(t)
            answers[i].append(t)
            if t not in stops and len(answers[i]) < max_tokens:
                nxt.append(i)
        live = nxt
    return answers


def answer_nll(model, prompts: list[list[int]], answers: list[list[int]], block: int,
               pad: int) -> list[float]:
    """Mean NLL per answer token under the causal path, per prompt."""
    dev = _dev(model)
    full = [p + a for p, a in zip(prompts, answers)]
    width = -(-max(len(s) for s in full) // block) * block
    x = torch.tensor([s + [pad] * (width - len(s)) for s in full], device=dev)
    lc, _ = model(x, None, block)
    lp = F.log_softmax(lc.float(), -1)
    out = []
    for r, (p, a) in enumerate(zip(prompts, answers)):
        if not a:
            out.append(float("nan"))
            continue
        pos = torch.arange(len(p) - 1, len(p) - 1 + len(a), device=dev)
        tgt = torch.tensor(a, device=dev)
        out.append(float(-lp[r, pos, tgt].mean()))
    return out


def evaluate(model, tok, block: int, thresholds, nprompts: int, max_tokens: int,
             with_nll: bool = True, heldout_path: str | None = None) -> dict:
    mask_id = tok.token_to_id("<|mask|>")
    pad = tok.token_to_id("<|endoftext|>")
    stops = {tok.token_to_id("<|im_end|>"), pad}
    ps = heldout(nprompts, heldout_path)
    prompts = [tok.encode(chat_prompt(p["prompt"])).ids for p in ps]
    res = {}
    ar = ar_nll = None
    if with_nll:
        ar = causal_greedy(model, prompts, max_tokens, block, pad, stops)
        ar_nll = sum(answer_nll(model, prompts, ar, block, pad)) / len(prompts)
        res["ar"] = {"nll": round(ar_nll, 4), "samples": [tok.decode(a) for a in ar[:3]]}
    for th in thresholds:
        ans, passes = block_diffusion(model, prompts, block, th, max_tokens, mask_id, pad, stops)
        r = {"tokens_per_pass": round(sum(map(len, ans)) / max(sum(passes), 1), 3),
             "samples": [tok.decode(a) for a in ans[:3]]}
        if with_nll:
            nll = sum(answer_nll(model, prompts, ans, block, pad)) / len(prompts)
            r["nll"] = round(nll, 4)
            r["nll_ratio"] = round(nll / ar_nll, 3) if ar_nll else None
        res[str(th)] = r
    return res
