"""Train the small Clover model of issue 16 (both paths of SPEC 2), resumable.

Schedule (by global step, so a run that resumes continues the same curve):
  steps [0, causal_steps): causal loss only (the causal path learns far faster);
  then block-diffusion adaptation: causal loss + the preview loss on masked rows,
  each block masked at a ratio drawn from U(0.05, r_max), r_max rising from 0.3
  to 1.0 over `ramp` steps (a curriculum over the mask ratio), plus
  `distill` x KL(causal prediction of the row || preview prediction), the causal
  path's predictions (detached) teaching the preview rows.

Data (data.py): every exchange's generation start (where clover's first block
starts at inference: after `</think>\\n\\n` with thinking off, after `<think>\\n`
with it on) falls on a block boundary, and the rows after the answer's end are
pads to the block's end, so a training block is what an inference block is.

Checkpoint (`--ckpt DIR`): the weights in bf16 in files of at most 16 MB, the
step and the loss log, rewritten every `--save-every-s` seconds (by rename, so
a call killed mid-save keeps the last good one) and at the end; `--stop-after-min`
ends the run cleanly. Every `--eval-every` steps after the causal phase (and at
the end) the batched evaluation (evaluate.py) measures tokens per pass on the
held-out prompts with the engine's rule, logged beside the losses.

    python3 tools/train/train.py --corpus C --tok T --ckpt K [--geometry small] ...
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

START = time.time()
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))

from data import build_rows  # noqa: E402
from model import GEOMETRIES, CloverTrainModel, text_config  # noqa: E402

import ckpt as ckpt_io  # noqa: E402


def save_ckpt(model, path: str, step: int, log: list, int8: bool = False) -> None:
    ckpt_io.save(model, path, step, log, int8)


def load_ckpt(model, path: str):
    step, log, _ = ckpt_io.load(model, path)
    return step, log


def lr_factor(step: int, start_step: int, steps: int, warmup: int, rewarm: int,
              cosine_from: int = 0) -> float:
    """The learning rate's multiplier: a linear warm-up over `warmup` steps
    from cosine_from (and over `rewarm` steps after each resume: the optimizer
    state is not in the checkpoint), then one cosine from 1 to 0.1 over
    [cosine_from, steps]. cosine_from 0 is the schedule every call so far ran."""
    s, total = step - cosine_from, max(steps - cosine_from, 1)
    return min(1.0, (step - start_step + 1) / rewarm, (s + 1) / warmup) * \
        (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * s / total)))


def mask_batch(ids, block, r_max, mask_id, gen, full_p: float = 0.0, r_min: float = 0.05,
               complementary: bool = False, prefix_p: float = 0.0):
    """Each block of each row masked at its own ratio in U(r_min, r_max), or
    fully masked (as inference starts every block) with probability full_p.
    prefix_p: a block that is not fully masked is, with this probability,
    masked as a left-to-right decode leaves it: rows < j clean, rows >= j
    masked, j ~ U{1..B-1} (PLAN.md, "Diagnosis at step 1257": row j then has
    exactly the causal path's context, which the random ratios almost never
    give; the draws happen only when prefix_p > 0, so prefix_p 0 gives the
    masks it always gave).
    complementary: a second view masks exactly the rows the first left clean
    (every token supervised once in views m and 1-m; Fast-dLLM v2). Returns
    (noisy [rN,T], masked [rN,T]), r = 1 or 2."""
    n, t = ids.shape
    m = t // block
    ratio = r_min + (r_max - r_min) * torch.rand(n, m, 1, generator=gen, device=ids.device)
    full = None
    if full_p > 0:
        full = torch.rand(n, m, 1, generator=gen, device=ids.device) < full_p
        ratio = torch.where(full, torch.ones_like(ratio) * 1.01, ratio)
    u = torch.rand(n, m, block, generator=gen, device=ids.device)
    masked = u < ratio
    if prefix_p > 0:
        pre = torch.rand(n, m, 1, generator=gen, device=ids.device) < prefix_p
        if full is not None:
            pre &= ~full
        j = torch.randint(1, block, (n, m, 1), generator=gen, device=ids.device)
        suffix = torch.arange(block, device=ids.device).view(1, 1, -1) >= j
        masked = torch.where(pre, suffix, masked)
    masked = masked.reshape(n, t)
    if complementary:
        masked = torch.cat([masked, ~masked], 0)
        ids = ids.repeat(2, 1)
    return torch.where(masked, torch.full_like(ids, mask_id), ids), masked


def spec3_fixes(conf, pending, threshold: float, max_distance: int | None = None):
    """SPEC 3's rule for one pass over blocks at once. conf [..., B] (the
    pick's probability), pending [..., B] (still masked). Returns the rows the
    pass fixes: every pending row above the threshold, else (no such row in the
    block) the single most confident pending row (the first on a tie).
    max_distance K (diag.py threshold_fixes' experiment, not SPEC): the
    threshold fixes only rows at most K right of the nearest fixed row (or the
    row -1 before the block) or row fixed in this pass, read left to right."""
    above = pending & (conf > threshold)
    b = conf.shape[-1]
    if max_distance is not None and max_distance < b:
        last = torch.full(conf.shape[:-1], -1, dtype=torch.long, device=conf.device)
        cols = []
        for r in range(b):
            take = above[..., r] & (r - last <= max_distance)
            cols.append(take)
            last = torch.where(take | ~pending[..., r], torch.full_like(last, r), last)
        above = torch.stack(cols, -1)
    c = torch.where(pending, conf, torch.full_like(conf, -1.0))
    best = torch.zeros_like(pending).scatter(-1, c.argmax(-1, keepdim=True), True)
    none = pending.any(-1, keepdim=True) & ~above.any(-1, keepdim=True)
    return above | (best & none)


@torch.no_grad()
def engine_masks(model, ids, block: int, mask_id: int, gen, threshold: float = 0.95,
                 max_pass: int = 8, fill: str = "true", max_distance: int | None = None,
                 autocast: tuple | None = None):
    """Masks as the engine leaves them (PLAN.md, "Next training call (gap
    fills)"): every block of ids [N,T] starts fully masked and is denoised by
    the model's own previews with SPEC 3's rule (all blocks at once, each over
    its clean prefix, as training's preview is), and each block stops after
    its own number of passes s ~ U{1..max_pass} (drawn from gen first); a
    block that is done sooner keeps its last state with a masked row. The
    state is the block as the engine leaves it after s passes: the rows it
    fixed and the gaps between and after them, where the preview loss goes.
    fill "true": the fixed rows hold the true tokens (the pattern is the
    model's, the content is the data's: the targets of the masked rows stay
    consistent with their context, and where the model fixed a wrong token the
    next passes run as if it had been right, i.e. teacher-forced); "own": they
    hold the model's picks, as in the engine (the targets are then the data's
    tokens in a context that may contradict them). Returns (noisy [N,T],
    masked [N,T], stop [N,T/B]: s per block, passes run). Cost: one clean
    stream, then one noisy stream (model.preview_cached) a pass."""
    n, t = ids.shape
    m = t // block
    stop = torch.randint(1, max_pass + 1, (n, m), generator=gen, device=ids.device)
    masked = torch.ones(n, m, block, dtype=torch.bool, device=ids.device)
    state = masked.clone()
    tokens = ids.clone().view(n, m, block)
    ac = autocast if autocast is not None else ("cpu", False)
    with torch.autocast(ac[0], dtype=torch.bfloat16, enabled=ac[1]):
        cache = model.clean_cache(ids, block)       # the clean stream once, not once a pass
    k = 0
    while k < max_pass:
        live = masked.any(-1) & (stop > k)                     # blocks that still move
        if not live.any():
            break
        noisy = torch.where(masked, torch.full_like(tokens, mask_id), tokens).view(n, t)
        with torch.autocast(ac[0], dtype=torch.bfloat16, enabled=ac[1]):
            ln = model.preview_cached(cache, noisy)
        lg = ln.float()
        lg[..., mask_id] = -float("inf")
        conf, pk = F.softmax(lg, -1).max(-1)
        del lg, ln
        fix = spec3_fixes(conf.view(n, m, block), masked, threshold, max_distance)
        fix &= live[..., None]
        if fill == "own":
            tokens = torch.where(fix, pk.view(n, m, block), tokens)
        masked = masked & ~fix
        k += 1
        keep = live & masked.any(-1)                           # a state with a gap left
        state = torch.where(keep[..., None], masked, state)
    noisy = torch.where(state, torch.full_like(tokens, mask_id), tokens).view(n, t)
    return noisy, state.view(n, t), stop, k


def mix_engine_masks(model, ids, noisy, masked, block: int, mask_id: int, gen, p: float,
                     **kw):
    """Replace the masks of a share p of the rows (each row with probability
    p, drawn from gen) by engine_masks' (the second, complementary view, if
    any, gets the complement). p 0: no draw, the masks unchanged. Returns
    (noisy, masked, rows replaced, passes run)."""
    if p <= 0:
        return noisy, masked, 0, 0
    n = ids.shape[0]
    sel = torch.rand(n, generator=gen, device=ids.device) < p
    if not sel.any():
        return noisy, masked, 0, 0
    en, em, _, k = engine_masks(model, ids[sel], block, mask_id, gen, **kw)
    noisy, masked = noisy.clone(), masked.clone()
    noisy[:n][sel], masked[:n][sel] = en, em
    if noisy.shape[0] == 2 * n:
        idx = torch.nonzero(sel)[:, 0] + n
        masked[idx] = ~em
        noisy[idx] = torch.where(~em, torch.full_like(em, mask_id, dtype=ids.dtype), ids[sel])
    return noisy, masked, int(sel.sum()), k


def losses(lc, ln, ids, real, masked, distill: float, entropy: float = 0.0, near: float = 0.0,
           block: int = 0, selfgen=None):
    """Causal CE on real targets; preview CE on masked rows of every view (pads
    included: the rows after an answer must resolve fast at inference too); the
    distillation KL on masked real rows that have a causal prediction; with
    entropy > 0 (the sharpening pass) the mean entropy of the preview on masked
    rows, returned as the fourth term (its weight applied by the caller).
    near > 0 (with the block size): the distillation term gains near x the KL
    on the masked rows whose left neighbour is clean (or that open their block)
    and with no clean row after them in their block: there the preview has
    exactly the causal path's context, so the teacher is exact (PLAN.md,
    "Diagnosis at step 1257": at such rows the preview's pick disagrees with
    the causal pick on about a quarter of the held-out answers' rows). near 0:
    as before. selfgen [N,T] (self-distillation rows' answers): not targets of
    the causal loss (the causal path is not trained on its own outputs)."""
    n = ids.shape[0]
    tgt_ok = real[:, 1:] if selfgen is None else (real & ~selfgen)[:, 1:]
    loss_c = F.cross_entropy(lc[:, :-1][tgt_ok].float(), ids[:, 1:][tgt_ok])
    z = loss_c.new_zeros(())
    if ln is None:
        return loss_c, z, z, z
    r = ln.shape[0] // n
    ids_r = ids.repeat(r, 1) if r > 1 else ids
    lnm = ln[masked].float()
    loss_p = F.cross_entropy(lnm, ids_r[masked])
    loss_e = z
    if entropy > 0:
        lp = F.log_softmax(lnm, -1)
        loss_e = -(lp.exp() * lp).sum(-1).mean()
    del lnm
    loss_d = z
    if distill > 0:
        parts, cnt = [], 0
        teach_all = lc.detach()[:, :-1]
        for v in range(r):
            mk = masked[v * n:(v + 1) * n] & real
            mk[:, 0] = False
            teacher = F.softmax(teach_all[mk[:, 1:]].float(), -1)
            student = F.log_softmax(ln[v * n:(v + 1) * n][mk].float(), -1)
            parts.append(F.kl_div(student, teacher, reduction="sum"))
            cnt += int(mk.sum())
        loss_d = sum(parts) / max(cnt, 1)
        if near > 0:
            t = ids.shape[1]
            start = (torch.arange(t, device=ids.device) % block == 0)[None]
            parts, cnt = [], 0
            for v in range(r):
                mv = masked[v * n:(v + 1) * n]
                left_clean = torch.cat([torch.ones_like(mv[:, :1]), ~mv[:, :-1]], 1)
                # clean rows at or after each row within its block (the row itself is masked)
                cl = (~mv).view(n, t // block, block).flip(-1).int().cumsum(-1).flip(-1).view(n, t)
                mk = mv & real & (left_clean | start) & (cl == 0)
                mk[:, 0] = False
                teacher = F.softmax(teach_all[mk[:, 1:]].float(), -1)
                student = F.log_softmax(ln[v * n:(v + 1) * n][mk].float(), -1)
                parts.append(F.kl_div(student, teacher, reduction="sum"))
                cnt += int(mk.sum())
            loss_d = loss_d + near * sum(parts) / max(cnt, 1)
    return loss_c, loss_p, loss_d, loss_e


def accumulate(fwd, a, ids, real, noisy, masked, accum: int, distill: float, entropy: float,
               near: float = 0.0, selfgen=None):
    """Forward + backward of one step's batch in `accum` micro-batches (each
    view of the preview split alike); returns the losses averaged over them."""
    n = ids.shape[0]
    mb = n // accum
    if n % accum:
        raise SystemExit(f"train: --batch {n} does not split into {accum} micro-batches")
    r = noisy.shape[0] // n if noisy is not None else 0
    tot = None
    for i in range(accum):
        sl = slice(i * mb, (i + 1) * mb)
        nz = mk = None
        if noisy is not None:
            nz = noisy.view(r, n, -1)[:, sl].reshape(r * mb, -1)
            mk = masked.view(r, n, -1)[:, sl].reshape(r * mb, -1)
        with torch.autocast(a.device.split(":")[0], dtype=torch.bfloat16, enabled=a.bf16):
            lc, ln = fwd(ids[sl], nz, a.block)
        parts = losses(lc, ln, ids[sl], real[sl], mk, distill, entropy, near, a.block,
                       None if selfgen is None else selfgen[sl])
        loss = parts[0] + parts[1] + a.distill * parts[2] + entropy * parts[3]
        (loss / accum).backward()
        del lc, ln, loss
        parts = [x.detach() / accum for x in parts]
        tot = parts if tot is None else [t + x for t, x in zip(tot, parts)]
    return tot


def save_sd_rows(path: str, ids, real, selfgen) -> None:
    """Rows as int16 ids (the vocabulary is 8192) and two bool masks: ~3 bytes a
    token, ~12 MB for 8,000 rows of 512."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    torch.save({"ids": ids.to(torch.int16), "real": real, "selfgen": selfgen}, path)


