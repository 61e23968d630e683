"""The multi-GPU options as a user meets them: `--devices` refused in one
line naming the problem (a bad list, a device this host lacks, no CUDA
backend, a missing libnccl.so.2, or the executor not built yet), never a
crash or a silent CPU run; and `clover synth` printing the parameter totals
of the 122B / 397B presets (sparse files, no disk blocks).

Needs the build's `clover` binary (CLOVER_BUILD_DIR)."""

import os
import subprocess
from pathlib import Path

import pytest

BUILD = Path(os.environ.get("CLOVER_BUILD_DIR", "build"))
CLOVER = BUILD / "clover"


def run(*args):
    return subprocess.run([str(CLOVER), *map(str, args)], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module", autouse=True)
def need_binary():
    if not CLOVER.exists():
        pytest.fail(f"{CLOVER} is missing: build the clover target first")


REASONS = ("does not exist (this host has", "no CUDA backend", "cannot load libnccl", "no expert-parallel executor")


@pytest.mark.parametrize("cmd", ["run", "chat"])
def test_devices_refused_in_one_line(cmd):
    r = run(cmd, "--devices", "0,1", *(["-p", "hi"] if cmd == "run" else []))
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--devices" in lines[0], r.stderr
    assert any(why in lines[0] for why in REASONS), r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("spec,why", [("a,b", "expected device numbers"), ("0,0", "named twice"),
                                      ("0,,1", "expected device numbers"), ("99", "")])
def test_devices_bad_lists(spec, why):
    r = run("run", "--devices", spec, "-p", "hi")
    assert r.returncode == 2
    line = r.stderr.strip()
    assert "\n" not in line and "--devices" in line
    assert why in line or "no CUDA backend" in line, line


@pytest.mark.parametrize("preset,total,active", [("qwen3.5-122b-a10b", "122.113", "9.773"),
                                                 ("qwen3.5-397b-a17b", "396.348", "17.351")])
def test_synth_prints_totals(tmp_path, preset, total, active):
    p = tmp_path / "big.gguf"
    r = run("synth", "--preset", preset, "--sparse", "-o", p)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"wrote {p} (") and lines[0].endswith(", sparse)")
    assert lines[1].startswith(f"parameters: {total} B total") and f"{active} B active per token" in lines[1]
    assert p.stat().st_blocks * 512 < 64 << 20
