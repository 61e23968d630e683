"""`clover run` and `clover ppl` as a user runs them, on the golden fixtures:
tests/fixtures/tiny_clover and tiny_ar are converted with `clover convert`
and the answers compared with what tools/reference computed (the
manifests): tokens, finish reason and passes per block exactly, confidences
within 1e-5, NLL within 1e-4. Also the parity dump against the first pass
the reference recorded, every JSON field, and the error conventions (one
line, exit 1; usage errors exit 2).

Needs the build's `clover` binary (CLOVER_BUILD_DIR)."""

import json
import math
import os
import subprocess
from pathlib import Path

import pytest

SOURCE = Path(os.environ.get("CLOVER_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BUILD = Path(os.environ.get("CLOVER_BUILD_DIR", "build"))
CLOVER = BUILD / "clover"
FIXTURES = SOURCE / "tests" / "fixtures"


def run(*args, check=True):
    r = subprocess.run([str(CLOVER), *map(str, args)], capture_output=True, text=True, timeout=300)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def ids_arg(ids):
    return ",".join(str(i) for i in ids)


def manifest(name):
    return json.loads((FIXTURES / name / "manifest.json").read_text())


@pytest.fixture(scope="module", autouse=True)
def need_binary():
    if not CLOVER.exists():
        pytest.fail(f"{CLOVER} is missing: build the clover target first")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    out = {}
    for name in ("tiny_clover", "tiny_ar"):
        path = d / f"{name}.gguf"
        run("convert", FIXTURES / name / "hf", "-o", path, "--type", "f32", "--threads", "1")
        out[name] = path
    return out


def case(m, name):
    return next(c for c in m["generate"] if c["name"] == name)


def run_json(model, c, *extra):
    o = c["options"]
    args = ["run", "-m", model, "--ids", ids_arg(c["prompt_ids"]), "--max-tokens", o["max_tokens"], "--json",
            "--threads", 2]
    if o["threshold"] is not None:
        args += ["--threshold", repr(o["threshold"])]
    if o["block_size"] is not None:
        args += ["--block", o["block_size"]]
    if o["temperature"] > 0:
        args += ["--temperature", repr(o["temperature"]), "--top-k", o["top_k"], "--top-p", repr(o["top_p"])]
    args += ["--seed", o["seed"]]
    if o["suppress"]:
        args += ["--suppress", ids_arg(o["suppress"])]
    if o["ignore_eos"]:
        args += ["--ignore-eos"]
    r = run(*args, *extra)
    assert r.stderr == ""
    return json.loads(r.stdout)


def check_answer(got, exp):
    assert got["ids"] == exp["tokens"]
    assert got["finish_reason"] == exp["finish_reason"]
    assert got["prompt_tokens"] == exp["prompt_tokens"]
    assert got["committed_after"] == exp["committed_after"]
    assert max(abs(a - b) for a, b in zip(got["confidences"], exp["confidences"])) <= 1e-5
    if "passes_per_block" in exp:
        assert got["passes_per_block"] == exp["passes_per_block"]


CLOVER_CASES = [c["name"] for c in manifest("tiny_clover")["generate"] if not c["record_overrides"]]


@pytest.mark.parametrize("name", CLOVER_CASES)
def test_run_block_diffusion_matches_the_reference(models, name):
    c = case(manifest("tiny_clover"), name)
    got = run_json(models["tiny_clover"], c)
    assert got["mode"] == "diffusion"
    check_answer(got, c["expected"])


@pytest.mark.parametrize("name", [c["name"] for c in manifest("tiny_ar")["generate"]])
def test_run_autoregressive_matches_the_reference(models, name):
    c = case(manifest("tiny_ar"), name)
    got = run_json(models["tiny_ar"], c)
    assert got["mode"] == "autoregressive"
    check_answer(got, c["expected"])


def test_json_has_every_statistic(models):
    c = case(manifest("tiny_clover"), "greedy_default")
    got = run_json(models["tiny_clover"], c)
    s = got["stats"]
    for key in ("prompt_tokens", "reused_tokens", "passes", "blocks", "prompt_s", "preview_s", "pick_s", "commit_s",
                "total_s", "coreset_kept", "coreset_layers", "coreset_mean", "prompt_tok_s", "gen_tok_s",
                "denoise_tok_s"):
        assert key in s, key
    for ops in ("preview_ops", "commit_ops"):
        assert set(s[ops]) == {"gdn_s", "attn_s", "moe_s", "head_s"}
    assert s["passes"] == sum(c["expected"]["passes_per_block"]) == sum(got["passes_per_block"])
    assert s["blocks"] == len(got["passes_per_block"]) == got["blocks"]
    assert s["prompt_tokens"] == len(c["prompt_ids"]) and s["reused_tokens"] == 0
    # The tiny model has 6 MoE layers, 8 experts each: the coreset keeps 1..8 of them.
    assert s["coreset_layers"] == 6 * s["passes"]
    assert 1 <= s["coreset_mean"] <= 8
    gen = len(got["ids"])
    denoise = s["preview_s"] + s["pick_s"] + s["commit_s"]
    assert math.isclose(s["denoise_tok_s"], gen / denoise, rel_tol=1e-6)
    assert s["total_s"] >= s["prompt_s"] + s["preview_s"] + s["pick_s"] + s["commit_s"] - 1e-6


def test_text_output(models):
    c = case(manifest("tiny_clover"), "max_tokens_13")
    r = run("run", "-m", models["tiny_clover"], "--ids", ids_arg(c["prompt_ids"]), "--max-tokens", 13)
    lines = r.stdout.splitlines()
    assert lines[0] == "ids: " + " ".join(str(t) for t in c["expected"]["tokens"])
    assert lines[1].startswith("finish       length, 13 tokens (prompt 30, reused 0), mode diffusion")
    assert "2 blocks, 7 passes (per block: 2 5)" in r.stdout


def test_first_preview_dump(models, tmp_path):
    """The dump holds the raw logits of the request's first pass. In the
    reference's first pass of greedy_default every row was fixed greedily
    with only non-negative biases (the ramps) on stop / </think> ids, so each
    row's largest raw logit other than the mask id is the token fixed there."""
    m = manifest("tiny_clover")
    c = case(m, "greedy_default")
    dump = tmp_path / "dump.json"
    run_json(models["tiny_clover"], c, "--dump-first-preview", dump)
    d = json.loads(dump.read_text())
    assert d["prompt_ids"] == c["prompt_ids"]
    assert len(d["rows"]) == m["record"]["block_size"]
    mask = m["record"]["mask_token_id"]
    first = c["expected"]["passes"][0][0]["fixed"]
    assert len(first) == m["record"]["block_size"]
    for (row, tok), r in zip(first, d["rows"]):
        assert len(r["ids"]) == 10 and len(r["logits"]) == 10
        assert r["logits"] == sorted(r["logits"], reverse=True)
        assert next(i for i in r["ids"] if i != mask) == tok


def test_ar_flag_on_a_clover_model(models):
    m = manifest("tiny_clover")
    c = case(m, "greedy_default")
    r = run("run", "-m", models["tiny_clover"], "--ids", ids_arg(c["prompt_ids"]), "--ar", "--max-tokens", 5,
            "--json")
    got = json.loads(r.stdout)
    assert got["mode"] == "autoregressive"
    assert 1 <= len(got["ids"]) <= 5
    assert m["record"]["mask_token_id"] not in got["ids"]
    assert got["passes_per_block"] == []
    assert got["committed_after"] == len(c["prompt_ids"]) + len(got["ids"]) - 1


@pytest.mark.parametrize("name", ["tiny_clover", "tiny_ar"])
def test_ppl_matches_the_reference(models, name):
    nll = manifest(name)["nll"]
    r = run("ppl", "-m", models[name], "--ids", ids_arg(nll["ids"]), "--json")
    got = json.loads(r.stdout)
    assert got["tokens"] == len(nll["ids"]) - 1
    assert abs(got["mean_nll"] - nll["mean_nll"]) <= 1e-4
    assert math.isclose(got["perplexity"], nll["perplexity"], rel_tol=1e-4)
    text = run("ppl", "-m", models[name], "--ids", ids_arg(nll["ids"])).stdout
    assert f"tokens scored {len(nll['ids']) - 1}" in text
    assert "mean NLL" in text and "perplexity" in text


def test_default_model_runs():
    r = run("run", "--ids", "1,2,3", "--max-tokens", 4, "--json")
    got = json.loads(r.stdout)
    assert got["mode"] == "diffusion" and len(got["ids"]) <= 4
    r = run("ppl", "--ids", "1,2,3,4")
    assert "tokens scored 3" in r.stdout


@pytest.mark.parametrize("cmd", ["run", "ppl"])
def test_help(cmd):
    r = run(cmd, "--help")
    assert r.stdout.startswith(f"usage: clover {cmd}")


@pytest.mark.parametrize("args,code,words", [
    (["run"], 2, "no prompt"),
    (["run", "--ids", "1,x"], 2, "--ids"),
    (["run", "--ids", "1,2,"], 2, "comma"),
    (["run", "--ids", "1", "--threshold", "2"], 2, "--threshold"),
    (["run", "--ids", "1", "--rule", "fast"], 2, "--rule 'fast': expected threshold or causal"),
    (["run", "--ids", "1", "--rule", "causal", "--lossless"], 1, "rule causal: not with lossless"),
    (["run", "--ids", "1", "--max-tokens"], 2, "needs a value"),
    (["run", "--ids", "1", "--bogus", "1"], 2, "unknown option"),
    (["run", "--ids", "1", "--block", "3"], 2, "does not divide the model's block size 32"),
    (["run", "--ids", "99999"], 1, "prompt"),
    (["run", "-m", "/nonexistent.gguf", "--ids", "1"], 1, "/nonexistent.gguf"),
    (["run", "--ids", "1", "--dump-first-preview", "/nonexistent-dir/x.json"], 1, "/nonexistent-dir/x.json"),
    (["ppl"], 2, "no text"),
    (["ppl", "--ids", "1"], 1, "at least 2"),
])
def test_errors_are_one_line(args, code, words):
    r = run(*args, check=False)
    assert r.returncode == code, (r.returncode, r.stderr)
    assert r.stdout == ""
    assert len(r.stderr.splitlines()) == 1 and words in r.stderr, r.stderr


def test_block_diffusion_needs_the_record(models):
    r = run("run", "-m", models["tiny_ar"], "--ids", "1,2", "--block", "4", check=False)
    # A model without the record runs autoregressive; an override of the
    # block size has nothing to apply to, so it is not an error there.
    assert r.returncode == 0, r.stderr
    assert "mode autoregressive" in r.stdout
