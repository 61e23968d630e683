"""The option parser every command shares (tools/cli/cli_opts.c) and the
context limits: expected values are written here by hand from the issue
(llama.cpp's names, the ranges, exit 2 for usage), not taken from the C
tables. The aliases are checked by running both spellings and comparing the
answers, so an alias that maps to the wrong option fails."""
import json
import subprocess

import pytest

import clover_paths as cp

CLOVER = cp.BUILD / "clover"
COMMANDS = ["run", "chat", "ppl", "serve", "synth", "quantize", "convert", "info", "tokenize", "check"]


def clover(*args, timeout=120, **kw):
    if not CLOVER.exists():
        pytest.fail(f"{CLOVER} is not built")
    return subprocess.run([str(CLOVER), *map(str, args)], capture_output=True, text=True, timeout=timeout, **kw)


@pytest.mark.parametrize("cmd", COMMANDS)
def test_unknown_option_named_exit_2(cmd):
    r = clover(cmd, "--bogus-flag")  # given last: unknown, not "needs a value"
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and f"clover {cmd}: unknown option '--bogus-flag'" in r.stderr, r.stderr
    assert "needs a value" not in r.stderr


@pytest.mark.parametrize("cmd,typo,near", [
    ("run", "--temprature", "--temperature"), ("run", "--max-token", "--max-tokens"), ("chat", "--sytem", "--system"),
    ("serve", "--prot", "--port"), ("quantize", "--typ", "--type"), ("ppl", "--ctx-sise", "--ctx-size"),
])
def test_did_you_mean(cmd, typo, near):
    r = clover(cmd, typo, "1")
    assert r.returncode == 2 and f"did you mean {near}?" in r.stderr, r.stderr


