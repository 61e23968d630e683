"""`clover serve` at the edges of HTTP and JSON (issue 27, items 3-7), on loopback, against hand-written expectations.

- 900 small header lines (under the 16 KB size limit) get a JSON 431, not libmicrohttpd's HTML page or silence;
  200 lines are served.
- JSON the standard allows: "\\u0000" in a string is taken (as U+FFFD), an integer past int64 in a field that wants
  one is a 400 naming the field, elsewhere (a tool's schema) it is kept, and a seed is a 64-bit unsigned value:
  18446744073709551615 draws what -1 draws (the documented two's-complement wrap).
- a generation body without Content-Type: application/json is a JSON 415 (a web page's text/plain POST cannot
  make the server generate).
- Expect: 100-continue: a body the server will refuse (too large, not JSON) is refused at once, with no
  100 Continue before it; an acceptable one gets its 100 and then its answer.
- GET /v1/models/{id}: 200 with the model object; an unknown id is a JSON 404.
- n: n=8 on an idle server is 200 with 8 choices; n above --queue is refused once, a 400 naming n (not a 429
  that no retry can pass).
- completions logprobs: text_offset indexes the returned text, also when a special token (in `tokens`, not in
  `text`) is among them.
"""
import json
import socket
import time

import pytest

import test_server_process as ss

MODEL_ID = "tiny_clover"


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    if not ss.CLOVER.exists():
        pytest.fail(f"{ss.CLOVER} is missing: build the clover target first")
    return ss.convert_fixture("tiny_clover", tmp_path_factory.mktemp("model") / f"{MODEL_ID}.gguf")


@pytest.fixture(scope="module")
def server(model, tmp_path_factory):
    srv = ss.start_server(model, tmp_path_factory.mktemp("serve") / "serve.log", "--max-body", 4096)
    try:
        yield srv
    finally:
        ss.stop_server(srv)


