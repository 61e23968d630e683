"""gen26: the generator's user turns are varied and never a held-out prompt.

CPU only, no torch (`.venv/bin/python -m pytest -q tools/train/tests/test_prompts.py`).
The pack written here holds the held-out prompts' own entities (France,
Germany, Japan, Brazil, Mexico, Albert Einstein, "lantern", "harvest"), so a
leak is possible and the ban is what stops it: with the ban lifted the same
draws do produce held-out prompts (checked below, so the test can fail).
Prompts are compared after a normalisation written here, not gen.norm."""
from __future__ import annotations

import json
import lzma
import os
import random
import re
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "..")
sys.path.insert(0, TRAIN)

tokenizers = pytest.importorskip("tokenizers")

import gen  # noqa: E402
import prompts  # noqa: E402

HELDOUT = [ln.strip() for ln in open(os.path.join(TRAIN, "heldout.txt"), encoding="utf-8")
           if ln.strip() and not ln.startswith("#")]
TOK = os.path.join(TRAIN, "tok", "tokenizer.json")


def canon(s: str) -> str:
    """lower case, every non-alphanumeric run a space, spaces collapsed"""
    return " ".join(re.sub(r"[^0-9a-z]+", " ", s.lower()).split())


def country(name, cap, langs, money, borders, sub="Western Europe", region="Europe"):
    return {"name": name, "capital": cap, "region": region, "subregion": sub, "languages": langs,
            "currencies": money, "demonym": name, "population": 1000000, "area": 1000, "borders": borders}


@pytest.fixture(scope="module")
def g(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("pack"))
    rows = {
        "wordnet": [{"w": "lantern", "pos": "noun", "gloss": "light in a transparent protective case",
                     "ex": [], "hyper": "lamp", "syn": []},
                    {"w": "harvest", "pos": "noun", "gloss": "the gathering of a ripened crop",
                     "ex": [], "hyper": "gathering", "syn": ["crop"]},
                    {"w": "run", "pos": "verb", "gloss": "move fast by using one's feet",
                     "ex": ["Don't run"], "hyper": None, "syn": ["race"]}],
        "countries": [country("France", "Paris", ["fr"], ["EUR"], ["Germany", "Spain"]),
                      country("Germany", "Berlin", ["de"], ["EUR"], ["France"]),
                      country("Japan", "Tokyo", ["ja"], ["JPY"], [], "Eastern Asia", "Asia"),
                      country("Brazil", "Brasilia", ["pt"], ["BRL"], [], "South America", "Americas"),
                      country("Mexico", "Mexico City", ["es"], ["MXN"], [], "Central America", "Americas")],
        "wiki": [{"title": "Albert Einstein", "desc": "German-born theoretical physicist (1879-1955)",
                  "text": "Albert Einstein was a German-born theoretical physicist."},
                 {"title": "Moon", "desc": "natural satellite of the Earth", "text": "The Moon orbits the Earth."}],
        "chat": [{"src": "chatterbot", "cat": "greetings", "turns": ["Hello!", "Hi there."]},
                 {"src": "chatterbot", "cat": "greetings", "turns": ["Good morning", "Good morning to you."]}],
        "prose": [{"src": "mobydick", "text": "Call me Ishmael."}],
        "fortunes": [{"file": "wisdom", "text": "A penny saved is a penny earned.\n\t\t-- B. Franklin"},
                     {"file": "riddles", "text": "Q:\tWhat is black and white?\nA:\tA zebra."}],
    }
    for k, v in rows.items():
        with lzma.open(os.path.join(d, k + ".jsonl.xz"), "wt", encoding="utf-8") as f:
            f.write("".join(json.dumps(x) + "\n" for x in v))
    return gen.Gen(gen.load_corpus(d))


def user_turns(g, seed, n):
    r = random.Random(seed)
    out = []
    for _ in range(n):
        msgs, _ = g.exchange(r)
        out += [t for role, t in msgs if role == "user"]
    return out


