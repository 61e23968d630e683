"""No command ever damages a file it reads, and an output appears only
complete. Each golden input's SHA-256 is taken before and compared after:
quantize IN IN, quantize through a symlink and a hard link to IN, convert DIR
-o DIR/<a shard of DIR> all fail and leave the input byte-identical; a
quantize killed (SIGTERM, SIGINT) mid-write leaves no temporary and either
no output or one that loads; a synth killed while overwriting an existing
file leaves that file as it was."""
import hashlib
import os
import signal
import subprocess
import time

import pytest

import test_convert_support as cs

CLOVER = cs.BUILD / "clover"


def clover(*args, **kw):
    if not CLOVER.exists():
        pytest.fail(f"{CLOVER} is not built")
    return subprocess.run([str(CLOVER), *map(str, args)], capture_output=True, text=True, timeout=300, **kw)


def sha(p):
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    d = tmp_path_factory.mktemp("safe")
    f = d / "in.gguf"
    # ~110 MB f32: quantising it to q4_k_m on one thread takes over a second on the dev VM
    r = clover("synth", "-o", f, "--hidden", 256, "--expert-ff", 256, "--layers", 8, "--experts", 16)
    assert r.returncode == 0, r.stderr
    return f


def test_quantize_onto_itself_refused(golden):
    before = sha(golden)
    link = golden.parent / "link.gguf"
    hard = golden.parent / "hard.gguf"
    link.unlink(missing_ok=True)
    hard.unlink(missing_ok=True)
    link.symlink_to(golden.name)
    os.link(golden, hard)
    try:
        for out in (golden, link, hard, golden.parent / "." / golden.name):
            r = clover("quantize", golden, out, "--type", "q8_0")
            assert r.returncode == 1, (out, r.stderr)
            assert "is also an input" in r.stderr and r.stderr.count("\n") == 1, r.stderr
            assert sha(golden) == before
        r = clover("quantize", link, golden, "--type", "q8_0")  # the input through the link, the output the file
        assert r.returncode == 1 and "is also an input" in r.stderr, r.stderr
        assert sha(golden) == before and link.is_symlink()
    finally:
        link.unlink()
        hard.unlink()
    assert sorted(p.name for p in golden.parent.iterdir()) == ["in.gguf"]


def temporaries(d):
    return [p.name for p in d.iterdir() if ".clover-tmp-" in p.name]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_quantize_killed(golden, tmp_path, sig):
    before = sha(golden)
    out = tmp_path / "out.gguf"
    p = subprocess.Popen([str(CLOVER), "quantize", str(golden), str(out), "--type", "q4_k_m", "--threads", "1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(0.4)
    p.send_signal(sig)
    p.communicate(timeout=120)
    print("quantize exit", p.returncode)
    assert sha(golden) == before
    assert temporaries(tmp_path) == []
    if out.exists():  # it finished before the signal, or the signal came after the output was renamed into place
        # (a loaded machine: CI saw -15 with the output there): either way the output is whole
        assert p.returncode in (0, -sig)
        r = clover("info", "-m", out)
        assert r.returncode == 0, r.stderr
    else:
        assert p.returncode == -sig


def test_synth_killed_keeps_old_target(tmp_path):
    old = tmp_path / "model.gguf"
    r = clover("synth", "-o", old)
    assert r.returncode == 0, r.stderr
    before = sha(old)
    args = ["synth", "-o", old, "--hidden", 512, "--expert-ff", 512, "--layers", 8, "--experts", 32, "--threads", 1]
    p = subprocess.Popen([str(CLOVER), *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(0.4)
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=120)
    print("synth exit", p.returncode)
    assert temporaries(tmp_path) == []
    if p.returncode == -signal.SIGTERM and sha(old) == before:
        pass  # stopped before the new file replaced the old one: the old one untouched
    else:  # finished first, or stopped after the rename (a loaded machine): replaced whole
        assert p.returncode in (0, -signal.SIGTERM) and clover("info", "-m", old).returncode == 0


def test_failed_write_keeps_old_target(golden, tmp_path):
    """A quantize that fails after writing began (a quantised input without
    --allow-requantize fails before; a full disk is not available here, so
    the writer's verify failure is what we cannot force from the CLI): a
    refused type leaves an existing target untouched."""
    old = tmp_path / "keep.gguf"
    old.write_bytes(b"precious")
    r = clover("quantize", golden, old, "--type", "q3_bogus")
    assert r.returncode == 2
    assert old.read_bytes() == b"precious"
    r = clover("quantize", tmp_path / "missing.gguf", old, "--type", "q8_0")
    assert r.returncode == 1
    assert old.read_bytes() == b"precious" and temporaries(tmp_path) == []


def test_convert_into_its_own_checkpoint_refused(tmp_path):
    g = cs.geometry()
    src = tmp_path / "hf"
    cs.write_checkpoint(src, g, cs.hf_weights(g), shards=2)
    shards = sorted(src.glob("*.safetensors"))
    assert len(shards) == 2
    before = {p.name: sha(p) for p in src.iterdir()}
    for out in (shards[0], src / "config.json", src / ".." / "hf" / shards[1].name):
        r = cs.run_convert(src, out)
        assert r.returncode == 1, (out, r.stderr)
        assert "is also an input" in r.stderr, r.stderr
    assert {p.name: sha(p) for p in src.iterdir()} == before
    r = cs.run_convert(src, src / "model.gguf")  # a new file beside the checkpoint is fine
    assert r.returncode == 0, r.stderr
    assert temporaries(src) == []


def test_quantize_onto_another_shard_refused(tmp_path):
    """A split set's other shards are inputs too (refused before the input
    is even opened, so the shards' contents do not matter here)."""
    first, second = tmp_path / "m-00001-of-00002.gguf", tmp_path / "m-00002-of-00002.gguf"
    first.write_bytes(b"GGUF first")
    second.write_bytes(b"GGUF second")
    r = clover("quantize", first, second, "--type", "q8_0")
    assert r.returncode == 1 and "is also an input" in r.stderr, r.stderr
    assert second.read_bytes() == b"GGUF second" and temporaries(tmp_path) == []
