"""Response-only penalties and the two ramps of SPEC 3.1 (seed 000,
`Penalties`).

Counts cover committed response tokens only: the caller adds a block's
emitted tokens after it resolved, never the prompt and never the block being
resolved. Every operation is float32, in the seed's order, so a C loop that
does the same operations in the same order gets the same bits.
"""
from __future__ import annotations

import numpy as np


def ramp(row_pos: int, start: int, window: int, strength: float) -> np.float32:
    """clamp((row_pos - start) / window, 0, 1) * strength, float32.

    A window of 0 (not defined by SPEC) is a step: full strength from
    row_pos >= start on, nothing before (README.md, DECISIONS)."""
    s = np.float32(strength)
    if window == 0:
        return s if row_pos >= start else np.float32(0.0)
    f = (np.float32(row_pos) - np.float32(start)) / np.float32(window)
    f = np.float32(min(max(f, np.float32(0.0)), np.float32(1.0)))
    return np.float32(f * s)


class Penalties:
    """Counts of the committed response tokens of one request."""

    def __init__(self):
        self.counts: dict[int, int] = {}
        self.seen: list[int] = []  # first-seen order
        self.length = 0

    def commit(self, ids) -> None:
        self.length += len(ids)
        for t in ids:
            t = int(t)
            if t not in self.counts:
                self.counts[t] = 0
                self.seen.append(t)
            self.counts[t] += 1

    def apply(self, rec, row: np.ndarray, row_pos: int, stop_ids, close_open: bool) -> None:
        """Mutate one float32 row in place. `rec` has the record's fields
        (float32 values), `row_pos` is the 1-based response position the row
        would take, `close_open` whether </think> is still open."""
        freq = np.float32(rec.frequency_penalty)
        pres = np.float32(rec.presence_penalty)
        rep = np.float32(rec.repetition_penalty)
        for t in self.seen:
            if t >= row.shape[0]:
                continue
            lv = np.float32(row[t])
            lv = np.float32(lv - np.float32(self.counts[t]) * freq)
            lv = np.float32(lv - pres)
            if rep != np.float32(1.0):
                lv = np.float32(lv * rep) if lv < 0 else np.float32(lv / rep)
            row[t] = lv
        if np.float32(rec.length_penalty) != 0:
            add = ramp(row_pos, rec.length_penalty_start, rec.length_penalty_window, rec.length_penalty)
            for t in stop_ids:
                row[t] = np.float32(row[t] + add)
        if close_open and np.float32(rec.think_end_bias) != 0 and rec.think_end_token_id is not None:
            c = rec.think_end_token_id
            if 0 <= c < row.shape[0]:
                row[c] = np.float32(row[c] + ramp(row_pos, rec.think_end_start, rec.think_end_window,
                                                  rec.think_end_bias))
