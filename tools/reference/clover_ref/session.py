"""One sequence on the causal trunk: transformers' own cache (KV rows of the
attention layers, conv states and recurrent states of the GDN layers) plus
the committed token ids.

`commit` IS transformers' forward with `use_cache`: rows at the end of the
cached sequence, positions continuing from the committed length. The preview
only reads what this holds (`gdn_state`, `kv`).
"""
from __future__ import annotations

import numpy as np
import torch
from transformers import DynamicCache


class Session:
    def __init__(self, cm):
        self.cm = cm
        self.reset()

    def reset(self) -> None:
        self.cache = DynamicCache(config=self.cm.model.config)
        self.ids: list[int] = []
        self.last_logits = None  # float32 [V]: the last committed row's logits

    @property
    def length(self) -> int:
        return len(self.ids)

    @torch.no_grad()
    def commit(self, ids, want_logits: bool = False, hidden: list | None = None):
        """Run `ids` causally at positions length..length+n-1; the cache
        advances. Returns float32 logits [n][V] when asked (row r predicts the
        token at position length+r+1). `hidden`, when a list, receives the
        residual stream: the embeddings, then the output of every layer."""
        ids = [int(t) for t in ids]
        if not ids:
            return np.zeros((0, self.cm.vocab_size), np.float32) if want_logits else None
        m = self.cm.model
        hooks = []
        if hidden is not None:
            hooks.append(m.model.embed_tokens.register_forward_hook(
                lambda mod, inp, out: hidden.append(out[0].detach().cpu().numpy().copy())))
            for layer in m.model.layers:
                hooks.append(layer.register_forward_hook(
                    lambda mod, inp, out: hidden.append(
                        (out[0] if isinstance(out, tuple) else out)[0].detach().cpu().numpy().copy())))
        try:
            x = torch.tensor([ids], dtype=torch.long, device=self.cm.device)
            out = m(input_ids=x, past_key_values=self.cache, use_cache=True)
        finally:
            for h in hooks:
                h.remove()
        self.ids.extend(ids)
        logits = out.logits[0].detach().to(torch.float32).cpu().numpy()
        self.last_logits = logits[-1].copy()
        assert self.cache.get_seq_length() == len(self.ids)
        return logits if want_logits else None

    def commit_chunks(self, ids, chunk: int, want_logits: bool = False):
        parts = [self.commit(ids[i:i + chunk], want_logits) for i in range(0, len(ids), chunk)]
        return np.concatenate(parts, axis=0) if want_logits and parts else None

    # --- read-only views for the preview -----------------------------------

    def gdn_state(self, li: int):
        """Layer li's committed conv ring R [K-1][conv_dim] (oldest first;
        zeros for a fresh sequence) and state S [nv][dk][dv]."""
        cfg = self.cm.config
        k = cfg.linear_conv_kernel_dim
        nk, nv = cfg.linear_num_key_heads, cfg.linear_num_value_heads
        dk, dv = cfg.linear_key_head_dim, cfg.linear_value_head_dim
        conv_dim = 2 * nk * dk + nv * dv
        layer = self.cache.layers[li] if li < len(self.cache.layers) else None
        dev = self.cm.device
        if layer is None or not layer.is_conv_states_initialized[0]:
            ring = torch.zeros(k - 1, conv_dim, device=dev)
        else:
            ring = layer.conv_states[0][0, :, -(k - 1):].transpose(0, 1)
        if layer is None or not layer.is_recurrent_states_initialized[0]:
            state = torch.zeros(nv, dk, dv, device=dev)
        else:
            state = layer.recurrent_states[0][0]
        return ring, state

    def kv(self, li: int):
        """Layer li's cached keys and values [1][nkv][T][hd] (None if empty)."""
        layer = self.cache.layers[li] if li < len(self.cache.layers) else None
        if layer is None or not getattr(layer, "is_initialized", False) or layer.keys is None:
            return None, None
        return layer.keys, layer.values

    def snapshot(self) -> dict:
        """Copies of every tensor the cache holds (for the read-only test)."""
        snap = {}
        for li, layer in enumerate(self.cache.layers):
            for name in ("keys", "values"):
                t = getattr(layer, name, None)
                if isinstance(t, torch.Tensor):
                    snap[(li, name)] = t.clone()
            for name in ("conv_states", "recurrent_states"):
                d = getattr(layer, name, None)
                if isinstance(d, dict):
                    for i, t in d.items():
                        if isinstance(t, torch.Tensor):
                            snap[(li, name, i)] = t.clone()
            hp = getattr(layer, "has_previous_state", None)
            if isinstance(hp, dict):
                snap[(li, "has_previous_state")] = dict(hp)
        snap["ids"] = list(self.ids)
        snap["seq_length"] = self.cache.get_seq_length()
        return snap