def raw_exchange(port, data, timeout=20, read_first=False):
    """Sends data on a fresh connection and reads until the server closes."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        out = b""
        while True:
            try:
                b = s.recv(65536)
            except ConnectionResetError:
                break
            if not b:
                break
            out += b
        return out
    finally:
        s.close()


def json_error(raw):
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    assert b"content-type: application/json" in head.lower(), raw[:400]
    err = json.loads(body)["error"]
    assert isinstance(err["message"], str) and err["message"]
    return status, err


def post(port, path, body, content_type="application/json", extra=b""):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(data)}\r\n").encode()
    if content_type is not None:
        head += f"Content-Type: {content_type}\r\n".encode()
    return raw_exchange(port, head + extra + b"\r\n" + data)


def status_of(raw):
    return int(raw.split(b" ", 2)[1])


def test_many_small_headers_get_json(server):
    lines = b"".join(b"X-H%d: v\r\n" % i for i in range(900))
    assert len(lines) < 16384  # under the size limit: the count is what is refused
    raw = raw_exchange(server.port, b"GET /health HTTP/1.1\r\nHost: x\r\n" + lines + b"\r\n")
    status, err = json_error(raw)
    assert status == 431 and err["code"] == "header_too_large", raw[:300]
    lines = b"".join(b"X-H%d: v\r\n" % i for i in range(200))
    assert status_of(raw_exchange(server.port, b"GET /health HTTP/1.1\r\nHost: x\r\n" + lines + b"\r\n")) == 200


def test_nul_in_strings_is_taken(server):
    status, body = server.post_json("/v1/chat/completions", {
        "messages": [{"role": "user", "content": "a\u0000b"}], "max_tokens": 2, "ignore_eos": True})
    assert status == 200 and body["usage"]["completion_tokens"] == 2, body
    status, body = server.post_json("/v1/completions", {"prompt": "x\u0000", "max_tokens": 2, "ignore_eos": True,
                                                         "stop": ["\u0000"]})
    assert status == 200, body


def test_wide_integers(server):
    seeds = {}
    for seed in (18446744073709551615, -1):
        status, body = server.post_json("/v1/completions", {
            "prompt": "Hello", "max_tokens": 12, "temperature": 1.0, "seed": seed, "ignore_eos": True})
        assert status == 200, body
        seeds[seed] = body["choices"][0]["text"]
    assert seeds[18446744073709551615] == seeds[-1]
    status, body = server.post_json("/v1/completions", {"prompt": "Hello", "seed": 18446744073709551616})
    assert status == 400 and body["error"]["param"] == "seed", body
    status, body = server.post_json("/v1/completions", {"prompt": "Hello", "max_tokens": 99999999999999999999})
    assert status == 400 and body["error"]["param"] == "max_tokens", body
    tool = {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"type": "integer", "maximum": 99999999999999999999999}}}}}
    status, body = server.post_json("/v1/chat/completions", {
        "messages": [{"role": "user", "content": "hi"}], "tools": [tool], "max_tokens": 2})
    assert status == 200, body


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded",
                                          "application/jsonx", "multipart/form-data; boundary=x"])
def test_body_needs_a_json_content_type(server, content_type):
    raw = post(server.port, "/v1/completions", {"prompt": "Hello", "max_tokens": 2}, content_type)
    status, err = json_error(raw)
    assert status == 415 and err["code"] == "unsupported_media_type", raw[:300]


def test_json_content_type_with_parameters(server):
    raw = post(server.port, "/v1/completions", {"prompt": "Hello", "max_tokens": 2},
               "Application/JSON; charset=utf-8")
    assert status_of(raw) == 200, raw[:300]


def expect_continue(port, body, content_type="application/json", length=None):
    """(what came before the body was sent, the rest): the server answers or says 100 within 5 s."""
    data = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    try:
        s.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\n"
                   f"Content-Length: {length or len(data)}\r\nExpect: 100-continue\r\n\r\n").encode())
        s.settimeout(5)
        first = s.recv(65536)
        if first.startswith(b"HTTP/1.1 100"):
            s.settimeout(20)
            s.sendall(data)
        rest = b""
        while True:
            try:
                b = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not b:
                break
            rest += b
        return first, rest
    finally:
        s.close()


def test_expect_continue_is_not_invited_for_a_refused_body(server):
    first, rest = expect_continue(server.port, {"prompt": "x"}, length=100000)  # over --max-body 4096
    status, err = json_error(first + rest)
    assert status == 413 and err["code"] == "request_too_large"
    first, rest = expect_continue(server.port, {"prompt": "x"}, content_type="text/plain")
    status, err = json_error(first + rest)
    assert status == 415
    first, rest = expect_continue(server.port, {"prompt": "Hello", "max_tokens": 2, "ignore_eos": True})
    assert first.startswith(b"HTTP/1.1 100"), first
    raw = (first + rest).split(b"\r\n\r\n", 1)[1]  # after the 100's empty line: the answer
    assert raw.startswith(b"HTTP/1.1 200"), raw[:300]


def test_one_model(server):
    status, _, body = server.request("GET", f"/v1/models/{MODEL_ID}")
    obj = json.loads(body)
    assert status == 200 and obj["id"] == MODEL_ID and obj["object"] == "model" and obj["owned_by"] == "clover"
    status, headers, body = server.request("GET", "/v1/models/nope")
    assert status == 404 and headers["content-type"] == "application/json"
    assert json.loads(body)["error"]["code"] == "model_not_found"


def test_n8_on_an_idle_server(server):
    status, body = server.post_json("/v1/completions", {"prompt": "Hello", "max_tokens": 3, "n": 8,
                                                        "ignore_eos": True})
    assert status == 200, body
    assert sorted(c["index"] for c in body["choices"]) == list(range(8))
    assert body["usage"]["completion_tokens"] == 24


def test_n_beyond_the_queue_is_a_400(model, tmp_path):
    srv = ss.start_server(model, tmp_path / "serve.log", "--queue", 4)
    try:
        status, body = srv.post_json("/v1/completions", {"prompt": "Hello", "max_tokens": 2, "n": 6})
        assert status == 400 and body["error"]["param"] == "n" and "--queue" in body["error"]["message"], body
        status, body = srv.post_json("/v1/completions", {"prompt": "Hello", "max_tokens": 2, "n": 4,
                                                         "ignore_eos": True})
        assert status == 200 and len(body["choices"]) == 4, body
    finally:
        ss.stop_server(srv)


def test_logprob_offsets_index_the_text(model, tmp_path):
    script = tmp_path / "script.txt"
    script.write_text("Hi<|im_end|> there<|endoftext|>ok")
    srv = ss.start_server(model, tmp_path / "serve.log", "--test-script", script)
    try:
        status, body = srv.post_json("/v1/completions", {"prompt": "Hello", "max_tokens": 64, "logprobs": 1})
        assert status == 200, body
        c = body["choices"][0]
        text, lp = c["text"], c["logprobs"]
        assert text == "Hi thereok"  # the special tokens are not shown
        specials = {"<|im_end|>", "<|endoftext|>"}
        assert specials <= set(lp["tokens"])
        offs = lp["text_offset"]
        assert offs == sorted(offs) and len(offs) == len(lp["tokens"])
        for tok, off in zip(lp["tokens"], offs):
            if tok in specials:
                assert 0 <= off <= len(text)
            else:
                assert text[off:off + len(tok)] == tok, (tok, off, text)
        rebuilt = "".join(t for t in lp["tokens"] if t not in specials)
        assert rebuilt == text
    finally:
        ss.stop_server(srv)
