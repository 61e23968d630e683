"""The reference of a quantised GGUF file: transformers' model with the
file's own weights, dequantised by llama.cpp's `gguf` package, and clover's
8-bit activation rounding applied where clover applies it.

Weights. Every tensor the file stores in a type other than F32 (Q8_0,
Q4_K, Q6_K, F16 ...) is dequantised by gguf.quants.dequantize and put back
in Hugging Face layout (the inverse of the converter's value-head tiling and
expert split, tests/python/test_convert_support.py spells the forward map);
F32 tensors are the checkpoint's own values and stay. The result is checked
against the float weights (a mapping error would be of order 1, a
quantisation error is bounded by the type's step).

Activations (clover's src/quant/matmul.c, the "integer path"): on a CPU
with AVX2+FMA+F16C and CLOVER_NO_SIMD unset, every matrix product against
Q8_0 or K-quant weights rounds each activation row to 8 bits first, in
blocks of 32 (Q8_0) or 256 (Q4_K, Q5_K, Q6_K) values: d = max|x| / 127
(float32), code = round-half-even(x * (127 / max|x|)) in float32, value =
d * code; any row count (three or more rows go through the integer tile
kernel, gemm_avx2.c, one or two through the per-row dot, whose stack buffer
leaves rows beyond 40 KiB of 8-bit blocks on float32). Every product on
other CPUs, and every product against float weights, keeps float32
activations. `rule="act8"` applies the rounding to every quantised Linear
and expert product; `rule="f32"` never does.
"""
from __future__ import annotations

import contextlib

import numpy as np
import torch
from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader
from gguf.quants import dequantize
from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe as qm

ACT_MAX_ROWS = 2                 # matmul.c: rows that take the per-row integer dot
ACT_STACK_BYTES = 40 * 1024      # matmul.c: their buffer (more rows: the heap, no limit)
ACT_BLOCK = {QT.Q8_0: 32, QT.Q4_K: 256, QT.Q5_K: 256, QT.Q6_K: 256}
ACT_BLOCK_BYTES = {32: 4 + 32, 256: 4 + 256 + 2 * 16}   # act_q8_32 / act_q8_k


# When set (a torch.Generator), act_round first moves every input by one
# float32 ulp up or down at random: the size of the summation-order
# differences between two correct implementations, to measure how far
# those alone move the logits through the 8-bit rounding's code flips
# (make_quant_fixtures.py's act8 spread).
PERTURB = None


