"""The library's include graph follows the layers of docs/BACKENDS.md
(/work/shared/ARCHITECTURE.md): each directory of src/ includes only its own
layer and those below it, cpu/ and cuda/ never include each other, and no
source file sits in src/ itself.

    base -> gguf, quant -> model, text, convert, grammar -> backend -> cpu, cuda
         -> offload, parallel -> engine          (include/clover.h: anyone)

The expected value is this table, written by hand from the architecture
document, not derived from the code. An include that points upward fails
the test with the file, the line and the two layers; the fix is to move
what is needed down (ARCHITECTURE.md: "the thing you need is in the wrong
room"). KNOWN lists the arrows still to be removed, each with its reason;
one that no longer occurs fails too, so the list only shrinks."""

import os
import re
from pathlib import Path

SOURCE = Path(os.environ.get("CLOVER_SOURCE_DIR", Path(__file__).resolve().parents[2]))
SRC = SOURCE / "src"

RANK = {
    "base": 0,
    "gguf": 1, "quant": 1,
    "model": 2, "text": 2, "convert": 2, "grammar": 2,
    "backend": 3,
    "cpu": 4, "cuda": 4,
    "offload": 5, "parallel": 5,
    "engine": 6,
}
# same rank, but never each other: what both need lives in model/ or backend/
FORBIDDEN_PAIRS = {("cpu", "cuda"), ("cuda", "cpu")}

# (directory, included directory): why it is still there
KNOWN = {}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_0-9]+)/[^"]+"', re.M)


def arrows():
    """{(dir, included dir): [(file, line), ...]} for every cross-directory include of src/."""
    out = {}
    for path in sorted(SRC.rglob("*")):
        if path.suffix not in (".c", ".h", ".cu", ".cuh") or not path.is_file():
            continue
        d = path.relative_to(SRC).parts[0]
        text = path.read_text(errors="replace")
        for m in INCLUDE.finditer(text):
            inc = m.group(1)
            if inc == d:
                continue
            line = text.count("\n", 0, m.start()) + 1
            out.setdefault((d, inc), []).append((str(path.relative_to(SOURCE)), line))
    return out


def test_every_directory_has_a_layer():
    dirs = {p.name for p in SRC.iterdir() if p.is_dir()}
    assert dirs <= set(RANK), f"directories of src/ without a layer in this test: {sorted(dirs - set(RANK))}"
    loose = [p.name for p in SRC.iterdir() if p.is_file()]
    assert not loose, f"files directly in src/ (each belongs to a layer's directory): {loose}"


def test_no_include_points_upward():
    bad = []
    for (d, inc), where in arrows().items():
        assert inc in RANK, f"{where[0][0]}:{where[0][1]} includes {inc}/, which is not a layer of src/"
        upward = RANK[inc] > RANK[d] or (d, inc) in FORBIDDEN_PAIRS
        if upward and (d, inc) not in KNOWN:
            bad += [f"{f}:{n}: {d}/ includes {inc}/" for f, n in where]
    assert not bad, "includes against the layer order:\n" + "\n".join(bad)


def test_known_exceptions_still_exist():
    seen = arrows()
    stale = [k for k in KNOWN if k not in seen]
    assert not stale, f"no longer included, remove from KNOWN: {stale}"


def test_the_checker_sees_an_upward_include(tmp_path, monkeypatch):
    """The checker itself: a planted cuda/ -> cpu/ and backend/ -> engine/ include are found."""
    root = tmp_path / "src"
    for d, body in (("cuda", '#include "cpu/rope.h"\n'), ("backend", '#include "engine/session.h"\n'),
                    ("cpu", '#include "backend/backend.h"\n')):
        (root / d).mkdir(parents=True)
        (root / d / "x.c").write_text(body)
    monkeypatch.setattr(__import__(__name__), "SRC", root)
    monkeypatch.setattr(__import__(__name__), "SOURCE", tmp_path)
    found = arrows()
    ups = {k for k in found if RANK[k[1]] > RANK[k[0]] or k in FORBIDDEN_PAIRS}
    assert ups == {("cuda", "cpu"), ("backend", "engine")}
