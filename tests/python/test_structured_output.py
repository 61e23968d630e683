"""Structured output (issue 27): the random tiny Clover model, constrained by a
JSON schema, produces only documents that PyPI's `jsonschema` (an independent
validator) accepts, in block diffusion, --ar and --lossless, through
`clover run --json-schema` and through the server's `response_format`; and a
schema the compiler cannot honour is refused with its construct named (a 400
from the server, a one-line error from the CLI)."""
import json
import subprocess

import jsonschema
import pytest

import test_server_process as ss

MODEL_ID = "tiny_clover"
SEEDS = range(5)  # the server's requests (cheap: one process)
CLI_SEEDS = range(3)  # each `clover run` loads the model (slow under ASan)
RICH = {
    "type": "object",
    "properties": {
        "color": {"enum": ["red", "green", "blue"]},
        "ok": {"type": "boolean"},
        "n": {"type": "integer", "minimum": -5, "maximum": 120},
        "name": {"type": "string", "minLength": 1, "maxLength": 8},
        "score": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 3},
        "inner": {"type": "object", "properties": {"k": {"const": "v"}, "z": {"type": ["integer", "null"]}},
                  "required": ["k"], "additionalProperties": False},
    },
    "required": ["color", "ok", "n"],
    "additionalProperties": False,
}
ENUM_BOOL = {
    "type": "object",
    "properties": {"answer": {"enum": ["yes", "no", "maybe"]}, "sure": {"type": "boolean"}},
    "required": ["answer", "sure"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    if not ss.CLOVER.exists():
        pytest.fail(f"{ss.CLOVER} is missing: build the clover target first")
    return ss.convert_fixture("tiny_clover", tmp_path_factory.mktemp("model") / f"{MODEL_ID}.gguf")


def run_cli(model, schema_path, *args):
    return subprocess.run([str(ss.CLOVER), "run", "-m", str(model), "-p", "Describe it as JSON.",
                           "--json-schema", str(schema_path), "--no-visual", "--threads", "1", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("mode", ["diffusion", "--ar", "--lossless"])
def test_cli_documents_validate(model, tmp_path, mode):
    schema = RICH
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema))
    extra = [] if mode == "diffusion" else [mode]
    for seed in CLI_SEEDS:
        r = run_cli(model, path, "--max-tokens", 400, "--temperature", 1, "--seed", seed, *extra)
        assert r.returncode == 0, r.stderr
        assert "[stop," in r.stderr, f"seed {seed}: the document did not end within 400 tokens:\n{r.stderr}"
        doc = json.loads(r.stdout)
        jsonschema.validate(doc, schema)


def test_cli_lossless_is_ar(model, tmp_path):
    """Lossless under a grammar is --ar's answer under the same grammar (same seed)."""
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(RICH))
    for seed in (3,):
        ar = run_cli(model, path, "--max-tokens", 400, "--temperature", 1, "--seed", seed, "--ar")
        ll = run_cli(model, path, "--max-tokens", 400, "--temperature", 1, "--seed", seed, "--lossless")
        assert ar.returncode == 0 and ll.returncode == 0, ar.stderr + ll.stderr
        assert ar.stdout == ll.stdout


def test_cli_json_object(model):
    """--grammar json: any JSON object (strings are unbounded, so a document may be cut by the limit)."""
    ended = 0
    for seed in CLI_SEEDS:
        r = subprocess.run([str(ss.CLOVER), "run", "-m", str(model), "-p", "x", "--grammar", "json", "--no-visual",
                            "--threads", "1", "--max-tokens", "600", "--temperature", "1", "--seed", str(seed)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        if "[stop," in r.stderr:
            ended += 1
            assert isinstance(json.loads(r.stdout), dict)
    assert ended >= 1, f"none of {len(CLI_SEEDS)} documents ended"


@pytest.mark.parametrize("schema,construct", [
    ({"type": "string", "pattern": "^a+$"}, "'pattern'"),
    ({"type": "object", "properties": {"d": {"type": "string", "format": "date"}}}, "'format'"),
    ({"$ref": "#/$defs/x", "$defs": {"x": {"type": "string"}}}, "'$ref'"),
])
def test_cli_unsupported_schema(model, tmp_path, schema, construct):
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema))
    r = run_cli(model, path)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and construct in lines[0], r.stderr


@pytest.fixture(scope="module")
def server(model, tmp_path_factory):
    d = tmp_path_factory.mktemp("serve")
    srv = ss.start_server(model, d / "serve.log")
    try:
        yield srv
    finally:
        ss.stop_server(srv)


def chat(server, response_format, seed, **kw):
    body = {"model": MODEL_ID, "messages": [{"role": "user", "content": "Answer as JSON."}],
            "response_format": response_format, "seed": seed, "temperature": 1.0, "max_tokens": 300, **kw}
    return server.post_json("/v1/chat/completions", body, timeout=120)


def test_server_json_schema_block_diffusion(server):
    """The issue's bar: an enum and a boolean, block diffusion, several seeds, through the server."""
    rf = {"type": "json_schema", "json_schema": {"name": "answer", "schema": ENUM_BOOL, "strict": True}}
    for seed in SEEDS:
        status, body = chat(server, rf, seed)
        assert status == 200, body
        choice = body["choices"][0]
        assert choice["finish_reason"] == "stop", body
        assert body["clover"]["mode"] == "diffusion", body["clover"]
        jsonschema.validate(json.loads(choice["message"]["content"]), ENUM_BOOL)


def test_server_json_schema_streamed_and_lossless(server):
    rf = {"type": "json_schema", "json_schema": {"name": "rich", "schema": RICH}}
    status, body = chat(server, rf, 7, lossless=True)
    assert status == 200, body
    jsonschema.validate(json.loads(body["choices"][0]["message"]["content"]), RICH)
    st, _, data = server.request("POST", "/v1/chat/completions",
                                 {"model": MODEL_ID, "messages": [{"role": "user", "content": "JSON"}],
                                  "response_format": rf, "seed": 8, "temperature": 1.0, "max_tokens": 300,
                                  "stream": True}, {"Content-Type": "application/json"}, timeout=120)
    assert st == 200
    text = ""
    for line in data.decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            for c in json.loads(line[6:]).get("choices", []):
                text += c.get("delta", {}).get("content") or ""
    jsonschema.validate(json.loads(text), RICH)


def test_server_json_object(server):
    status, body = chat(server, {"type": "json_object"}, 1, max_tokens=600)
    assert status == 200, body
    if body["choices"][0]["finish_reason"] == "stop":
        assert isinstance(json.loads(body["choices"][0]["message"]["content"]), dict)


@pytest.mark.parametrize("schema,construct", [
    ({"type": "string", "pattern": "^a+$"}, "'pattern'"),
    ({"type": "object", "properties": {"a": {"allOf": [{"type": "string"}]}}}, "'allOf'"),
    ({"type": "number", "maximum": 3}, "'maximum' on a number"),
    ({"anyOf": [{"type": "object"}, {"type": "object", "properties": {"a": {}}}]}, "'anyOf'"),
])
def test_server_unsupported_schema_is_400(server, schema, construct):
    status, body = chat(server, {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}, 1)
    assert status == 400, body
    assert construct in body["error"]["message"], body
    assert body["error"]["param"] == "response_format.json_schema.schema"


def test_server_bad_response_format_is_400(server):
    for rf in ({"type": "xml"}, {"type": "json_schema"}, "json", {"type": "json_schema", "json_schema": {"schema": 3}}):
        status, body = chat(server, rf, 1)
        assert status == 400, (rf, body)
