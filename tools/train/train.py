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

SHARD_BYTES = 16 * 10**6


def save_ckpt(model, path: str, step: int, log: list) -> None:
    """Shards written under temporary names, then renamed, state.json last."""
    from safetensors.torch import save_file
    os.makedirs(path, exist_ok=True)
    sd = {k: v.detach().to(torch.bfloat16).cpu().contiguous() for k, v in model.state_dict().items()}
    shards, cur, size = [], {}, 0
    for k in sorted(sd):
        nb = sd[k].numel() * 2
        if cur and size + nb > SHARD_BYTES:
            shards.append(cur)
            cur, size = {}, 0
        cur[k], size = sd[k], size + nb
    shards.append(cur)
    names = [f"weights-{i:03d}.safetensors" for i in range(len(shards))]
    for n, s in zip(names, shards):
        save_file(s, os.path.join(path, n + ".tmp"))
    for n in names:
        os.replace(os.path.join(path, n + ".tmp"), os.path.join(path, n))
    for n in os.listdir(path):
        if n.startswith("weights-") and n not in names:
            os.remove(os.path.join(path, n))
    with open(os.path.join(path, "state.json.tmp"), "w") as f:
        json.dump({"step": step, "shards": names, "log": log}, f, indent=1)
    os.replace(os.path.join(path, "state.json.tmp"), os.path.join(path, "state.json"))


def load_ckpt(model, path: str):
    from safetensors.torch import load_file
    if not os.path.exists(os.path.join(path, "state.json")):
        return 0, []
    with open(os.path.join(path, "state.json")) as f:
        st = json.load(f)
    sd = {}
    for n in st.get("shards") or sorted(x for x in os.listdir(path) if x.startswith("weights-")):
        sd.update(load_file(os.path.join(path, n)))
    model.load_state_dict({k: v.float() for k, v in sd.items()})
    return st["step"], st["log"]


def mask_batch(ids, block, r_max, mask_id, gen):
    """Each block of each row masked at its own ratio in U(0.05, r_max)."""
    n, t = ids.shape
    m = t // block
    ratio = 0.05 + (r_max - 0.05) * torch.rand(n, m, 1, generator=gen, device=ids.device)
    u = torch.rand(n, m, block, generator=gen, device=ids.device)
    masked = (u < ratio).reshape(n, t)
    return torch.where(masked, torch.full_like(ids, mask_id), ids), masked


