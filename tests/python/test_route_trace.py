"""Skewed routing (`clover synth --route-skew`), the routing trace
(CLOVER_ROUTE_TRACE) and the cache-policy simulator (bench_expert_cache).

Expected values come from elsewhere than the code under test: the router
rows read back with llama.cpp's `gguf` package (the skewed file's rows are
the unskewed file's times exactly 1 + S / (1 + rank), the ranks a
permutation); the trace checked against the run (one line per layer per
pass, each row's k experts); and every hit rate the simulator prints
recomputed by the policies written out here from expert_cache.h's rules."""

import random
import re
import subprocess

import numpy as np
import pytest
from gguf import GGUFReader

import test_server_process as ss

BENCH = ss.BUILD / "bench" / "bench_expert_cache"
SKEW = 8.0
EXPERTS, USED, LAYERS = 64, 2, 4
PROMPT, CHUNK = 256, 256  # random ids: one 256-row prompt pass (the CPU backend takes up to 512 rows a pass)


def synth(path, skew, threads=2):
    r = subprocess.run([str(ss.CLOVER), "synth", "-o", str(path), "--seed", "5", "--experts", str(EXPERTS),
                        "--no-diffusion", "--route-skew", str(skew), "--threads", str(threads)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return path


def routers(path):
    rd = GGUFReader(str(path))
    return {t.name: np.array(t.data, dtype=np.float32).reshape(EXPERTS, -1)
            for t in rd.tensors if t.name.endswith("ffn_gate_inp.weight")}


def trace_of(model, path, ids, max_tokens):
    r = subprocess.run([str(ss.CLOVER), "run", "-m", str(model), "--ids", ",".join(map(str, ids)), "--max-tokens",
                        str(max_tokens), "--ignore-eos", "--temperature", "1", "--threads", "1"],
                       capture_output=True, text=True, timeout=300, env={**ss.os.environ, "CLOVER_ROUTE_TRACE": str(path)})
    assert r.returncode == 0, r.stderr
    lines = path.read_text().splitlines()
    assert lines[0] == "clover-route-trace 1" and lines[1] == f"experts {EXPERTS} used {USED}", lines[:2]
    recs = []
    for line in lines[2:]:
        f = line.split()
        uses = [tuple(map(int, x.split(":"))) for x in f[2:]]
        recs.append((int(f[0]), int(f[1]), uses))
    return recs


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    if not ss.CLOVER.exists():
        pytest.fail(f"{ss.CLOVER} is missing: build the clover target first")
    d = tmp_path_factory.mktemp("skew")
    return synth(d / "plain.gguf", 0), synth(d / "skew.gguf", SKEW), d


def test_skew_is_the_documented_scale(files):
    plain, skew, d = files
    a, b = routers(plain), routers(skew)
    assert len(a) == LAYERS
    want = np.sort(1.0 + np.float32(SKEW) / (1.0 + np.arange(EXPERTS, dtype=np.float32)))
    orders = []
    for name in a:
        ratio = np.linalg.norm(b[name], axis=1) / np.linalg.norm(a[name], axis=1)
        np.testing.assert_allclose(np.sort(ratio), want, rtol=1e-5)
        orders.append(tuple(np.argsort(-ratio)))
    assert len(set(orders)) == LAYERS  # an order of its own per layer
    # deterministic: the same options (another thread count) give the same bytes
    again = synth(d / "again.gguf", SKEW, threads=1)
    assert again.read_bytes() == skew.read_bytes()


def test_bad_skew(files):
    for bad in ("-1", "65", "x"):
        r = subprocess.run([str(ss.CLOVER), "synth", "-o", str(files[2] / "bad.gguf"), "--route-skew", bad],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "--route-skew" in r.stderr and r.stderr.count("\n") == 1, r.stderr


@pytest.fixture(scope="module")
def traces(files):
    plain, skew, d = files
    rng = random.Random(7)
    ids = [rng.randrange(256) for _ in range(PROMPT)]
    return {name: trace_of(m, d / f"{name}.trace", ids, 40) for name, m in (("plain", plain), ("skew", skew))}


def test_trace_matches_the_run(traces):
    for recs in traces.values():
        # the prompt (one pass of 256 rows) then one pass per decoded token but the last
        prompt_recs = LAYERS * PROMPT // CHUNK
        assert len(recs) == prompt_recs + LAYERS * 39
        for i, (layer, rows, uses) in enumerate(recs):
            assert layer == i % LAYERS
            assert rows == (CHUNK if i < prompt_recs else 1)
            assert sum(n for _, n in uses) == rows * USED
            assert [e for e, _ in uses] == sorted(e for e, _ in uses)


def test_skew_shows_in_the_routing(traces, files):
    def top_share(recs):
        counts = {}
        for layer, _, uses in recs:
            for e, n in uses:
                counts[(layer, e)] = counts.get((layer, e), 0) + n
        shares = []
        for layer in range(LAYERS):
            v = sorted((n for (l, _), n in counts.items() if l == layer), reverse=True)
            shares.append(sum(v[:4]) / sum(v))
        return min(shares), max(shares)
    # over the prompt's random ids (a random model's own decoding repeats itself)
    prompt_recs = LAYERS * PROMPT // CHUNK
    lo_plain, hi_plain = top_share(traces["plain"][:prompt_recs])
    lo_skew, _ = top_share(traces["skew"][:prompt_recs])
    assert lo_skew > 1.5 * hi_plain, (lo_skew, hi_plain)


def simulate(recs, policy, slots):
    """Hits of expert_cache.h's policy over the trace, written out independently."""
    uses = [(layer * EXPERTS + e, step) for step, (layer, _, u) in enumerate(recs) for e, _ in u]
    nxt, seen = [None] * len(uses), {}
    for i in range(len(uses) - 1, -1, -1):
        nxt[i] = seen.get(uses[i][0], float("inf"))
        seen[uses[i][0]] = i
    res, last, nextu, touched, freq, hits = set(), {}, {}, {}, {}, 0
    size = {}  # uses a step makes (sweep: a step using more than half a layer's experts)
    for _, step in uses:
        size[step] = size.get(step, 0) + 1
    for i, (key, step) in enumerate(uses):
        freq[key] = freq.get(key, 0) + 1
        if key in res:
            hits += 1
        else:
            if len(res) >= slots:
                free = [k for k in res if touched[k] != step]
                if not free:
                    continue
                if policy == "lfu":
                    v = min(free, key=lambda k: (freq[k], last[k]))
                elif policy == "opt":
                    v = max(free, key=lambda k: nextu[k])
                    if not nxt[i] < nextu[v]:
                        continue
                elif policy == "sweep" and 2 * size[step] > EXPERTS:
                    v = max(free, key=lambda k: last[k])  # the most recent the step has not touched
                else:
                    v = min(free, key=lambda k: last[k])
                    if policy == "admit" and not freq[key] > freq[v]:
                        continue
                res.remove(v)
            res.add(key)
        last[key], nextu[key], touched[key] = i, nxt[i], step
    return hits, len(uses)


def test_simulator_hit_rates(traces, files):
    if not BENCH.exists():
        pytest.fail(f"{BENCH} is missing: build bench_expert_cache")
    d = files[2]
    for name, recs in traces.items():
        r = subprocess.run([str(BENCH), str(d / f"{name}.trace"), "--budgets", "1,4,8,16"], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        rows = [line.split() for line in r.stdout.splitlines() if re.match(r"^\d", line)]
        assert len(rows) == 4, r.stdout
        for row in rows:
            slots = int(row[2])
            got = {p: float(row[i].rstrip("%"))
                   for p, i in (("lru", 4), ("lfu", 5), ("admit", 6), ("sweep", 7), ("opt", 9))}
            for p, rate in got.items():
                hits, n = simulate(recs, p, slots)
                assert rate == pytest.approx(100.0 * hits / n, abs=0.051), (name, slots, p, r.stdout)
            assert got["opt"] >= max(got["lru"], got["lfu"], got["admit"], got["sweep"]), r.stdout