def test_heldout_file_is_the_20_prompts():
    assert len(HELDOUT) == 20 and len({canon(h) for h in HELDOUT}) == 20
    assert "Why is the sky blue?" in HELDOUT


def test_20000_exchanges_never_ask_a_heldout_prompt(g):
    banned = {canon(h) for h in HELDOUT}
    users = user_turns(g, 26, 20000)
    assert len(users) > 20000
    hit = sorted({u for u in users if canon(u) in banned})
    assert not hit, hit[:5]
    # nor a long held-out prompt wrapped in other words ("Hey, write a short story about ...")
    long_ = [f" {b} " for b in banned if len(b.split()) >= 4]
    inside = sorted({u for u in users if any(b in f" {canon(u)} " for b in long_)})
    assert not inside, inside[:5]
    # not vacuous: the same intents and entities, in other words
    c = {canon(u) for u in users}
    assert any("capital" in u and "france" in u for u in c)
    assert any("joke" in u for u in c) and any("sky" in u and "blue" in u for u in c)
    assert any("animal" in u and ("biggest" in u or "largest" in u) for u in c)


def test_without_the_ban_the_same_draws_do_leak(g):
    banned, banned_in = g.banned, g.banned_in
    try:
        g.banned, g.banned_in = set(), []
        users = user_turns(g, 26, 20000)
    finally:
        g.banned, g.banned_in = banned, banned_in
    leaked = {canon(u) for u in users} & {canon(h) for h in HELDOUT}
    assert len(leaked) >= 8, leaked                        # the ban above is doing the work


def test_many_phrasings_per_intent(g):
    # pre-gen26 counts over 5,000 draws on the real pack: identity 18, why 16, quote (with riddles) 10
    want = {"identity": 300, "why": 300, "joke": 200, "fact": 200, "unknown": 300, "story": 500,
            "math": 1000, "country": 500, "define": 200}
    for kind, least in want.items():
        r = random.Random(1)
        qs = {g.TASKS[kind](g, r)[0] for _ in range(3000)}
        assert len(qs) >= least, (kind, len(qs))


def test_answers_of_the_new_intents_keep_their_length(g):
    tok = tokenizers.Tokenizer.from_file(TOK)
    for kind in ("joke", "fact", "unknown", "why"):
        r = random.Random(2)
        for _ in range(300):
            q, a, t = g.TASKS[kind](g, r)
            n = len(tok.encode(a).ids)
            assert 40 <= n <= 200, (kind, q, n)


def test_unknown_answers_say_so_and_jokes_are_jokes(g):
    r = random.Random(4)
    for _ in range(200):
        q, a, _ = g.unknown(r)
        assert re.match(r"I don't know that\.|I am sorry, I don't know that\.|I can't answer that", a), a
        assert "{" not in q                                  # slots filled
        q, a, _ = g.joke(r)
        assert any(s in a for s, _, _ in gen.JOKES), a


def test_prompts_tokenize_without_an_explosion(g):
    tok = tokenizers.Tokenizer.from_file(TOK)
    users = user_turns(g, 5, 3000)
    ntok = [len(tok.encode(u).ids) for u in users]
    nword = [max(1, len(u.split())) for u in users]
    # 1.45 tokens a word before gen26 (real pack, dev VM); typos and casing may add a little
    assert sum(ntok) / sum(nword) < 1.8
    assert max(n / w for n, w in zip(ntok, nword)) < 8


def test_typo_is_one_edit_outside_the_slots():
    r = random.Random(9)
    t = "What is the capital of {n}?"
    seen = set()
    for _ in range(300):
        x = prompts._typo(r, t)
        assert x.format(n="France").endswith("France?")
        seen.add(x)
        a, b = t.split(), x.split()
        assert len(a) == len(b) and sum(p != q for p, q in zip(a, b)) == 1   # one word changed
    assert len(seen) > 50


def test_generator_is_a_function_of_its_random(g):
    ra, rb = random.Random(11), random.Random(11)
    a = [g.sample(ra) for _ in range(300)]
    b = [g.sample(rb) for _ in range(300)]
    assert a == b and len(set(a)) > 250
