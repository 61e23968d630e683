"""The default model of the `clover` command: the trained demo model
(models/clover-demo-q8_0.gguf) embedded in the binary, used when no -m is
given and $CLOVER_DEFAULT_MODEL is unset (ctest sets it to the tiny model for
every other test; here it is removed).

Expected values are independent of clover: the geometry from the GGUF's own
metadata as llama.cpp's gguf package reads it, and a fact (Paris is the
capital of France), asserted on the answer's text and not on its exact words,
since the model file is replaced by better-trained ones. Greedy decoding, so
the answers are deterministic. A checkout without the model file builds the
tiny model in instead (CMakeLists.txt): these tests then skip, saying so."""
import json
import os
import subprocess
import urllib.request

import gguf
import pytest

from clover_paths import BUILD, SOURCE, require_command
from serve_port import listening_port

DEMO = SOURCE / "models" / "clover-demo-q8_0.gguf"


@pytest.fixture(scope="module")
def clover():
    if not DEMO.exists():
        pytest.skip(f"{DEMO} is absent: this build embeds the tiny random model instead")
    exe = require_command("clover")
    env = {k: v for k, v in os.environ.items() if k != "CLOVER_DEFAULT_MODEL"}

    def run(*args):
        return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=300, env=env)
    return run


def answer(stdout):
    """The answer after the think block (the block may be cut by --max-tokens: then the whole text)."""
    return stdout.split("</think>")[-1]


@pytest.mark.parametrize("mode", [[], ["--ar"]], ids=["block-diffusion", "ar"])
def test_default_model_knows_the_capital_of_france(clover, mode):
    r = clover("run", "-p", "What is the capital of France?", "--max-tokens", "96", "--threads", "2", *mode)
    assert r.returncode == 0, r.stderr
    assert "Paris" in answer(r.stdout), r.stdout


@pytest.mark.parametrize("mode", [[], ["--ar"]], ids=["block-diffusion", "ar"])
def test_default_model_says_why_the_sky_is_blue(clover, mode):
    """The physics, not the wording: sunlight's blue is scattered by the air more than its red.
    A held-out prompt (tools/train/heldout.txt) whose topic the generator covers in other words."""
    r = clover("run", "-p", "Why is the sky blue?", "--max-tokens", "128", "--threads", "2", *mode)
    assert r.returncode == 0, r.stderr
    text = answer(r.stdout).lower()
    assert "scatter" in text and "blue" in text and "red" in text, r.stdout


def test_info_names_the_demo_geometry(clover):
    r = clover("info")
    assert r.returncode == 0, r.stderr
    f = {}
    for line in r.stdout.splitlines():
        label, _, value = line.partition("  ")
        f.setdefault(label.strip(), value.strip())
    reader = gguf.GGUFReader(DEMO)

    def kv(key):
        field = reader.fields[key]
        return field.contents()
    arch = kv("general.architecture")
    assert f["architecture"] == arch
    assert f["layers"].startswith(f"{kv(f'{arch}.block_count')}: ")
    assert f["hidden"] == str(kv(f"{arch}.embedding_length"))
    assert f["vocabulary"] == str(len(reader.fields["tokenizer.ggml.tokens"].data))
    # the embedded bytes are the file's, and the label says which default this is
    assert f["file"] == f"(embedded default model: {DEMO.name}, the trained demo model) ({DEMO.stat().st_size} bytes)"


def test_serve_names_the_default_after_its_file(tmp_path):
    """`clover serve` without -m: the API's model id is the embedded file's name without .gguf (it said
    clover-tiny whatever was built in); with $CLOVER_DEFAULT_MODEL, that file's name."""
    if not DEMO.exists():
        pytest.skip(f"{DEMO} is absent: this build embeds the tiny random model instead")
    exe = require_command("clover")
    env = {k: v for k, v in os.environ.items() if k != "CLOVER_DEFAULT_MODEL"}
    log = tmp_path / "serve.log"
    with open(log, "wb") as f:
        proc = subprocess.Popen([str(exe), "serve", "--port", "0", "--threads", "1"],
                                stdout=subprocess.DEVNULL, stderr=f, env=env)
    try:
        port = listening_port(proc, log)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=30) as r:
            ids = [m["id"] for m in json.load(r)["data"]]
        assert ids == [DEMO.stem], ids
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_version_names_the_default(clover):
    r = clover("--version")
    assert r.returncode == 0, r.stderr
    assert f"default model: {DEMO.name}, the trained demo model, embedded" in r.stdout


@pytest.mark.parametrize("kind", ["missing", "truncated"])
def test_a_bad_clover_default_model_is_a_one_line_error(tmp_path, kind):
    """$CLOVER_DEFAULT_MODEL naming a file that is not there, or not a whole GGUF: the command's one-line
    load error, naming the file and the variable (any build: no demo model needed)."""
    exe = require_command("clover")
    p = tmp_path / "model.gguf"
    if kind == "truncated":
        tiny = BUILD / "models" / "clover-tiny.gguf"
        p.write_bytes(tiny.read_bytes()[:4096])
    for cmd in (["run", "-p", "Hi", "--max-tokens", "4"], ["info"], ["tokenize", "Hi"]):
        r = subprocess.run([str(exe), *cmd], capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, CLOVER_DEFAULT_MODEL=str(p)))
        assert r.returncode == 1, (cmd, r.stdout, r.stderr)
        assert len(r.stderr.splitlines()) == 1 and str(p) in r.stderr and "CLOVER_DEFAULT_MODEL" in r.stderr, r.stderr
