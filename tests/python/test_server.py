"""`clover serve` as clients use it, on the tiny Clover fixture model
(tests/fixtures/tiny_clover, converted with `clover convert`).

Expected values come from elsewhere than the server: prompt token counts from
Hugging Face `tokenizers` on the fixture's tokenizer.json and the template
rules written out here; generated text from `clover run --json` (the CLI over
the same engine) decoded by `tokenizers`; and the server's non-streaming
answers for its streamed ones. The official `openai` package is the client
wherever the request is well formed; raw HTTP where it is not.

Needs the build's `clover` binary (CLOVER_BUILD_DIR); under the ASan build the
same tests run on the sanitized server, and every server must exit cleanly."""

import json
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest
from tokenizers import Tokenizer

import test_server_process as ss
from test_server_process import wait_for

MODEL_ID = "tiny_clover"
BLOCK = 8  # the fixture record's block size


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    if not ss.CLOVER.exists():
        pytest.fail(f"{ss.CLOVER} is missing: build the clover target first")
    return ss.convert_fixture("tiny_clover", tmp_path_factory.mktemp("model") / f"{MODEL_ID}.gguf")


@pytest.fixture(scope="module")
def server(model, tmp_path_factory):
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    srv = ss.start_server(model, log, "--timeout", 3, "--max-body", 65536, "--queue", 64, "--sessions", 4)
    try:
        yield srv
    finally:
        ss.stop_server(srv)


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def hf_tok():
    return Tokenizer.from_file(str(ss.FIXTURES / "tiny_clover" / "hf" / "tokenizer.json"))


def render(messages, thinking=True):
    """Qwen3.5's ChatML for plain system / user turns and the generation prompt (TRUNK.md 6)."""
    text = "".join(f"<|im_start|>{m['role']}\n{m['content'].strip()}<|im_end|>\n" for m in messages)
    return text + "<|im_start|>assistant\n" + ("<think>\n" if thinking else "<think>\n\n</think>\n\n")


