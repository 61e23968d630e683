#!/usr/bin/env python3
"""Regenerate the golden fixtures of tests/fixtures/ (see README.md here for
how each one is computed, and tests/fixtures/README.md for the format).

    python3 tools/reference/make_fixtures.py            # writes tests/fixtures
    python3 tools/reference/make_fixtures.py --out DIR  # somewhere else

Deterministic: float32 on the CPU, one thread, deterministic algorithms,
seeded weights; running it twice on one machine gives byte-identical files
(writing tests/fixtures also records that machine's fingerprint in
fixtures_recorded_on.json). Another CPU or BLAS build changes the last bits
of the float results and nothing else: compare_fixtures.py checks a
regeneration against the committed tree on those terms. Every case is
checked for robustness (no decision it records is within rounding of
flipping) and for the property it is there to show; a failed check stops
the run instead of writing a weak fixture.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

import make_quant_fixtures  # noqa: E402
from clover_ref import machine, tiny_models  # noqa: E402
from clover_ref.checkpoint import CloverModel, set_deterministic  # noqa: E402
from clover_ref.coreset import coreset_margin  # noqa: E402
from clover_ref.fixture_io import FixtureDir, f32, finite_or_none  # noqa: E402
from clover_ref.generate import (Options, TrunkBackend, generate_autoregressive,  # noqa: E402
                                 generate_block_diffusion, score_nll)
from clover_ref.preview import preview  # noqa: E402
from clover_ref.session import Session  # noqa: E402
from clover_ref.tolerance import TRUNK_REL, scale_error  # noqa: E402
from clover_ref.tiny_tokenizer import build_tokenizer, write_tokenizer  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_OUT = os.path.join(REPO, "tests", "fixtures")

# Decisions closer than these to flipping would make a fixture depend on
# rounding; the C engine's float32 differs from torch in the last bits only.
MIN_THRESHOLD_MARGIN = 1e-4   # |confidence - threshold|
MIN_GREEDY_GAP = 1e-3         # top-1 minus top-2 penalised logit
MIN_SAMPLE_MARGIN = 1e-4      # |u - CDF boundary|
MIN_CORESET_MARGIN = 1e-5     # |mass before - top_p|, gaps between totals
MIN_ROUTING_MARGIN = 1e-6     # k-th minus (k+1)-th router probability
MIN_FALLBACK_GAP = 1e-5       # best minus second-best confidence in a fallback pass


def chat_prompt(question: str) -> str:
    return f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n<think>\n"


AWKWARD_STRINGS = [
    "", " ", "   ", "\n", "\n\n\n", "\r\n", "\t", " \t\n ",
    "Hello world", " Hello  world ", "hello\nworld\n", "   leading and trailing   ",
    "12345", "3.14159", "1,000,000", "version 2.0.1-beta",
    "don't", "DON'T", "It's I'm we've they'll she'd", "'s 're 've",
    "e\u0301", "caf\u00e9 cafe\u0301", "A\u030a \u212b \u00c5",
    "\u0939\u093f\u0928\u094d\u0926\u0940 \u0928\u092e\u0938\u094d\u0924\u0947",
    "\u4f60\u597d\uff0c\u4e16\u754c\u3002", "\u3053\u3093\u306b\u3061\u306f",
    "\ud55c\uad6d\uc5b4", "\U0001F44D\U0001F3FD \U0001F468\u200d\U0001F469\u200d\U0001F467",
    "\u2764\ufe0f \u00a9 \u20ac \u221e", "a\u00a0b\u2003c",
    "def add(a, b):\n    return a + b\n",
    "{\"k\": [1, 2], \"s\": \"x\"}",
    "<|im_start|>user\nhi<|im_end|>\n", "<think>\nhmm\n</think>\n\nok",
    "<|mask|><|mask|>x", "<|im_sta", "<|endoftext|><|endoftext|>",
    "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
    "!!!???...", "a-b_c.d/e\\f", "x\n\n\ny  \n  z",
]

CHATS = [
    {"messages": [{"role": "user", "content": "Hi!"}], "add_generation_prompt": True},
    {"messages": [{"role": "system", "content": "You are brief."},
                  {"role": "user", "content": "What is 7 times 8?"}],
     "add_generation_prompt": True, "enable_thinking": False},
    {"messages": [{"role": "user", "content": "Name a fruit."},
                  {"role": "assistant", "content": "<think>\neasy\n</think>\n\nA pear."},
                  {"role": "user", "content": "Another?"}],
     "add_generation_prompt": True},
]


def check(cond: bool, what: str) -> None:
    if not cond:
        raise SystemExit(f"make_fixtures: check failed: {what}")


# --- building the model directories -------------------------------------


def build_models(out: str, only=None):
    tok = build_tokenizer()
    dirs = {}
    for name, build in (("tiny_clover", tiny_models.build_clover), ("tiny_ar", tiny_models.build_ar),
                        ("tiny_interop", tiny_models.build_interop)):
        if only and name not in only:
            continue
        d = os.path.join(out, name, "hf")
        os.makedirs(d)
        build(d)
        write_tokenizer(tok, d)
        tiny_models.generation_config().save_pretrained(d)
        dirs[name] = d
    return dirs


# --- tokenizer fixture ----------------------------------------------------


def tokenizer_fixture(out: str, hf_dir: str) -> None:
    fx = FixtureDir(os.path.join(out, "tokenizer"))
    tok = Tokenizer.from_file(os.path.join(hf_dir, "tokenizer.json"))
    auto = AutoTokenizer.from_pretrained(hf_dir)
    cases = []
    for s in AWKWARD_STRINGS:
        enc = tok.encode(s, add_special_tokens=False)
        check(auto(s, add_special_tokens=False).input_ids == enc.ids,
              f"transformers and tokenizers agree on {s!r}")
        cases.append({"text": s, "ids": enc.ids,
                      "decoded": tok.decode(enc.ids, skip_special_tokens=False),
                      "decoded_skip_special": tok.decode(enc.ids, skip_special_tokens=True)})
    chats = []
    for c in CHATS:
        kw = {k: v for k, v in c.items() if k not in ("messages",)}
        text = auto.apply_chat_template(c["messages"], tokenize=False, **kw)
        chats.append({"messages": c["messages"], **kw, "text": text,
                      "ids": tok.encode(text, add_special_tokens=False).ids})
    specials = {a.content: i for i, a in sorted(tok.get_added_tokens_decoder().items())}
    fx.manifest({
        "format": 1,
        "description": "Expected encodings by Hugging Face tokenizers of the fixture "
                       "tokenizer (tiny_clover/hf/tokenizer.json; tiny_ar uses the same file).",
        "tokenizer": "../tiny_clover/hf/tokenizer.json",
        "tokenizer_config": "../tiny_clover/hf/tokenizer_config.json",
        "vocab_size": tok.get_vocab_size(),
        "added_tokens": specials,
        "encode": cases,
        "chat": chats,
    })


# --- shared pieces of the model fixtures ----------------------------------


def causal_fixture(fx: FixtureDir, cm, ids: list, name: str) -> dict:
    """Commit logits (one call; checked against chunked calls and a
    cache-free forward) and the residual stream after every layer."""
    s = Session(cm)
    hidden = []
    logits = s.commit(ids, want_logits=True, hidden=hidden)
    s2 = Session(cm)
    chunked = s2.commit_chunks(ids, 5, want_logits=True)
    err = scale_error(chunked, logits)
    check(err <= TRUNK_REL, f"chunked commit equals one call ({err:.2e} of the logit scale, "
                            f"tolerance {TRUNK_REL:g})")
    with torch.no_grad():
        nocache = cm.model(input_ids=torch.tensor([ids]), use_cache=False).logits[0].numpy()
    err = scale_error(nocache, logits)
    check(err <= TRUNK_REL, f"commit equals the cache-free forward ({err:.2e} of the logit "
                            f"scale, tolerance {TRUNK_REL:g})")
    return {
        "ids": ids,
        "logits": fx.array(f"{name}_logits", logits),
        "hidden_states": fx.array(f"{name}_hidden", np.stack(hidden)),
        "hidden_states_note": "[num_layers+1][n][hidden]: row 0 is the embeddings, row l+1 the "
                              "residual stream after layer l (before the final norm)",
    }


def state_fixture(fx: FixtureDir, cm, ids: list, name: str) -> dict:
    """The committed cache after `ids`: KV rows, conv ring and state S per
    layer, in Hugging Face order (value heads grouped by key head)."""
    s = Session(cm)
    s.commit(ids)
    layers = []
    for li, kind in enumerate(cm.config.layer_types):
        if kind == "linear_attention":
            ring, state = s.gdn_state(li)
            layers.append({"layer": li, "kind": kind,
                           "conv_ring": fx.array(f"{name}_L{li}_ring", ring.numpy()),
                           "state": fx.array(f"{name}_L{li}_state", state.numpy())})
        else:
            k, v = s.kv(li)
            layers.append({"layer": li, "kind": kind,
                           "keys": fx.array(f"{name}_L{li}_keys", k[0].numpy()),
                           "values": fx.array(f"{name}_L{li}_values", v[0].numpy())})
    return {"ids": ids, "layers": layers,
            "note": "conv_ring [K-1][conv_dim] oldest first (pre-conv in_proj_qkv rows); state "
                    "[nv][dk][dv] (S_h[i_k][j_v]); keys [nkv][T][head_dim] after k_norm and RoPE, "
                    "values [nkv][T][head_dim]. Value heads in Hugging Face order (grouped by key "
                    "head); GGUF's tiled order differs."}


def nll_fixture(cm, tok, text: str) -> dict:
    ids = tok.encode(text).ids
    be = TrunkBackend(cm)
    nll, mean, ppl = score_nll(be, ids)
    nll_c, _, _ = score_nll(be, ids, chunk=7)
    err = scale_error(nll_c, nll)
    check(err <= TRUNK_REL, f"chunked NLL equals one call ({err:.2e} of the NLL scale, "
                            f"tolerance {TRUNK_REL:g})")
    return {"text": text, "ids": ids, "per_token_nll": [float(x) for x in nll],
            "mean_nll": mean, "perplexity": ppl,
            "note": "row r of the commit scores token r+1: len(ids)-1 values; float64 "
                    "log-softmax of the float32 logits"}


def options_dict(o: Options) -> dict:
    return {"max_tokens": o.max_tokens, "threshold": o.threshold, "block_size": o.block_size,
            "temperature": f32(o.temperature), "top_k": o.top_k, "top_p": f32(o.top_p),
            "seed": o.seed, "suppress": list(o.suppress), "ignore_eos": o.ignore_eos}


def result_dict(r, block_mode: bool) -> dict:
    d = {"tokens": [int(t) for t in r.tokens],
         "confidences": [f32(c) for c in r.confidences],
         "finish_reason": r.finish_reason,
         "prompt_tokens": r.prompt_tokens,
         "reused_tokens": r.reused_tokens,
         "committed_after": len(r.committed_after)}
    if block_mode:
        d["passes_per_block"] = r.passes_per_block
        d["passes"] = [[{"fixed": [[int(row), int(t)] for row, t, _ in p.fixed],
                         "fallback": p.fallback, "think_open": p.close_open} for p in blk]
                       for blk in r.blocks]
    return d


def margins_of(r, be) -> dict:
    passes = [p for blk in r.blocks for p in blk]
    m = {
        "threshold": min((p.min_threshold_margin for p in passes), default=float("inf")),
        "greedy_gap": min((p.min_greedy_gap for p in passes), default=float("inf")),
        "sample": min((p.min_sample_margin for p in passes), default=float("inf")),
        "fallback_gap": min((p.min_best_gap for p in passes), default=float("inf")),
        "routing": be.margins["routing"],
        "coreset": be.margins["coreset"],
    }
    return m


def check_margins(name: str, m: dict, block_mode: bool) -> None:
    if block_mode:
        check(m["threshold"] > MIN_THRESHOLD_MARGIN, f"{name}: threshold margin {m['threshold']}")
        check(m["fallback_gap"] > MIN_FALLBACK_GAP, f"{name}: fallback gap {m['fallback_gap']}")
        check(m["coreset"] > MIN_CORESET_MARGIN, f"{name}: coreset margin {m['coreset']}")
    check(m["greedy_gap"] > MIN_GREEDY_GAP, f"{name}: greedy gap {m['greedy_gap']}")
    check(m["sample"] > MIN_SAMPLE_MARGIN, f"{name}: sample margin {m['sample']}")
    check(m["routing"] > MIN_ROUTING_MARGIN, f"{name}: routing margin {m['routing']}")


# --- tiny_clover ------------------------------------------------------------

CLOVER_CASES = [
    # name, question, options, description
    ("greedy_default", "Write a short poem about the sea.", Options(max_tokens=32),
     "the record as shipped: threshold 0.5, coreset, penalties and both ramps on"),
    ("threshold_0", "What is the capital of France?", Options(max_tokens=24, threshold=0.0),
     "threshold override 0: every pending row fixed in the first pass of each block"),
    ("threshold_1", "What is the capital of France?", Options(max_tokens=16, threshold=1.0),
     "threshold override 1: no row is ever above it, one row (the most confident) per pass"),
    ("max_tokens_13", "Count from 1 to 10.", Options(max_tokens=13),
     "max_tokens not a multiple of the block size: the second block emits 5 rows"),
    ("block_size_4", "Why is the sky blue?", Options(max_tokens=16, block_size=4),
     "block-size override 4 (divides 8): ln(b/B) = ln(1/2) in every GDN layer"),
    ("stop_in_block", "Hi!", Options(max_tokens=40),
     "a stop id is fixed inside a block (row 6 of 8) in a pass before rows ahead of it are "
     "fixed: emission stops there after the block resolved, the block is not committed"),
    ("ignore_eos", "Hi!", Options(max_tokens=40, ignore_eos=True),
     "the same request with ignore_eos: the stop id is emitted and generation goes on"),
    ("suppress", "Write a short poem about the sea.", Options(max_tokens=16, suppress=(393, 405)),
     "suppressed ids (forbidden like the mask id)"),
    ("sample_topk_topp", "Tell me a story about a fox and a dog.",
     Options(max_tokens=24, temperature=0.8, top_k=20, top_p=0.9, seed=0x0123456789ABCDEF),
     "sampling: temperature 0.8, top-k 20, top-p 0.9, 64-bit seed"),
    ("sample_plain", "Give me a haiku.", Options(max_tokens=16, temperature=1.0, seed=7),
     "sampling: temperature 1, no top-k / top-p"),
    ("no_penalties", "Write a short poem about the sea.", Options(max_tokens=32),
     "the record with presence / frequency / repetition penalties and both ramps off "
     "(record_overrides), to isolate them"),
]

NO_PENALTIES = {"presence_penalty": 0.0, "frequency_penalty": 0.0, "repetition_penalty": 1.0,
                "length_penalty": 0.0, "think_end_bias": 0.0}


def clover_record_for(cm, name):
    from dataclasses import replace
    if name == "no_penalties":
        return replace(cm.record, **NO_PENALTIES), dict(NO_PENALTIES)
    return cm.record, {}


def run_case(cm, tok, name, question, opts, be=None):
    rec, overrides = clover_record_for(cm, name)
    be = be or TrunkBackend(cm, track_margins=True)
    be.margins = {"routing": float("inf"), "coreset": float("inf")}
    prompt = tok.encode(chat_prompt(question)).ids
    r = generate_block_diffusion(be, rec, cm.stop_ids(), prompt, opts)
    return r, be, prompt, overrides


def check_case_property(cm, name, r, opts) -> None:
    passes = [p for blk in r.blocks for p in blk]
    bs = opts.block_size or cm.record.block_size
    if name == "greedy_default":
        check(any(len(p.fixed) > 1 for p in passes), "default: some pass fixes several rows")
        check(any(p.fallback for p in passes), "default: some pass falls back to one row")
        check(any(p.close_open for p in passes) and any(not p.close_open for p in passes),
              "default: </think> opens and closes (think ramp on, then off)")
    if name == "threshold_0":
        check(all(n == 1 for n in r.passes_per_block), "threshold 0: one pass a block")
    if name == "threshold_1":
        check(all(n == bs for n in r.passes_per_block), "threshold 1: B passes a block")
        check(all(p.fallback and len(p.fixed) == 1 for p in passes), "threshold 1: fallbacks")
    if name == "max_tokens_13":
        check(len(r.tokens) == 13 and r.finish_reason == "length", "max_tokens 13: length")
    if name == "block_size_4":
        check(len(r.passes_per_block) == 4 and r.finish_reason == "length", "block 4: 4 blocks")
    if name == "stop_in_block":
        check(r.finish_reason == "stop", "stop case stops")
        row = (len(r.tokens) - 1) % bs
        check(row < bs - 1, f"stop row {row} is inside the block")
        when = {x: i for i, p in enumerate(r.blocks[-1]) for x, _, _ in p.fixed}
        check(any(when[x] > when[row] for x in range(row)),
              "the stop is fixed before some row ahead of it")
        check(len(r.committed_after) == r.prompt_tokens + (len(r.tokens) - 1) // bs * bs,
              "the stopped block is not committed")
    if name == "ignore_eos":
        check(r.finish_reason == "length" and len(r.tokens) == opts.max_tokens, "ignore_eos runs on")
    if name.startswith("sample"):
        check(r.finish_reason in ("length", "stop"), "sampled")
    check(all(t < tiny_models.N_TOKENS for t in r.tokens), f"{name}: no padding ids emitted")


def clover_fixture(out: str, hf_dir: str) -> None:
    cm = CloverModel(hf_dir)
    tok = Tokenizer.from_file(os.path.join(hf_dir, "tokenizer.json"))
    fx = FixtureDir(os.path.join(out, "tiny_clover"))
    rec = cm.record
    man = {
        "format": 1,
        "description": "Tiny random Clover model (block diffusion) and what the reference "
                       "computes with it. tools/reference/README.md says how.",
        "model_dir": "hf",
        "vocab_size": cm.vocab_size,
        "tokenizer_tokens": tiny_models.N_TOKENS,
        "num_layers": cm.config.num_hidden_layers,
        "layer_types": list(cm.config.layer_types),
        "record": rec.to_dict(),
        "eos_ids": cm.eos_ids,
        "stop_ids": cm.stop_ids(),
    }
    main_prompt = tok.encode(chat_prompt(CLOVER_CASES[0][1])).ids
    man["causal"] = causal_fixture(fx, cm, main_prompt, "causal")
    man["committed_state"] = state_fixture(fx, cm, main_prompt, "state")
    man["nll"] = nll_fixture(cm, tok, "The quick brown fox jumps over the lazy dog. "
                                      "Once upon a time there was a small model.")

    # Generation cases.
    gens = []
    results = {}
    for name, question, opts, desc in CLOVER_CASES:
        r, be, prompt, overrides = run_case(cm, tok, name, question, opts)
        m = margins_of(r, be)
        check_margins(name, m, True)
        check_case_property(cm, name, r, opts)
        results[name] = (r, prompt)
        gens.append({"name": name, "description": desc, "prompt_text": chat_prompt(question),
                     "prompt_ids": prompt, "options": options_dict(opts),
                     "record_overrides": overrides, "expected": result_dict(r, True),
                     "margins": {k: finite_or_none(v) for k, v in m.items()}})
        be.close()
    man["generate"] = gens

    # Previews of one block over the default prompt: rows 1, 4, 5 fixed to
    # the tokens the default generation chose there, the rest masked.
    r0, _ = results["greedy_default"]
    mask = rec.mask_token_id
    block = [mask] * rec.block_size
    for row in (1, 4, 5):
        block[row] = r0.tokens[row]
    previews = []
    s = Session(cm)
    s.commit(main_prompt)
    for name, blk, top_p in (("preview_block", block, "record"),
                             ("preview_no_coreset", block, None),
                             ("preview_b4", block[:4], "record")):
        snap = s.snapshot()
        trace = {}
        logits = preview(cm, s, blk, coreset_top_p=top_p, trace=trace)
        after = s.snapshot()
        check(all(torch.equal(snap[k], after[k]) if isinstance(snap[k], torch.Tensor)
                  else snap[k] == after[k] for k in snap), f"{name}: cache untouched")
        entry = {"name": name, "prefix_ids": main_prompt, "position": len(main_prompt),
                 "block_ids": blk, "record_block_size": rec.block_size,
                 "coreset": top_p is not None,
                 "logits": fx.array(f"{name}_logits", logits),
                 "hidden_states": fx.array(f"{name}_hidden", trace["hidden"])}
        if top_p is not None:
            layers, margin = [], float("inf")
            for li, lt in enumerate(trace["layers"]):
                kept = [int(e) for e in np.nonzero(lt["allowed"])[0]]
                layers.append({"layer": li, "kept": kept, "totals": [float(x) for x in lt["totals"]],
                               "routed_experts": lt["index"].tolist()})
                margin = min(margin, coreset_margin(lt["totals"], rec.coreset_top_p))
            check(margin > MIN_CORESET_MARGIN, f"{name}: coreset margin {margin}")
            check(any(0 < len(layer["kept"]) < cm.config.num_experts for layer in layers),
                  f"{name}: the coreset drops some experts but not all")
            entry["coreset_layers"] = layers
            entry["router_logits"] = fx.array(f"{name}_router_logits",
                                              np.stack([lt["router_logits"] for lt in trace["layers"]]))
            entry["coreset_margin"] = margin
        previews.append(entry)
    man["preview"] = previews

    # Prefix reuse: a second request that extends the first conversation.
    r1, p1 = results["greedy_default"]
    follow = tok.encode("\n<|im_start|>user\nAnd then?<|im_end|>\n<|im_start|>assistant\n<think>\n").ids
    second = p1 + [int(t) for t in r1.tokens] + follow
    be = TrunkBackend(cm, track_margins=True)
    first = generate_block_diffusion(be, rec, cm.stop_ids(), p1, Options(max_tokens=32))
    check(first.tokens == r1.tokens, "first request repeats")
    reused = generate_block_diffusion(be, rec, cm.stop_ids(), second, Options(max_tokens=24))
    m = margins_of(reused, be)
    be.close()
    fresh = generate_block_diffusion(TrunkBackend(cm), rec, cm.stop_ids(), second,
                                     Options(max_tokens=24))
    check(reused.reused_tokens == len(first.committed_after) > len(p1), "the prefix is reused")
    check(fresh.reused_tokens == 0, "the fresh run reuses nothing")
    check(reused.tokens == fresh.tokens and reused.passes_per_block == fresh.passes_per_block
          and reused.finish_reason == fresh.finish_reason, "reuse equals a fresh run")
    check(np.allclose(np.array(reused.confidences, np.float64),
                      np.array(fresh.confidences, np.float64), atol=1e-5), "same confidences")
    check_margins("prefix_reuse", m, True)
    fres = result_dict(fresh, True)
    fres["reused_tokens"] = reused.reused_tokens
    man["prefix_reuse"] = {
        "description": "request 1 = generate case greedy_default on one session; request 2 "
                       "(prompt = request 1's prompt + its answer + a follow-up turn) on the "
                       "same session reuses the committed prefix (prompt 1 + the committed blocks) "
                       "and must equal a fresh run of request 2",
        "first": "greedy_default",
        "second_prompt_ids": second,
        "options": options_dict(Options(max_tokens=24)),
        "expected": fres,
        "margins": {k: finite_or_none(v) for k, v in m.items()},
    }
    fx.manifest(man)


# --- tiny_ar ----------------------------------------------------------------

AR_CASES = [
    ("ar_greedy", "Count from 1 to 10.", Options(max_tokens=24), "greedy, ends on max_tokens"),
    ("ar_stop", "Write a short poem about the sea.", Options(max_tokens=48),
     "greedy until an EOS id (kept in the ids)"),
    ("ar_sample", "Tell me a story about a fox and a dog.",
     Options(max_tokens=24, temperature=0.7, top_k=10, top_p=0.9, seed=42),
     "sampling with temperature, top-k and top-p"),
]


def ar_fixture(out: str, hf_dir: str) -> None:
    cm = CloverModel(hf_dir)
    check(cm.record is None, "the plain model has no record")
    tok = Tokenizer.from_file(os.path.join(hf_dir, "tokenizer.json"))
    fx = FixtureDir(os.path.join(out, "tiny_ar"))
    man = {
        "format": 1,
        "description": "Tiny random plain autoregressive Qwen3.5-MoE and what the reference "
                       "computes with it. tools/reference/README.md says how.",
        "model_dir": "hf",
        "vocab_size": cm.vocab_size,
        "tokenizer_tokens": tiny_models.N_TOKENS,
        "num_layers": cm.config.num_hidden_layers,
        "layer_types": list(cm.config.layer_types),
        "eos_ids": cm.eos_ids,
        "stop_ids": cm.stop_ids(),
    }
    prompt = tok.encode(chat_prompt(AR_CASES[0][1])).ids
    man["causal"] = causal_fixture(fx, cm, prompt, "causal")
    man["committed_state"] = state_fixture(fx, cm, prompt, "state")
    man["nll"] = nll_fixture(cm, tok, "Diffusion models denoise a block of masked tokens; "
                                      "transformers predict the next one.")
    gens = []
    for name, question, opts, desc in AR_CASES:
        be = TrunkBackend(cm, track_margins=True)
        p = tok.encode(chat_prompt(question)).ids
        r = generate_autoregressive(be, cm.stop_ids(), p, opts)
        m = margins_of(r, be)
        be.close()
        check_margins(name, m, False)
        check(all(t < tiny_models.N_TOKENS for t in r.tokens), f"{name}: no padding ids")
        if name == "ar_stop":
            check(r.finish_reason == "stop", "ar_stop stops")
        gens.append({"name": name, "description": desc, "prompt_text": chat_prompt(question),
                     "prompt_ids": p, "options": options_dict(opts),
                     "expected": result_dict(r, False),
                     "margins": {k: finite_or_none(v) for k, v in m.items()
                                 if k not in ("threshold", "coreset", "fallback_gap")}})
    man["generate"] = gens
    fx.manifest(man)


# --- tiny_interop -------------------------------------------------------------


def interop_fixture(out: str, hf_dir: str) -> None:
    cm = CloverModel(hf_dir)
    check(cm.record is None, "the interop model has no record")
    check(list(cm.config.layer_types) == tiny_models.INTEROP_TEXT["layer_types"], "the irregular pattern loads")
    check(cm.model.lm_head.weight.data_ptr() == cm.model.model.embed_tokens.weight.data_ptr(),
          "transformers ties the head to the embedding")
    tok = Tokenizer.from_file(os.path.join(hf_dir, "tokenizer.json"))
    fx = FixtureDir(os.path.join(out, "tiny_interop"))
    man = {
        "format": 1,
        "description": "Tiny random Qwen3.5-MoE as transformers' save_pretrained writes it: an "
                       "irregular layer pattern, no mrope_section, tied embeddings. "
                       "tools/reference/README.md says how.",
        "model_dir": "hf",
        "vocab_size": cm.vocab_size,
        "tokenizer_tokens": tiny_models.N_TOKENS,
        "num_layers": cm.config.num_hidden_layers,
        "layer_types": list(cm.config.layer_types),
        "eos_ids": cm.eos_ids,
        "stop_ids": cm.stop_ids(),
    }
    prompt = tok.encode(chat_prompt("What is a tied embedding?")).ids
    man["causal"] = causal_fixture(fx, cm, prompt, "causal")
    man["committed_state"] = state_fixture(fx, cm, prompt, "state")
    man["nll"] = nll_fixture(cm, tok, "The checkpoint a user saves is the checkpoint the engine runs.")
    fx.manifest(man)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--only", action="append",
                    choices=("tiny_clover", "tiny_ar", "tiny_interop", "tokenizer", "tiny_clover_quant"),
                    help="regenerate only this fixture (repeatable); the machine record is then left alone")
    ap.add_argument("--clover", default=os.path.join(REPO, "build", "clover"),
                    help="the clover binary whose converter writes tiny_clover_quant's quantised files")
    args = ap.parse_args()
    if (not args.only or "tiny_clover_quant" in args.only) and not os.path.exists(args.clover):
        raise SystemExit(f"{args.clover}: no clover binary (build it, or pass --clover): "
                         "tiny_clover_quant needs its converter")
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    set_deterministic()
    os.makedirs(args.out, exist_ok=True)
    only = set(args.only or ())
    if "tokenizer" in only or "tiny_clover_quant" in only:
        only.add("tiny_clover")   # both point into tiny_clover's files
    for name in ("tiny_clover", "tiny_ar", "tiny_interop", "tokenizer", "tiny_clover_quant"):
        if not only or name in only:
            shutil.rmtree(os.path.join(args.out, name), ignore_errors=True)
            if name == "tiny_clover_quant":   # its 256-wide K-quant sibling, same script
                shutil.rmtree(os.path.join(args.out, "tiny_clover_k"), ignore_errors=True)
    dirs = build_models(args.out, only)
    if not only or "tiny_clover" in only:
        tokenizer_fixture(args.out, dirs["tiny_clover"])
        clover_fixture(args.out, dirs["tiny_clover"])
    if not only or "tiny_ar" in only:
        ar_fixture(args.out, dirs["tiny_ar"])
    if not only or "tiny_interop" in only:
        interop_fixture(args.out, dirs["tiny_interop"])
    if not only or "tiny_clover_quant" in only:
        make_quant_fixtures.quant_fixture(args.out, args.clover)   # needs tiny_clover written
        make_quant_fixtures.k_fixture(args.out, args.clover)
    if not only and os.path.realpath(args.out) == os.path.realpath(DEFAULT_OUT):
        machine.record(machine.fingerprint())   # where these bytes are reproducible
    print(f"make_fixtures: wrote {args.out}")


if __name__ == "__main__":
    main()
