"""The server's device path (issue 25): `clover serve --device` picks the
engine's backend through the same registry as every other command.

- `--device cuda` where no CUDA device is usable (no GPU, or a build without
  the CUDA backend) refuses at start: exit status 1 ("could not start", as
  the help says: the option is valid, this machine cannot honour it; 2 is
  kept for usage errors) and one last line naming CUDA in a user's words,
  never a library function name. `clover run --device cuda` refuses the
  same way. On a machine with a usable GPU the server starts instead and
  says it runs on cuda, which is checked instead: either outcome is asserted.
- The chosen backend is printed at start ("on the cpu backend (asked for)",
  "auto: ..." with the reason) and named in /metrics as
  clover_device{device="..."} 1."""

import re
import subprocess
import time

import test_server_process as ss

model = ss.model  # the module fixture: tiny_clover converted to f32

FUNCTION_NAME = re.compile(r"\bclover_[a-z_]+\b|\bcuda[A-Z]\w*\(")


def _serve_until_exit_or_listen(args, log, timeout=120):
    cmd = [str(ss.CLOVER), "serve", "--port", "0", "--threads", "1", *args]
    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=f)
    deadline = time.time() + timeout
    while time.time() < deadline:
        text = log.read_text(errors="replace")
        if proc.poll() is not None:
            return proc, None, text
        m = re.search(r"listening on https?://[^:]+:(\d+)", text)
        if m:
            return proc, int(m.group(1)), text
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("clover serve neither exited nor listened:\n" + log.read_text(errors="replace"))


def test_serve_device_cuda_without_a_gpu_refuses(tmp_path):
    log = tmp_path / "serve.log"
    proc, port, text = _serve_until_exit_or_listen(["--device", "cuda"], log)
    if port is not None:  # a usable GPU here: then it must really run there
        srv = ss.Server(proc, port, log)
        try:
            assert ss.wait_for(lambda: "on the cuda backend" in srv.log_text()), srv.log_text()
            assert srv.metrics().get('clover_device{device="cuda"}') == 1
        finally:
            ss.stop_server(srv)
        return
    assert proc.returncode == 1, text
    last = text.strip().splitlines()[-1]
    assert last.startswith("clover serve: --device cuda: "), text
    assert "CUDA" in last.split(": ", 2)[2], text
    assert not FUNCTION_NAME.search(last), text
    assert "listening" not in text


def test_run_device_cuda_refuses_the_same_way():
    r = subprocess.run([str(ss.CLOVER), "run", "--device", "cuda", "-p", "Hello", "--max-tokens", "2"],
                       capture_output=True, text=True, timeout=300)
    if r.returncode == 0:  # a usable GPU here
        return
    assert r.returncode == 1, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("clover run: --device cuda: ") and "CUDA" in last, r.stderr
    assert not FUNCTION_NAME.search(last), r.stderr


def test_device_printed_and_in_metrics(model, tmp_path):
    srv = ss.start_server(model, tmp_path / "cpu.log", "--device", "cpu")
    try:
        assert ss.wait_for(lambda: "clover serve: on the cpu backend (asked for)" in srv.log_text()), srv.log_text()
        m = srv.metrics()
        assert m.get('clover_device{device="cpu"}') == 1, m
        assert not any(k.startswith("clover_device{") and k != 'clover_device{device="cpu"}' for k in m), m
    finally:
        ss.stop_server(srv)


def test_auto_says_why(model, tmp_path):
    srv = ss.start_server(model, tmp_path / "auto.log")
    try:
        assert ss.wait_for(lambda: re.search(r"on the (cpu|cuda) backend \(", srv.log_text())), srv.log_text()
        dev = re.search(r"on the (cpu|cuda) backend \((.*)\)", srv.log_text())
        if dev.group(1) == "cpu":  # auto fell back: the reason names CUDA
            assert dev.group(2).startswith("auto: ") and "CUDA" in dev.group(2), srv.log_text()
        assert srv.metrics().get(f'clover_device{{device="{dev.group(1)}"}}') == 1
    finally:
        ss.stop_server(srv)


def test_device_memory_full_is_a_503(model, tmp_path, monkeypatch):
    """Admission by device memory: with a device that holds one session (CLOVER_FAULT_INJECT=full:2, the CPU
    standing in for the device inside the failover), a second concurrent request finds no session and no idle one
    to reuse, and is answered 503 with a JSON error naming the device's memory; once the first ends, a request
    is served on the session it left."""
    monkeypatch.setenv("CLOVER_FAULT_INJECT", "full:2")
    srv = ss.start_server(model, tmp_path / "full.log", "--device", "cpu", "--max-batch", 2, "--sessions", 1)
    monkeypatch.delenv("CLOVER_FAULT_INJECT")
    try:
        long = ss._send_raw(srv.port, {"prompt": "Go on:", "max_tokens": 4000, "ignore_eos": True}, True)
        assert ss.wait_for(lambda: srv.metrics()["clover_busy"] == 1.0)
        status, body = srv.post_json("/v1/completions", {"prompt": "Hello", "max_tokens": 4})
        assert status == 503, body
        assert body["error"]["code"] == "device_memory_full" and body["error"]["type"] == "server_error", body
        assert "memory" in body["error"]["message"] and "\n" not in body["error"]["message"], body
        long.close()
        assert ss.wait_for(lambda: srv.metrics()["clover_busy"] == 0.0, timeout=120)
        status, body = srv.post_json("/v1/completions", {"prompt": "Hello", "max_tokens": 4})
        assert status == 200 and body["choices"][0]["text"] is not None, body
    finally:
        ss.stop_server(srv)