@pytest.mark.parametrize("args,words", [
    (["run", "-p", "hi", "--top-p", "2"], "--top-p 2 is out of range"),
    (["run", "-p", "hi", "--temperature", "-1"], "--temperature -1 is out of range"),
    (["run", "-p", "hi", "--temp=-1"], "--temperature -1 is out of range"),
    (["run", "-p", "hi", "--block", "3"], "--block 3 does not divide the model's block size 32"),
    (["run", "-p", "hi", "-n", "x"], "--max-tokens needs a whole number"),
    (["run", "-p", "hi", "-s", "0x-1"], "--seed needs a whole number"),  # strtoull took the sign (fuzz_cli_opts)
    (["run", "-p", "hi", "-s", "0x"], "--seed needs a whole number"),
    (["run", "-p", "hi", "-s", "0x0x1"], "--seed needs a whole number"),  # strtoull took a second 0x (fuzz_cli_opts)
    (["run", "-p", "hi", "--ar=1"], "--ar takes no value"),
    (["run", "-p", ""], "the prompt is empty"),
    (["run", "-p"], "needs a value"),
    (["chat", "--top-k", "-3"], "--top-k needs a whole number"),
    (["synth", "-o", "x.gguf", "--preset", "huge"], "unknown preset 'huge'"),
    (["synth", "-o", "x.gguf", "--layers", "0"], "--layers 0 is out of range"),
    (["serve", "--port", "70000"], "--port 70000 is out of range"),
    (["ppl", "-c", "5", "--ids", "1,2"], "--ctx-size 5 is not an even window"),
    (["quantize", "a.gguf", "b.gguf", "--type", "q3"], "--type 'q3'"),
])
def test_usage_errors_exit_2(args, words, tmp_path):
    r = clover(*args, cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.count("\n") == 1 and words in r.stderr, r.stderr
    assert "synth: synth" not in r.stderr


def answer(*args):
    r = clover("run", "--json", "--no-visual", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_llama_cpp_names_are_the_long_ones():
    """-p -n -c -t -s --temp and the --name=value form select --prompt --max-tokens --ctx-size --threads
    --seed --temperature: each spelling gives the long one's answer, for two seeds whose answers differ
    from each other and from the greedy one (found among a few seeds, then required), so an alias that
    selects another option, or none, gives another answer. (-c and -t change no answer here: -c's limit
    is test_ctx_size_aliases_limit_the_context's.)"""
    prompt, n, sampling = "Once upon a time", 24, ["--top-k", 0, "--top-p", 1.0, "--ignore-eos"]

    def short(seed, temp):
        return answer("-p", prompt, "-n", n, "-c", 512, "-t", 1, "-s", seed, "--temp", temp, *sampling)["ids"]

    def long(seed, temp):
        return answer("--prompt", prompt, "--max-tokens", n, "--ctx-size", 512, "--threads", 1, "--seed", seed,
                      "--temperature", temp, *sampling)["ids"]

    def eq(seed, temp):
        return answer(f"--prompt={prompt}", f"--max-tokens={n}", "--ctx-size=512", f"--seed={seed}",
                      f"--temperature={temp}", "--top-k=0", "--top-p=1", "--ignore-eos")["ids"]

    greedy = long(3, 0)
    # The trained default model is confident: two given seeds may well give the same answer (3 and 4 do
    # at -n 8 on "hi"), so the seeds are chosen here rather than assumed to differ.
    sampled, s1, s2 = {}, None, None
    for seed in range(3, 19):
        sampled[seed] = long(seed, 1.0)
        if s1 is None and sampled[seed] != greedy:
            s1 = seed
        elif s1 is not None and sampled[seed] != sampled[s1]:
            s2 = seed
            break
    assert s1 is not None and s2 is not None, "no two seeds in 3..18 answer differently at temperature 1"
    for seed in (s1, s2):
        want = sampled[seed]
        assert len(want) == n
        assert short(seed, 1.0) == want and eq(seed, 1.0) == want, seed
    assert short(s1, 0) == greedy  # --temp 0 is greedy, as --temperature 0


def test_ctx_size_aliases_limit_the_context():
    for name in ("-c", "--ctx-size", "--max-context", "--ctx"):
        r = answer("--ar", "--ids", "1,2,3,4", name, 16, "-n", 100, "--ignore-eos")
        # 4 prompt ids + 12 committed answer tokens fill 16; the 13th is emitted, never committed
        assert r["finish_reason"] == "length" and len(r["ids"]) == 13, (name, r["finish_reason"], len(r["ids"]))


def test_prompt_file(tmp_path):
    f = tmp_path / "prompt.txt"
    f.write_text("hi")
    assert answer("-f", f, "-n", 4)["ids"] == answer("-p", "hi", "-n", 4)["ids"]


def test_diffusion_options_on_an_ar_model_said_once(tmp_path):
    ar = tmp_path / "ar.gguf"
    assert clover("synth", "-o", ar, "--no-diffusion").returncode == 0
    r = clover("run", "-m", ar, "-p", "hi", "-n", 2, "--block", 4, "--threshold", 0.5, "--no-visual")
    assert r.returncode == 0, r.stderr
    notes = [l for l in r.stderr.splitlines() if "block diffusion only" in l]
    assert len(notes) == 1 and "--block" in notes[0] and "autoregressive" in notes[0], r.stderr
    r = clover("run", "-p", "hi", "-n", 2, "--min-p", 0.05, "--no-visual")
    assert r.returncode == 0 and r.stderr.count("--min-p") == 1, r.stderr


def test_rule_causal_at_threshold_one_is_autoregressive(tmp_path):
    """--rule causal --threshold 1: no row is ever above the threshold, so every row is the
    causal fallback's autoregressive step: the answer is --ar's (f32 weights, whole blocks)."""
    m = tmp_path / "tiny.gguf"
    assert clover("synth", "-o", m).returncode == 0
    base = ["run", "-m", m, "--ids", "5,6,7,8", "-n", 64, "--ignore-eos", "--json", "--no-visual"]
    r = clover(*base, "--rule", "causal", "--threshold", 1)
    ar = clover(*base, "--ar")
    assert r.returncode == 0 and ar.returncode == 0, r.stderr + ar.stderr
    c, a = json.loads(r.stdout), json.loads(ar.stdout)
    assert c["ids"] == a["ids"] and c["mode"] == "diffusion"
    assert c["stats"]["causal_steps"] == c["stats"]["passes"] == 64
    t = json.loads(clover(*base, "--rule", "threshold", "--threshold", 1).stdout)
    assert t["stats"]["causal_steps"] == 0
    assert "decode rule" in clover("info", "-m", m).stdout
    assert "--rule" in clover("run", "--help").stdout


@pytest.mark.parametrize("cmd", ["run", "chat"])
def test_help_lists_the_aliases(cmd):
    r = clover(cmd, "--help")
    assert r.returncode == 0
    for s in ("-n, --max-tokens", "-c, --ctx-size", "-t, --threads", "-s, --seed", "-ngl, --gpu-layers",
              "-b, --batch-size", "-m, --model", "--temperature, --temp", "--repetition-penalty, --repeat-penalty"):
        assert s in r.stdout, s


def test_prompt_longer_than_context_refused_up_front():
    r = clover("run", "--ar", "--ids", ",".join(["1"] * 300), "-c", 256, "-n", 4)
    assert r.returncode == 1, r.stderr
    assert "the prompt is 300 tokens, more than the context of 256 tokens" in r.stderr
    assert "-c/--ctx-size" in r.stderr and r.stderr.count("\n") == 1


def sanitized_build():
    cache = cp.BUILD / "CMakeCache.txt"
    return cache.exists() and "CLOVER_SANITIZE:BOOL=ON" in cache.read_text()


def test_full_default_context_ends_as_length():
    """The issue's case on the 4,096-token default context: --max-tokens 5000
    --ignore-eos ends as length, exit 0, with its note. A prompt 96 tokens
    short of the context brings its end near (decoding 4,000 tokens would
    cost CI a minute), in both modes. Under the sanitizers (a -O0 build, ~15x
    slower) the same case runs on a 1,024-token context (-c)."""
    ctx, extra = (1024, ["-c", 1024]) if sanitized_build() else (4096, [])
    ids = ",".join(str(1 + i % 200) for i in range(ctx - 96))
    r = clover("run", "--ar", "--ids", ids, "--max-tokens", 5000, "--ignore-eos", "--json", *extra, timeout=300)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    # the prompt + 96 committed answer tokens fill the context; the 97th is emitted, never committed
    assert j["finish_reason"] == "length" and j["committed_after"] == ctx and len(j["ids"]) == 97, r.stderr
    assert f"end of the context ({ctx} tokens held)" in r.stderr
    r = clover("run", "--ids", ids, "--max-tokens", 5000, "--ignore-eos", "--json", *extra, timeout=300)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    # 32-row blocks: 3 fit after the prompt (filling the context), a 4th would not
    assert j["finish_reason"] == "length" and j["blocks"] == 3 and len(j["ids"]) == 96, r.stderr
    assert j["committed_after"] == ctx and "end of the context" in r.stderr


def test_chat_suggests_reset():
    """Turn 2 fills the 150-token context (ends as length, with the hint);
    turn 3 does not fit (refused, with the hint); after /reset turn 4 runs."""
    r = clover("chat", "--ar", "-c", 150, "-n", 60, "--ignore-eos", "--no-visual",
               input="hello\nhow are you today, my friend?\nagain\n/reset\nhi\n/stats\n")
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 2, r.stderr
    assert "stopped at the end of the context" in lines[0] and "/reset" in lines[0]
    assert "more than the context of 150 tokens" in lines[1] and "/reset" in lines[1]
    assert "0 reused from the session (it held 0)" in r.stdout  # the turn after /reset started afresh


def test_ctrl_c_exits_130_with_summary():
    import signal
    import time
    p = subprocess.Popen([str(CLOVER), "run", "-p", "hi", "-n", "100000", "-c", "100000", "--ignore-eos", "--ar",
                          "--no-visual"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    assert err.startswith("[cancelled, "), err


@pytest.mark.parametrize("env,plain", [({"TERM": "xterm-256color"}, False), ({"TERM": "xterm-256color", "NO_COLOR": "1"}, True),
                                       ({"TERM": "dumb"}, True)])
def test_no_color_and_dumb_terminals(env, plain):
    """On a terminal (a pty) the answer is drawn with escape sequences, unless
    NO_COLOR is set or TERM is dumb: then the bytes are plain text."""
    import os
    import pty
    master, slave = pty.openpty()
    e = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    e.update(env)
    p = subprocess.Popen([str(CLOVER), "run", "-p", "hi", "-n", "40"], stdin=subprocess.DEVNULL, stdout=slave,
                         stderr=subprocess.DEVNULL, env=e)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert p.wait(timeout=60) == 0
    assert (b"\x1b[" in out) != plain, out[:200]


@pytest.mark.parametrize("mode", [["--ar"]])
def test_prefill_progress_on_a_terminal_changes_nothing(mode):
    """A 2,100-token prompt with stderr on a terminal shows the prompt's
    progress; the answer and the reported statistics are those of the same
    run with stderr on a pipe (no progress)."""
    import os
    import pty
    ids = ",".join(str(1 + i % 200) for i in range(2100))
    args = [str(CLOVER), "run", *mode, "--ids", ids, "-n", "8", "--json", "--ignore-eos"]
    plain = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0, plain.stderr
    master, slave = pty.openpty()
    env = dict(os.environ, TERM="xterm")
    env.pop("NO_COLOR", None)
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    err = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        err += chunk
    out, _ = p.communicate(timeout=300)
    os.close(master)
    assert p.returncode == 0, err
    assert b"prompt: 512 of 2100 tokens" in err and b"prompt: 2048 of 2100 tokens" in err, err[-300:]
    a, b = json.loads(plain.stdout), json.loads(out)
    assert a["ids"] == b["ids"] and a["confidences"] == b["confidences"]
    assert b["stats"]["prompt_tokens"] == 2100 and b["stats"]["reused_tokens"] == 0