def cli_generate(model, ids, max_tokens, *extra):
    r = subprocess.run([str(ss.CLOVER), "run", "-m", str(model), "--ids", ",".join(map(str, ids)), "--max-tokens",
                        str(max_tokens), "--threads", "1", "--json", *map(str, extra)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def extra(obj, name):
    return (obj.model_extra or {}).get(name)


def stream_chat(client, **kw):
    """(reasoning, content, finish_reason, usage, clover, chunks) of a streamed chat completion."""
    reasoning, content, finish, usage, stats, n = [], [], None, None, None, 0
    for chunk in client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw):
        n += 1
        assert chunk.object == "chat.completion.chunk" and chunk.model == MODEL_ID
        if chunk.usage:
            usage = chunk.usage
        if extra(chunk, "clover"):
            stats = extra(chunk, "clover")
        for c in chunk.choices:
            if c.delta.content:
                content.append(c.delta.content)
            if extra(c.delta, "reasoning_content"):
                reasoning.append(extra(c.delta, "reasoning_content"))
            if c.finish_reason:
                finish = c.finish_reason
    return "".join(reasoning), "".join(content), finish, usage, stats, n


def stream_completion(client, **kw):
    text, finish, usage = [], None, None
    for chunk in client.completions.create(stream=True, stream_options={"include_usage": True}, **kw):
        if chunk.usage:
            usage = chunk.usage
        for c in chunk.choices:
            text.append(c.text)
            if c.finish_reason:
                finish = c.finish_reason
    return "".join(text), finish, usage


# ---- the API through the openai client ----

def test_models_and_health(server, client):
    ids = [m.id for m in client.models.list().data]
    assert ids == [MODEL_ID]
    status, _, body = server.request("GET", "/health")
    assert status == 200 and json.loads(body) == {"status": "ok"}
    assert wait_for(lambda: "clover serve: GET /health 200 tokens 0+0" in server.log_text())  # one line a request


@pytest.mark.parametrize("thinking", [True, False])
def test_chat_prompt_and_parts(client, hf_tok, thinking):
    messages = [{"role": "system", "content": "You are terse. "}, {"role": "user", "content": "Hello there"}]
    r = client.chat.completions.create(model=MODEL_ID, messages=messages, max_tokens=12,
                                       extra_body={"chat_template_kwargs": {"enable_thinking": thinking}})
    expected_prompt = hf_tok.encode(render(messages, thinking), add_special_tokens=False).ids
    assert r.usage.prompt_tokens == len(expected_prompt)
    assert 1 <= r.usage.completion_tokens <= 12
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.object == "chat.completion" and r.model == MODEL_ID and r.id.startswith("chatcmpl-")
    choice = r.choices[0]
    assert choice.finish_reason in ("stop", "length") and choice.message.role == "assistant"
    if thinking:
        assert isinstance(extra(choice.message, "reasoning_content"), str)
    else:
        assert extra(choice.message, "reasoning_content") is None
    stats = extra(r, "clover")
    assert stats["mode"] == "diffusion" and stats["passes"] >= stats["blocks"] >= 1
    assert stats["prompt_tokens"] == r.usage.prompt_tokens and stats["tokens_per_second"] > 0


@pytest.mark.parametrize("sampling", [{}, {"temperature": 0.9, "top_p": 0.95, "seed": 11}])
def test_completion_matches_cli(model, client, hf_tok, sampling):
    prompt = hf_tok.encode("Once upon a time, in a land far away", add_special_tokens=False).ids
    r = client.completions.create(model=MODEL_ID, prompt=prompt, max_tokens=20, **sampling)
    cli_args = ["--temperature", sampling["temperature"], "--top-p", sampling["top_p"], "--seed",
                sampling["seed"]] if sampling else []
    ref = cli_generate(model, prompt, 20, *cli_args)
    ids = ref["ids"]
    if ref["finish_reason"] == "stop":
        ids = ids[:-1]  # the stop id is counted but not text
    assert r.choices[0].text == hf_tok.decode(ids, skip_special_tokens=True)
    assert r.choices[0].finish_reason == ref["finish_reason"]
    assert r.usage.completion_tokens == len(ref["ids"])
    assert r.usage.prompt_tokens == len(prompt)


@pytest.mark.parametrize("sampling", [{}, {"temperature": 0.9, "top_p": 0.95, "seed": 11}])
def test_lossless_completion_matches_cli_ar(model, client, hf_tok, sampling):
    """The "lossless" option gives autoregressive decoding's answer (clover run --ar, same options, seed)."""
    prompt = hf_tok.encode("Once upon a time, in a land far away", add_special_tokens=False).ids
    r = client.completions.create(model=MODEL_ID, prompt=prompt, max_tokens=20, extra_body={"lossless": True},
                                  **sampling)
    cli_args = ["--temperature", sampling["temperature"], "--top-p", sampling["top_p"], "--seed",
                sampling["seed"]] if sampling else []
    ref = cli_generate(model, prompt, 20, "--ar", *cli_args)
    ids = ref["ids"][:-1] if ref["finish_reason"] == "stop" else ref["ids"]
    assert r.choices[0].text == hf_tok.decode(ids, skip_special_tokens=True)
    assert r.choices[0].finish_reason == ref["finish_reason"]
    assert r.usage.completion_tokens == len(ref["ids"])
    lossy = cli_generate(model, prompt, 20, *cli_args)
    ll = cli_generate(model, prompt, 20, "--lossless", *cli_args)
    assert ll["ids"] == ref["ids"] and ll["lossless"] and len(ll["accepted_per_block"]) == ll["blocks"]
    assert lossy["mode"] == ll["mode"] == "diffusion"


def test_rule_causal_matches_cli(model, client, hf_tok):
    """The "rule" field: the causal-fallback rule, as clover run --rule causal; at threshold 1 every row is
    a causal step."""
    prompt = hf_tok.encode("Once upon a time, in a land far away", add_special_tokens=False).ids
    for thr in (0.5, 1.0):
        r = client.completions.create(model=MODEL_ID, prompt=prompt, max_tokens=20,
                                      extra_body={"rule": "causal", "threshold": thr})
        ref = cli_generate(model, prompt, 20, "--rule", "causal", "--threshold", thr)
        ids = ref["ids"][:-1] if ref["finish_reason"] == "stop" else ref["ids"]
        assert r.choices[0].text == hf_tok.decode(ids, skip_special_tokens=True)
        assert r.usage.completion_tokens == len(ref["ids"])
        stats = extra(r, "clover")
        assert stats["passes"] == ref["stats"]["passes"]
        assert stats.get("causal_steps", 0) == ref["stats"]["causal_steps"]
        if thr == 1.0:
            assert ref["stats"]["causal_steps"] == ref["stats"]["passes"] > 0
    for body, param in (({"rule": "fast"}, "rule"), ({"rule": "causal", "lossless": True}, "rule")):
        with pytest.raises(openai.BadRequestError) as e:
            client.completions.create(model=MODEL_ID, prompt="hi", extra_body=body)
        assert e.value.status_code == 400 and e.value.param == param


@pytest.mark.parametrize("thinking", [True, False])
@pytest.mark.parametrize("sampling", [{}, {"temperature": 1.0, "seed": 5}])
def test_chat_stream_equals_non_stream(client, thinking, sampling):
    kw = dict(model=MODEL_ID, max_tokens=40, messages=[{"role": "user", "content": "Tell me a story."}],
              extra_body={"enable_thinking": thinking, "ignore_eos": True}, **sampling)
    r = client.chat.completions.create(**kw)
    reasoning, content, finish, usage, stats, n_chunks = stream_chat(client, **kw)
    msg = r.choices[0].message
    assert content == (msg.content or "")
    assert reasoning == (extra(msg, "reasoning_content") or "")
    assert finish == r.choices[0].finish_reason
    assert usage.prompt_tokens == r.usage.prompt_tokens
    assert usage.completion_tokens == r.usage.completion_tokens
    assert stats["passes"] == extra(r, "clover")["passes"]
    assert n_chunks >= 3  # the role chunk, at least one piece, the finish chunk


def test_completion_stream_equals_non_stream(client):
    kw = dict(model=MODEL_ID, prompt="The weather today is", max_tokens=30, temperature=0.8, seed=3,
              extra_body={"ignore_eos": True, "top_k": 50})
    r = client.completions.create(**kw)
    text, finish, usage = stream_completion(client, **kw)
    assert text == r.choices[0].text
    assert finish == r.choices[0].finish_reason == "length"
    assert usage.completion_tokens == r.usage.completion_tokens == 30


def test_stop_sequences(client):
    kw = dict(model=MODEL_ID, max_tokens=32, extra_body={"ignore_eos": True})
    for prompt in ("A list of things:", "Numbers follow", "Say something"):
        full = client.completions.create(prompt=prompt, **kw).choices[0].text
        if len(full) >= 6:
            break
    else:
        pytest.fail("no answer long enough to cut")
    stop = full[len(full) // 2: len(full) // 2 + 2]
    expected = full[:full.find(stop)]
    r = client.completions.create(prompt=prompt, stop=[stop, "\u00a7\u00a7never"], **kw)
    assert r.choices[0].text == expected and r.choices[0].finish_reason == "stop"
    text, finish, _ = stream_completion(client, prompt=prompt, stop=stop, **kw)
    assert text == expected and finish == "stop"


def test_prefix_reuse(model, client, hf_tok):
    base = hf_tok.encode("The quick brown fox jumps over the lazy dog.", add_special_tokens=False).ids
    first = client.completions.create(model=MODEL_ID, prompt=base, max_tokens=BLOCK // 2)
    tail = [17, 18, 19]
    r = client.completions.create(model=MODEL_ID, prompt=base + tail, max_tokens=6)
    assert extra(first, "clover")["reused_tokens"] == 0 or extra(first, "clover")["reused_tokens"] <= len(base)
    assert extra(r, "clover")["reused_tokens"] == len(base)  # the first answer fit in its last block: prompt kept
    assert r.usage.prompt_tokens_details.cached_tokens == len(base)
    ref = cli_generate(model, base + tail, 6)  # the same request on a fresh session
    ids = ref["ids"][:-1] if ref["finish_reason"] == "stop" else ref["ids"]
    assert r.choices[0].text == hf_tok.decode(ids, skip_special_tokens=True)


def test_openai_errors(client):
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "hi"}])
    assert e.value.status_code == 404 and e.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": "hi"}], n=9)
    assert e.value.status_code == 400 and e.value.param == "n"  # above --max-n (8)
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL_ID, prompt="hi", extra_body={"block_size": 3})
    assert e.value.param == "block_size"


