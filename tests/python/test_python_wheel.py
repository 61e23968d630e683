"""The wheel: `pip wheel` of the checkout (pyproject.toml, scikit-build-core
driving the project's CMake with the tests and CUDA off), installed into a
fresh virtual environment that sees nothing of the build tree, where the bar
of the issue must hold: import clover, Model() on the carried default model,
tokenize / generate / stream (joined == generate) / score, and
`python -m clover serve` serving the chat page and answering
/v1/chat/completions. The expected answer comes from the build's own `clover`
command (same prompt ids, options and seed).

The wheel's CMake tree is kept in BUILD/python-wheel, so a second run only
relinks; CI (a clean clone) pays one compile of the library and the command,
made without optimisation (build type None: half the compile time of the
Release build `pip install .` makes; the packaging is the same).
Build isolation is off (scikit-build-core comes from tests/requirements.txt),
so the test needs no network."""
import json
import os
import subprocess
import sys
import time
import urllib.request
import venv

import pytest

from clover_paths import BUILD, SOURCE, require_command
from serve_port import listening_port

CHECK = r"""
import json, sys
import clover
m = clover.Model(threads=2)
ids = json.loads(sys.argv[1])
kw = dict(max_tokens=24, temperature=0.7, seed=5)  # one block: the default model at -O0 (build type None)
text = m.generate(ids, **kw)
out = {"ids": m.last_stats.ids, "text": text, "stream": "".join(m.stream(ids, **kw)),
       "tokens": m.tokenize("Hello world"), "score": m.score("Hello world, the sea is calm"),
       "lib": clover._lib.library_path(), "version": clover.version()}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheel")
    t0 = time.time()
    jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
    env = dict(os.environ, CMAKE_BUILD_PARALLEL_LEVEL=jobs)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q",
                        "-w", str(tmp), str(SOURCE), f"-Cbuild-dir={BUILD / 'python-wheel'}",
                        "-Ccmake.define.CLOVER_CUDA=OFF", "-Ccmake.build-type=None"], capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    wheels = list(tmp.glob("clover-*.whl"))
    assert len(wheels) == 1, wheels
    print(f"wheel built in {time.time() - t0:.1f} s: {wheels[0].name}")
    v = tmp / "venv"
    venv.EnvBuilder(with_pip=False).create(v)
    py = v / "bin" / "python"
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "-q",
                        str(wheels[0])], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CLOVER_", "PYTHON"))}
    return py, clean, tmp


def test_the_installed_package_works(wheel_env):
    py, env, tmp = wheel_env
    cli = require_command("clover")
    # the build's command on its embedded default model (ctest's CLOVER_DEFAULT_MODEL removed), the model
    # the wheel carries too: the demo model, or the tiny one in a checkout without models/
    want = json.loads(subprocess.run([str(cli), "run", "-p", "Hello", "--max-tokens", "24", "--temperature", "0.7",
                                      "--seed", "5", "--json", "--threads", "2"], capture_output=True, text=True,
                                     check=True, timeout=300, env=env).stdout)
    r = subprocess.run([str(py), "-c", CHECK, json.dumps(want["prompt_ids"])], capture_output=True, text=True,
                       env=env, cwd=tmp, timeout=300)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["lib"].startswith(str(tmp / "venv"))  # the wheel's library, not the build tree's
    assert got["ids"] == want["ids"] and got["text"] == want["text"]
    assert got["stream"] == got["text"]
    tok = subprocess.run([str(cli), "tokenize", "Hello world"], capture_output=True, text=True, check=True, env=env)
    assert got["tokens"] == [int(x) for x in tok.stdout.strip().split(",")]
    assert 0 < got["score"] < 20 and got["version"] == "0.1.0"
    # `python -m clover` without -m: the same default model as the build's command (the package's file,
    # which its command gets through CLOVER_DEFAULT_MODEL); every line of `info` but the file's name
    info = [subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp, timeout=300)
            for cmd in ([str(py), "-m", "clover", "info"], [str(cli), "info"])]
    assert info[0].returncode == 0, info[0].stderr
    assert info[0].stdout.splitlines()[1:] == info[1].stdout.splitlines()[1:]


def test_python_m_clover_serve(wheel_env):
    py, env, tmp = wheel_env
    log = tmp / "serve.log"
    with open(log, "w") as f:
        proc = subprocess.Popen([str(py), "-m", "clover", "serve", "--port", "0", "--threads", "2"], stdout=f,
                                stderr=f, env=env, cwd=tmp)
    try:
        port = listening_port(proc, log)
        page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=60).read().decode()
        assert "<title>clover</title>" in page
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", method="POST",
                                     data=json.dumps({"messages": [{"role": "user", "content": "Hi"}],
                                                      "max_tokens": 8}).encode(),
                                     headers={"Content-Type": "application/json"})
        ans = json.loads(urllib.request.urlopen(req, timeout=120).read())
        assert ans["choices"][0]["finish_reason"] in ("stop", "length") and ans["usage"]["completion_tokens"] >= 1
    finally:
        proc.terminate()
        assert proc.wait(timeout=60) == 0, log.read_text(errors="replace")
