"""docs/openapi.json against `clover serve`: schemathesis (PyPI) generates requests from the description,
property-based, for a bounded number of examples, and checks every answer: no 5xx, a status the description
lists, a body of the declared content type (so every error is JSON) and schema (so every error is
{error: {message, type, param, code}}), and that a request the description calls invalid is refused (so the
description types no field more loosely than the server reads it). The server runs with a small context so that no generation is long;
about 10 s of CI. Requests the description allows but the server refuses for reasons it cannot state (the
prompt against the context, an unknown model name) are not counted as failures: the checks below are the ones
about server errors and error bodies.

schemathesis cannot see a field the description leaves out (an unknown field is free in the description).
So test_every_field_the_server_reads_is_described sends each request field that OpenAI's API, vLLM or
llama-server names (a list written here, independent of the server's code) with a value of a wrong type:
a field the server reads answers 400 naming it, and such a field must be in the description."""

import json
import subprocess
import sys

import pytest

import test_server_process as ss

SPEC = ss.SOURCE / "docs" / "openapi.json"


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    if not ss.CLOVER.exists():
        pytest.fail(f"{ss.CLOVER} is missing: build the clover target first")
    return ss.convert_fixture("tiny_clover", tmp_path_factory.mktemp("model") / "tiny_clover.gguf")


def test_description_names_every_route():
    spec = json.loads(SPEC.read_text())
    assert set(spec["paths"]) == {"/v1/chat/completions", "/v1/completions", "/v1/models", "/v1/models/{id}",
                                  "/health", "/metrics", "/", "/index.html", "/app.css", "/app.js"}


# Request fields of OpenAI's API reference (chat and legacy completions), and vLLM's and llama-server's extras.
CANDIDATES = """messages prompt model frequency_penalty presence_penalty logit_bias logprobs top_logprobs max_tokens
max_completion_tokens n response_format seed stop stream stream_options temperature top_p tools tool_choice
parallel_tool_calls user service_tier store metadata modalities audio prediction reasoning_effort
web_search_options functions function_call best_of echo suffix top_k min_p repetition_penalty ignore_eos
min_tokens typical_p chat_template_kwargs enable_thinking grammar json_schema guided_json cache_prompt n_predict
mirostat samplers threshold block_size lossless rule""".split()
WRONG = {"x": [1]}  # an object: the wrong type for every field above that is not itself an object


def test_every_field_the_server_reads_is_described(model, tmp_path):
    spec = json.loads(SPEC.read_text())["components"]["schemas"]
    srv = ss.start_server(model, tmp_path / "serve.log", "--ctx", 96)
    try:
        missing = []
        for path, schema, base in (("/v1/chat/completions", "ChatRequest",
                                    {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}),
                                   ("/v1/completions", "CompletionRequest", {"prompt": "hi", "max_tokens": 1})):
            described = set(spec[schema]["properties"])
            for name in CANDIDATES:
                status, body = srv.post_json(path, {**base, name: WRONG})
                assert status in (200, 400), (path, name, status, body)
                read = status == 400 and (body["error"]["param"] or "").split(".")[0] == name
                if read and name not in described:
                    missing.append(f"{schema}.{name}: {body['error']['message']}")
        assert not missing, "fields the server reads but docs/openapi.json does not describe:\n" + "\n".join(missing)
    finally:
        ss.stop_server(srv)


def test_schemathesis(model, tmp_path):
    try:
        import schemathesis  # noqa: F401
    except ImportError:
        pytest.fail("schemathesis is missing: pip install -r tests/requirements.txt")
    srv = ss.start_server(model, tmp_path / "serve.log", "--ctx", 96, "--queue", 64)
    try:
        r = subprocess.run([sys.executable, "-m", "schemathesis.cli", "run", str(SPEC), "-u", srv.base_url,
                            "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,"
                            "response_schema_conformance,negative_data_rejection", "--max-examples", "25",
                            "--request-timeout", "30",
                            "--generation-deterministic", "--no-color"],
                           capture_output=True, text=True, timeout=240)
        assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
        assert "generated" in r.stdout
    finally:
        ss.stop_server(srv)
    statuses = [int(l.split()[4]) for l in srv.log_text().splitlines() if " tokens " in l]
    assert len(statuses) > 100 and max(statuses) < 500
