"""The port a `clover serve --port 0` process listens on, read from its log
(the server prints "listening on http://HOST:PORT" once it accepts
connections). Shared by the tests that start a server of their own."""
import re
import time


def listening_port(proc, log, timeout=120):
    """The port, or an AssertionError with the log when the process ended or
    `timeout` seconds passed first."""
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        m = re.search(r"listening on http://[^:]+:(\d+)", log.read_text(errors="replace"))
        if m:
            return int(m.group(1))
        time.sleep(0.05)
    raise AssertionError("clover serve did not listen:\n" + log.read_text(errors="replace"))