def act_round(x: torch.Tensor, block: int) -> torch.Tensor:
    """x [m][n] float32 -> its 8-bit rounding (the module docstring's rule)."""
    m, n = x.shape
    if PERTURB is not None:
        sign = torch.randint(0, 2, x.shape, generator=PERTURB).to(torch.float32) * 2 - 1
        x = x * (1 + sign * torch.tensor(2.0 ** -23, dtype=torch.float32))
    xb = x.reshape(m, n // block, block)
    amax = xb.abs().amax(dim=-1, keepdim=True)
    safe = torch.where(amax > 0, amax, torch.ones_like(amax))
    iscale = torch.where(amax > 0, torch.tensor(127.0, dtype=torch.float32) / safe, torch.zeros_like(amax))
    q = torch.round(xb * iscale)                     # half to even, like nearbyintf
    d = amax / torch.tensor(127.0, dtype=torch.float32)
    return (q * d).reshape(m, n)


def act_applies(block: int, n_in: int, n_rows: int) -> bool:
    return (block > 0 and n_in % block == 0
            and (n_rows > ACT_MAX_ROWS or n_in // block * ACT_BLOCK_BYTES[block] * n_rows <= ACT_STACK_BYTES))


def _tiled_index(nk: int, nv: int, hs: int) -> np.ndarray:
    """GGUF (tiled) position i -> Hugging Face (grouped) element: gguf[i] = hf[perm[i]]."""
    r = nv // nk
    heads = [(p % nk) * r + p // nk for p in range(nv)]
    return np.array([heads[i // hs] * hs + i % hs for i in range(nv * hs)], dtype=np.int64)


def _untile_rows(a: np.ndarray, perm: np.ndarray, start: int = 0) -> np.ndarray:
    out = a.copy()
    out[start + perm] = a[start:start + len(perm)]
    return out


class QuantisedWeights:
    """Loads a GGUF file's dequantised weights into a CloverModel (in place)."""

    def __init__(self, cm, gguf_path: str):
        self.cm, self.path = cm, gguf_path
        self.reader = GGUFReader(gguf_path)
        self.types = {t.name: t.tensor_type for t in self.reader.tensors}
        self.report = []   # (gguf name, type, rel rmse vs the float weights)

    def load(self) -> None:
        cfg = self.cm.config
        nk, nv, dk, dv = (cfg.linear_num_key_heads, cfg.linear_num_value_heads, cfg.linear_key_head_dim,
                          cfg.linear_value_head_dim)
        I = cfg.moe_intermediate_size
        vperm, hperm, qk = _tiled_index(nk, nv, dv), _tiled_index(nk, nv, 1), 2 * nk * dk
        params = dict(self.cm.model.named_parameters())
        for t in self.reader.tensors:
            if t.tensor_type == QT.F32:
                continue
            shape = tuple(int(x) for x in reversed([int(s) for s in t.shape]))
            a = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(shape)
            name = t.name
            if name == "token_embd.weight":
                self._put(params, "model.embed_tokens.weight", a, name)
                continue
            if name == "output.weight":
                self._put(params, "lm_head.weight", a, name)
                continue
            _, li, rest = name.split(".", 2)
            p = f"model.layers.{int(li)}."
            la, sa, mlp = p + "linear_attn.", p + "self_attn.", p + "mlp."
            simple = {"attn_q.weight": sa + "q_proj.weight", "attn_k.weight": sa + "k_proj.weight",
                      "attn_v.weight": sa + "v_proj.weight", "attn_output.weight": sa + "o_proj.weight",
                      "ffn_gate_shexp.weight": mlp + "shared_expert.gate_proj.weight",
                      "ffn_up_shexp.weight": mlp + "shared_expert.up_proj.weight",
                      "ffn_down_shexp.weight": mlp + "shared_expert.down_proj.weight",
                      "ffn_down_exps.weight": mlp + "experts.down_proj"}
            if rest in simple:
                self._put(params, simple[rest], a, name)
            elif rest == "attn_qkv.weight":
                self._put(params, la + "in_proj_qkv.weight", _untile_rows(a, vperm, qk), name)
            elif rest == "attn_gate.weight":
                self._put(params, la + "in_proj_z.weight", _untile_rows(a, vperm), name)
            elif rest == "ssm_beta.weight":
                self._put(params, la + "in_proj_b.weight", _untile_rows(a, hperm), name)
            elif rest == "ssm_alpha.weight":
                self._put(params, la + "in_proj_a.weight", _untile_rows(a, hperm), name)
            elif rest == "ssm_out.weight":
                self._put(params, la + "out_proj.weight", _untile_rows(a.T, vperm).T, name)
            elif rest in ("ffn_gate_exps.weight", "ffn_up_exps.weight"):
                gu = params[mlp + "experts.gate_up_proj"]
                sl = slice(0, I) if rest.startswith("ffn_gate") else slice(I, 2 * I)
                self._put(params, mlp + "experts.gate_up_proj", a, name, sub=(slice(None), sl))
                del gu
            else:
                raise ValueError(f"{self.path}: no Hugging Face place for {name} ({t.tensor_type.name})")

    def _put(self, params, hf_name, a, gguf_name, sub=None):
        p = params[hf_name]
        with torch.no_grad():
            dst = p if sub is None else p[sub]
            if tuple(dst.shape) != a.shape:
                raise ValueError(f"{gguf_name}: shape {a.shape}, {hf_name} is {tuple(dst.shape)}")
            orig = dst.detach().clone()
            dst.copy_(torch.from_numpy(np.ascontiguousarray(a)))
            rel = float(torch.sqrt(((dst - orig) ** 2).mean()) / torch.sqrt((orig ** 2).mean()))
        self.report.append((gguf_name, self.types[gguf_name].name, rel))
        # Q8_0 / F16 stay within 1% rms of the float weights, K-quants within 20%:
        # a weight put in the wrong place would be ~140% off.
        bound = 0.01 if self.types[gguf_name] in (QT.Q8_0, QT.F16, QT.BF16) else 0.2
        if not rel <= bound:
            raise ValueError(f"{gguf_name} -> {hf_name}: {rel:.3g} rms off the float weights "
                             f"(bound {bound}): the inverse mapping is wrong")

    def act_block_of(self, gguf_name: str) -> int:
        return ACT_BLOCK.get(self.types.get(gguf_name), 0)


# (layer, the experts' input rows) of every MoE call inside activation_rule:
# the router logits of each row, for its top-k margin.
EXPERT_INPUTS: list = []


@contextlib.contextmanager
def activation_rule(cm, qw: QuantisedWeights, rule: str):
    """Within the block, the model's products round activations as clover does under `rule`."""
    if rule not in ("act8", "f32"):
        raise ValueError(rule)
    hooks, saved = [], qm.Qwen3_5MoeExperts.forward
    for li, layer in enumerate(cm.model.model.layers):
        ex = layer.mlp.experts
        ex._clover_layer = li
        ex._clover_act = (0, 0, 0)
        if rule == "act8":
            ex._clover_act = (qw.act_block_of(f"blk.{li}.ffn_gate_exps.weight"),
                              qw.act_block_of(f"blk.{li}.ffn_up_exps.weight"),
                              qw.act_block_of(f"blk.{li}.ffn_down_exps.weight"))
    qm.Qwen3_5MoeExperts.forward = _experts_forward_act8
    if rule == "act8":
        names = {}
        for li in range(len(cm.model.model.layers)):
            for g, h in (("attn_q", "self_attn.q_proj"), ("attn_k", "self_attn.k_proj"),
                         ("attn_v", "self_attn.v_proj"), ("attn_output", "self_attn.o_proj"),
                         ("attn_qkv", "linear_attn.in_proj_qkv"), ("attn_gate", "linear_attn.in_proj_z"),
                         ("ssm_beta", "linear_attn.in_proj_b"), ("ssm_alpha", "linear_attn.in_proj_a"),
                         ("ssm_out", "linear_attn.out_proj"), ("ffn_gate_shexp", "mlp.shared_expert.gate_proj"),
                         ("ffn_up_shexp", "mlp.shared_expert.up_proj"),
                         ("ffn_down_shexp", "mlp.shared_expert.down_proj")):
                names[f"model.layers.{li}.{h}"] = f"blk.{li}.{g}.weight"
        names["lm_head"] = "output.weight"
        for mod_name, mod in cm.model.named_modules():
            if mod_name in names and isinstance(mod, torch.nn.Linear):
                block = qw.act_block_of(names[mod_name])

                def pre(m, args, block=block):
                    x = args[0]
                    flat = x.reshape(-1, x.shape[-1])
                    if act_applies(block, flat.shape[1], flat.shape[0]):
                        return (act_round(flat, block).reshape(x.shape),) + tuple(args[1:])
                    return None
                hooks.append(mod.register_forward_pre_hook(pre))
    try:
        yield
    finally:
        qm.Qwen3_5MoeExperts.forward = saved
        for h in hooks:
            h.remove()


def _experts_forward_act8(self, hidden_states, top_k_index, top_k_weights):
    """transformers' eager Qwen3_5MoeExperts.forward, with each expert's rows
    rounded to 8 bits before the gate/up (and down) products when clover's
    rule applies to that product (a type with an integer path)."""
    bg, bu, bd = getattr(self, "_clover_act", (0, 0, 0))
    EXPERT_INPUTS.append((getattr(self, "_clover_layer", -1), hidden_states.detach().clone()))
    final_hidden_states = torch.zeros_like(hidden_states)
    with torch.no_grad():
        expert_mask = torch.nn.functional.one_hot(top_k_index, num_classes=self.num_experts)
        expert_mask = expert_mask.permute(2, 1, 0)
        expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
    I = self.intermediate_dim
    for expert_idx in expert_hit:
        expert_idx = expert_idx[0]
        if expert_idx == self.num_experts:
            continue
        top_k_pos, token_idx = torch.where(expert_mask[expert_idx])
        x = hidden_states[token_idx]
        m, n = x.shape
        w = self.gate_up_proj[expert_idx]
        xg = act_round(x, bg) if act_applies(bg, n, m) else x
        xu = act_round(x, bu) if act_applies(bu, n, m) else x
        gate = torch.nn.functional.linear(xg, w[:I])
        up = torch.nn.functional.linear(xu, w[I:])
        h = self.act_fn(gate) * up
        if act_applies(bd, h.shape[1], m):
            h = act_round(h, bd)
        out = torch.nn.functional.linear(h, self.down_proj[expert_idx])
        out = out * top_k_weights[token_idx, top_k_pos, None]
        final_hidden_states.index_add_(0, token_idx, out.to(final_hidden_states.dtype))
    return final_hidden_states
