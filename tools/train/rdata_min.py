"""A minimal reader of R's lazy-load data files (`data/Rdata.rdx` +
`data/Rdata.rdb`), enough for the character vectors that Debian's
r-cran-janeaustenr (Austen's novels) and r-cran-tokenizers (Moby Dick) ship.

Why our own: the fetch runs on the dev box with no R; PyPI's `rdata` would do
it too, but the subset needed (XDR serialization of vectors, pairlists,
attributes, strings) is sixty lines and keeps the fetch free of one more
dependency.

Format: `Rdata.rdx` is gzip of an R serialization whose `variables` map each
object's name to (offset, length) in `Rdata.rdb`; each rdb entry is a 4-byte
big-endian uncompressed length then zlib data (or 'X' + xz, '2' + bz2,
'0' + stored), itself an R serialization (`X\\n`, version 2 or 3).
"""
from __future__ import annotations

import bz2
import gzip
import lzma
import struct
import zlib

NIL_LIKE = {254, 242, 251, 253, 252, 250}   # NILVALUE, empty/global/base envs, missing arg


class _Reader:
    def __init__(self, b: bytes):
        self.b, self.i, self.refs = b, 0, []

    def int(self) -> int:
        v = struct.unpack_from(">i", self.b, self.i)[0]
        self.i += 4
        return v

    def obj(self):
        flags = self.int()
        t = flags & 0xFF
        has_attr, has_tag = flags & (1 << 9), flags & (1 << 10)
        if t in NIL_LIKE:
            return None
        if t == 255:                                   # REFSXP
            return self.refs[(flags >> 8) - 1]
        if t == 1:                                     # SYMSXP
            v = self.obj()
            self.refs.append(v)
            return v
        if t == 9:                                     # CHARSXP
            n = self.int()
            if n == -1:
                return None
            v = self.b[self.i:self.i + n].decode("utf-8", "replace")
            self.i += n
            return v
        if t in (2, 6):                                # LISTSXP, LANGSXP
            out = []
            while True:
                if has_attr:
                    self.obj()
                tag = self.obj() if has_tag else None
                out.append((tag, self.obj()))
                f2 = self.int()
                if f2 & 0xFF == 254:
                    break
                if f2 & 0xFF not in (2, 6):
                    raise ValueError(f"R pairlist: unexpected type {f2 & 0xFF}")
                has_attr, has_tag = f2 & (1 << 9), f2 & (1 << 10)
            return dict(out) if all(k for k, _ in out) else out
        if t in (10, 13):                              # LGLSXP, INTSXP
            n = self.int()
            v = list(struct.unpack_from(f">{n}i", self.b, self.i))
            self.i += 4 * n
        elif t == 14:                                  # REALSXP
            n = self.int()
            v = list(struct.unpack_from(f">{n}d", self.b, self.i))
            self.i += 8 * n
        elif t in (16, 19, 20):                        # STRSXP, VECSXP, EXPRSXP
            n = self.int()
            v = [self.obj() for _ in range(n)]
        else:
            raise ValueError(f"R type {t} is not supported by this reader")
        if has_attr:
            return {"value": v, "attr": self.obj()}
        return v


def unserialize(b: bytes):
    if b[:2] != b"X\n":
        raise ValueError("not an XDR R serialization")
    r = _Reader(b[2:])
    version = r.int()
    r.int()
    r.int()
    if version == 3:
        n = r.int()
        r.i += n                                      # native encoding name
    return r.obj()


def _entry(chunk: bytes) -> bytes:
    n = struct.unpack(">I", chunk[:4])[0]
    c = chunk[4:]
    if c[:1] == b"X":
        return lzma.decompress(c[1:])[:n]
    if c[:1] == b"2":
        return bz2.decompress(c[1:])[:n]
    if c[:1] == b"0":
        return c[1:1 + n]
    return zlib.decompress(c)


def load(data_dir: str) -> dict:
    """{object name: its value} of an R package's data/ directory."""
    with open(f"{data_dir}/Rdata.rdx", "rb") as f:
        idx = unserialize(gzip.decompress(f.read()))
    var = idx["value"][0]
    with open(f"{data_dir}/Rdata.rdb", "rb") as f:
        rdb = f.read()
    out = {}
    for name, (off, n) in zip(var["attr"]["names"], var["value"]):
        o = unserialize(_entry(rdb[off:off + n]))
        out[name] = o["value"] if isinstance(o, dict) else o
    return out
