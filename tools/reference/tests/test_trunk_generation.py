"""Generation and scoring on the real (tiny) trunk, against transformers'
own generate() and loss, and prefix reuse against a fresh run."""
import numpy as np
import pytest
import torch

from clover_ref.generate import (Options, TrunkBackend, generate_autoregressive,
                                 generate_block_diffusion, score_nll)
from clover_ref.tiny_tokenizer import build_tokenizer


def test_autoregressive_greedy_equals_transformers_generate(ar, prompt_ids):
    for prompt in (prompt_ids, prompt_ids[:12]):
        res = generate_autoregressive(TrunkBackend(ar), ar.stop_ids(), prompt,
                                      Options(max_tokens=20))
        with torch.no_grad():
            out = ar.model.generate(torch.tensor([prompt]), max_new_tokens=20, do_sample=False,
                                    eos_token_id=ar.stop_ids(), pad_token_id=ar.stop_ids()[0],
                                    top_k=None, top_p=None, temperature=None)
        assert res.tokens == out[0, len(prompt):].tolist()


def test_nll_equals_transformers_loss(clover, ar, prompt_ids):
    for cm in (clover, ar):
        nll, mean, ppl = score_nll(TrunkBackend(cm), prompt_ids)
        with torch.no_grad():
            loss = cm.model(input_ids=torch.tensor([prompt_ids]),
                            labels=torch.tensor([prompt_ids])).loss.item()
        assert len(nll) == len(prompt_ids) - 1
        assert mean == pytest.approx(loss, rel=1e-5)
        assert ppl == pytest.approx(np.exp(loss), rel=1e-5)


def test_prefix_reuse_equals_a_fresh_run(clover, prompt_ids):
    tok = build_tokenizer()
    rec, stop = clover.record, clover.stop_ids()
    be = TrunkBackend(clover)
    first = generate_block_diffusion(be, rec, stop, prompt_ids, Options(max_tokens=16))
    assert len(first.committed_after) > len(prompt_ids)
    second = prompt_ids + first.tokens + tok.encode("\n<|im_start|>user\nMore?<|im_end|>\n").ids
    reused = generate_block_diffusion(be, rec, stop, second, Options(max_tokens=16))
    fresh = generate_block_diffusion(TrunkBackend(clover), rec, stop, second,
                                     Options(max_tokens=16))
    assert reused.reused_tokens == len(first.committed_after)
    assert fresh.reused_tokens == 0
    assert reused.tokens == fresh.tokens
    assert reused.passes_per_block == fresh.passes_per_block
    assert np.allclose(np.float64(reused.confidences), np.float64(fresh.confidences), atol=1e-5)


def test_generation_is_repeatable_and_prompt_chunking_does_not_matter(clover, prompt_ids):
    rec, stop = clover.record, clover.stop_ids()
    a = generate_block_diffusion(TrunkBackend(clover), rec, stop, prompt_ids,
                                 Options(max_tokens=16))
    b = generate_block_diffusion(TrunkBackend(clover), rec, stop, prompt_ids,
                                 Options(max_tokens=16, prompt_chunk=4))
    assert a.tokens == b.tokens and a.passes_per_block == b.passes_per_block
    assert generate_block_diffusion(TrunkBackend(clover), rec, stop, prompt_ids,
                                    Options(max_tokens=0)).tokens == []


def test_stop_ids_merge_record_and_tokenizer(clover, ar):
    # record: <|endoftext|> (400) and 455 (past the vocabulary, dropped); EOS ids 400, 402
    assert clover.stop_ids() == [400, 402]
    assert ar.stop_ids() == [400, 402]
    assert clover.record.mask_token_id == 433 and clover.record.think_end_token_id == 425
