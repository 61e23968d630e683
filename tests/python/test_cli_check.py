"""`clover check --device X`: a device backend against the CPU backend.

No GPU on CI, so the device is the CPU backend itself: alone it must agree
to the bit (every printed error 0); through CLOVER_SIM_RANKS its MoE runs
over simulated ranks, which docs/MULTI_GPU.md promises bit-identical (0
again), and a planted rank failure there fails the device's commit, not
the reference's (the reference ignores the variable); with --rows 1 its
commits run row by row (the recurrent GDN form, one-row products), so the
errors are small but not zero, and --tol below them makes it exit 1. The
layer kinds printed must be the model's own (from `clover info`).
`--device cuda` without a CUDA build or device is one line and exit 1."""

import os
import re
import subprocess

import test_server_process as ss


def check(*args, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("CLOVER_SIM_")}
    e.update(env or {})
    return subprocess.run([str(ss.CLOVER), "check", *map(str, args)], capture_output=True, text=True, timeout=300,
                          env=e)


def table(out):
    rows = [line.split() for line in out.splitlines() if re.match(r"^\d+\s+(gdn|attention)\s", line)]
    m = re.search(r"^logits (\S+) \(largest difference (\S+)\); the same top id in (\d+) of (\d+) rows", out, re.M)
    assert rows and m, out
    return rows, float(m.group(1)), int(m.group(3)), int(m.group(4))


def pattern():
    r = subprocess.run([str(ss.CLOVER), "info"], capture_output=True, text=True, timeout=60)
    return re.search(r"^layer pattern\s+(\S+)", r.stdout, re.M).group(1)


def test_cpu_against_itself_is_exact():
    for env in (None, {"CLOVER_SIM_RANKS": "3"}):
        r = check("--device", "cpu", "--blocks", 2, env=env)
        assert r.returncode == 0, r.stderr
        rows, logits, same, n = table(r.stdout)
        assert "".join("A" if k == "attention" else "G" for _, k, _, _ in rows) == pattern()
        assert all(float(h) == 0 and float(s) == 0 for _, _, h, s in rows), r.stdout
        assert logits == 0 and same == n, r.stdout
        assert "3 commits" in r.stdout and r.stdout.rstrip().endswith("within the tolerance 0.001"), r.stdout


def test_the_device_runs_through_the_simulated_ranks():
    r = check("--device", "cpu", env={"CLOVER_SIM_RANKS": "2", "CLOVER_SIM_FAULT": "error:1:0"})
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    assert "on the cpu backend" in r.stderr and "rank 1 of 2 failed" in r.stderr, r.stderr


def test_row_by_row_differs_a_little():
    r = check("--device", "cpu", "--rows", 1, "--blocks", 3)
    assert r.returncode == 0, r.stderr
    rows, logits, same, n = table(r.stdout)
    errs = [float(x) for _, _, h, s in rows for x in (h, s)] + [logits]
    assert all(0 < e < 1e-5 for e in errs), r.stdout
    assert same == n
    r = check("--device", "cpu", "--rows", 1, "--tol", "1e-12")
    assert r.returncode == 1 and "differs: the largest error" in r.stdout, r.stdout


def test_cuda_without_a_device_is_one_line():
    r = check("--device", "cuda")
    if r.returncode == 0:  # a CUDA build on a machine with a GPU: a real check
        assert "device cuda against cpu" in r.stdout
        return
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "cuda" in r.stderr, r.stderr
    assert r.stdout == ""


def test_usage_errors():
    for args in (("--device", "auto"), ("--blocks", 2), ("--device", "cpu", "--rows", "x")):
        r = check(*args)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, (args, r.stderr)


def test_gpu_layers_is_refused_in_one_line():
    """The split pass is tested CPU + CPU (test_split); the CUDA backend's layer range (on since its H200
    run; test_cuda_split checks it there) is off with CLOVER_CUDA_LAYER_RANGE=0, and then --gpu-layers is
    the old one-line refusal, at a split point and at every layer."""
    env = dict(os.environ, CLOVER_CUDA_LAYER_RANGE="0")
    for n in ("2", "4096"):
        r = subprocess.run([str(ss.CLOVER), "run", "--gpu-layers", n, "-p", "hi", "--max-tokens", "4"],
                           capture_output=True, text=True, timeout=120, env=env)
        assert r.returncode == 1 and r.stderr.count("\n") == 1 and "--gpu-layers" in r.stderr, (n, r.stderr)


def test_gpu_layers_by_default():
    """By default (the layer range on): where there is no GPU (or no CUDA build) still one line and exit 1;
    on a device the run completes (test_cuda_split compares its tokens)."""
    env = {k: v for k, v in os.environ.items() if k != "CLOVER_CUDA_LAYER_RANGE"}
    for n in ("2", "4096"):
        r = subprocess.run([str(ss.CLOVER), "run", "--gpu-layers", n, "-p", "hi", "--max-tokens", "4"],
                           capture_output=True, text=True, timeout=120, env=env)
        if r.returncode == 0:
            continue
        assert r.returncode == 1 and r.stderr.count("\n") == 1, (n, r.stderr)


def test_gpu_mem_refusals_in_one_line():
    """--gpu-mem N (GiB): a budget of the CUDA device's memory, so it needs --device cuda (auto and cpu are
    refused), not with --gpu-layers, and N must be a size above 0 (usage: exit 2); every refusal one line. Where
    there is no GPU (here) --device cuda --gpu-mem is CUDA's own one-line refusal; on a device
    test_cuda_gpumem checks the cache's tokens against the all-device run."""
    def run(*args, cmd="run"):
        extra = ["-p", "hi", "--max-tokens", "4"] if cmd == "run" else ["--ids", "1,2,3"]
        return subprocess.run([str(ss.CLOVER), cmd, *args, *extra], capture_output=True, text=True, timeout=120)
    for cmd in ("run", "ppl"):
        for args in (["--gpu-mem", "8"], ["--gpu-mem", "8", "--device", "cpu"]):
            r = run(*args, cmd=cmd)
            assert r.returncode == 1 and r.stderr.count("\n") == 1, (cmd, args, r.stderr)
            assert "--gpu-mem needs --device cuda" in r.stderr, r.stderr
    r = run("--gpu-mem", "8", "--device", "cuda", "--gpu-layers", "2")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "do not go together" in r.stderr, r.stderr
    for bad in ("0", "-1", "abc", "1e9"):
        r = run("--gpu-mem", bad, "--device", "cuda")
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--gpu-mem needs a size in GiB" in r.stderr, r.stderr
    r = run("--gpu-mem", "8", "--device", "cuda")
    if r.returncode != 0:  # no GPU or no CUDA build here: CUDA's own refusal
        assert r.returncode == 1 and r.stderr.count("\n") == 1 and ("cuda" in r.stderr.lower()), r.stderr
    r = subprocess.run([str(ss.CLOVER), "check", "--device", "cpu", "--gpu-mem", "8"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "--gpu-mem needs --device cuda" in r.stderr, r.stderr
    h = subprocess.run([str(ss.CLOVER), "--help"], capture_output=True, text=True, timeout=60)
    assert h.returncode == 0 and "--gpu-mem N" in h.stdout
    for cmd in ("run", "chat", "ppl", "serve", "bench", "check"):
        h = subprocess.run([str(ss.CLOVER), cmd, "--help"], capture_output=True, text=True, timeout=60)
        assert h.returncode == 0 and "--gpu-mem N" in h.stdout, cmd
