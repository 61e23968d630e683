"""How full the scheduler's engine steps are, through `clover serve`'s /metrics (issue 25: 16 concurrent requests
must share their passes, not take turns).

Expected values come from the request shapes, not from the server's code:
- 16 choices of one request (n=16) are queued together, so with --max-batch 16 they start in the same step and
  run side by side to the end: an autoregressive answer of T tokens is one prompt pass (the prompt fits one
  chunk; its pass picks the first token) and T - 1 decode passes (the last token is emitted, never committed),
  so the metrics must show exactly T steps, every one carrying all 16 requests (histogram: none at <= 8, all T
  at <= 16), 16 * T sequences, the rows 16 * (prompt tokens) + 16 * (T - 1), and on the CPU backend one model
  pass per decode step (16 rows) and, for the prompt step, as many as it takes to pack the 16 prompts, whole,
  into passes of the server's 64-row chunks (server.c);
- 16 independent clients: however their arrivals spread over the steps (a loaded machine), each request is
  carried by exactly T steps, so the sequences sum to 16 * T; steps lie between T and 16 * T; the histogram is
  cumulative and ends at the step count.
No timing enters any assertion (the seconds counters are only checked to be non-negative and ordered).
"""
import json
import threading

import pytest

import test_server_process as ss

N, T = 16, 12


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    if not ss.CLOVER.exists():
        pytest.fail(f"{ss.CLOVER} is missing: build the clover target first")
    d = tmp_path_factory.mktemp("steps")
    model = ss.convert_fixture("tiny_ar", d / "tiny_ar.gguf")
    # the CPU backend: the pass counts below are its shared passes (a GPU machine's auto would pick CUDA)
    s = ss.start_server(model, d / "serve.log", "--device", "cpu", "--max-batch", N, "--max-n", N, "--sessions", 1)
    try:
        yield s
    finally:
        ss.stop_server(s)


STEP_KEYS = ["clover_step_sequences_count", "clover_step_sequences_sum", "clover_step_rows_total",
             "clover_backend_passes_total", "clover_passes_total", "clover_prompt_tokens_total",
             "clover_reused_tokens_total", "clover_completion_tokens_total", "clover_backend_seconds_total",
             "clover_step_seconds_total", "clover_scheduler_seconds_total", "clover_snapshot_seconds_total"]
BOUNDS = ["1", "2", "4", "8", "16", "32", "64", "+Inf"]


def bucket(le):
    return f'clover_step_sequences_bucket{{le="{le}"}}'


def delta(before, after):
    keys = STEP_KEYS + [bucket(le) for le in BOUNDS]
    for k in keys:
        assert k in after, f"/metrics has no {k}"
    return {k: after[k] - before.get(k, 0.0) for k in keys}


def check_shape(d):
    """The histogram is cumulative and ends at the count; the seconds are ordered."""
    counts = [d[bucket(le)] for le in BOUNDS]
    assert counts == sorted(counts), counts
    assert counts[-1] == d["clover_step_sequences_count"]
    assert 0 <= d["clover_backend_seconds_total"] <= d["clover_step_seconds_total"] + 1e-9
    assert d["clover_step_seconds_total"] <= d["clover_scheduler_seconds_total"] + 1e-9
    assert d["clover_snapshot_seconds_total"] >= 0


def test_choices_share_every_step(srv):
    before = srv.metrics()
    status, body = srv.post_json("/v1/completions", {"prompt": "The sea and the wind", "max_tokens": T, "n": N,
                                                     "temperature": 0, "ignore_eos": True}, timeout=300)
    assert status == 200, body
    assert len(body["choices"]) == N
    d = delta(before, srv.metrics())
    check_shape(d)
    assert d["clover_completion_tokens_total"] == N * T
    assert d["clover_step_sequences_count"] == T
    assert d["clover_step_sequences_sum"] == N * T
    assert d[bucket("8")] == 0 and d[bucket("16")] == T
    assert d["clover_passes_total"] == N * (T - 1)  # the requests' own count of decode passes
    prompt_rows = d["clover_prompt_tokens_total"] - d["clover_reused_tokens_total"]
    assert prompt_rows >= N
    assert d["clover_step_rows_total"] == prompt_rows + N * (T - 1)
    # the CPU backend: one shared pass a decode step; the prompt step packs whole prompts into 64-row passes
    assert prompt_rows % N == 0
    per_pass = 64 // int(prompt_rows // N)
    assert per_pass >= 1
    assert d["clover_backend_passes_total"] == (T - 1) + -(-N // per_pass)


def test_concurrent_clients_counted_per_request(srv):
    before = srv.metrics()
    out, errors = [None] * N, []
    go = threading.Barrier(N)

    def ask(i):
        try:
            go.wait()
            out[i] = srv.post_json("/v1/chat/completions", {
                "messages": [{"role": "user", "content": f"Request {i}: the sea and boat {i * 7}."}],
                "max_tokens": T, "temperature": 0, "ignore_eos": True}, timeout=300)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    th = [threading.Thread(target=ask, args=(i,)) for i in range(N)]
    for x in th:
        x.start()
    for x in th:
        x.join()
    assert not errors, errors
    for status, body in out:
        assert status == 200, json.dumps(body)
        assert body["usage"]["completion_tokens"] == T
    d = delta(before, srv.metrics())
    check_shape(d)
    steps = d["clover_step_sequences_count"]
    # a chat prompt is committed in up to two chunks (the snapshot point before the generation prompt splits
    # it), so a request is carried by T or T + 1 steps
    assert N * T <= d["clover_step_sequences_sum"] <= N * (T + 1)
    assert T <= steps <= d["clover_step_sequences_sum"]
    assert d["clover_passes_total"] == N * (T - 1)
    assert d["clover_backend_passes_total"] >= steps