def losses(lc, ln, ids, real, masked, distill: float):
    """Causal CE on real targets; preview CE on masked rows (pads included:
    the rows after an answer must resolve fast at inference too); the
    distillation KL on masked real rows that have a causal prediction."""
    v = lc.shape[-1]
    tgt_ok = real[:, 1:]
    loss_c = F.cross_entropy(lc[:, :-1][tgt_ok].float(), ids[:, 1:][tgt_ok])
    if ln is None:
        z = loss_c.new_zeros(())
        return loss_c, z, z
    lnm = ln[masked].float()
    loss_p = F.cross_entropy(lnm, ids[masked])
    loss_d = loss_c.new_zeros(())
    if distill > 0:
        mk = masked & real
        mk[:, 0] = False
        teacher = F.softmax(lc.detach()[:, :-1][mk[:, 1:]].float(), -1)
        student = F.log_softmax(ln[mk].float(), -1)
        loss_d = F.kl_div(student, teacher, reduction="batchmean")
    del v
    return loss_c, loss_p, loss_d


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--tok", required=True)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--geometry", default="small", choices=sorted(GEOMETRIES))
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--causal-steps", type=int, default=600)
    ap.add_argument("--ramp", type=int, default=800)
    ap.add_argument("--distill", type=float, default=0.5)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--block", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--bf16", action="store_true", help="autocast matmuls to bfloat16 (GPU)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the forward")
    ap.add_argument("--limit", type=int, default=None, help="use the first N corpus samples")
    ap.add_argument("--stop-after-min", type=float, default=9.0)
    ap.add_argument("--max-steps-run", type=int, default=None, help="stop this run after N steps")
    ap.add_argument("--save-every-s", type=float, default=60.0)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--eval-every", type=int, default=500)
    ap.add_argument("--eval-prompts", type=int, default=20)
    ap.add_argument("--eval-tokens", type=int, default=96)
    ap.add_argument("--thresholds", type=float, nargs="+", default=[0.9, 0.7, 0.5])
    a = ap.parse_args()
    if a.seq % a.block:
        raise SystemExit(f"train: --seq {a.seq} is not a multiple of --block {a.block}")
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(a.tok, "tokenizer.json"))
    vocab = tok.get_vocab_size()
    mask_id, eot = tok.token_to_id("<|mask|>"), tok.token_to_id("<|endoftext|>")
    cfg = text_config(a.geometry, vocab, eot, tok.token_to_id("<|im_end|>"))
    a.every = GEOMETRIES[a.geometry]["full_attention_interval"]
    model = CloverTrainModel(cfg, seed=a.seed)
    step, log = load_ckpt(model, a.ckpt)
    model.to(a.device).train()
    model.grouped = a.device.startswith("cuda") and not os.environ.get("CLOVER_TRAIN_LOOP_MOE")
    nparam = sum(p.numel() for p in model.parameters())
    t_data = time.time()
    ids_all, real_all = build_rows(a.corpus, tok, a.seed, a.block, a.seq, a.limit)
    rows = ids_all.shape[0]
    if rows == 0:
        raise SystemExit(f"train: no exchange fits a row of --seq {a.seq} tokens (block {a.block})")
    print(f"train: {nparam / 1e6:.2f}M parameters, {rows} rows of {a.seq} "
          f"({real_all.sum().item() / 1e6:.2f}M real tokens, "
          f"{real_all.float().mean().item():.2f} of the rows' tokens), built in "
          f"{time.time() - t_data:.1f} s, from step {step}, on {a.device}"
          f"{' bf16' if a.bf16 else ''}{' compiled' if a.compile else ''}", flush=True)
    ids_all, real_all = ids_all.to(a.device), real_all.to(a.device)
    # The optimizer restarts with each run (weights-only checkpoints); a short
    # re-warmup keeps the restart gentle.
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    other = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": other, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), fused=a.device.startswith("cuda"))
    fwd = torch.compile(model) if a.compile else model
    gen = torch.Generator(device=a.device).manual_seed(a.seed + step)
    order = torch.randperm(rows, generator=torch.Generator().manual_seed(a.seed)).to(a.device)
    start_step, t0, last_save = step, time.time(), time.time()
    ntok = 0
    while step < a.steps:
        lr = a.lr * min(1.0, (step - start_step + 1) / a.warmup, (step + 1) / a.warmup) * \
            (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / a.steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        epoch, off = divmod(step * a.batch, rows)
        sel = order[(off + torch.arange(a.batch, device=a.device)) % rows]
        ids, real = ids_all[sel], real_all[sel]
        diffusion = step >= a.causal_steps
        r_max = min(1.0, 0.3 + 0.7 * (step - a.causal_steps) / max(a.ramp, 1))
        noisy, masked = mask_batch(ids, a.block, r_max, mask_id, gen) if diffusion else (None, None)
        with torch.autocast(a.device.split(":")[0], dtype=torch.bfloat16, enabled=a.bf16):
            lc, ln = fwd(ids, noisy, a.block)
        loss_c, loss_p, loss_d = losses(lc, ln, ids, real, masked, a.distill if diffusion else 0)
        loss = loss_c + loss_p + a.distill * loss_d
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        ntok += a.batch * a.seq
        if step % a.log_every == 0 or step == a.steps:
            now = time.time()
            rec = {"step": step, "epoch": round(epoch + off / rows, 2),
                   "causal": round(loss_c.item(), 4), "preview": round(loss_p.item(), 4),
                   "distill": round(loss_d.item(), 4), "r_max": round(r_max, 3) if diffusion else 0,
                   "lr": round(lr, 6), "tok_per_s": round(ntok / max(now - t0, 1e-9)),
                   "wall_s": round(now - START, 1)}
            t0, ntok = time.time(), 0
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
                res = evaluate(model, tok, a.block, a.thresholds, a.eval_prompts, a.eval_tokens)
            model.train()
            log.append({"step": step, "eval": res})
            print(f"eval step {step}: AR answers' NLL {res['ar']['nll']:.3f}; " + ", ".join(
                f"th {k}: {v['tokens_per_pass']:.2f} tok/pass, NLL x{v['nll_ratio']}"
                for k, v in res.items() if k != "ar"), flush=True)
            for k, v in res.items():
                print(f"  {k}: {v['samples'][0]!r}", flush=True)
            t0, ntok = time.time(), 0
        if done or out_of_time or time.time() - last_save > a.save_every_s:
            save_ckpt(model, a.ckpt, step, log)
            last_save = time.time()
            print(f"train: checkpoint at step {step} in {a.ckpt} ({time.time() - START:.0f} s)",
                  flush=True)
        if done or out_of_time:
            break


if __name__ == "__main__":
    main()
