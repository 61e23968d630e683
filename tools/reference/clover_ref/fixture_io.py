"""Writing expected outputs in a form a C test reads in a few lines:
one manifest.json per fixture directory, small numbers inline, arrays as
raw little-endian float32 files (`data/NAME.f32`, shape in the manifest).

Floats inline in JSON are float32 values written as the shortest decimal of
the exact double (`repr(float(np.float32(x)))`), so parsing them as double
and casting to float gives back the same bits, and regenerating gives the
same bytes.
"""
from __future__ import annotations

import json
import math
import os

import numpy as np


def f32(x) -> float:
    return float(np.float32(x))


def finite_or_none(x):
    x = float(x)
    return None if math.isinf(x) or math.isnan(x) else x


class FixtureDir:
    def __init__(self, path: str):
        self.path = path
        os.makedirs(os.path.join(path, "data"), exist_ok=True)
        self.names: set[str] = set()

    def array(self, name: str, arr) -> dict:
        """Write arr as float32 LE; return the manifest entry."""
        if name in self.names:
            raise ValueError(f"duplicate fixture array {name}")
        self.names.add(name)
        a = np.ascontiguousarray(np.asarray(arr, dtype="<f4"))
        rel = f"data/{name}.f32"
        with open(os.path.join(self.path, rel), "wb") as f:
            f.write(a.tobytes())
        return {"file": rel, "dtype": "f32le", "shape": list(a.shape)}

    def manifest(self, obj: dict) -> None:
        with open(os.path.join(self.path, "manifest.json"), "w") as f:
            json.dump(obj, f, indent=1, ensure_ascii=False, allow_nan=False)
            f.write("\n")


def read_array(base: str, entry: dict) -> np.ndarray:
    a = np.fromfile(os.path.join(base, entry["file"]), dtype="<f4")
    return a.reshape(entry["shape"])