# ---- malformed requests, over raw HTTP ----

CHAT = "/v1/chat/completions"
HELLO = [{"role": "user", "content": "hi"}]


def bad_cases():
    long_prompt = "word " * 5000  # more tokens than the fixture's 4096-token context
    return [
        ("bad json", "POST", CHAT, b'{"messages": [', 400, "invalid_json", None),
        ("not an object", "POST", CHAT, b'[1, 2]', 400, "invalid_type", "body"),
        ("messages a string", "POST", CHAT, {"messages": "hi"}, 400, "invalid_type", "messages"),
        ("max_tokens a string", "POST", CHAT, {"messages": HELLO, "max_tokens": "5"}, 400, "invalid_type",
         "max_tokens"),
        ("huge integer", "POST", CHAT, b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": '
         b'99999999999999999999999999}', 400, "invalid_value", "max_tokens"),
        ("huge real", "POST", CHAT, b'{"messages": [{"role": "user", "content": "hi"}], "temperature": 1e999}',
         400, "invalid_json", None),
        ("max_tokens over the cap", "POST", CHAT, {"messages": HELLO, "max_tokens": 2 ** 40}, 400, "invalid_value",
         "max_tokens"),
        ("negative max_tokens", "POST", CHAT, {"messages": HELLO, "max_tokens": -3}, 400, "invalid_value",
         "max_tokens"),
        ("empty messages", "POST", CHAT, {"messages": []}, 400, "invalid_value", "messages"),
        ("invalid utf-8", "POST", CHAT, b'{"messages": [{"role": "user", "content": "\xc3\x28 \xff"}]}', 400,
         "invalid_json", None),
        ("temperature out of range", "POST", CHAT, {"messages": HELLO, "temperature": -1}, 400, "invalid_value",
         "temperature"),
        ("unknown role", "POST", CHAT, {"messages": [{"role": "wizard", "content": "x"}]}, 400, "invalid_value",
         "messages[0].role"),
        ("no user turn", "POST", CHAT, {"messages": [{"role": "system", "content": "x"}]}, 400, None, "messages"),
        ("threshold out of range", "POST", CHAT, {"messages": HELLO, "threshold": 2}, 400, "invalid_value",
         "threshold"),
        ("token id outside the vocabulary", "POST", "/v1/completions", {"prompt": [1, 2, 100000]}, 400,
         "invalid_value", "prompt"),
        ("prompt longer than the context", "POST", "/v1/completions", {"prompt": long_prompt}, 400,
         "context_length_exceeded", "prompt"),
        ("max_tokens past the context", "POST", CHAT, {"messages": HELLO, "max_tokens": 5000}, 400,
         "context_length_exceeded", "max_tokens"),
        ("oversize body", "POST", CHAT, b'{"messages": [{"role": "user", "content": "' + b"x" * 70000 + b'"}]}',
         413, "request_too_large", None),
        ("unknown route", "POST", "/v1/embeddings", {"input": "x"}, 404, "unknown_url", None),
        ("wrong method", "GET", CHAT, None, 405, "method_not_allowed", None),
        ("wrong method on health", "DELETE", "/health", None, 405, "method_not_allowed", None),
    ]


