"""`clover chat` and `clover run` on a terminal: driven through a
pseudo-terminal (Python's pty module), as a person at a keyboard would.

  * two chat turns, then /stats: the second turn's prompt is the reference's
    prefix_reuse request (tests/fixtures/tiny_clover/manifest.json), so the
    session must have reused exactly the 47 tokens the reference committed
    after the first answer;
  * the block display is drawn on a terminal (masked rows as a dim shade,
    fixed rows in colour) and not with --no-visual;
  * Ctrl-C stops an answer and returns to the prompt (and at the prompt,
    just gives a fresh one); Ctrl-D leaves with exit code 0, also when it
    was typed while an answer ran;
  * what the block display leaves on the screen, once every preview is
    erased, is exactly what --no-visual prints, at several terminal widths
    (both screens rebuilt by pyte, a terminal emulator, from the bytes);
  * loading a large model file shows a progress bar on the terminal.

Needs the build's `clover` binary (CLOVER_BUILD_DIR)."""

import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest

SOURCE = Path(os.environ.get("CLOVER_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BUILD = Path(os.environ.get("CLOVER_BUILD_DIR", "build"))
CLOVER = BUILD / "clover"
FIXTURES = SOURCE / "tests" / "fixtures"
PROMPT = b"\x1b[1m>\x1b[0m "  # the chat prompt on a terminal
MASK = "\u2591".encode()      # a masked row in the block display


class Term:
    """A command on a pseudo-terminal of its own (its controlling terminal,
    so ^C and ^D act as they do for a person), cols wide; stderr to the
    terminal too unless quiet."""

    def __init__(self, *args, cols=80, quiet=False):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            try:
                fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 200, cols, 0, 0))
                if quiet:
                    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
                os.execv(str(CLOVER), [str(CLOVER), *map(str, args)])
            finally:
                os._exit(127)
        self.out = b""
        self.pos = 0
        self.status = None

    def read_until(self, pattern, timeout=60.0):
        """Reads until pattern (bytes, or a compiled regex) appears after the
        previous match; returns the output from there up to the match's end."""
        start = self.pos
        deadline = time.monotonic() + timeout
        while True:
            tail = self.out[start:]
            if isinstance(pattern, bytes):
                i = tail.find(pattern)
                end = i + len(pattern) if i >= 0 else -1
            else:
                m = pattern.search(tail)
                end = m.end() if m else -1
            if end >= 0:
                self.pos = start + end
                return tail[:end]
            left = deadline - time.monotonic()
            assert left > 0, f"timed out waiting for {pattern!r}; output so far:\n{tail!r}"
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    data = b""
                assert data, f"the command ended before {pattern!r}; output:\n{tail!r}"
                self.out += data

    def send(self, data):
        os.write(self.fd, data)

    def wait(self, timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:  # keep draining so the child never blocks on a full terminal
                r, _, _ = select.select([self.fd], [], [], 0.05)
                if r:
                    self.out += os.read(self.fd, 65536)
            except OSError:
                pass
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = status
                self._drain()  # what it wrote just before it ended may still be in the terminal
                return os.waitstatus_to_exitcode(status)
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        pytest.fail(f"still running after {timeout} s; the last output: {self.out[-300:]!r}; before it:\n{self.out[-2000:-300]!r}")

    def _drain(self):
        """Reads what is left once the command has ended, up to the end
        (the terminal's other side closed: an empty read, or EIO on Linux)."""
        while True:
            r, _, _ = select.select([self.fd], [], [], 5.0)
            if not r:
                return
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                return
            if not data:
                return
            self.out += data

    def close(self):
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except OSError:
                pass
        os.close(self.fd)


def manifest(name):
    return json.loads((FIXTURES / name / "manifest.json").read_text())


@pytest.fixture(scope="module", autouse=True)
def need_binary():
    if not CLOVER.exists():
        pytest.fail(f"{CLOVER} is missing: build the clover target first")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "tiny_clover.gguf"
    r = subprocess.run([str(CLOVER), "convert", str(FIXTURES / "tiny_clover" / "hf"), "-o", str(path), "--type",
                        "f32", "--threads", "1"], capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return path


@pytest.fixture
def term():
    made = []

    def start(*args, **kwargs):
        t = Term(*args, **kwargs)
        made.append(t)
        return t

    yield start
    for t in made:
        t.close()


def test_two_turns_reuse_the_prefix(model, term):
    m = manifest("tiny_clover")
    first = next(c for c in m["generate"] if c["name"] == "greedy_default")
    pr = m["prefix_reuse"]
    t = term("chat", "-m", model, "--max-tokens", pr["options"]["max_tokens"], "--threads", 2)
    banner = t.read_until(PROMPT)
    assert b"clover chat:" in banner and b"block diffusion" in banner and b"thinking on" in banner
    t.send(b"Write a short poem about the sea.\r")
    answer = t.read_until(PROMPT)
    # the display drew the blocks: dim masks, then rows coloured by confidence
    assert b"\x1b[2m" + MASK in answer and b"\x1b[38;5;" in answer
    t.send(b"And then?\r")
    t.read_until(PROMPT)
    t.send(b"/stats\r")
    stats = t.read_until(re.compile(rb"totals[^\n]*\n")).decode()
    n_prompt = len(pr["second_prompt_ids"])
    reused = pr["expected"]["reused_tokens"]
    assert (f"prompt {n_prompt} tokens: {reused} reused from the session "
            f"(it held {first['expected']['committed_after']}), {n_prompt - reused} committed now") in stats, stats
    assert f"answer {len(pr['expected']['tokens'])} tokens ({pr['expected']['finish_reason']})" in stats
    assert "2 answers" in stats
    t.read_until(PROMPT)
    t.send(b"\x04")  # Ctrl-D: end of input
    assert t.wait() == 0


def test_ctrl_c_stops_the_answer_not_the_chat(model, term):
    # ignore_eos and a long answer, so the answer is still running when ^C comes
    t = term("chat", "-m", model, "--ignore-eos", "--max-tokens", 3000, "--threads", 1, "--no-visual")
    t.read_until(PROMPT)
    t.send(b"\x03")  # at the prompt: a fresh prompt
    t.read_until(PROMPT)
    t.send(b"Hi!\r")
    t.read_until(b"Hi!\r\n")  # the echo
    t.read_until(re.compile(rb"\S"))  # the answer has started
    t.send(b"\x03")
    t.read_until(b"[cancelled]")
    t.read_until(PROMPT)
    t.send(b"/stats\r")
    stats = t.read_until(re.compile(rb"totals[^\n]*\n")).decode()
    m = re.search(r"answer (\d+) tokens \(cancelled\)", stats)
    assert m and 0 < int(m.group(1)) < 3000, stats
    assert "session      0 tokens committed" in stats  # a cancelled request leaves nothing to reuse
    t.read_until(PROMPT)
    t.send(b"/quit\r")
    assert t.wait() == 0


def test_ctrl_d_typed_during_an_answer_leaves_after_it(model, term):
    # Between prompts the terminal is in cooked mode, where Ctrl-D is queued
    # as an end-of-file mark: it must end the chat once the answer is done,
    # not turn into a NUL byte at the next prompt.
    # a long answer (ignore_eos), so the Ctrl-D surely comes while it runs
    t = term("chat", "-m", model, "--ignore-eos", "--max-tokens", 3000, "--threads", 1, "--no-visual")
    t.read_until(PROMPT)
    t.send(b"Hi!\r")
    t.read_until(b"Hi!\r\n")
    t.read_until(re.compile(rb"\S"))  # the answer has started
    t.send(b"\x04")
    assert t.wait() == 0
    assert PROMPT not in t.out[t.pos:], t.out[t.pos:]


def test_run_draws_blocks_on_a_terminal_only_when_asked(model, term):
    args = ("run", "-m", model, "-p", "Hi!", "--max-tokens", 16, "--threads", 2)
    t = term(*args)
    assert t.wait() == 0
    assert MASK in t.out and b"\x1b[38;5;" in t.out
    assert re.search(rb"\[(stop|length), \d+ tokens; \d+ blocks, passes per block", t.out)
    t = term(*args, "--no-visual")
    assert t.wait() == 0
    assert MASK not in t.out and b"\x1b[38;5;" not in t.out


@pytest.mark.parametrize("cols", [13, 37, 80])
def test_the_display_settles_into_the_text(model, term, cols):
    import pyte  # a missing test tool is a failure, not a skip

    def screen(data):
        s = pyte.Screen(cols, 200)
        pyte.ByteStream(s).feed(data)
        return [line.rstrip() for line in s.display]

    for prompt in ("Write a short poem about the sea.", "Tell me a story about a fox and a dog."):
        args = ("run", "-m", model, "-p", prompt, "--max-tokens", 40, "--threads", 1)
        shown = term(*args, cols=cols, quiet=True)
        assert shown.wait() == 0
        plain = term(*args, "--no-visual", cols=cols, quiet=True)
        assert plain.wait() == 0
        assert MASK in shown.out and MASK not in plain.out  # previews were drawn, and erased:
        assert screen(shown.out) == screen(plain.out)
        assert any(screen(plain.out))


def test_load_progress_bar(term, tmp_path):
    """A model file of 64 MiB or more is read with a progress bar on the
    terminal (a sparse synthetic file: no disk blocks, quick to read)."""
    big = tmp_path / "big.gguf"
    r = subprocess.run([str(CLOVER), "synth", "-o", str(big), "--hidden", "1024", "--experts", "64", "--sparse"],
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert big.stat().st_size >= 64 << 20
    t = term("tokenize", "-m", big, "hi")
    assert t.wait() == 0
    assert re.search(rb"loading big\.gguf \[#+\] 100%", t.out), t.out[-500:]
    assert t.out.endswith(b"\r\x1b[K71,72\r\n"), t.out[-200:]  # the bar erased, then the ids
    # not on a pipe
    r = subprocess.run([str(CLOVER), "tokenize", "-m", str(big), "hi"], capture_output=True, timeout=120)
    assert r.stdout == b"71,72\n" and r.stderr == b""
