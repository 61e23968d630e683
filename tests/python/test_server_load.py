"""`clover serve` under load from one address (127.0.0.1, loopback only), with --api-key, bounded in time.

- 256 concurrent clients from one address, 3 requests each (a short generation, the model list, the model), every
  one on a fresh connection: all 768 answered 200, zero refused or broken. One address is every
  client behind a reverse proxy; the per-address share only applies when the server is short of connections.
- 300 stalled and 100 trickling connections from the same address as a real client: the real client (with its
  key) gets the answer to an 8-token request within 2 s, and the bad sockets were still held (unanswered) then.

Robust on a loaded machine: the server is warmed up first, the deadlines of the bad sockets are far away (30 s),
the trickle is light (one byte per socket every 0.5 s), and only the real client's own exchange is timed.
"""
import json
import socket
import threading
import time

import pytest

import test_server_process as ss

KEY = "load-test-key"


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    if not ss.CLOVER.exists():
        pytest.fail(f"{ss.CLOVER} is missing: build the clover target first")
    return ss.convert_fixture("tiny_clover", tmp_path_factory.mktemp("model") / "tiny_clover.gguf")


def exchange(port, method, path, body=None, timeout=120):
    """One request on a fresh connection from 127.0.0.1: (status, body bytes)."""
    data = json.dumps(body).encode() if body is not None else b""
    head = (f"{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
            f"Content-Length: {len(data)}\r\n").encode()
    if body is not None:
        head += b"Content-Type: application/json\r\n"
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(head + b"\r\n" + data)
        raw = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            raw += b
    finally:
        s.close()
    head, _, payload = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), payload


GEN = {"prompt": "Hello", "max_tokens": 2, "ignore_eos": True}


def test_256_clients_from_one_address(model, tmp_path):
    srv = ss.start_server(model, tmp_path / "serve.log", "--api-key", KEY)  # the default limits
    failures, done = [], []
    lock = threading.Lock()
    start = threading.Barrier(256)

    def client(i):
        try:
            start.wait(timeout=60)
            for method, path, body in (("POST", "/v1/completions", GEN), ("GET", "/v1/models", None),
                                       ("GET", "/v1/models/tiny_clover", None)):
                status, payload = exchange(srv.port, method, path, body)
                if status != 200:
                    raise AssertionError(f"{method} {path}: {status} {payload[:200]!r}")
                if body is not None and json.loads(payload)["usage"]["completion_tokens"] != 2:
                    raise AssertionError(payload[:200])
            with lock:
                done.append(i)
        except Exception as e:  # noqa: BLE001 (every failure is reported)
            with lock:
                failures.append(f"client {i}: {type(e).__name__}: {e}")

    try:
        threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(256)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=240)
        assert not failures, f"{len(failures)} of 256 clients failed; first: {failures[:5]}"
        assert len(done) == 256
    finally:
        ss.stop_server(srv)
    log = srv.log_text()
    assert log.count("POST /v1/completions 200 tokens ") == 256 and log.count("GET /v1/models 200 tokens ") == 256
    assert log.count("GET /v1/models/tiny_clover 200 tokens ") == 256


def test_real_client_beside_400_bad_sockets_from_its_address(model, tmp_path):
    srv = ss.start_server(model, tmp_path / "serve.log", "--api-key", KEY, "--request-deadline", 30)
    bad = []
    stop = threading.Event()
    try:
        assert exchange(srv.port, "POST", "/v1/completions", GEN)[0] == 200  # warm
        for i in range(400):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            s.setblocking(False)
            s.send(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le" if i < 300 else b"G")
            bad.append(s)
        trickling = bad[300:]

        def trickle():
            while not stop.is_set():
                for s in trickling:
                    try:
                        s.send(b"E")
                    except OSError:
                        pass
                stop.wait(0.5)

        th = threading.Thread(target=trickle, daemon=True)
        th.start()
        time.sleep(0.5)
        t0 = time.monotonic()
        status, payload = exchange(srv.port, "POST", "/v1/completions",
                                   {"prompt": "Hello", "max_tokens": 8, "ignore_eos": True}, timeout=30)
        took = time.monotonic() - t0
        assert status == 200 and json.loads(payload)["usage"]["completion_tokens"] == 8, payload[:300]
        assert took < 2.0, f"the real client waited {took:.2f} s"
        held = 0
        for s in bad:  # still there, unanswered: the client was served beside them, not after them
            try:
                s.recv(1)  # an answer or the end: not held
            except BlockingIOError:
                held += 1  # nothing to read: still waiting for its header
            except OSError:
                pass
        assert held == 400, f"only {held} of the 400 bad sockets were still held"
        status, _ = exchange(srv.port, "GET", "/v1/models")
        assert status == 200
    finally:
        stop.set()
        for s in bad:
            s.close()
        ss.stop_server(srv)
