"""Device-side check before training (test_model.test_grouped_moe_equals_loop
on CUDA): the grouped-GEMM MoE in bf16 against the float loop, output and every
gradient, normalised error bound 2e-2 (the test's bound and its reason). Exits
1 on a miss, so the run script trains with the loop instead."""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "tests"))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
from test_model import moe_pair  # noqa: E402

m, mlp, x = moe_pair("cuda")
outs = []
for grouped in (False, True):
    m.grouped = grouped
    xx = x.clone().requires_grad_(True)
    y = m.moe(mlp, xx)
    mlp.zero_grad()
    (y * torch.linspace(-1, 1, y.shape[-1], device="cuda")).sum().backward()
    outs.append([y.detach(), xx.grad] + [p.grad.clone() for p in mlp.parameters()
                                         if p.grad is not None])
errs = [((g.float() - w).norm() / w.norm()).item() for w, g in zip(*outs)]
print(f"check_cuda: grouped vs loop, {len(errs)} tensors, worst normalised error "
      f"{max(errs):.2e} (bound 2e-2)")
sys.exit(0 if len(outs[0]) == len(outs[1]) and max(errs) < 2e-2 else 1)
