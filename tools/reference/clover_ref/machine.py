"""What the fixtures' float bytes depend on: the CPU's instruction sets, the
kernels torch dispatches to (ATen's CPU capability, the MKL build and its
MKL_CBWR code path) and the versions of the packages that compute. Two
machines with the same fingerprint give the same bytes; any other pair agrees
only within the tolerances of tolerance.py (compare_fixtures.py).

make_fixtures.py records the fingerprint of the machine that wrote
tests/fixtures in fixtures_recorded_on.json (here, not among the fixtures, so
the fixture bytes stay independent of it); the byte-identity test runs only
where it matches.
"""
from __future__ import annotations

import importlib.metadata
import json
import os
import re

# Instruction-set flags that change which kernels MKL, oneDNN and ATen pick.
ISA_FLAGS = ("avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
             "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16")
PACKAGES = ("torch", "transformers", "tokenizers", "safetensors", "numpy")
# Settings that pick other MKL / oneDNN code paths (ATEN_CPU_CAPABILITY shows
# in torch_cpu_capability). Each changes the float32 bytes.
ENV_KNOBS = ("MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")
RECORD_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "fixtures_recorded_on.json")


def _cpuinfo() -> tuple[str, str, list[str]]:
    vendor = model = ""
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                key, value = key.strip(), value.strip()
                if key == "vendor_id" and not vendor:
                    vendor = value
                elif key == "model name" and not model:
                    model = value
                elif key == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    return vendor, model, [f for f in ISA_FLAGS if f in flags]


def fingerprint() -> dict:
    import torch  # here, so compare_fixtures.py (numpy only) can import this package

    vendor, model, flags = _cpuinfo()
    m = re.search(r"Math Kernel Library Version (.+?) for", torch.__config__.show())
    fp = {
        "cpu_vendor": vendor,
        "cpu_model": model,
        "cpu_flags": flags,
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "mkl": m.group(1) if m else None,
    }
    fp.update({k: os.environ.get(k) for k in ENV_KNOBS})
    for p in PACKAGES:
        try:
            fp[p] = importlib.metadata.version(p)
        except importlib.metadata.PackageNotFoundError:
            fp[p] = None
    return fp


def recorded() -> dict | None:
    if not os.path.exists(RECORD_PATH):
        return None
    with open(RECORD_PATH, encoding="utf-8") as f:
        return json.load(f)["fingerprint"]


def record(fp: dict) -> None:
    with open(RECORD_PATH, "w", encoding="utf-8") as f:
        json.dump({"note": "The machine that last wrote tests/fixtures with make_fixtures.py "
                           "(clover_ref/machine.py). Float bytes are reproducible only where "
                           "this fingerprint matches; elsewhere compare_fixtures.py applies.",
                   "fingerprint": fp}, f, indent=1, sort_keys=True)
        f.write("\n")


def differences(a: dict, b: dict) -> list[str]:
    return [f"{k}: {a.get(k)!r} vs {b.get(k)!r}" for k in sorted(set(a) | set(b))
            if a.get(k) != b.get(k)]
