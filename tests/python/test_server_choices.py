"""`n` > 1 and `logprobs` through `clover serve` with the official `openai` client.

Expected values come from elsewhere than the server:
- logprobs on the autoregressive fixture (tiny_ar): transformers' causal
  logits (tests/fixtures/tiny_ar/data/causal_logits.f32, recorded by
  tools/reference) give log_softmax of the row before the token: the greedy
  token's log-probability and the top 5 must match it;
- logprobs on the block-diffusion fixture (tiny_clover): exp(logprob) must
  equal the confidences `clover run --json` reports for the same request
  (the CLI over the engine, no server code), the greedy pick must be the
  top alternative, and the alternatives must be sorted;
- n: choice k must equal a single request with seed + k (documented), and
  the streamed choices the non-streamed ones.
"""
import json
import math
import subprocess

import numpy as np
import openai
import pytest
from tokenizers import Tokenizer

import test_server_process as ss


def convert(name, tmp_path_factory):
    if not ss.CLOVER.exists():
        pytest.fail(f"{ss.CLOVER} is missing: build the clover target first")
    return ss.convert_fixture(name, tmp_path_factory.mktemp(name) / f"{name}.gguf")


@pytest.fixture(scope="module")
def clover_model(tmp_path_factory):
    return convert("tiny_clover", tmp_path_factory)


@pytest.fixture(scope="module")
def ar_model(tmp_path_factory):
    return convert("tiny_ar", tmp_path_factory)


def serve(model, tmp_path_factory, *args):
    d = tmp_path_factory.mktemp("serve")
    return ss.start_server(model, d / "serve.log", *args)


@pytest.fixture(scope="module")
def clover_srv(clover_model, tmp_path_factory):
    srv = serve(clover_model, tmp_path_factory, "--max-n", 4)
    try:
        yield srv
    finally:
        ss.stop_server(srv)


@pytest.fixture(scope="module")
def ar_srv(ar_model, tmp_path_factory):
    srv = serve(ar_model, tmp_path_factory)
    try:
        yield srv
    finally:
        ss.stop_server(srv)


