"""`clover serve` when its device fails mid-request (src/offload/failover.h).

With no GPU on CI, CLOVER_FAULT_INJECT makes the CPU backend the failing
"device" and a second CPU backend takes over. Several requests run at once
(one batched backend call holds them all) while the Nth device call fails:
every request is answered 200 with exactly the text and token counts an
uninjected server gives (the expected values), the server logs exactly one
warning: "dropped" where the device is gone (dead), "moved" where a single
call failed (once), and it exits cleanly."""

import os
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

import test_server_process as ss

MODEL_ID = "tiny_clover"
PROMPTS = [f"Tell me about the number {k}." for k in range(6)]
DROPPED = "dropped for the rest of the process"
MOVED = "the session moved to the cpu backend"


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    if not ss.CLOVER.exists():
        pytest.fail(f"{ss.CLOVER} is missing: build the clover target first")
    return ss.convert_fixture("tiny_clover", tmp_path_factory.mktemp("model") / f"{MODEL_ID}.gguf")


def answers(model, log, inject):
    """Every prompt's (text, completion tokens) from a server started with inject (None: no fault)."""
    old = os.environ.pop("CLOVER_FAULT_INJECT", None)
    if inject:
        os.environ["CLOVER_FAULT_INJECT"] = inject
    try:
        srv = ss.start_server(model, log, "--sessions", 4, "--queue", 16)
    finally:
        os.environ.pop("CLOVER_FAULT_INJECT", None)
        if old is not None:
            os.environ["CLOVER_FAULT_INJECT"] = old
    try:
        client = openai.OpenAI(base_url=srv.base_url + "/v1", api_key="unused", max_retries=0, timeout=120)

        def one(prompt):
            r = client.completions.create(model=MODEL_ID, prompt=prompt, max_tokens=24, temperature=0)
            return r.choices[0].text, r.usage.completion_tokens, r.choices[0].finish_reason

        with ThreadPoolExecutor(len(PROMPTS)) as pool:
            out = list(pool.map(one, PROMPTS))
        out.append(one(PROMPTS[0]))  # a request after the failure, on a session made before it
    finally:
        ss.stop_server(srv)
    return out, srv.log_text()


@pytest.fixture(scope="module")
def expected(model, tmp_path_factory):
    out, log = answers(model, tmp_path_factory.mktemp("plain") / "serve.log", None)
    assert DROPPED not in log
    return out


@pytest.mark.parametrize("inject,line", [("call:3:dead", DROPPED), ("preview:2", MOVED), ("load:1", DROPPED)])
def test_no_request_lost(model, expected, tmp_path, inject, line):
    got, log = answers(model, tmp_path / "serve.log", inject)
    assert got == expected, log
    warnings = [w for w in log.splitlines() if "warning:" in w]
    assert len(warnings) == 1 and line in warnings[0], log
