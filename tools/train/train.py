"""Train the small Clover model of issue 16 (both paths of SPEC 2), resumable.

Schedule (by global step, so a run that resumes continues the same curve):
  steps [0, causal_steps): causal loss only (the causal path learns far faster);
  then block-diffusion adaptation: causal loss + the preview loss on masked rows,
  each block masked at a ratio drawn from U(0.05, r_max), r_max rising from 0.3
  to 1.0 over `ramp` steps (a curriculum over the mask ratio), plus optionally
  `distill` x KL(causal prediction of the row || preview prediction), the causal
  path's predictions (detached) teaching the preview rows.

Data: the corpus's chat samples, tokenized, shuffled with the seed, packed into
rows of `seq` tokens (a multiple of the block size), so blocks start at every
offset of an exchange, as a prompt of any length makes them do at inference.

Checkpoint (`--ckpt DIR`): the weights in bf16 in files of at most 16 MB, the
step and the loss log; `--stop-after-min M` saves and exits cleanly after M
minutes of wall time, so a device call of <= 10 minutes always ends with a
checkpoint to resume from. Every `--eval-every` steps (and at the end) it
exports the model and measures tokens per pass on the held-out prompts with the
reference's own generation loop (clover_ref.generate), logged beside the losses.

    python3 tools/train/train.py --corpus C --tok T --ckpt K [--geometry small] ...
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import random
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))

from model import GEOMETRIES, CloverTrainModel, text_config  # noqa: E402

SHARD_BYTES = 16 * 10**6


def load_ids(corpus: str, tok, seed: int, limit: int | None):
    with gzip.open(os.path.join(corpus, "train.jsonl.gz"), "rt", encoding="utf-8") as f:
        texts = [json.loads(ln)["text"] for i, ln in zip(range(limit or 1 << 62), f)]
    random.Random(seed).shuffle(texts)
    ids = []
    for e in tok.encode_batch(texts):
        ids.extend(e.ids)
    return torch.tensor(ids, dtype=torch.long)


def save_ckpt(model, path: str, step: int, log: list) -> None:
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
    from safetensors.torch import save_file
    for n in os.listdir(path):
        if n.startswith("weights-"):
            os.remove(os.path.join(path, n))
    for i, s in enumerate(shards):
        save_file(s, os.path.join(path, f"weights-{i:03d}.safetensors"))
    with open(os.path.join(path, "state.json"), "w") as f:
        json.dump({"step": step, "log": log}, f, indent=1)


def load_ckpt(model, path: str):
    from safetensors.torch import load_file
    if not os.path.exists(os.path.join(path, "state.json")):
        return 0, []
    sd = {}
    for n in sorted(os.listdir(path)):
        if n.startswith("weights-"):
            sd.update(load_file(os.path.join(path, n)))
    model.load_state_dict({k: v.float() for k, v in sd.items()})
    with open(os.path.join(path, "state.json")) as f:
        st = json.load(f)
    return st["step"], st["log"]


def mask_batch(ids, block, r_max, mask_id, gen):
    """Each block of each row masked at its own ratio in U(0.05, r_max)."""
    n, t = ids.shape
    m = t // block
    ratio = 0.05 + (r_max - 0.05) * torch.rand(n, m, 1, generator=gen, device=ids.device)
    u = torch.rand(n, m, block, generator=gen, device=ids.device)
    masked = (u < ratio).reshape(n, t)
    return torch.where(masked, torch.full_like(ids, mask_id), ids), masked


def evaluate(model, a, tok_dir, step):
    """Tokens per pass and answers on the held-out prompts, greedy, thinking off,
    through the reference's generation loop on the exported model."""
    from clover_ref.checkpoint import CloverModel
    from clover_ref.generate import Options, TrunkBackend, generate_block_diffusion
    from tokenizers import Tokenizer
    from export import export
    out = os.path.join(a.ckpt, "eval-hf")
    export(model, tok_dir, out, a.block, a.thresholds[0], a.every)
    cm = CloverModel(out, device=a.device)
    tok = Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))
    with open(os.path.join(HERE, "heldout_prompts.json")) as f:
        prompts = json.load(f)["prompts"][:a.eval_prompts]
    res = {}
    for th in a.thresholds:
        toks = passes = 0
        sample = None
        for p in prompts:
            text = (f"<|im_start|>user\n{p['prompt']}<|im_end|>\n<|im_start|>assistant\n"
                    "<think>\n\n</think>\n\n")
            r = generate_block_diffusion(TrunkBackend(cm), cm.record, cm.stop_ids(),
                                         tok.encode(text).ids,
                                         Options(max_tokens=a.eval_tokens, threshold=th))
            toks += len(r.tokens)
            passes += sum(r.passes_per_block)
            sample = sample or tok.decode(r.tokens)
        res[str(th)] = {"tokens_per_pass": toks / max(passes, 1), "sample": sample}
    print(f"eval step {step}: " + ", ".join(f"th {k}: {v['tokens_per_pass']:.2f} tok/pass"
                                            for k, v in res.items()), flush=True)
    print(f"  sample: {res[str(a.thresholds[0])]['sample']!r}", flush=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--tok", required=True)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--geometry", default="small", choices=sorted(GEOMETRIES))
    ap.add_argument("--steps", type=int, default=6000)
    ap.add_argument("--causal-steps", type=int, default=2000)
    ap.add_argument("--ramp", type=int, default=1500)
    ap.add_argument("--distill", type=float, default=0.5)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--block", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--bf16", action="store_true", help="autocast matmuls to bfloat16 (GPU)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the forward")
    ap.add_argument("--limit", type=int, default=None, help="use the first N corpus samples")
    ap.add_argument("--stop-after-min", type=float, default=9.0)
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--eval-every", type=int, default=1000)
    ap.add_argument("--eval-prompts", type=int, default=20)
    ap.add_argument("--eval-tokens", type=int, default=96)
    ap.add_argument("--thresholds", type=float, nargs="+", default=[0.9, 0.5])
    a = ap.parse_args()
    if a.seq % a.block:
        raise SystemExit(f"train: --seq {a.seq} is not a multiple of --block {a.block}")
    t0 = time.time()
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(a.tok, "tokenizer.json"))
    vocab = tok.get_vocab_size()
    mask_id, eot = tok.token_to_id("<|mask|>"), tok.token_to_id("<|endoftext|>")
    cfg = text_config(a.geometry, vocab, eot, tok.token_to_id("<|im_end|>"))
    a.every = GEOMETRIES[a.geometry]["full_attention_interval"]
    model = CloverTrainModel(cfg, seed=a.seed)
    step, log = load_ckpt(model, a.ckpt)
    model.to(a.device).train()
    nparam = sum(p.numel() for p in model.parameters())
    data = load_ids(a.corpus, tok, a.seed, a.limit)
    rows = data.numel() // a.seq
    data = data[:rows * a.seq].view(rows, a.seq)
    print(f"train: {nparam / 1e6:.1f}M parameters, {data.numel() / 1e6:.2f}M tokens "
          f"({rows} rows of {a.seq}), from step {step}, on {a.device}", flush=True)
    # The optimizer restarts with each run (weights-only checkpoints); a short
    # re-warmup keeps the restart gentle.
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.1)
    fwd = torch.compile(model) if a.compile else model
    gen = torch.Generator(device=a.device).manual_seed(a.seed + step)
    order = torch.randperm(rows, generator=torch.Generator().manual_seed(a.seed))
    start_step = step
    while step < a.steps:
        lr = a.lr * min(1.0, (step - start_step + 1) / a.warmup, (step + 1) / a.warmup) * \
            0.5 * (1 + math.cos(math.pi * step / a.steps))
        for g in opt.param_groups:
            g["lr"] = lr
        sel = order[(step * a.batch + torch.arange(a.batch)) % rows]
        ids = data[sel].to(a.device)
        diffusion = step >= a.causal_steps
        r_max = min(1.0, 0.3 + 0.7 * (step - a.causal_steps) / max(a.ramp, 1))
        noisy, masked = mask_batch(ids, a.block, r_max, mask_id, gen) if diffusion else (None, None)
        with torch.autocast(a.device.split(":")[0], dtype=torch.bfloat16, enabled=a.bf16):
            lc, ln = fwd(ids, noisy, a.block)
        lc = lc.float()
        loss_c = F.cross_entropy(lc[:, :-1].reshape(-1, vocab), ids[:, 1:].reshape(-1))
        loss = loss_c
        loss_p = loss_d = torch.zeros(())
        if diffusion:
            ln = ln.float()
            loss_p = F.cross_entropy(ln[masked], ids[masked])
            loss = loss + loss_p
            if a.distill > 0:
                # row r's token is predicted causally at r-1 (row 0 of the sequence has none)
                mk = masked.clone()
                mk[:, 0] = False
                teacher = F.softmax(lc.detach()[:, :-1][mk[:, 1:]], -1)
                loss_d = F.kl_div(F.log_softmax(ln[mk], -1), teacher, reduction="batchmean")
                loss = loss + a.distill * loss_d
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % a.log_every == 0 or step == a.steps:
            rec = {"step": step, "causal": round(loss_c.item(), 4), "preview": round(loss_p.item(), 4),
                   "distill": round(loss_d.item(), 4), "r_max": round(r_max, 3) if diffusion else 0,
                   "lr": lr, "tok_per_s": round(a.batch * a.seq * a.log_every /
                                                max(time.time() - t0, 1e-9))}
            t0 = time.time()
            log.append(rec)
            print(json.dumps(rec), flush=True)
        done = step == a.steps
        if (step % a.eval_every == 0 and step > a.causal_steps) or done:
            model.eval()
            log.append({"step": step, "eval": evaluate(model, a, a.tok, step)})
            model.train()
        if done or time.time() - START > a.stop_after_min * 60:
            break
    save_ckpt(model, a.ckpt, step, log)
    print(f"train: checkpoint at step {step} in {a.ckpt}", flush=True)


START = time.time()

if __name__ == "__main__":
    main()
