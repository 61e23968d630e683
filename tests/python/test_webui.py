"""The chat page of `clover serve` (tools/server/webui) and its pass events.

 * HTTP: GET / is the page (and its CSS / JS), served without the API key
   while the API still needs it; --no-webui answers 404; a stream with
   stream_options.clover_passes carries each denoising pass (chunk.clover.pass)
   consistent with the request's own figures and does not change the answer;
   a bad clover_passes value is a 400.
 * A real browser: Debian's chromium, headless, driven over the DevTools
   protocol (websocket-client). It loads the page, enters the API key and a
   prompt with a fixed seed, waits for the answer and the denoising cells, and
   compares what the page shows with the same request made directly to the API
   (a turn with the decoding rule picked: the request's rule, causal steps shown).
   Any JavaScript exception or console error fails the test. The screenshot is
   kept in BUILD/test-artifacts/webui.png.
"""
import base64
import http.client
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request

import pytest
import websocket

from clover_paths import BUILD, require_command

KEY = "webui-test-key"


class Server:
    def __init__(self, *args):
        self.log = tempfile.NamedTemporaryFile(prefix="webui-server-", suffix=".log", delete=False)
        self.proc = subprocess.Popen([str(require_command("clover")), "serve", "--port", "0", "--threads", "2",
                                      *args], stdout=self.log, stderr=self.log)
        deadline = time.time() + 120
        self.port = None
        while time.time() < deadline and self.port is None:
            m = re.search(r"listening on http://[^:]+:(\d+)", open(self.log.name, errors="replace").read())
            if m:
                self.port = int(m.group(1))
            elif self.proc.poll() is not None:
                break
            time.sleep(0.05)
        if self.port is None:
            self.stop()
            pytest.fail("clover serve did not start:\n" + open(self.log.name, errors="replace").read())

    def request(self, method, path, body=None, headers=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        c.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, r.getheader("Content-Type"), data

    def chat(self, body):
        status, _, data = self.request("POST", "/v1/chat/completions", body,
                                       {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
        assert status == 200, data
        return data

    def stop(self):
        self.proc.terminate()
        try:
            assert self.proc.wait(timeout=60) == 0, open(self.log.name, errors="replace").read()
        finally:
            os.unlink(self.log.name)


@pytest.fixture(scope="module")
def server():
    s = Server("--api-key", KEY)
    yield s
    s.stop()


def events(raw):
    out = []
    for block in raw.decode().split("\n\n"):
        if block.startswith("data: ") and block != "data: [DONE]":
            out.append(json.loads(block[6:]))
    return out


def test_the_page_is_served_without_the_key(server):
    status, ctype, body = server.request("GET", "/")
    assert status == 200 and ctype.startswith("text/html")
    page = body.decode()
    assert "<title>clover</title>" in page and '<script src="/app.js">' in page
    for path, kind in (("/app.js", "text/javascript"), ("/app.css", "text/css"), ("/index.html", "text/html")):
        status, ctype, body = server.request("GET", path)
        assert status == 200 and ctype.startswith(kind) and body
    js = server.request("GET", "/app.js")[2].decode()
    assert "/v1/chat/completions" in js and "Bearer " in js
    assert server.request("GET", "/v1/models")[0] == 401  # the API still needs it
    assert server.request("GET", "/nothing-here")[0] == 401
    assert server.request("POST", "/", {})[0] in (401, 404, 405)


def test_no_webui_turns_it_off():
    s = Server("--no-webui")
    try:
        assert s.request("GET", "/")[0] == 404
        assert s.request("GET", "/app.js")[0] == 404
        assert s.request("GET", "/health")[0] == 200
    finally:
        s.stop()


def test_pass_events(server):
    base = {"messages": [{"role": "user", "content": "Describe the sea"}], "max_tokens": 80, "seed": 9,
            "temperature": 0.8, "ignore_eos": True, "stream": True}
    plain = events(server.chat(base))
    assert not any("pass" in (e.get("clover") or {}) for e in plain)
    evs = events(server.chat(dict(base, stream_options={"clover_passes": True})))
    passes = [e["clover"]["pass"] for e in evs if "pass" in (e.get("clover") or {})]
    final = [e["clover"] for e in evs if e.get("clover") and "pass" not in e["clover"]][-1]
    assert all(e["choices"] == [] for e in evs if "pass" in (e.get("clover") or {}))
    text = lambda es: "".join(c["delta"].get("reasoning_content", "") + c["delta"].get("content", "")
                              for e in es for c in e["choices"])
    assert text(evs) == text(plain)  # asking for the view does not change the answer
    blocks = sorted({p["block"] for p in passes})
    assert blocks == list(range(final["blocks"]))
    assert sum(1 for p in passes if p["pass"] > 0) == final["passes"]
    for b in blocks:
        bp = [p for p in passes if p["block"] == b]
        assert [p["pass"] for p in bp] == list(range(len(bp)))  # pass 0 (all masked), 1, 2, ...
        assert bp[0]["n_fixed"] == 0 and all(r is None for r in bp[0]["rows"])
        for prev, cur in zip(bp, bp[1:]):
            assert cur["n_fixed"] == prev["n_fixed"] + cur["n_fixed_now"]
            assert sum(r is not None for r in cur["rows"]) == cur["n_fixed"]
            assert all(p is None or p == c for p, c in zip(prev["rows"], cur["rows"]))  # fixed rows stay
        assert bp[-1]["n_fixed"] == bp[-1]["block_size"] or b == blocks[-1]
    status, _, data = server.request("POST", "/v1/chat/completions",
                                     dict(base, stream_options={"clover_passes": "yes"}),
                                     {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    assert status == 400 and b"clover_passes" in data


# ---- the browser ----

class Browser:
    """Headless chromium and one page, over the DevTools protocol."""

    def __init__(self, tmp):
        exe = shutil.which("chromium") or shutil.which("chromium-browser")
        if not exe:
            pytest.fail("chromium is not installed (scripts/setup.sh installs Debian's chromium)")
        self.proc = subprocess.Popen([exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                      "--disable-dev-shm-usage", "--remote-debugging-port=0",
                                      f"--user-data-dir={tmp}", "--window-size=1280,860", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        port_file = os.path.join(tmp, "DevToolsActivePort")
        deadline = time.time() + 60
        while not os.path.exists(port_file) or not open(port_file).read().strip():
            if time.time() > deadline or self.proc.poll() is not None:
                self.close()
                pytest.fail("chromium did not start its DevTools endpoint")
            time.sleep(0.1)
        port = int(open(port_file).read().split()[0])
        pages = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30))
        page = next(p for p in pages if p["type"] == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60, suppress_origin=True)
        self.next_id = 0
        self.errors = []
        self.network = []
        for domain in ("Runtime", "Page", "Log"):
            self.call(f"{domain}.enable")

    def _note(self, msg):
        m, p = msg.get("method"), msg.get("params", {})
        if m == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            self.errors.append("exception: " + d.get("exception", {}).get("description", d.get("text", "")))
        elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            self.errors.append("console.error: " + " ".join(str(a.get("value", a.get("description"))) for a in p["args"]))
        elif m == "Log.entryAdded" and p["entry"]["level"] == "error":
            e = p["entry"]
            if e.get("source") == "network":  # a failed request: the test decides which are expected
                self.network.append((e.get("url", ""), e["text"]))
            else:
                self.errors.append("log: " + e["text"])

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise AssertionError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self._note(msg)

    def js(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise AssertionError(f"{expr}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait(self, expr, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.js(expr):
                return
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {expr}; the page shows: "
                             + str(self.js("document.getElementById('messages').innerText")))

    def close(self):
        if getattr(self, "ws", None):
            self.ws.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


SEND = """(() => {
  const set = (id, v) => { const e = document.getElementById(id); e.value = v;
                           e.dispatchEvent(new Event('change')); };
  set('apikey', %(key)s); set('max_tokens', '%(max)d'); set('seed', '%(seed)d'); set('temperature', '0.8');
  set('threshold', '0.12'); set('rule', %(rule)s);
  document.getElementById('thinking').checked = %(thinking)s;
  set('prompt', %(prompt)s);
  document.getElementById('send').click();
  return true;
})()"""


def test_chat_page_in_a_browser(server, tmp_path):
    # the second turn picks the causal-fallback rule (sent as the request's rule; the first leaves the model's)
    turns = [("Describe the sea", True, 90, 21, ""), ("And the sky?", False, 70, 22, "causal")]
    # What the API answers to the same conversation (the page must show exactly this).
    expected, messages = [], []
    for prompt, thinking, max_tokens, seed, rule in turns:
        messages.append({"role": "user", "content": prompt})
        ans = json.loads(server.chat({"messages": messages, "max_tokens": max_tokens, "seed": seed,
                                      "temperature": 0.8, "threshold": 0.12, "chat_template_kwargs": {"enable_thinking": thinking},
                                      **({"rule": rule} if rule else {})}))
        msg = ans["choices"][0]["message"]
        expected.append((msg.get("reasoning_content") or "", msg["content"] or "", ans["clover"]))
        messages.append({"role": "assistant", "content": msg["content"] or ""})

    b = Browser(str(tmp_path / "profile"))
    try:
        b.call("Page.navigate", url=f"http://127.0.0.1:{server.port}/")
        b.wait("document.readyState === 'complete' && !!document.getElementById('send')")
        b.wait("document.getElementById('model').textContent === '(enter the API key)'")  # no key yet: 401
        # the rule control: the model's by default, then the two rules the server's rule field takes
        assert b.js("[...document.getElementById('rule').options].map(o => o.value)") == ["", "threshold", "causal"]
        assert b.js("document.getElementById('rule').value") == ""
        for k, (prompt, thinking, max_tokens, seed, rule) in enumerate(turns):
            assert b.js(SEND % {"key": json.dumps(KEY), "max": max_tokens, "seed": seed, "rule": json.dumps(rule),
                                "thinking": "true" if thinking else "false", "prompt": json.dumps(prompt)})
            b.wait(f"document.querySelectorAll('.msg.assistant').length === {k + 1} && "
                   f"document.querySelectorAll('.msg.assistant')[{k}].dataset.done === '1'")
            got = b.js(f"""(() => {{
              const m = document.querySelectorAll('.msg.assistant')[{k}];
              return {{ thought: m.querySelector('details > div').textContent,
                        folded: !m.querySelector('details').open,
                        hasThought: !m.querySelector('details').hidden,
                        answer: m.querySelector('.answer').textContent,
                        error: m.classList.contains('error'),
                        blocks: document.querySelectorAll('#denoise .block').length,
                        cells: document.querySelectorAll('#denoise .cell').length,
                        fixed: document.querySelectorAll('#denoise .cell.fixed').length,
                        heads: [...document.querySelectorAll('#denoise .head')].map(h => h.textContent),
                        stats: document.getElementById('stats').textContent }}; }})()""")
            reasoning, content, fig = expected[k]
            assert not got["error"], got["answer"]
            assert got["thought"] == reasoning and got["answer"] == content
            assert got["hasThought"] == bool(reasoning) and got["folded"]
            assert got["blocks"] == fig["blocks"] >= 2
            assert got["cells"] == 32 * fig["blocks"]  # the tiny model's block size
            assert got["fixed"] >= max_tokens - 32
            # the threshold (0.12) fixes several rows in some passes: fewer passes than tokens
            assert fig["passes"] < 32 * fig["blocks"]
            assert all(re.search(r"tokens/pass, [0-9.]+ tok/s$", h) for h in got["heads"]), got["heads"]
            assert f"{fig['passes']} passes, {fig['blocks']} blocks" in got["stats"]
            if rule == "causal":  # the tiny model is rarely confident: rows fall back to the causal pick
                assert fig["causal_steps"] > 0 and f"{fig['blocks']} blocks, {fig['causal_steps']} causal steps, " \
                    in got["stats"], got["stats"]
            else:
                assert "causal_steps" not in fig and "causal" not in got["stats"]
        assert b.js("document.getElementById('model').textContent") == "clover-tiny"
        # the page after two turns (a test artifact: look at it)
        shot = b.call("Page.captureScreenshot", format="png")["data"]
        out = BUILD / "test-artifacts"
        out.mkdir(exist_ok=True)
        (out / "webui.png").write_bytes(base64.b64decode(shot))
        # Stop: a long answer cut short from the page (the server sees the client leave)
        assert b.js(SEND % {"key": json.dumps(KEY), "max": 3000, "seed": 5, "thinking": "false", "rule": '""',
                            "prompt": json.dumps("A long story")})
        b.wait("document.querySelectorAll('#denoise .block').length >= 2")
        b.js("document.getElementById('stop').click()")
        b.wait("document.querySelectorAll('.msg.assistant')[2].dataset.done === '1'")
        assert b.js("document.querySelectorAll('.msg.assistant')[2].querySelector('.meta').textContent") == "stopped"
        assert b.js("document.getElementById('send').disabled") is False
        b.js("1")  # drain the events that came with the last calls
        assert b.errors == [], b.errors
        # the one failed request: the model list asked before the key was entered
        assert [(u.rsplit("/", 2)[-2:], "401" in t) for u, t in b.network][:1] == [(["v1", "models"], True)], b.network
        assert all("chat/completions" in u for u, _ in b.network[1:]), b.network  # the stopped stream, if logged
    finally:
        b.close()
