"""Every file the user documentation names exists (README.md and docs/*.md):
a path written in them (docs/..., tests/..., scripts/..., bench/...,
src/..., tools/..., include/..., and the top-level LICENSE) must be in the
source tree, and user docs carry no issue numbers and do not send readers
to SPEC.md or TRUNK.md (team documents outside the repository); the
developer documents may."""
import re

import pytest

import clover_paths as cp

DOCS = [cp.SOURCE / "README.md"] + sorted((cp.SOURCE / "docs").glob("*.md"))
DEVELOPER_DOCS = {"DEVELOPING.md", "BACKENDS.md"}  # for people changing clover: may name the team's documents
USER_DOCS = [d for d in DOCS if d.name not in DEVELOPER_DOCS]
PATH = re.compile(r"(?<![\w./-])((?:docs|tests|scripts|bench|src|tools|include)/[\w./-]*[\w-]|LICENSE\b)")


def named_paths(text):
    for m in PATH.finditer(text):
        p = m.group(1).rstrip(".")
        if "*" in text[m.end():m.end() + 1] or "{" in text[m.end():m.end() + 1]:
            continue  # a glob or a brace list: not one file
        yield p


def test_the_pattern_finds_paths():
    text = "see docs/FORMAT.md, `tests/python/x.py` and LICENSE; not a.docs/b or src/cuda/NOTES_*.md"
    assert list(named_paths(text)) == ["docs/FORMAT.md", "tests/python/x.py", "LICENSE"]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_named_files_exist(doc):
    missing = sorted({p for p in named_paths(doc.read_text()) if not (cp.SOURCE / p).exists()})
    assert not missing, f"{doc.name} names files that do not exist: {missing}"


@pytest.mark.parametrize("doc", USER_DOCS, ids=lambda p: p.name)
def test_no_team_references(doc):
    text = doc.read_text()
    assert not re.search(r"\bissues? \d+|\(issue|SPEC\.md|TRUNK\.md", text, re.I), doc.name


def test_readme_names_a_few():
    names = set(named_paths((cp.SOURCE / "README.md").read_text()))
    assert {"docs/FORMAT.md", "docs/USAGE.md", "docs/DEVELOPING.md", "docs/PYTHON.md", "docs/WEBUI.md",
            "docs/STRUCTURED_OUTPUT.md", "docs/SERVER.md", "LICENSE"} <= names
    assert "src/backend.h" not in (cp.SOURCE / "README.md").read_text()  # moved: src/backend/backend.h
