"""Issue 26's training data, on the CPU without torch: the committed tokenizer
(tools/train/tok), the generator (tools/train/gen.py) and the streamed batch
layout (tools/train/stream.py), over a small pack written here in the format
fetch_corpus.py writes (the real pack needs the package registries)."""
from __future__ import annotations

import json
import lzma
import os
import random
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TRAIN = os.path.join(ROOT, "tools", "train")
sys.path.insert(0, TRAIN)
sys.path.insert(0, os.path.join(ROOT, "tools", "reference"))

tokenizers = pytest.importorskip("tokenizers")
np = pytest.importorskip("numpy")

import gen  # noqa: E402
import stream  # noqa: E402

TOK = os.path.join(TRAIN, "tok", "tokenizer.json")
# Qwen3.5's added tokens in their id order (TRUNK.md 6), then the mask token
QWEN_ADDED_HEAD = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def write_pack(d):
    rows = {
        "wordnet": [{"w": "lantern", "pos": "noun", "gloss": "light in a transparent protective case",
                     "ex": [], "hyper": "lamp", "syn": []},
                    {"w": "run", "pos": "verb", "gloss": "move fast by using one's feet",
                     "ex": ["Don't run--you'll be out of breath"], "hyper": None, "syn": ["race"]}],
        "countries": [{"name": "France", "capital": "Paris", "region": "Europe",
                       "subregion": "Western Europe", "languages": ["fr"], "currencies": ["EUR"],
                       "demonym": "French", "population": 66078000, "area": 640679,
                       "borders": ["Germany", "Spain"]},
                      {"name": "Germany", "capital": "Berlin", "region": "Europe",
                       "subregion": "Western Europe", "languages": ["de"], "currencies": ["EUR"],
                       "demonym": "German", "population": 81770900, "area": 357114,
                       "borders": ["France"]}],
        "wiki": [{"title": "Moon", "desc": "natural satellite of the Earth", "topic": "Space",
                  "text": "The Moon is Earth's only natural satellite. It orbits the Earth."}],
        "chat": [{"src": "chatterbot", "cat": "greetings", "turns": ["Hello", "Hi there."]}],
        "prose": [{"src": "austen/emma", "text": "Emma Woodhouse, handsome, clever, and rich."},
                  {"src": "austen/emma", "text": "She was the youngest of the two daughters."},
                  {"src": "mobydick", "text": "Call me Ishmael. Some years ago I went to sea."}],
        "fortunes": [{"file": "wisdom", "text": "A penny saved is a penny earned.\n\t\t-- B. Franklin"},
                     {"file": "riddles", "text": "Q:\tWhat is black and white?\nA:\tA zebra."}],
    }
    for k, v in rows.items():
        with lzma.open(os.path.join(d, k + ".jsonl.xz"), "wt", encoding="utf-8") as f:
            f.write("".join(json.dumps(x) + "\n" for x in v))
    with open(os.path.join(d, "SOURCES.json"), "w") as f:
        json.dump({}, f)
    return d


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    return write_pack(str(tmp_path_factory.mktemp("pack")))


def test_committed_tokenizer_has_the_clover_tokens():
    from clover_ref.tiny_tokenizer import ADDED
    tok = tokenizers.Tokenizer.from_file(TOK)
    assert tok.get_vocab_size() == 8192
    first = 8192 - len(ADDED)
    for i, (content, _) in enumerate(ADDED):
        assert tok.token_to_id(content) == first + i, content
    assert [c for c, _ in ADDED[:3]] == QWEN_ADDED_HEAD
    assert tok.token_to_id("<|mask|>") == 8191
    text = ("<|im_start|>user\nWhat does \"lantern\" mean? Ünïcode, 42 + 7.<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nA lantern is a lamp.<|im_end|>\n")
    enc = tok.encode(text)
    assert tok.decode(enc.ids, skip_special_tokens=False) == text
    assert enc.ids[0] == tok.token_to_id("<|im_start|>")
    # English words are single tokens in a vocabulary trained on English
    assert len(tok.encode(" the country").ids) == 2


def test_render_is_clovers_chat_template():
    msgs = [("user", "Hi"), ("assistant", "Hello."), ("user", " Who are you? "), ("assistant", "I am Clover.")]
    p, c = gen.Gen.render(msgs, None)
    assert p == ("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n"
                 "<|im_start|>user\nWho are you?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert c == "I am Clover.<|im_end|>\n"
    p, c = gen.Gen.render(msgs[2:], "The user asks who I am.")
    assert p.endswith("<|im_start|>assistant\n<think>\n")
    assert c == "The user asks who I am.\n</think>\n\nI am Clover.<|im_end|>\n"


def test_generator_is_seeded_and_never_asks_a_heldout_prompt(pack):
    g = gen.Gen(gen.load_corpus(pack))
    a = [g.sample(random.Random(7)) for _ in range(3)]
    b = [g.sample(random.Random(7)) for _ in range(3)]
    assert a == b
    r = random.Random(1)
    samples = [g.sample(r) for _ in range(3000)]
    users = [ln for p, _ in samples for ln in p.split("<|im_start|>user\n")[1:]]
    users = {u.split("<|im_end|>")[0] for u in users}
    banned = {gen.norm(x) for x in gen.heldout_prompts()}
    assert len(banned) == 20
    assert not {gen.norm(u) for u in users} & banned
    # the filter is not vacuous: France's capital is asked, in other words
    assert "What's the capital city of France?" in users
    assert "What is the capital of Germany?" in users
    assert "What is the capital of France?" not in users
    lens = sorted(len(c) for _, c in samples)
    assert lens[len(lens) // 2] > 120                       # answers of sentences, not words


def test_stream_batches_are_block_aligned_and_seeded(pack):
    s = stream.Stream(pack, TOK, seed=3, batch=6, seq=256, block=32, prose_p=0.2, workers=0)
    ids, real = s.get(4)
    ids2, real2 = s.get(4)
    assert (ids == ids2).all() and (real == real2).all()
    assert not (ids == s.get(5)[0]).all()
    tok = tokenizers.Tokenizer.from_file(TOK)
    pad, end = tok.token_to_id("<|endoftext|>"), tok.token_to_id("<|im_end|>")
    nl = tok.encode("\n").ids[0]
    gen_start = tok.encode("<|im_start|>assistant\n<think>\n\n</think>\n\n").ids
    starts = 0
    for row, rl in zip(ids.tolist(), real.tolist()):
        for i in range(len(row) - len(gen_start) + 1):
            if row[i:i + len(gen_start)] == gen_start:
                j = i + len(gen_start)
                assert j % 32 == 0, (i, j)                  # the answer starts a block
                starts += 1
                k = row.index(end, j)
                assert row[k + 1] == nl
                tail = range(k + 2, (k + 2 + 31) // 32 * 32)
                assert all(row[t] == pad and not rl[t] for t in tail)   # pads to the block's end
                assert all(rl[t] for t in range(j, k + 2))
    assert starts >= 6


def test_worker_batches_equal_in_process_batches(pack):
    kw = dict(seed=5, batch=4, seq=128, block=32, prose_p=0.3)
    s = stream.Stream(pack, TOK, workers=1, ahead=3, **kw)
    try:
        s.prefetch(7)
        got = [s.get(7), s.get(8), s.get(9)]
    finally:
        s.close()
    ref = stream.Stream(pack, TOK, workers=0, **kw)
    for k, (ids, real) in zip((7, 8, 9), got):
        rid, rreal = ref.get(k)
        assert (ids == rid).all() and (real == rreal).all(), k
