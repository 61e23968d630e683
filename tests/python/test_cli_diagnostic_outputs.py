"""The diagnostic writers (`--dump-first-preview FILE`, `CLOVER_ROUTE_TRACE=FILE`) write as every output
does: never over a file the command reads, and a file under the name is the old one or the whole new one.

Expected values are independent of the writers: each input's SHA-256 before and after; the old file's bytes
read through a hard link made before the run (a writer that truncated and rewrote the name in place would
change them, a temporary renamed over the name leaves them); the dump parsed by Python's json with its prompt
ids equal to `clover tokenize`'s; the trace's header lines as route_trace.h documents them."""
import hashlib
import json
import os
import subprocess

import pytest

import test_convert_support as cs

CLOVER = cs.BUILD / "clover"


def clover(*args, env=None):
    if not CLOVER.exists():
        pytest.fail(f"{CLOVER} is not built")
    return subprocess.run([str(CLOVER), *map(str, args)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def sha(p):
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    f = tmp_path_factory.mktemp("diag") / "m.gguf"
    r = clover("synth", "-o", f, "--preset", "tiny", "--seed", 3)
    assert r.returncode == 0, r.stderr
    return f


def leftovers(d):
    return [p.name for p in d.iterdir() if ".clover-tmp-" in p.name]


@pytest.mark.parametrize("via", ["same", "symlink", "hardlink"])
def test_dump_onto_the_model_refused(model, tmp_path, via):
    target = model
    if via == "symlink":
        target = tmp_path / "link.gguf"
        target.symlink_to(model)
    elif via == "hardlink":
        target = tmp_path / "hard.gguf"
        os.link(model, target)
    before = sha(model)
    r = clover("run", "-m", model, "-p", "hi", "-n", 2, "--dump-first-preview", target)
    assert r.returncode == 2, r.stderr
    assert "is also an input" in r.stderr and "Traceback" not in r.stderr
    assert sha(model) == before


def test_dump_onto_the_prompt_or_schema_file_refused(model, tmp_path):
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("hello there")
    schema = tmp_path / "schema.json"
    schema.write_text('{"type": "object"}')
    for extra in (["-f", prompt, "--dump-first-preview", prompt],
                  ["-p", "hi", "--json-schema", schema, "--dump-first-preview", schema]):
        r = clover("run", "-m", model, "-n", 2, *extra)
        assert r.returncode == 2 and "is also an input" in r.stderr, r.stderr
    assert prompt.read_text() == "hello there" and schema.read_text() == '{"type": "object"}'


def test_trace_onto_the_model_refused(model, tmp_path):
    before = sha(model)
    link = tmp_path / "link.gguf"
    link.symlink_to(model)
    r = clover("run", "-m", model, "-p", "hi", "-n", 2, env={"CLOVER_ROUTE_TRACE": str(link)})
    assert r.returncode == 2 and "CLOVER_ROUTE_TRACE" in r.stderr and "is also an input" in r.stderr, r.stderr
    # A command without the command line's check (ppl): the library refuses the mapped model itself, and the
    # command still works, without a trace.
    text = tmp_path / "t.txt"
    text.write_text("the quick brown fox jumps over the lazy dog " * 4)
    r = clover("ppl", "-m", model, "-f", text, "-c", 32, env={"CLOVER_ROUTE_TRACE": str(link)})
    assert r.returncode == 0, r.stderr
    assert "model file this process is reading" in r.stderr, r.stderr
    assert sha(model) == before


def test_dump_replaces_the_old_file_whole(model, tmp_path):
    out = tmp_path / "first.json"
    out.write_text("old dump")
    keep = tmp_path / "old-inode"
    os.link(out, keep)  # the old file's inode, seen through another name
    r = clover("run", "-m", model, "-p", "hello", "-n", 2, "--raw", "--dump-first-preview", out)
    assert r.returncode == 0, r.stderr
    d = json.loads(out.read_text())
    ids = clover("tokenize", "-m", model, "hello")
    assert ids.returncode == 0, ids.stderr
    assert d["prompt_ids"] == [int(x) for x in ids.stdout.replace(",", " ").split()]
    assert len(d["rows"]) >= 1 and all(len(row["ids"]) == 10 for row in d["rows"])
    assert keep.read_text() == "old dump"  # written beside and renamed, not rewritten in place
    assert leftovers(tmp_path) == []


def test_dump_into_a_missing_directory_is_one_line(model, tmp_path):
    r = clover("run", "-m", model, "-p", "hi", "-n", 2, "--dump-first-preview", tmp_path / "no" / "d.json")
    assert r.returncode == 1 and str(tmp_path / "no" / "d.json") in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_trace_replaces_the_old_file_whole(model, tmp_path):
    out = tmp_path / "route.trace"
    out.write_text("old trace")
    keep = tmp_path / "old-inode"
    os.link(out, keep)
    r = clover("run", "-m", model, "-p", "hi", "-n", 4, env={"CLOVER_ROUTE_TRACE": str(out)})
    assert r.returncode == 0, r.stderr
    lines = out.read_text().splitlines()
    assert lines[0] == "clover-route-trace 1" and lines[1].startswith("experts "), lines[:2]
    assert len(lines) > 2
    assert keep.read_text() == "old trace"
    assert leftovers(tmp_path) == []
