"""Training rows for issue 16's trainer: the corpus's exchanges, tokenized and
packed so that a training block is what an inference block is.

At inference clover's first block starts right after the prompt: after
`<think>\n\n</think>\n\n` with thinking off, after `<think>\n` with it on. So
each exchange is cut there into prompt and completion (tokenized apart, as
clover tokenizes the prompt alone), and written as one segment

    [pad * P1] prompt | completion [pad * P2]

with P1 pads so that the completion starts on a block boundary and P2 so that
the segment ends on one; the rows after the answer's `<|im_end|>\n` are then
pads (`<|endoftext|>`) to the block's end, as predictable as what follows a
stop should be (a block is emitted only once all its rows resolved). Segments
are packed into rows of `seq` tokens, a row's tail padded. `real` marks the
tokens that are not pads: the causal loss skips pad targets.
"""
from __future__ import annotations

import gzip
import json
import os
import random

import torch

THINK_OFF = "<think>\n\n</think>\n\n"
ASSISTANT = "<|im_start|>assistant\n<think>\n"


def split_exchange(text: str) -> tuple[str, str]:
    """(prompt as clover renders it, completion the model writes)."""
    i = text.index(ASSISTANT) + len(ASSISTANT)
    j = text.index(ASSISTANT) + len("<|im_start|>assistant\n")
    if text.startswith(THINK_OFF, j):
        i = j + len(THINK_OFF)
    return text[:i], text[i:]


def segments(prompts: list[list[int]], comps: list[list[int]], block: int, pad: int):
    for p, c in zip(prompts, comps):
        p1 = (-len(p)) % block
        p2 = (-len(c)) % block
        ids = [pad] * p1 + p + c + [pad] * p2
        real = [False] * p1 + [True] * (len(p) + len(c)) + [False] * p2
        yield ids, real


def pack(segs, seq: int, pad: int):
    """Greedy packing in order; a segment longer than a row is dropped."""
    rows, reals, cur, cur_r = [], [], [], []
    for ids, real in segs:
        if len(ids) > seq:
            continue
        if len(cur) + len(ids) > seq:
            rows.append(cur + [pad] * (seq - len(cur)))
            reals.append(cur_r + [False] * (seq - len(cur)))
            cur, cur_r = [], []
        cur, cur_r = cur + ids, cur_r + real
    if cur:
        rows.append(cur + [pad] * (seq - len(cur)))
        reals.append(cur_r + [False] * (seq - len(cur)))
    return torch.tensor(rows, dtype=torch.long), torch.tensor(reals, dtype=torch.bool)


def build_rows(corpus: str, tok, seed: int, block: int, seq: int, limit: int | None):
    with gzip.open(os.path.join(corpus, "train.jsonl.gz"), "rt", encoding="utf-8") as f:
        texts = [json.loads(ln)["text"] for _, ln in zip(range(limit or 1 << 62), f)]
    random.Random(seed).shuffle(texts)
    parts = [split_exchange(t) for t in texts]
    prompts = [e.ids for e in tok.encode_batch([p for p, _ in parts])]
    comps = [e.ids for e in tok.encode_batch([c for _, c in parts])]
    pad = tok.token_to_id("<|endoftext|>")
    return pack(segments(prompts, comps, block, pad), seq, pad)
