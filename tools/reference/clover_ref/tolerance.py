"""How closely two float32 evaluations of the same quantity must agree, and
why: the one place the reference's self-checks, its tests and
compare_fixtures.py take their tolerances from.

Two evaluations of the trunk that are the same mathematics in a different
float32 order (one commit vs chunked commits, the cached path vs the
cache-free forward, a decode step vs the full forward, this CPU's kernels vs
another's) do not agree bit for bit. The Gated DeltaNet's chunked algorithm
(transformers' `torch_chunk_gated_delta_rule`, float32 inside even for a
float64 model) turns last-bit differences of the matrix kernels into logit
differences of about 1e-5 of the logit scale. Measured on the tiny fixture
models (README.md, "Determinism and tolerances"): up to 2.8e-5 across thread
counts, ATen CPU capabilities, MKL code paths (MKL_CBWR) and oneDNN on / off,
and up to 4.4e-5 with independent 4-ulp noise on every projection's output (a
stand-in for a CPU whose kernels round differently, such as AVX-512's).

TRUNK_REL = 1e-4 of the scale is the SPEC 1.1 bound the C engine is held
to against these same numbers: a disagreement the engine would be allowed
is not a reference bug. Real bugs are 8 to 10,000 times larger (measured:
state S off by 0.1% -> 8.5e-4, one attention value row lost -> 3.9e-2, a
conv-ring column lost or a position off by one -> 0.9).
"""
from __future__ import annotations

import numpy as np

# max |a - ref| <= TRUNK_REL * max(1, max |ref|): logits, hidden states,
# router logits, conv rings, states S, keys / values.
TRUNK_REL = 1e-4

# Confidences (float32 probabilities) of two runs whose tokens agree: the
# suggestion tests/fixtures/README.md makes to the engine. Observed between
# CPUs / kernel paths: up to 7.3e-6. Not implied by TRUNK_REL (a confidence
# moves by up to 2 x logit error x confidence), so it has the least headroom.
CONFIDENCE_ABS = 1e-5


def scale_error(a, ref) -> float:
    """max |a - ref| / max(1, max |ref|), in float64; inf when shapes differ
    or a non-finite value is not matched by the same value."""
    a, ref = np.asarray(a, np.float64), np.asarray(ref, np.float64)
    if a.shape != ref.shape:
        return float("inf")
    if a.size == 0:
        return 0.0
    fa, fr = np.isfinite(a), np.isfinite(ref)
    if not np.array_equal(fa, fr) or not np.array_equal(a[~fa], ref[~fr]):
        return float("inf")
    if not fr.any():
        return 0.0
    scale = max(1.0, float(np.max(np.abs(ref[fr]))))
    return float(np.max(np.abs(a[fa] - ref[fr]))) / scale


def scale_close(a, ref, rel: float = TRUNK_REL) -> bool:
    """max |a - ref| within rel of the reference's scale (max |ref|, at least 1)."""
    return scale_error(a, ref) <= rel