def load_sd_rows(path: str, seq: int):
    d = torch.load(path)
    ids, real, selfgen = d["ids"].long(), d["real"], d["selfgen"]
    if ids.dim() != 2 or ids.shape[1] != seq or real.shape != ids.shape or selfgen.shape != ids.shape:
        raise SystemExit(f"train: --sd-rows {path}: rows of shape {tuple(ids.shape)}, not [N, {seq}]")
    return ids, real, selfgen


def self_distill_rows(a, model, tok, step: int):
    """--sd-p: the model's greedy answers to --sd-prompts generated prompts (a
    seed of their own per step, never training's stream) packed as rows;
    returns (ids, real, selfgen) on the CPU."""
    from selfdistill import greedy_answers, pack_rows, sd_prompts
    t = time.time()
    prompts = sd_prompts(a.pack, tok, a.sd_prompts, a.seed * 1_000_003 + 7919 * step + 1,
                         a.think_p, a.block)
    answers = greedy_answers(model, prompts, tok, a.sd_max_new, a.sd_batch,
                             autocast=(a.device.split(":")[0], a.bf16), time_limit=a.sd_time)
    ids, real, selfgen = pack_rows(prompts, answers, a.seq, a.block,
                                   tok.token_to_id("<|endoftext|>"))
    done = [x for x in answers if x is not None]
    print(f"train: self-distillation: {len(done)} of {len(prompts)} prompts answered within "
          f"{a.sd_max_new} tokens (mean {sum(map(len, done)) / max(len(done), 1):.1f}), "
          f"{ids.shape[0]} rows of {a.seq}, {time.time() - t:.1f} s", flush=True)
    for i in range(min(3, len(prompts))):
        if answers[i] is not None:
            print("  sd sample: " + repr(tok.decode(prompts[i][-24:] + answers[i],
                                                   skip_special_tokens=False)), flush=True)
    if ids.shape[0] == 0:
        raise SystemExit("train: --sd-p: no prompt was answered within --sd-max-new tokens")
    return ids, real, selfgen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--corpus", help="issue 16: a corpus.py folder (train.jsonl.gz), rows built up front")
    src.add_argument("--pack", help="issue 26: a fetch_corpus.py pack; batches streamed from gen.py")
    ap.add_argument("--tok", required=True, help="folder with tokenizer.json")
    ap.add_argument("--ckpt", required=True, help="checkpoint folder written (and resumed from)")
    ap.add_argument("--init-from", default=None,
                    help="resume from this checkpoint folder when --ckpt has none yet")
    ap.add_argument("--ckpt-int8", action="store_true", help="8-bit weight shards (ckpt.py)")
    ap.add_argument("--geometry", default="small", choices=sorted(GEOMETRIES))
    ap.add_argument("--steps", type=int, default=3000, help="the schedule's total steps")
    ap.add_argument("--causal-steps", type=int, default=600)
    ap.add_argument("--ramp", type=int, default=800)
    ap.add_argument("--r-min", type=float, default=0.05)
    ap.add_argument("--full-p", type=float, default=0.0,
                    help="probability that a block is fully masked (as inference starts it)")
    ap.add_argument("--prefix-p", type=float, default=0.0,
                    help="probability that a block (not fully masked) is masked as a left-to-right "
                         "decode leaves it: rows < j clean, the rest masked (PLAN.md: diagnosis)")
    ap.add_argument("--engine-mask-p", type=float, default=0.0,
                    help="share of the rows whose masks are the engine's own (engine_masks: the "
                         "model's SPEC 3 passes, stopped at a random pass; PLAN.md: gap fills); "
                         "0: no draw, masks unchanged")
    ap.add_argument("--engine-threshold", type=float, default=0.95)
    ap.add_argument("--engine-passes", type=int, default=8,
                    help="engine masks stop after s ~ U{1..this} passes (the cost: this many "
                         "forwards of the chosen rows a step)")
    ap.add_argument("--engine-fill", choices=["true", "own"], default="true",
                    help="the rows the engine fixed hold the true tokens or the model's picks")
    ap.add_argument("--engine-max-distance", type=int, default=None,
                    help="engine masks under diag.py's --max-distance rule (experiment)")
    ap.add_argument("--complementary", action="store_true",
                    help="a second preview view with the complementary mask 1-m")
    ap.add_argument("--distill", type=float, default=0.5)
    ap.add_argument("--distill-near", type=float, default=0.0,
                    help="the distillation term adds this x the KL on masked rows with exactly the "
                         "causal context: left neighbour clean, nothing clean after them in the "
                         "block (an exact teacher; PLAN.md: diagnosis)")
    ap.add_argument("--sd-p", type=float, default=0.0,
                    help="block diffusion: the share of each batch's rows replaced by self-distillation "
                         "rows (the model's own greedy answers, selfdistill.py; made at the start of "
                         "each run from its weights); 0: none, the batches unchanged")
    ap.add_argument("--sd-prompts", type=int, default=8192, help="--sd-p: prompts answered a run")
    ap.add_argument("--sd-max-new", type=int, default=192,
                    help="--sd-p: longest answer kept (tokens; an answer with no stop is dropped)")
    ap.add_argument("--sd-batch", type=int, default=2048, help="--sd-p: prompts decoded at once")
    ap.add_argument("--sd-rows", default=None,
                    help="--sd-p: a file of self-distillation rows: read when it exists (no decoding), "
                         "else written after decoding (a later call carries it and saves ~100 s)")
    ap.add_argument("--sd-time", type=float, default=90.0,
                    help="--sd-p: no new decoding batch starts after this many seconds")
    ap.add_argument("--sharpen-from", type=int, default=None,
                    help="from this step on, add --entropy x the preview's entropy on masked rows")
    ap.add_argument("--entropy", type=float, default=0.0)
    ap.add_argument("--prose-p", type=float, default=0.3, help="--pack: prose rows, causal phase")
    ap.add_argument("--prose-p-diff", type=float, default=0.05, help="--pack: prose rows, after it")
    ap.add_argument("--think-p", type=float, default=0.2, help="--pack: exchanges with thinking on")
    ap.add_argument("--workers", type=int, default=max(1, min(8, (os.cpu_count() or 2) - 2)))
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--accum", type=int, default=1,
                    help="micro-batches a step (doubled by itself on out-of-memory)")
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--block", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--rewarmup", type=int, default=30, help="warm-up steps after a resume")
    ap.add_argument("--cosine-from", type=int, default=0,
                    help="the cosine (and its --warmup) runs over [this step, --steps] instead of "
                         "[0, --steps]: a fresh schedule for a changed objective from a checkpoint")
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--bf16", action="store_true", help="autocast matmuls to bfloat16 (GPU)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the forward")
    ap.add_argument("--limit", type=int, default=None, help="--corpus: the first N samples")
    ap.add_argument("--stop-after-min", type=float, default=9.0,
                    help="stop (and save) once this much wall time has passed since start")
    ap.add_argument("--max-steps-run", type=int, default=None, help="stop this run after N steps")
    ap.add_argument("--save-every-s", type=float, default=120.0)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--eval-every", type=int, default=500)
    ap.add_argument("--eval-prompts", type=int, default=20)
    ap.add_argument("--eval-tokens", type=int, default=96)
    ap.add_argument("--heldout", default=None, help="held-out prompts (.json or .txt)")
    ap.add_argument("--thresholds", type=float, nargs="+", default=[0.9, 0.7, 0.5])
    a = ap.parse_args()
    if a.seq % a.block:
        raise SystemExit(f"train: --seq {a.seq} is not a multiple of --block {a.block}")
    from tokenizers import Tokenizer
    tok_path = os.path.join(a.tok, "tokenizer.json")
    tok = Tokenizer.from_file(tok_path)
    vocab = tok.get_vocab_size()
    mask_id, eot = tok.token_to_id("<|mask|>"), tok.token_to_id("<|endoftext|>")
    if mask_id is None:
        raise SystemExit(f"train: {tok_path} has no <|mask|> token")
    stream = None
    if a.pack:
        # the workers start (spawned) before CUDA is touched
        from stream import Stream
        stream = Stream(a.pack, tok_path, seed=a.seed, batch=a.batch, seq=a.seq, block=a.block,
                        prose_p=a.prose_p, think_p=a.think_p, workers=a.workers,
                        prose_p_diff=a.prose_p_diff, causal_steps=a.causal_steps)
    cfg = text_config(a.geometry, vocab, eot, tok.token_to_id("<|im_end|>"))
    model = CloverTrainModel(cfg, seed=a.seed)
    step, log, _ = ckpt_io.load(model, a.ckpt)
    if step == 0 and a.init_from:
        step, log, _ = ckpt_io.load(model, a.init_from)
    model.to(a.device).train()
    model.grouped = a.device.startswith("cuda") and not os.environ.get("CLOVER_TRAIN_LOOP_MOE")
    nparam = sum(p.numel() for p in model.parameters())
    t_data = time.time()
    if stream is None:
        ids_all, real_all = build_rows(a.corpus, tok, a.seed, a.block, a.seq, a.limit)
        rows = ids_all.shape[0]
        if rows == 0:
            raise SystemExit(f"train: no exchange fits a row of --seq {a.seq} tokens (block {a.block})")
        what = (f"{rows} rows of {a.seq} ({real_all.sum().item() / 1e6:.2f}M real tokens, "
                f"{real_all.float().mean().item():.2f} of the rows' tokens)")
        ids_all, real_all = ids_all.to(a.device), real_all.to(a.device)
        order = torch.randperm(rows, generator=torch.Generator().manual_seed(a.seed)).to(a.device)
    else:
        what = f"batches of {a.batch} x {a.seq} streamed from {a.pack} by {a.workers} workers"
        stream.prefetch(step)   # the first batch made: the workers have loaded the pack
    print(f"train: {nparam / 1e6:.2f}M parameters, {what}, ready in "
          f"{time.time() - t_data:.1f} s, from step {step} of {a.steps}, on {a.device}"
          f"{' bf16' if a.bf16 else ''}{' compiled' if a.compile else ''}"
          f"{' int8-ckpt' if a.ckpt_int8 else ''}", flush=True)
    # The optimizer restarts with each run (weights-only checkpoints); a short
    # re-warmup keeps the restart gentle.
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    other = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": other, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), fused=a.device.startswith("cuda"))
    fwd = torch.compile(model) if a.compile else model
    gen = torch.Generator(device=a.device).manual_seed(a.seed + step)
    start_step, t0, last_save = step, time.time(), time.time()
    ntok, eng_s, eng_rows, eng_steps = 0, 0.0, 0, 0
    if step < a.cosine_from:
        raise SystemExit(f"train: --cosine-from {a.cosine_from} is past the checkpoint's step {step}: "
                         f"it restarts the schedule from a checkpoint at or after that step")
    warm = a.warmup if start_step == 0 else a.rewarmup
    accum = a.accum
    sd = None
    if a.sd_p > 0 and step >= a.causal_steps:
        try:
            if a.sd_rows and os.path.exists(a.sd_rows):
                sd = load_sd_rows(a.sd_rows, a.seq)
                print(f"train: self-distillation: {sd[0].shape[0]} rows read from {a.sd_rows}",
                      flush=True)
            else:
                sd = self_distill_rows(a, model, tok, step)
                if a.sd_rows:
                    save_sd_rows(a.sd_rows, *sd)
        except Exception:   # a device call still trains (without these rows) rather than die
            import traceback
            traceback.print_exc()
            print("train: self-distillation rows failed: training without them", flush=True)
        model.train()
        if sd is not None:   # on the device once, not copied again every step
            sd = tuple(x.to(a.device) for x in sd)
    while step < a.steps:
        lr = a.lr * lr_factor(step, start_step, a.steps, a.warmup, warm, a.cosine_from)
        for g in opt.param_groups:
            g["lr"] = lr
        if stream is None:
            epoch, off = divmod(step * a.batch, rows)
            sel = order[(off + torch.arange(a.batch, device=a.device)) % rows]
            ids, real = ids_all[sel], real_all[sel]
            ep = round(epoch + off / rows, 2)
        else:
            ids_np, real_np = stream.get(step)
            ids = torch.from_numpy(ids_np).to(a.device, torch.long, non_blocking=True)
            real = torch.from_numpy(real_np).to(a.device, non_blocking=True)
            ep = None
        diffusion = step >= a.causal_steps
        selfgen = None
        if sd is not None:
            # the first n_sd rows (the stream's rows are in a shuffled order) become
            # self-distillation rows drawn by step: a run that resumes draws the same
            k = max(1, round(a.sd_p * a.batch))
            pick = torch.randint(0, sd[0].shape[0], (k,),
                                 generator=torch.Generator().manual_seed(a.seed * 31 + step)).to(a.device)
            ids, real = ids.clone(), real.clone()
            ids[:k], real[:k] = sd[0][pick], sd[1][pick]
            selfgen = torch.zeros_like(real)
            selfgen[:k] = sd[2][pick]
        sharpen = a.sharpen_from is not None and step >= a.sharpen_from
        r_max = min(1.0, 0.3 + 0.7 * (step - a.causal_steps) / max(a.ramp, 1))
        noisy, masked = mask_batch(ids, a.block, r_max, mask_id, gen, a.full_p, a.r_min,
                                   a.complementary, a.prefix_p) if diffusion else (None, None)
        if diffusion and a.engine_mask_p > 0:
            te = time.time()
            noisy, masked, n_eng, k_eng = mix_engine_masks(
                model, ids, noisy, masked, a.block, mask_id, gen, a.engine_mask_p,
                threshold=a.engine_threshold, max_pass=a.engine_passes, fill=a.engine_fill,
                max_distance=a.engine_max_distance, autocast=(a.device.split(":")[0], a.bf16))
            eng_s += time.time() - te
            eng_rows += n_eng
            eng_steps += 1
        while True:
            try:
                opt.zero_grad(set_to_none=True)
                loss_c, loss_p, loss_d, loss_e = accumulate(
                    fwd, a, ids, real, noisy, masked, accum, a.distill if diffusion else 0,
                    a.entropy if sharpen else 0, a.distill_near, selfgen)
                break
            except torch.OutOfMemoryError:
                # same batch, same step, in more micro-batches: the schedule is unchanged
                if accum >= a.batch or accum >= 32:
                    raise
                accum *= 2
                opt.zero_grad(set_to_none=True)
                torch.cuda.empty_cache()
                print(f"train: out of memory at step {step}: micro-batches of "
                      f"{a.batch // accum} ({accum} a step) from now on", flush=True)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        ntok += a.batch * a.seq
        if step % a.log_every == 0 or step == a.steps:
            now = time.time()
            rec = {"step": step, "epoch": ep,
                   "causal": round(loss_c.item(), 4), "preview": round(loss_p.item(), 4),
                   "distill": round(loss_d.item(), 4), "entropy": round(loss_e.item(), 4),
                   "r_max": round(r_max, 3) if diffusion else 0,
                   "lr": round(lr, 6), "tok_per_s": round(ntok / max(now - t0, 1e-9)),
                   "wall_s": round(now - START, 1)}
            if a.engine_mask_p > 0:
                # seconds a step spent in the engine passes, rows a step they masked
                rec["engine_s"] = round(eng_s / max(eng_steps, 1), 3)
                rec["engine_rows"] = round(eng_rows / max(eng_steps, 1), 1)
            t0, ntok, eng_s, eng_rows, eng_steps = time.time(), 0, 0.0, 0, 0
            log.append(rec)
            print(json.dumps(rec), flush=True)
        done = step == a.steps
        out_of_time = time.time() - START > a.stop_after_min * 60 or \
            (a.max_steps_run is not None and step - start_step >= a.max_steps_run)
        if a.eval_prompts > 0 and ((step % a.eval_every == 0 and step > a.causal_steps)
                                   or done or out_of_time):
            from evaluate import evaluate
            model.eval()
            with torch.no_grad(), torch.autocast(a.device.split(":")[0], dtype=torch.bfloat16,
                                                 enabled=a.bf16):
                res = evaluate(model, tok, a.block, a.thresholds, a.eval_prompts, a.eval_tokens,
                               heldout_path=a.heldout)
            model.train()
            log.append({"step": step, "eval": res})
            print(f"eval step {step}: AR answers' NLL {res['ar']['nll']:.3f}; " + ", ".join(
                f"th {k}: {v['tokens_per_pass']:.2f} tok/pass, NLL x{v['nll_ratio']}"
                for k, v in res.items() if k != "ar"), flush=True)
            for k, v in res.items():
                print(f"  {k}: {v['samples'][0]!r}", flush=True)
            t0, ntok = time.time(), 0
        if done or out_of_time or time.time() - last_save > a.save_every_s:
            save_ckpt(model, a.ckpt, step, log, a.ckpt_int8)
            last_save = time.time()
            print(f"train: checkpoint at step {step} in {a.ckpt} ({time.time() - START:.0f} s)",
                  flush=True)
        if done or out_of_time:
            break
    if stream is not None:
        stream.close()


if __name__ == "__main__":
    main()
