"""`clover chat` on a terminal edits the line and keeps a history (libedit):
typed through a pseudo-terminal, Left arrows move the cursor back into the
line (without editing, the escape bytes would become part of the command),
and Up recalls the previous line. The expected outputs are the chat
commands' own fixed texts."""
import os
import pty
import select
import subprocess
import time

import pytest

import clover_paths as cp

CLOVER = cp.BUILD / "clover"


PROMPT = b">\x1b[0m "  # the end of the bold prompt


def read_until(fd, needle, timeout=60.0):
    out = b""
    end = time.time() + timeout
    while needle not in out and time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                out += os.read(fd, 65536)
            except OSError:
                break
    return out


@pytest.fixture
def chat():
    if not CLOVER.exists():
        pytest.fail(f"{CLOVER} is not built")
    master, slave = pty.openpty()
    env = dict(os.environ, TERM="xterm", HOME=os.environ.get("HOME", "/tmp"))
    env.pop("NO_COLOR", None)
    p = subprocess.Popen([str(CLOVER), "chat", "--no-visual"], stdin=slave, stdout=slave, stderr=slave, env=env,
                         start_new_session=True)
    os.close(slave)
    yield p, master
    if p.poll() is None:
        p.kill()
    p.wait(timeout=30)
    os.close(master)


def test_left_arrow_edits_and_up_recalls(chat):
    p, fd = chat
    assert PROMPT in read_until(fd, PROMPT)
    # keys typed as soon as the prompt shows: chat puts the terminal in libedit's mode before the prompt
    os.write(fd, b"/stts\x1b[D\x1b[Da\r")  # "/stts", Left Left, "a": "/stats"
    out = read_until(fd, b"no answer yet")
    assert b"no answer yet" in out, out
    assert b"unknown command" not in out
    if PROMPT not in out.split(b"no answer yet")[-1]:  # the next prompt, unless it came with the answer
        read_until(fd, PROMPT, timeout=10)
    os.write(fd, b"\x1b[A\r")  # Up: "/stats" again
    out = read_until(fd, b"no answer yet")
    assert b"no answer yet" in out, out
    if PROMPT not in out.split(b"no answer yet")[-1]:
        read_until(fd, PROMPT, timeout=10)
    os.write(fd, b"\x04")  # Ctrl-D leaves
    assert p.wait(timeout=30) == 0
