"""Training batches made on the fly from gen.py, deterministically by step
(issue 26).

Why streamed: ~300M tokens of generated text are ~1.2 GB, too much to carry to
the GPU machine or back, and a 10-minute run should start training at once. A
batch is a pure function of (seed, step): worker processes (spawned, no torch)
generate, tokenize and pack batch `step` while the GPU trains on earlier ones,
so a run that resumes at step s sees exactly the batches it would have seen,
on any machine, with nothing cached.

A batch is `batch` rows of `seq` token ids (numpy int32) and a bool mask of the
tokens that are not padding. Rows are of two kinds:

* chat rows (data.py's layout, issue 16): each exchange is
  [pad * P1] prompt | completion [pad * P2], P1 so that the completion starts on
  a block boundary (where clover's first block starts at inference), P2 so that
  the rows after the answer's `<|im_end|>\\n` are pads to the block's end (the
  end-of-answer block as inference resolves it); exchanges packed greedily;
* prose rows (a share `prose_p` in the causal phase, `prose_p_diff` after
  it; both fixed per step, so still a function of the step): consecutive paragraphs of a public-domain
  book or Wikipedia leads, documents separated by `<|endoftext|>`.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import random
import sys
from collections import deque

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

_W: dict = {}


def _init(pack: str, tok_path: str, cfg: dict) -> None:
    os.environ["RAYON_NUM_THREADS"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    sys.path.insert(0, HERE)
    from tokenizers import Tokenizer

    from gen import Gen, load_corpus
    _W["gen"] = Gen(load_corpus(pack))
    _W["tok"] = Tokenizer.from_file(tok_path)
    _W["pad"] = _W["tok"].token_to_id("<|endoftext|>")
    _W.update(cfg)


def _chat_segments(r: random.Random, n: int):
    g, tok, block, pad = _W["gen"], _W["tok"], _W["block"], _W["pad"]
    ex = [g.sample(r, _W["think_p"]) for _ in range(n)]
    ps = tok.encode_batch([p for p, _ in ex])
    cs = tok.encode_batch([c for _, c in ex])
    for p, c in zip(ps, cs):
        p, c = p.ids, c.ids
        p1, p2 = (-len(p)) % block, (-len(c)) % block
        yield [pad] * p1 + p + c + [pad] * p2, p1, len(p) + len(c), p2


def _prose_row(r: random.Random, seq: int):
    g, tok, pad = _W["gen"], _W["tok"], _W["pad"]
    ids = []
    while len(ids) < seq:
        ids += tok.encode(g.prose_doc(r)).ids + [pad]
    return np.array(ids[:seq], np.int32), np.ones(seq, bool)


def make_batch(step: int):
    """(ids [B,T] int32, real [B,T] bool) of batch `step`."""
    seed, batch, seq = _W["seed"], _W["batch"], _W["seq"]
    pad = _W["pad"]
    r = random.Random(seed * 1_000_003 + step)
    ids = np.full((batch, seq), pad, np.int32)
    real = np.zeros((batch, seq), bool)
    rows = list(range(batch))
    share = _W["prose_p"] if step < _W["causal_steps"] else _W["prose_p_diff"]
    n_prose = sum(r.random() < share for _ in rows)
    for i in rows[:n_prose]:
        ids[i], real[i] = _prose_row(r, seq)
    row, at, segs = n_prose, 0, iter(())
    while row < batch:
        seg = next(segs, None)
        if seg is None:
            segs = _chat_segments(r, 64)
            continue
        s, p1, nreal, _ = seg
        if len(s) > seq:
            continue
        if at + len(s) > seq:
            row, at = row + 1, 0
            if row == batch:
                break
        ids[row, at:at + len(s)] = s
        real[row, at + p1:at + p1 + nreal] = True
        at += len(s)
    # shuffle prose rows among chat rows (deterministically)
    perm = np.random.default_rng(seed * 7 + step).permutation(batch)
    return ids[perm], real[perm]


class Stream:
    """Batches step, step+1, ... made `ahead` steps in advance by `workers` processes."""

    def __init__(self, pack: str, tok_path: str, *, seed: int, batch: int, seq: int, block: int,
                 prose_p: float, think_p: float = 0.2, workers: int = 6, ahead: int = 24,
                 prose_p_diff: float | None = None, causal_steps: int = 0):
        cfg = dict(seed=seed, batch=batch, seq=seq, block=block, prose_p=prose_p, think_p=think_p,
                   prose_p_diff=prose_p if prose_p_diff is None else prose_p_diff,
                   causal_steps=causal_steps)
        if workers == 0:                    # in-process (tests, CPU smoke runs)
            _init(pack, tok_path, cfg)
            self.pool = None
        else:
            ctx = mp.get_context("spawn")   # no fork after CUDA starts
            self.pool = ctx.Pool(workers, _init, (pack, tok_path, cfg))
        self.ahead, self.q, self.next, self.want = ahead, deque(), None, None

    def prefetch(self, step: int) -> None:
        """Starts making batches step, step+1, ... and waits for the first one
        (the workers have loaded the pack); the next get() must ask for step."""
        if self.pool is None:
            return
        if self.want != step:
            self.q.clear()
            self.next = step
        while len(self.q) < self.ahead:
            self.q.append(self.pool.apply_async(make_batch, (self.next,)))
            self.next += 1
        self.want = step
        self.q[0].get()

    def get(self, step: int):
        if self.pool is None:
            return make_batch(step)
        if self.want != step:               # first call, or a jump: start over at step
            self.q.clear()
            self.next = step
        while len(self.q) < self.ahead:
            self.q.append(self.pool.apply_async(make_batch, (self.next,)))
            self.next += 1
        self.want = step + 1
        return self.q.popleft().get()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.terminate()
