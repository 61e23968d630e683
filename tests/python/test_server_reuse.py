"""Prefix reuse across a re-rendered chat in `clover serve` (the engine's prompt
snapshot, src/engine/snapshot.h), on the tiny Clover fixture model.

Turn 2 of a chat is turn 1's messages + the assistant's answer as returned + a
new user message. The template renders the answer without its reasoning and in
place of turn 1's generation prompt, so what turn 2 can reuse is turn 1's
conversation before its generation prompt. Expected values come from elsewhere
than the server: that prefix's token count from Hugging Face `tokenizers` on
the fixture's tokenizer.json over the template rules written out here, and the
answers from a fresh server given the same request and seed."""

import openai
import pytest
from tokenizers import Tokenizer

import test_server_process as ss

MODEL_ID = "tiny_clover"


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    if not ss.CLOVER.exists():
        pytest.fail(f"{ss.CLOVER} is missing: build the clover target first")
    return ss.convert_fixture("tiny_clover", tmp_path_factory.mktemp("model") / f"{MODEL_ID}.gguf")


def started(model, tmp_path_factory, name, *args):
    return ss.start_server(model, tmp_path_factory.mktemp(name) / "serve.log", "--timeout", 3, *args)


@pytest.fixture(scope="module")
def hf_tok():
    return Tokenizer.from_file(str(ss.FIXTURES / "tiny_clover" / "hf" / "tokenizer.json"))


def history_tokens(tok, messages):
    """Token count of the conversation rendered WITHOUT a generation prompt:
    earlier assistant turns carry their content only (TRUNK.md 6)."""
    text = "".join(f"<|im_start|>{m['role']}\n{m['content'].strip()}<|im_end|>\n" for m in messages)
    return len(tok.encode(text, add_special_tokens=False).ids)


def chat(srv, messages, **kw):
    """The openai client's chat completion as a plain dict (the "clover" extra object included)."""
    client = openai.OpenAI(base_url=srv.base_url + "/v1", api_key="unused", max_retries=0, timeout=120)
    return client.chat.completions.create(model=MODEL_ID, messages=messages, max_tokens=16, **kw).model_dump()


def answer_of(body):
    m = body["choices"][0]["message"]
    return m.get("content") or "", m.get("reasoning_content") or ""


CONVERSATIONS = [
    [{"role": "system", "content": "You are a terse assistant."}, {"role": "user", "content": "Name a colour."}],
    [{"role": "user", "content": "Count from one to five, please, in words."}],
]
FOLLOW_UPS = ["And another one?", "Now backwards."]


@pytest.mark.parametrize("sampling", [{}, {"temperature": 0.8, "seed": 1234}], ids=["greedy", "sampled"])
def test_chat_turns_reuse_the_snapshot(model, tmp_path_factory, hf_tok, sampling):
    srv = started(model, tmp_path_factory, "reuse", "--sessions", 2)
    fresh = None
    try:
        convs = [list(c) for c in CONVERSATIONS]
        # turn 1 of both conversations, interleaved: the cache must keep them apart
        for c in convs:
            first = chat(srv, c, **sampling)
            assert first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
            content, _ = answer_of(first)
            c.append({"role": "assistant", "content": content})
        for c, follow in zip(convs, FOLLOW_UPS):
            prefix = history_tokens(hf_tok, c[:-1])  # turn 1 before its generation prompt
            c.append({"role": "user", "content": follow})
            second = chat(srv, c, **sampling)
            assert second["usage"]["prompt_tokens"] > prefix > 0
            assert second["usage"]["prompt_tokens_details"]["cached_tokens"] == prefix
            assert second["clover"]["reused_tokens"] == prefix
            # the same request on a fresh server, which has nothing to reuse
            if fresh is None:
                fresh = started(model, tmp_path_factory, "fresh", "--sessions", 1)
            ref = chat(fresh, c, **sampling)
            assert ref["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
            assert answer_of(second) == answer_of(ref)
            assert second["usage"]["completion_tokens"] == ref["usage"]["completion_tokens"]
            assert second["choices"][0]["finish_reason"] == ref["choices"][0]["finish_reason"]
            c.append({"role": "assistant", "content": answer_of(second)[0]})
        # turn 3 of the first conversation reuses turns 1 and 2 (before turn 2's generation prompt)
        c = convs[0]
        prefix = history_tokens(hf_tok, c[:-1])
        c.append({"role": "user", "content": "Thanks."})
        third = chat(srv, c, **sampling)
        assert third["usage"]["prompt_tokens_details"]["cached_tokens"] == prefix
        assert answer_of(third) == answer_of(chat(fresh, c, **sampling))
        metrics = srv.metrics()
        assert metrics["clover_reused_tokens_total"] >= prefix
    finally:
        ss.stop_server(srv)
        if fresh is not None:
            ss.stop_server(fresh)


def test_completions_take_no_snapshot(model, tmp_path_factory, hf_tok):
    """A completion is not re-rendered: a prompt that only shares a prefix with
    an earlier one (not its committed ids) starts afresh."""
    srv = started(model, tmp_path_factory, "completions", "--sessions", 1)
    try:
        ids = hf_tok.encode("The quick brown fox jumps over the lazy dog.", add_special_tokens=False).ids
        code, body = srv.post_json("/v1/completions", {"model": MODEL_ID, "prompt": ids, "max_tokens": 8})
        assert code == 200, body
        code, body = srv.post_json("/v1/completions", {"model": MODEL_ID, "prompt": ids[:-2] + [17, 18],
                                                       "max_tokens": 4})
        assert code == 200, body
        assert body["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    finally:
        ss.stop_server(srv)


def test_snapshot_mib_zero_keeps_none(model, tmp_path_factory, hf_tok):
    """--snapshot-mib 0 turns the prompt snapshot off: the second turn of a chat
    (re-rendered without the first answer's generation prompt) reuses nothing,
    and answers exactly as with the snapshot."""
    srv = started(model, tmp_path_factory, "nosnap", "--sessions", 1, "--snapshot-mib", 0)
    try:
        c = list(CONVERSATIONS[1])
        content, _ = answer_of(chat(srv, c))
        c += [{"role": "assistant", "content": content}, {"role": "user", "content": FOLLOW_UPS[1]}]
        second = chat(srv, c)
        assert second["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
        assert second["clover"]["reused_tokens"] == 0
    finally:
        ss.stop_server(srv)
