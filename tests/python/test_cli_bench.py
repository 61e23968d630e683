"""`clover bench`: each pass's row beside its floor. The bytes a pass reads
are recomputed here from the file with llama.cpp's gguf package (every
tensor but token_embd and the routed experts, plus the experts' bytes times
1 - (1 - k/E)^rows), and each floor must be those bytes over the bandwidth
the same run printed."""
import re
import subprocess

import pytest
from gguf import GGUFReader

import clover_paths as cp

CLOVER = cp.BUILD / "clover"


def test_bench_rows_and_floors(tmp_path):
    if not CLOVER.exists():
        pytest.fail(f"{CLOVER} is not built")
    model = tmp_path / "tiny.gguf"
    assert subprocess.run([str(CLOVER), "synth", "-o", str(model)], capture_output=True).returncode == 0
    r = subprocess.run([str(CLOVER), "bench", "-m", str(model), "-t", "1", "--prompt-tokens", "64",
                        "--decode-tokens", "4", "--blocks", "2"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    bw = float(re.search(r"memory\s+([\d.]+) GB/s read", r.stdout).group(1)) * 1e9
    reader = GGUFReader(str(model))
    dense = sum(int(t.n_bytes) for t in reader.tensors if t.name != "token_embd.weight" and "_exps" not in t.name)
    experts = sum(int(t.n_bytes) for t in reader.tensors if "_exps" in t.name)
    E = int(reader.fields["qwen35moe.expert_count"].contents())
    k = int(reader.fields["qwen35moe.expert_used_count"].contents())
    rows = {}
    for line in r.stdout.splitlines():
        m = re.match(r"(prompt \(64 tokens\)|decode|preview \(one pass\)|commit \(a block\))\s+(\d+)\s+([\d.]+)\s+"
                     r"([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)%", line)
        if m:
            rows[m.group(1)] = [float(x) for x in m.groups()[1:]]
    assert set(rows) == {"prompt (64 tokens)", "decode", "preview (one pass)", "commit (a block)"}, r.stdout
    for name, (n, ms, tok_s, mb, floor_ms, pct) in rows.items():
        expect = dense + experts * (1 - (1 - k / E) ** n)
        assert abs(mb * 1e6 - expect) <= 0.051e6, (name, mb, expect)
        # the bandwidth is printed to 0.01 GB/s and the floor to 0.001 ms: both roundings allowed
        assert abs(floor_ms - expect / bw * 1e3) <= 0.0011 + floor_ms * (0.0051e9 / bw + 1e-3), (name, floor_ms)
        assert ms > 0 and tok_s > 0
    assert rows["decode"][0] == 1 and rows["preview (one pass)"][0] == 32
