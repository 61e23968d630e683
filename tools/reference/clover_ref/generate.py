"""Generation (SPEC 3, 4) and scoring (SPEC 5) over a backend.

The loops only talk to a small backend interface (`commit`, `preview`,
`committed`, `reset`), so the same code runs on the real trunk
(`TrunkBackend`) and on hand-made stubs in the tests. The order of
operations follows seed 000's `clover_generate_with`; README.md (DECISIONS)
lists the details SPEC.md leaves open and how they are settled here.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import torch

from .coreset import coreset_margin, routing_margin
from .penalties import Penalties
from .preview import preview as preview_pass
from .sampler import PickInfo, SplitMix64, pick
from .session import Session


class GenerationError(RuntimeError):
    pass


@dataclass
class Options:
    max_tokens: int = 64
    threshold: float | None = None      # override of the record's (0..1)
    block_size: int | None = None       # override; must divide the record's
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0
    suppress: tuple = ()
    ignore_eos: bool = False
    prompt_chunk: int = 0               # commit the prompt in chunks of this size (0: one call)


@dataclass
class PassTrace:
    fixed: list          # [(row, id, conf)] fixed by this pass
    fallback: bool       # no row was above the threshold: the most confident one
    close_open: bool     # </think> open during this pass
    min_threshold_margin: float    # min |conf - threshold| over pending rows
    min_greedy_gap: float          # min top1 - top2 penalised logit gap (greedy rows fixed)
    min_sample_margin: float       # min distance of u from a CDF boundary (sampled rows)
    min_best_gap: float            # fallback: gap between best and second-best confidence


@dataclass
class Result:
    tokens: list
    confidences: list
    finish_reason: str
    passes_per_block: list
    prompt_tokens: int
    reused_tokens: int
    committed_after: list
    blocks: list = field(default_factory=list)   # per block: [PassTrace]


class TrunkBackend:
    """The real thing: a Session on the transformers trunk plus the preview.

    With track_margins, it also records how close the run came to a routing
    or coreset decision flipping (see fixtures: a C backend's rounding must
    not be able to change a decision the fixtures depend on)."""

    def __init__(self, cm, track_margins: bool = False):
        self.cm = cm
        self.session = Session(cm)
        self.margins = {"routing": float("inf"), "coreset": float("inf")}
        self._hooks = []
        if track_margins:
            for layer in cm.model.model.layers:
                k = layer.mlp.gate.top_k
                self._hooks.append(layer.mlp.gate.register_forward_hook(
                    lambda mod, inp, out, k=k: self._note_routing(out[0], k)))

    def _note_routing(self, logits, k, allowed=None) -> None:
        lg = logits.detach().reshape(-1, logits.shape[-1]).cpu().numpy().astype(np.float32)
        self.margins["routing"] = min(self.margins["routing"], routing_margin(lg, k, allowed))

    def close(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks = []

    @property
    def committed(self) -> list:
        return self.session.ids

    @property
    def vocab(self) -> int:
        return self.cm.vocab_size

    def reset(self) -> None:
        self.session.reset()

    def commit(self, ids, chunk: int = 0) -> None:
        if chunk > 0:
            self.session.commit_chunks(list(ids), chunk)
        else:
            self.session.commit(list(ids))

    def last_logits(self) -> np.ndarray:
        return self.session.last_logits

    def preview(self, block) -> np.ndarray:
        trace = {} if self._hooks else None
        logits = preview_pass(self.cm, self.session, block, trace=trace)
        if trace is not None:
            rec = self.cm.record
            for lt in trace["layers"]:
                if "totals" in lt:
                    self.margins["coreset"] = min(self.margins["coreset"],
                                                  coreset_margin(lt["totals"], rec.coreset_top_p))
                    k = self.cm.config.num_experts_per_tok
                    self._note_routing(torch.from_numpy(lt["router_logits"]), k, lt["allowed"])
        return logits


def prepare_prompt(backend, prompt, chunk: int = 0) -> int:
    """Commit the prompt, reusing the committed sequence when the prompt
    extends it (the committed ids are a prefix of the prompt); otherwise start
    afresh. Returns the number of reused tokens."""
    prompt = [int(t) for t in prompt]
    c = backend.committed
    if c and len(c) <= len(prompt) and prompt[:len(c)] == list(c):
        reuse = len(c)
    else:
        reuse = 0
        backend.reset()
    backend.commit(prompt[reuse:], chunk)
    return reuse


def effective_record(rec, opts: Options):
    """The record with the request's threshold / block-size overrides,
    validated as SPEC 4 asks."""
    r = replace(rec)
    if opts.threshold is not None:
        t = float(np.float32(opts.threshold))
        if not (0.0 <= t <= 1.0):
            raise ValueError(f"threshold override {opts.threshold}: expected 0..1")
        r.threshold = t
    if opts.block_size is not None:
        bs = int(opts.block_size)
        if bs <= 0 or rec.block_size % bs != 0:
            raise ValueError(f"block size override {opts.block_size}: expected a divisor of "
                             f"the record's block size {rec.block_size}")
        r.block_size = bs
    return r


def _second(values: np.ndarray) -> float:
    """Gap between the largest and the second largest finite value."""
    v = values[np.isfinite(values)]
    if v.size < 2:
        return float("inf")
    top2 = np.partition(v.astype(np.float64), -2)[-2:]
    return float(top2[1] - top2[0])


def generate_block_diffusion(backend, record, stop_ids, prompt, opts: Options) -> Result:
    """SPEC 3: LowConfidence block diffusion."""
    rec = effective_record(record, opts)
    bs, mask = rec.block_size, rec.mask_token_id
    if opts.max_tokens < 0:
        raise ValueError("max_tokens: expected >= 0")
    try:
        reuse = prepare_prompt(backend, prompt, opts.prompt_chunk)
        stop_set = set(stop_ids)
        forbid = [mask] + [int(s) for s in opts.suppress if 0 <= int(s) < backend.vocab]
        pen = Penalties()
        rng = SplitMix64(opts.seed)
        thr = np.float32(rec.threshold)
        out, conf_out, ppb, blocks = [], [], [], []
        finish = "length"
        while len(out) < opts.max_tokens:
            remaining = min(bs, opts.max_tokens - len(out))
            block = [mask] * bs
            pending = [True] * bs
            conf_of = [np.float32(0.0)] * bs
            passes = 0
            traces = []
            while any(pending):
                if passes == bs:
                    raise GenerationError("block diffusion: denoising step limit reached with "
                                          "unresolved masks")
                close_open = rec.think_end_token_id is not None and \
                    pen.counts.get(rec.think_end_token_id, 0) == 0 and \
                    rec.think_end_token_id not in block
                logits = backend.preview(block)
                passes += 1
                rows = [r for r in range(bs) if pending[r]]
                picks = []
                gaps = {}
                s_margin = float("inf")
                for r in rows:
                    row = np.array(logits[r], dtype=np.float32, copy=True)
                    for t in forbid:
                        row[t] = -np.inf
                    pen.apply(rec, row, pen.length + r + 1, stop_ids, close_open)
                    info = PickInfo()
                    tok, c = pick(row, opts.temperature, opts.top_k, opts.top_p, rng, info)
                    if opts.temperature < 1e-6:
                        gaps[r] = _second(row)
                    else:
                        s_margin = min(s_margin, info.boundary_margin)
                    picks.append((r, tok, np.float32(c)))
                fixed = [p for p in picks if p[2] > thr]
                fallback = not fixed
                best_gap = float("inf")
                if fallback:
                    best = None
                    for p in picks:           # ties: the lowest row index
                        if best is None or p[2] > best[2]:
                            best = p
                    fixed = [best]
                    cs = sorted((float(p[2]) for p in picks), reverse=True)
                    best_gap = cs[0] - cs[1] if len(cs) > 1 else float("inf")
                thr_margin = min(abs(float(p[2]) - float(thr)) for p in picks)
                for r, tok, c in fixed:
                    block[r] = tok
                    pending[r] = False
                    conf_of[r] = c
                # A near tie between two tokens only matters where the row is
                # fixed (the confidence is the same either way).
                g_gap = min((gaps[r] for r, _, _ in fixed if r in gaps), default=float("inf"))
                traces.append(PassTrace([(r, t, c) for r, t, c in fixed], fallback, close_open,
                                        thr_margin, g_gap, s_margin, best_gap))
            ppb.append(passes)
            blocks.append(traces)
            new = block[:remaining]
            take, stopped = len(new), False
            for i, t in enumerate(new):
                out.append(t)
                conf_out.append(conf_of[i])
                if t in stop_set and not opts.ignore_eos:
                    finish, take, stopped = "stop", i + 1, True
                    break
            pen.commit(new[:take])
            if stopped or len(out) >= opts.max_tokens:
                break
            backend.commit(new)
        return Result(out, conf_out, finish, ppb, len(prompt), reuse, list(backend.committed), blocks)
    except Exception:
        backend.reset()
        raise


def generate_autoregressive(backend, stop_ids, prompt, opts: Options) -> Result:
    """Ordinary next-token decoding on the causal trunk (a model without the
    record): the same pick (greedy / SplitMix64 sampler) and forbidden ids,
    no penalties. Every emitted token but the last is committed."""
    try:
        reuse = prepare_prompt(backend, prompt, opts.prompt_chunk)
        stop_set = set(stop_ids)
        rng = SplitMix64(opts.seed)
        out, conf_out, traces = [], [], []
        finish = "length"
        while len(out) < opts.max_tokens:
            row = np.array(backend.last_logits(), dtype=np.float32, copy=True)
            for t in opts.suppress:
                if 0 <= int(t) < row.shape[0]:
                    row[int(t)] = -np.inf
            info = PickInfo()
            tok, c = pick(row, opts.temperature, opts.top_k, opts.top_p, rng, info)
            traces.append(PassTrace([(0, tok, c)], False, False, float("inf"),
                                    _second(row) if opts.temperature < 1e-6 else float("inf"),
                                    info.boundary_margin if info.boundary_margin is not None
                                    else float("inf"), float("inf")))
            out.append(tok)
            conf_out.append(np.float32(c))
            if tok in stop_set and not opts.ignore_eos:
                finish = "stop"
                break
            if len(out) >= opts.max_tokens:
                break
            backend.commit([tok])
        return Result(out, conf_out, finish, [], len(prompt), reuse, list(backend.committed),
                      [traces])
    except Exception:
        backend.reset()
        raise


def score_nll(backend, ids, chunk: int = 0):
    """Teacher-forced NLL on the commit path (SPEC 5): row r scores token
    r+1. Per-token NLL (float64 log-softmax of the float32 logits), mean, ppl."""
    backend.reset()
    s = backend.session
    logits = s.commit_chunks(list(ids), chunk, True) if chunk > 0 else s.commit(list(ids), True)
    lg = logits[:-1].astype(np.float64)
    mx = lg.max(axis=1, keepdims=True)
    lse = np.log(np.exp(lg - mx).sum(axis=1)) + mx[:, 0]
    tgt = np.asarray(ids[1:], dtype=np.int64)
    nll = lse - lg[np.arange(len(tgt)), tgt]
    mean = float(nll.mean())
    return nll, mean, float(np.exp(mean))