@pytest.mark.parametrize("case", bad_cases(), ids=[c[0] for c in bad_cases()])
def test_malformed_requests(server, case):
    _, method, path, body, status, code, param = case
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    got, headers, data = server.request(method, path, body, {"Content-Type": "application/json"})
    assert got == status, data
    err = json.loads(data)["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["message"] and "\n" not in err["message"]
    if code:
        assert err["code"] == code, err
    assert err["param"] == param, err
    if status == 405:
        assert headers["allow"] == ("POST" if path == CHAT else "GET, HEAD")
    assert server.request("GET", "/health")[0] == 200


def test_slow_client_is_dropped(server):
    """A body that stops arriving: answered a JSON 408 at --request-deadline (10 s from the connect) while others
    are served, and closed."""
    before = server.metrics().get(f'clover_requests_total{{route="{CHAT}",status="408"}}', 0)
    s = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: 200\r\n\r\n{\"messages\": [")
    t0 = time.time()
    assert server.request("GET", "/health", timeout=5)[0] == 200  # not blocked by the slow one
    got = b""
    while True:
        b = s.recv(4096)
        if not b:
            break
        got += b
    elapsed = time.time() - t0
    s.close()
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408") and b"content-type: application/json" in head.lower(), got
    assert json.loads(body)["error"]["code"] == "request_timeout"
    assert 2.0 <= elapsed <= 15.0, elapsed
    # counted when libmicrohttpd lets the request go, which may come just after the client saw the close
    key = f'clover_requests_total{{route="{CHAT}",status="408"}}'
    deadline = time.time() + 10
    while server.metrics().get(key, 0) != before + 1 and time.time() < deadline:
        time.sleep(0.1)
    assert server.metrics().get(key, 0) == before + 1
    r = server.post_json(CHAT, {"messages": HELLO, "max_tokens": 4})
    assert r[0] == 200


# ---- a client that leaves ----

@pytest.mark.parametrize("stream", [True, False])
def test_disconnect_cancels(server, client, stream):
    kw = dict(model=MODEL_ID, prompt="Hello world", max_tokens=12)
    before_text = client.completions.create(**kw).choices[0].text
    m0 = server.metrics()
    body = json.dumps({"prompt": "A very long story:", "max_tokens": 4000, "ignore_eos": True,
                       "stream": stream}).encode()
    s = socket.create_connection(("127.0.0.1", server.port), timeout=60)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    if stream:
        got = b""
        while got.count(b"data: ") < 2:  # the generation is under way
            b = s.recv(4096)
            assert b, got
            got += b
    else:
        assert wait_for(lambda: server.metrics()["clover_busy"] == 1.0)
    s.close()
    t_close = time.time()
    assert wait_for(lambda: server.metrics()["clover_cancelled_requests_total"] == m0["clover_cancelled_requests_total"] + 1)
    assert wait_for(lambda: server.metrics()["clover_busy"] == 0.0)
    stopped_after = time.time() - t_close
    m1 = server.metrics()
    # stopped long before the 4000 tokens (about 2 ms a token here, more under ASan)
    assert m1["clover_completion_tokens_total"] - m0["clover_completion_tokens_total"] < 1000
    assert stopped_after < 5.0, stopped_after
    assert m1['clover_requests_total{route="/v1/completions",status="499"}'] >= 1
    assert client.completions.create(**kw).choices[0].text == before_text  # served as before
    assert "client left: cancelled" in server.log_text()


# ---- many clients ----

def request_set():
    reqs = []
    for i in range(25):
        kind = ("chat", "completion")[i % 2]
        stream = i % 3 == 0
        sampling = {"temperature": 0.8, "seed": 1000 + i} if i % 4 else {}
        if kind == "chat":
            reqs.append(("chat", stream, dict(messages=[{"role": "user", "content": f"Question {i}: why?"}],
                                              max_tokens=8 + i % 9, **sampling)))
        else:
            reqs.append(("completion", stream, dict(prompt=f"Story {i} begins here?", max_tokens=8 + i % 11,
                                                    **sampling)))
    return reqs


def run_one(client, req):
    kind, stream, kw = req
    if kind == "chat":
        if stream:
            reasoning, content, finish, usage, _, _ = stream_chat(client, model=MODEL_ID, **kw)
            return reasoning, content, finish, usage.completion_tokens
        r = client.chat.completions.create(model=MODEL_ID, **kw)
        m = r.choices[0].message
        return extra(m, "reasoning_content") or "", m.content or "", r.choices[0].finish_reason, r.usage.completion_tokens
    if stream:
        text, finish, usage = stream_completion(client, model=MODEL_ID, **kw)
        return "", text, finish, usage.completion_tokens
    r = client.completions.create(model=MODEL_ID, **kw)
    return "", r.choices[0].text, r.choices[0].finish_reason, r.usage.completion_tokens


def test_concurrent_clients_match_sequential(server, client):
    reqs = request_set()
    sequential = [run_one(client, r) for r in reqs]
    order = [i for _ in range(4) for i in range(len(reqs))]  # 100 requests
    # 32 clients at once: up to --max-batch (8) generate together in batched passes, the rest queue
    with ThreadPoolExecutor(max_workers=32) as pool:
        results = list(pool.map(lambda i: (i, run_one(client, reqs[i])), order))
    assert len(results) == 100
    for i, got in results:
        assert got == sequential[i], f"request {i}: {got} != {sequential[i]}"
    assert server.request("GET", "/health")[0] == 200


def test_queue_full_is_429(model, tmp_path):
    """--queue 1 --max-batch 1: one request runs, one waits, the next is refused; the server stays healthy."""
    srv = ss.start_server(model, tmp_path / "serve.log", "--queue", 1, "--max-batch", 1)
    socks = []
    try:
        body = json.dumps({"prompt": "Go on:", "max_tokens": 4000, "ignore_eos": True, "stream": True}).encode()
        head = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
                + str(len(body)).encode() + b"\r\n\r\n")
        for wait in (lambda m: m["clover_busy"] == 1.0, lambda m: m["clover_queue_length"] == 1.0):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
            s.sendall(head + body)
            socks.append(s)
            assert wait_for(lambda: wait(srv.metrics()))  # running, then waiting
        status, r = srv.post_json("/v1/completions", {"prompt": "hi", "max_tokens": 2})
        assert status == 429 and r["error"]["code"] == "queue_full" and r["error"]["type"] == "rate_limit_error"
        for s in socks:
            s.close()
        assert wait_for(lambda: srv.metrics()["clover_cancelled_requests_total"] == 2.0)
        assert wait_for(lambda: srv.metrics()["clover_queue_length"] == 0.0 and srv.metrics()["clover_busy"] == 0.0)
        assert srv.post_json("/v1/completions", {"prompt": "hi", "max_tokens": 2})[0] == 200
        m = srv.metrics()
        assert m['clover_requests_total{route="/v1/completions",status="429"}'] == 1
    finally:
        for s in socks:
            s.close()
        ss.stop_server(srv)


def test_default_max_tokens_fill_the_context(model, tmp_path):
    """--ctx 64 and no max_tokens: a chat answer runs to the end of the context, streamed or not (the last
    block, cut short, still fits the session)."""
    srv = ss.start_server(model, tmp_path / "serve.log", "--ctx", 64)
    try:
        client = openai.OpenAI(base_url=srv.base_url + "/v1", api_key="unused", max_retries=0, timeout=120)
        kw = dict(model=MODEL_ID, messages=[{"role": "user", "content": "Talk."}], extra_body={"ignore_eos": True})
        r = client.chat.completions.create(**kw)
        assert r.usage.prompt_tokens + r.usage.completion_tokens == 64 and r.choices[0].finish_reason == "length"
        reasoning, content, finish, usage, _, _ = stream_chat(client, **kw)
        assert (reasoning, content, finish) == (extra(r.choices[0].message, "reasoning_content") or "",
                                                r.choices[0].message.content or "", "length")
        assert usage.completion_tokens == r.usage.completion_tokens
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(max_tokens=64, **kw)
        assert e.value.code == "context_length_exceeded"
    finally:
        ss.stop_server(srv)
