"""The block's expert coreset (SPEC 2.2, seed 000 `coreset`) and the
restricted routing of the preview's MoE.

Totals are float64 sums of float64 softmax probabilities computed from the
float32 router logits over ALL experts (the seed's arithmetic); rankings are
stable: ties go to the lower expert index.
"""
from __future__ import annotations

import numpy as np
import torch


def coreset_totals(router_logits: np.ndarray, top_k: int) -> np.ndarray:
    """router_logits: float32 [b][E]. Each row's top-k experts (by logit,
    ties: lower index first) add their softmax probability. float64 [E]."""
    b, ne = router_logits.shape
    k = min(top_k, ne)
    totals = np.zeros(ne, dtype=np.float64)
    for row in router_logits:
        r64 = row.astype(np.float64)
        e = np.exp(r64 - np.max(r64))
        probs = e / np.sum(e)
        order = np.lexsort((np.arange(ne), -r64))
        for j in order[:k]:
            totals[j] += probs[j]
    return totals


def coreset_from_totals(totals: np.ndarray, top_p: float) -> np.ndarray:
    """Experts by total descending (ties: lower index first), kept while the
    normalised mass BEFORE them is below top_p; the first always. bool [E]."""
    ne = totals.shape[0]
    total = max(float(np.sum(totals)), 1e-9)
    order = np.lexsort((np.arange(ne), -totals))
    allowed = np.zeros(ne, dtype=bool)
    tp = float(np.float32(top_p))
    before = 0.0
    for i, e in enumerate(order):
        if i == 0 or before < tp:
            allowed[e] = True
        before += totals[e] / total
    return allowed


def coreset_margin(totals: np.ndarray, top_p: float) -> float:
    """How far the decisive comparisons are from flipping: the smallest
    |mass before - top_p| over the ranking and the smallest gap between
    neighbouring totals (a fixture is only robust when both are not tiny)."""
    ne = totals.shape[0]
    total = max(float(np.sum(totals)), 1e-9)
    order = np.lexsort((np.arange(ne), -totals))
    tp = float(np.float32(top_p))
    m = float("inf")
    before = 0.0
    for i, e in enumerate(order):
        if i > 0:
            m = min(m, abs(before - tp))
            m = min(m, abs(totals[order[i - 1]] - totals[e]) / total if totals[e] > 0 else m)
        before += totals[e] / total
    return m


def route_restricted(router_logits: torch.Tensor, allowed: np.ndarray, top_k: int):
    """Each row's top-k among the allowed experts (all of them when fewer than
    k are allowed), ranked by logit with ties to the lower index; weights are
    the float32 softmax over ALL experts renormalised over the chosen ones, as
    the trunk's router does. Returns (index [b][k'], weight [b][k'])."""
    probs = torch.softmax(router_logits, dim=-1, dtype=torch.float32)
    logits = router_logits.detach().cpu().numpy().astype(np.float64)
    b, ne = logits.shape
    cand = np.nonzero(allowed)[0]
    k = min(top_k, len(cand))
    idx = np.zeros((b, k), dtype=np.int64)
    for r in range(b):
        order = np.lexsort((cand, -logits[r, cand]))
        idx[r] = cand[order[:k]]
    index = torch.from_numpy(idx).to(router_logits.device)
    w = torch.gather(probs, 1, index)
    w = w / w.sum(dim=-1, keepdim=True)
    return index, w.to(router_logits.dtype)


def routing_margin(router_logits: np.ndarray, top_k: int, allowed: np.ndarray | None = None) -> float:
    """Smallest softmax-probability gap between the k-th and (k+1)-th allowed
    expert of any row: a routing flip needs an error larger than this."""
    b, ne = router_logits.shape
    cand = np.arange(ne) if allowed is None else np.nonzero(allowed)[0]
    if len(cand) <= top_k:
        return float("inf")
    m = float("inf")
    for row in router_logits.astype(np.float64):
        e = np.exp(row - np.max(row))
        p = e / np.sum(e)
        s = np.sort(p[cand])[::-1]
        m = min(m, s[top_k - 1] - s[top_k])
    return m
