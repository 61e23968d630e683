"""Training checkpoints small enough to come back from the GPU machine and be
committed (issue 26): safetensors shards of at most 16 MB each (`run` returns
at most 8 files of 16 MiB), written under temporary names and renamed,
`state.json` last, so a run killed mid-save keeps the previous good one.

Weights are bf16, or with int8=True 8-bit: every matrix in blocks of 64 values
with one float16 scale each (absmax / 127, as Q8_0 does with 32), `NAME.q8` +
`NAME.q8s`; vectors and odd-sized tensors stay float32. 8-bit halves the size (the 27.6M-parameter
"demo" geometry: ~29 MB instead of 55) at a rounding error of at most half a
step (absmax/254) per value, well under the noise of one optimizer step. The
optimizer state is not kept (two float32 moments would be 8x the 8-bit
weights): a resumed run restarts AdamW with a short warm-up.
"""
from __future__ import annotations

import json
import os

import torch

SHARD_BYTES = 16 * 10**6
QBLOCK = 64


def _encode(sd: dict, int8: bool) -> dict:
    out = {}
    for k, v in sd.items():
        v = v.detach().float().cpu().contiguous()
        if int8 and v.dim() >= 2 and v.numel() % QBLOCK == 0:
            b = v.reshape(-1, QBLOCK)
            # the scale rounded to float16 first, so the values are quantized
            # against the scale that is stored (error <= half a step)
            s = (b.abs().amax(1) / 127).clamp_min(1e-7).to(torch.float16)
            q = torch.round(b / s.float()[:, None]).clamp(-127, 127)
            out[k + ".q8"] = q.to(torch.int8).reshape(v.shape)
            out[k + ".q8s"] = s
        elif int8:                                   # vectors, odd shapes: float32
            out[k] = v
        else:
            out[k] = v.to(torch.bfloat16)
    return out


def _decode(raw: dict) -> dict:
    sd = {}
    for k, v in raw.items():
        if k.endswith(".q8s"):
            continue
        if k.endswith(".q8"):
            s = raw[k + "s"].float()
            sd[k[:-3]] = (v.float().reshape(-1, QBLOCK) * s[:, None]).reshape(v.shape)
        else:
            sd[k] = v.float()
    return sd


def save(model, path: str, step: int, log: list, int8: bool = False, extra: dict | None = None) -> list:
    from safetensors.torch import save_file
    os.makedirs(path, exist_ok=True)
    enc = _encode(model.state_dict(), int8)
    shards, cur, size = [], {}, 0
    for k in sorted(enc):
        nb = enc[k].numel() * enc[k].element_size()
        if cur and size + nb > SHARD_BYTES and not k.endswith(".q8s"):
            shards.append(cur)
            cur, size = {}, 0
        cur[k], size = enc[k], size + nb
    shards.append(cur)
    names = [f"weights-{i:03d}.safetensors" for i in range(len(shards))]
    for n, s in zip(names, shards):
        save_file(s, os.path.join(path, n + ".tmp"))
    for n in names:
        os.replace(os.path.join(path, n + ".tmp"), os.path.join(path, n))
    for n in os.listdir(path):
        if n.startswith("weights-") and n not in names:
            os.remove(os.path.join(path, n))
    st = {"step": step, "shards": names, "int8": int8, "log": log, **(extra or {})}
    with open(os.path.join(path, "state.json.tmp"), "w") as f:
        json.dump(st, f, indent=0)
    os.replace(os.path.join(path, "state.json.tmp"), os.path.join(path, "state.json"))
    for n in names:
        if os.path.getsize(os.path.join(path, n)) > 16 * 2**20:
            raise SystemExit(f"ckpt: {n} is over 16 MiB; it would not come back from the device")
    return names


def load(model, path: str):
    """(step, log, state) from path/state.json, or (0, [], {}) when there is none."""
    from safetensors.torch import load_file
    if not path or not os.path.exists(os.path.join(path, "state.json")):
        return 0, [], {}
    with open(os.path.join(path, "state.json")) as f:
        st = json.load(f)
    raw = {}
    for n in st.get("shards") or sorted(x for x in os.listdir(path) if x.startswith("weights-")):
        raw.update(load_file(os.path.join(path, n)))
    model.load_state_dict(_decode(raw))
    return st["step"], st["log"], st
