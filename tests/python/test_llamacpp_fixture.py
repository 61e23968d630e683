"""A GGUF written by llama.cpp's own convert_hf_to_gguf.py (tests/fixtures/
llamacpp_bf16: a tiny random Qwen3.5-MoE with Qwen3's real tokenizer, tied
embeddings, no mrope_section, bf16; tools/reference/make_llamacpp_fixture.py)
runs in clover with transformers' numbers: the text tokenizes to Hugging Face
tokenizers' ids, the mean NLL is transformers' within 1e-5 (relative), and
greedy decoding gives transformers' ids."""
import json
import subprocess

import pytest

import test_convert_support as cs

FX = cs.SOURCE / "tests/fixtures/llamacpp_bf16"
CLOVER = cs.BUILD / "clover"


@pytest.fixture(scope="module")
def fx():
    if not (FX / "manifest.json").exists():
        pytest.fail("tests/fixtures/llamacpp_bf16 is missing (tools/reference/make_llamacpp_fixture.py)")
    if not CLOVER.exists():
        pytest.fail(f"{CLOVER} is not built")
    return json.loads((FX / "manifest.json").read_text())


def clover(*args):
    return subprocess.run([str(CLOVER), *map(str, args)], capture_output=True, text=True, timeout=300)


def test_tokenizes_like_hf(fx):
    r = clover("tokenize", "-m", FX / "model.gguf", fx["text"])
    assert r.returncode == 0, r.stderr
    assert [int(x) for x in r.stdout.strip().split(",")] == fx["ids"]


def test_nll_and_greedy_like_transformers(fx):
    ids = ",".join(map(str, fx["ids"]))
    r = clover("ppl", "-m", FX / "model.gguf", "--ids", ids, "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["tokens"] == len(fx["per_token_nll"])
    assert got["mean_nll"] == pytest.approx(fx["mean_nll"], rel=1e-5)
    r = clover("run", "-m", FX / "model.gguf", "--ids", ids, "--max-tokens", len(fx["greedy"]), "--ignore-eos",
               "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ids"] == fx["greedy"]


def test_file_shape(fx):
    r = clover("info", FX / "model.gguf")
    assert r.returncode == 0, r.stderr
    assert "vocabulary      151936" in r.stdout and "hidden          8" in r.stdout
    dump = subprocess.run([str(cs.BUILD / "tests/tools/gguf_dump"), str(FX / "model.gguf")], capture_output=True,
                          text=True, timeout=300)
    assert dump.returncode == 0, dump.stderr
    names = {t["name"] for t in json.loads(dump.stdout)["tensors"]}  # gguf-py's reader takes a minute on 151k tokens
    assert "token_embd.weight" in names and "output.weight" not in names  # tied: clover reuses the embedding
