"""clover_paths: where the Python tests find what they need, and a failure
(never a skip) that names it when it is missing.

 - SOURCE: the source tree (CLOVER_SOURCE_DIR, set by ctest);
 - BUILD: the build tree (CLOVER_BUILD_DIR);
 - SHARED: the team's shared data, ../shared beside the source tree, or
   CLOVER_SHARED_DIR where a copy of the repository lives elsewhere (a clean
   clone in a temporary directory, another machine).

A test that needs a file or a command calls require_file / require_command:
its absence fails the test with the path and how to provide it, so a
missing input can never turn into a green run that checked nothing.
"""
import os
from pathlib import Path

import pytest

SOURCE = Path(os.environ.get("CLOVER_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BUILD = Path(os.environ.get("CLOVER_BUILD_DIR", SOURCE / "build"))
SHARED = Path(os.environ.get("CLOVER_SHARED_DIR") or (SOURCE / ".." / "shared")).resolve()


def require_file(path, what):
    """path if it exists; otherwise the test fails naming it."""
    path = Path(path)
    if not path.exists():
        pytest.fail(f"missing {what}: {path} does not exist"
                    + (" (set CLOVER_SHARED_DIR to the shared directory)" if SHARED in path.parents else ""),
                    pytrace=False)
    return path


def shared_file(rel, what):
    """A file under the shared directory (CLOVER_SHARED_DIR or ../shared); its absence fails the test."""
    return require_file(SHARED / rel, what)


def require_command(name):
    """A built program under BUILD (the clover binary, a test tool); its absence fails the test."""
    for p in (BUILD / name, BUILD / "tests" / "tools" / name, BUILD / "tests" / name):
        if p.exists():
            return p
    pytest.fail(f"missing command: {name} is not built under {BUILD} (cmake --build {BUILD})", pytrace=False)