def client_of(srv):
    return openai.OpenAI(base_url=srv.base_url + "/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def hf_tok():
    return Tokenizer.from_file(str(ss.FIXTURES / "tiny_clover" / "hf" / "tokenizer.json"))


def test_ar_logprobs_match_transformers(ar_srv, hf_tok):
    man = json.loads((ss.FIXTURES / "tiny_ar" / "manifest.json").read_text())
    ids = man["causal"]["ids"]
    logits = np.fromfile(ss.FIXTURES / "tiny_ar" / man["causal"]["logits"]["file"], dtype="<f4").reshape(
        man["causal"]["logits"]["shape"]).astype(np.float64)
    client = client_of(ar_srv)
    for k in (5, 17, 30):
        row = logits[k - 1]
        ref = row - (row.max() + np.log(np.exp(row - row.max()).sum()))
        order = sorted(range(len(ref)), key=lambda i: (-ref[i], i))[:5]
        r = client.completions.create(model="tiny_ar", prompt=ids[:k], max_tokens=1, temperature=0, logprobs=5,
                                      extra_body={"ignore_eos": True})
        lp = r.choices[0].logprobs
        assert len(lp.token_logprobs) == 1
        assert lp.tokens[0] == hf_tok.decode([order[0]], skip_special_tokens=False)
        assert abs(lp.token_logprobs[0] - ref[order[0]]) < 1e-4
        want = {}
        for i in order:  # two ids may read the same (bytes of one character): the more probable one is kept
            want.setdefault(hf_tok.decode([i], skip_special_tokens=False), ref[i])
        got = lp.top_logprobs[0]
        assert set(got) == set(want)
        for t in want:
            assert abs(got[t] - want[t]) < 1e-4, (t, got[t], want[t])
        assert lp.text_offset == [0]


def test_diffusion_logprobs_match_cli_confidences(clover_srv, clover_model):
    client = client_of(clover_srv)
    prompt = [401, 84, 82, 261, 198, 34, 321, 77, 83, 271]
    r = client.completions.create(model="tiny_clover", prompt=prompt, max_tokens=12, temperature=0, logprobs=3,
                                  extra_body={"ignore_eos": True})
    cli = subprocess.run([str(ss.CLOVER), "run", "-m", str(clover_model), "--ids", ",".join(map(str, prompt)),
                          "--max-tokens", "12", "--threads", "1", "--json", "--ignore-eos"],
                         capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stderr
    conf = json.loads(cli.stdout)["confidences"]
    lp = r.choices[0].logprobs
    assert len(lp.token_logprobs) == len(conf) == 12
    for got, c in zip(lp.token_logprobs, conf):
        assert abs(math.exp(got) - c) < 1e-5, (got, c)
    for t, top in zip(lp.token_logprobs, lp.top_logprobs):
        vals = sorted(top.values(), reverse=True)
        assert abs(vals[0] - t) < 1e-6  # greedy: the pick is the most probable
        assert all(v <= 0 for v in vals)


def test_chat_logprobs_streamed_equal_plain(clover_srv):
    client = client_of(clover_srv)
    kw = dict(model="tiny_clover", messages=[{"role": "user", "content": "Hello"}], max_tokens=10, temperature=0,
              logprobs=True, top_logprobs=2, extra_body={"ignore_eos": True})
    r = client.chat.completions.create(**kw)
    plain = [(e.token, round(e.logprob, 5), [(t.token, round(t.logprob, 5)) for t in e.top_logprobs])
             for e in r.choices[0].logprobs.content]
    assert len(plain) == r.usage.completion_tokens == 10
    assert all(len(e[2]) == 2 and e[2][0][1] >= e[2][1][1] for e in plain)
    streamed = []
    for ch in client.chat.completions.create(stream=True, **kw):
        if ch.choices and ch.choices[0].logprobs and ch.choices[0].logprobs.content:
            streamed += [(e.token, round(e.logprob, 5), [(t.token, round(t.logprob, 5)) for t in e.top_logprobs])
                         for e in ch.choices[0].logprobs.content]
    assert streamed == plain
    # no logprobs asked: none given
    r = client.chat.completions.create(model="tiny_clover", messages=[{"role": "user", "content": "Hi"}], max_tokens=2)
    assert r.choices[0].logprobs is None


def test_n_choices_are_seed_plus_index(clover_srv):
    client = client_of(clover_srv)
    kw = dict(model="tiny_clover", prompt="The weather today is", max_tokens=12, temperature=1.0,
              extra_body={"ignore_eos": True})
    r = client.completions.create(n=3, seed=40, **kw)
    assert [c.index for c in r.choices] == [0, 1, 2]
    singles = [client.completions.create(n=1, seed=40 + k, **kw) for k in range(3)]
    assert [c.text for c in r.choices] == [s.choices[0].text for s in singles]
    assert len({c.text for c in r.choices}) > 1  # different draws
    assert r.usage.prompt_tokens == singles[0].usage.prompt_tokens
    assert r.usage.completion_tokens == sum(s.usage.completion_tokens for s in singles)
    # streamed: the same texts, each choice's chunks carrying its index, one [DONE] (the client ends on it)
    texts, finish = {}, {}
    for ch in client.completions.create(n=3, seed=40, stream=True, stream_options={"include_usage": True}, **kw):
        for c in ch.choices:
            texts[c.index] = texts.get(c.index, "") + c.text
            if c.finish_reason:
                finish[c.index] = c.finish_reason
        if ch.usage:
            assert ch.usage.completion_tokens == r.usage.completion_tokens
    assert [texts[k] for k in range(3)] == [c.text for c in r.choices]
    assert finish == {0: "length", 1: "length", 2: "length"}


def test_n_chat_streamed_and_limit(clover_srv):
    client = client_of(clover_srv)
    kw = dict(model="tiny_clover", messages=[{"role": "user", "content": "Hi"}], max_tokens=9, temperature=0.9,
              seed=7, extra_body={"ignore_eos": True, "enable_thinking": False})
    r = client.chat.completions.create(n=2, **kw)
    got = {}
    for ch in client.chat.completions.create(n=2, stream=True, **kw):
        for c in ch.choices:
            got[c.index] = got.get(c.index, "") + (c.delta.content or "")
    assert [got[0], got[1]] == [c.message.content for c in r.choices]
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(n=5, **kw)
    assert e.value.body["param"] == "n" and "--max-n" in e.value.body["message"]
