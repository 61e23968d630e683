"""The token choice of SPEC 3.2: greedy, or temperature / top-k / top-p with
the contract's SplitMix64 stream.

The arithmetic is spelled out step by step (float32 where the engine holds
float32 values, float64 for sums and probabilities, as seed 000's
`clover_pick` / `greedy_pick` do) so that a C implementation that follows the
same steps draws the same tokens; README.md (DECISIONS) lists each choice.
"""
from __future__ import annotations

import numpy as np

MASK64 = (1 << 64) - 1


class SplitMix64:
    """SplitMix64 (Steele, Lea, Flood 2014) with the published constants."""

    def __init__(self, seed: int):
        self.s = seed & MASK64

    def next(self) -> int:
        self.s = (self.s + 0x9E3779B97F4A7C15) & MASK64
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def uniform(self) -> float:
        """One draw of the contract: u = (next() >> 40) * 2^-24, in [0, 1)."""
        return float(self.next() >> 40) * (1.0 / 16777216.0)


def softmax_prob(row: np.ndarray, idx: int) -> np.float32:
    """The T = 1 softmax probability of `idx` over a float32 row that may hold
    -inf: d = float32(l - max), exp and sum in float64, result as float32."""
    mx = np.float32(np.max(row))
    d = (row - mx).astype(np.float32).astype(np.float64)
    e = np.exp(d)
    return np.float32(e[idx] / np.sum(e))


def greedy_pick(row: np.ndarray) -> tuple[int, np.float32]:
    """The first maximum (torch.argmax) and its softmax probability."""
    idx = int(np.argmax(row))
    return idx, softmax_prob(row, idx)


class PickInfo:
    """What a sampled pick looked like, for robustness margins in fixtures."""

    def __init__(self):
        self.u = None
        self.boundary_margin = None  # distance of u from the nearest CDF boundary


def sample_pick(row: np.ndarray, temperature: float, top_k: int, top_p: float,
                rng: SplitMix64, info: PickInfo | None = None) -> tuple[int, np.float32]:
    """SPEC 3.2 for T > 0 (the caller routes T < 1e-6 to greedy_pick).

    logits / T (float32), sort descending (ties: lower id first), top-k keeps
    every logit >= the k-th, softmax (float64), top-p keeps the prefix until
    the mass before a candidate exceeds p (at least one), renormalise, one
    draw u, walk the candidates subtracting their probabilities."""
    t = np.float32(temperature)
    ids = np.nonzero(np.isfinite(row))[0]
    vals = (row[ids] / t).astype(np.float32)
    order = np.lexsort((ids, -vals.astype(np.float64)))  # value desc, id asc
    ids, vals = ids[order], vals[order]
    if 0 < top_k < len(ids):
        cut = vals[top_k - 1]
        keep = vals >= cut
        ids, vals = ids[keep], vals[keep]
    m0 = vals[0]
    p = np.exp((vals - m0).astype(np.float32).astype(np.float64))
    p = p / np.sum(p)
    tp = float(np.float32(top_p))
    if 0.0 < tp < 1.0:
        before = 0.0
        keep_n = len(p)
        for i, x in enumerate(p):
            if before > tp:
                keep_n = i
                break
            before += x
        keep_n = max(keep_n, 1)
        ids, p = ids[:keep_n], p[:keep_n]
        p = p / np.sum(p)
    u = rng.uniform()
    u0 = u
    pick = int(ids[-1])
    margin = float("inf")
    for c, pi in zip(ids, p):
        margin = min(margin, abs(u - pi))
        if u < pi:
            pick = int(c)
            break
        u -= pi
    if info is not None:
        info.u = u0
        info.boundary_margin = margin
    return pick, softmax_prob(row, pick)


def pick(row: np.ndarray, temperature: float, top_k: int, top_p: float,
         rng: SplitMix64, info: PickInfo | None = None) -> tuple[int, np.float32]:
    """Greedy below T = 1e-6 (no draw is taken), the sampler otherwise."""
    if temperature < 1e-6:
        return greedy_pick(row)
    return sample_pick(row, temperature, top_k, top_p, rng, info)
