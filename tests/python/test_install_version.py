"""`clover --version` and `cmake --install`, as a user meets them.

Expected values come from outside the binary: the version from CMakeLists.txt's project() line; the commit
must be one git knows in this checkout; the backends from the build's CMakeCache (CLOVER_CUDA) and the CPU's
own flags in /proc/cpuinfo. The install tree is checked by what a user does with it: the installed command
runs, and a C program compiled against the installed clover.h and linked with the installed libclover prints
the same version."""
import os
import re
import subprocess

import pytest

from clover_paths import BUILD, SOURCE, require_command


def cache(name):
    text = (BUILD / "CMakeCache.txt").read_text()
    m = re.search(rf"^{name}:\w+=(.*)$", text, re.M)
    return m.group(1) if m else ""


def project_version():
    m = re.search(r"^project\(clover VERSION ([0-9.]+)", (SOURCE / "CMakeLists.txt").read_text(), re.M)
    assert m, "CMakeLists.txt has no project(clover VERSION ...)"
    return m.group(1)


def version_text(clover):
    r = subprocess.run([str(clover), "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and not r.stderr, r.stderr
    return r.stdout


def test_version_names_the_backends():
    out = version_text(require_command("clover"))
    first = out.splitlines()[0]
    m = re.fullmatch(r"clover (\S+) \(commit (\S+)\)", first)
    assert m, first
    assert m.group(1) == project_version()
    commit = m.group(2)
    if commit != "unknown":  # configured outside git
        r = subprocess.run(["git", "-C", str(SOURCE), "cat-file", "-t", commit], capture_output=True, text=True)
        assert r.stdout.strip() == "commit", f"--version names commit {commit}, which git does not know"
    backends = re.findall(r"\w+ \([^)]*\)", re.search(r"^backends: (.*)$", out, re.M).group(1))
    assert backends[0] == "cpu (avx2, avx512-vnni)"
    compiler = cache("CMAKE_CUDA_COMPILER")
    cuda = cache("CLOVER_CUDA").upper() in ("ON", "TRUE", "1") and compiler != "" and "NOTFOUND" not in compiler
    if cuda:
        assert any(re.fullmatch(r"cuda \(sm_\w+\)", b) for b in backends[1:]), backends
    else:
        assert backends == ["cpu (avx2, avx512-vnni)"] and "built without CUDA" in out, out
    flags = set(re.search(r"^flags\s*:(.*)$", open("/proc/cpuinfo").read(), re.M).group(1).split())
    has = {"avx2", "fma"} <= flags
    assert ("this CPU: avx2 + fma" in out) == has and ("no avx2" in out) == (not has), out
    # the AVX-512 VNNI level: the kernel's own flags (/proc/cpuinfo lists them only when the OS saves ZMM state)
    wide = has and {"avx512f", "avx512bw", "avx512vl", "avx512_vnni"} <= flags
    assert (" + avx512 vnni " in out) == wide, out
    # the AMX level: its tile and int8 flags as well (/proc/cpuinfo lists them where the OS saves the tile state)
    amx = wide and {"amx_tile", "amx_int8"} <= flags
    level = "amx" if amx else "avx512-vnni" if wide else "avx2" if has else "scalar"
    assert f"(the {level} kernels run)" in out, out


def test_version_says_which_kernels_the_switches_leave():
    clover = require_command("clover")
    for env, level in (({"CLOVER_NO_AVX512": "1"}, "avx2"), ({"CLOVER_NO_SIMD": "1"}, "scalar")):
        r = subprocess.run([str(clover), "--version"], capture_output=True, text=True, timeout=60,
                           env={**os.environ, **env})
        flags = set(re.search(r"^flags\s*:(.*)$", open("/proc/cpuinfo").read(), re.M).group(1).split())
        if level == "avx2" and not {"avx2", "fma"} <= flags:
            level = "scalar"
        assert r.returncode == 0 and f"(the {level} kernels run)" in r.stdout, (env, r.stdout)


def test_cmake_install_gives_command_header_and_library(tmp_path):
    prefix = tmp_path / "prefix"
    r = subprocess.run(["cmake", "--install", str(BUILD), "--prefix", str(prefix)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    clover = prefix / "bin" / "clover"
    header = prefix / "include" / "clover.h"
    libdirs = [d for d in (prefix / "lib", prefix / "lib64") if d.is_dir()]
    shared = [p for d in libdirs for p in d.glob("libclover.so*")]
    assert clover.is_file() and header.is_file() and shared, sorted(str(p) for p in prefix.rglob("*"))
    assert list(prefix.rglob("LICENSE")), "the LICENSE is not installed"
    assert version_text(clover) == version_text(require_command("clover"))
    prog = tmp_path / "v.c"
    prog.write_text('#include <stdio.h>\n#include "clover.h"\nint main(void) { puts(clover_version()); return 0; }\n')
    exe = tmp_path / "v"
    sanitize = ["-fsanitize=address,undefined"] if cache("CLOVER_SANITIZE").upper() in ("ON", "TRUE", "1") else []
    cc = cache("CMAKE_C_COMPILER") or "cc"
    r = subprocess.run([cc, *sanitize, "-I", str(prefix / "include"), str(prog), "-o", str(exe),
                        "-L", str(shared[0].parent), "-lclover"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "LD_LIBRARY_PATH": str(shared[0].parent)})
    assert r.returncode == 0 and r.stdout.strip() == project_version(), (r.stdout, r.stderr)
