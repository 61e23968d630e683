"""`clover run` with text, `clover chat` through pipes, and `clover tokenize`,
as a user runs them, on the golden fixtures converted with `clover convert`.

Expected values come from elsewhere:
  * the generated ids are the reference's (tests/fixtures/*/manifest.json,
    tools/reference), and the text must be those ids decoded by Hugging Face
    `tokenizers` (pinned in tests/requirements.txt) from the fixture's
    tokenizer.json -- the final stop id left out, as SPEC.md 3 item 3 says;
  * the prompt ids must be the reference's prompt ids, which it tokenized from
    the chat template's text with Hugging Face;
  * the chat prompts of later turns must be the reference's prefix_reuse
    request (prompt + answer + a follow-up turn), whose reuse count it gives;
  * `clover tokenize` must agree with Hugging Face on the fixture tokenizer,
    through the model (GGUF) and through tokenizer.json.
Also --help of every command, and bad input: one line on stderr, exit 1
(the model or the request) or 2 (usage).

Needs the build's `clover` binary (CLOVER_BUILD_DIR) and the .venv tools."""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

import tokenizers  # noqa: E402 (a missing test tool is a failure, not a skip)
from tokenizers import Tokenizer  # noqa: E402

SOURCE = Path(os.environ.get("CLOVER_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BUILD = Path(os.environ.get("CLOVER_BUILD_DIR", "build"))
CLOVER = BUILD / "clover"
FIXTURES = SOURCE / "tests" / "fixtures"
TOKENIZER_JSON = FIXTURES / "tiny_clover" / "hf" / "tokenizer.json"
CHAT_PROMPT = re.compile(r"^<\|im_start\|>user\n(.*)<\|im_end\|>\n<\|im_start\|>assistant\n<think>\n$", re.S)


def run(*args, check=True, stdin=None):
    r = subprocess.run([str(CLOVER), *map(str, args)], capture_output=True, timeout=300,
                       input=stdin if stdin is not None else b"", )
    if check:
        assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r


def manifest(name):
    return json.loads((FIXTURES / name / "manifest.json").read_text())


@pytest.fixture(scope="module", autouse=True)
def need_binary():
    if not CLOVER.exists():
        pytest.fail(f"{CLOVER} is missing: build the clover target first")


@pytest.fixture(scope="module")
def hf():
    return Tokenizer.from_file(str(TOKENIZER_JSON))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    out = {}
    for name in ("tiny_clover", "tiny_ar"):
        path = d / f"{name}.gguf"
        run("convert", FIXTURES / name / "hf", "-o", path, "--type", "f32", "--threads", "1")
        out[name] = path
    return out


def user_message(case):
    m = CHAT_PROMPT.match(case["prompt_text"])
    assert m, case["prompt_text"]
    return m.group(1)


def option_args(o):
    args = ["--max-tokens", o["max_tokens"], "--seed", o["seed"], "--threads", 2]
    if o["threshold"] is not None:
        args += ["--threshold", repr(o["threshold"])]
    if o["block_size"] is not None:
        args += ["--block", o["block_size"]]
    if o["temperature"] > 0:
        args += ["--temperature", repr(o["temperature"]), "--top-k", o["top_k"], "--top-p", repr(o["top_p"])]
    if o["suppress"]:
        args += ["--suppress", ",".join(map(str, o["suppress"]))]
    if o["ignore_eos"]:
        args += ["--ignore-eos"]
    return args


def answer_ids(exp):
    """The ids that have text: a final stop id is not part of the answer."""
    toks = exp["tokens"]
    return toks[:-1] if exp["finish_reason"] == "stop" else toks


def split_answer(text, thinking=True):
    """TRUNK.md 6: reasoning before the first </think> (newlines trimmed), content after it."""
    if "</think>" in text:
        r, c = text.split("</think>", 1)
        return r.strip("\n"), c.lstrip("\n")
    return (text.strip("\n"), "") if thinking else ("", text)


CASES = [(f, c["name"]) for f in ("tiny_clover", "tiny_ar") for c in manifest(f)["generate"]
         if not c.get("record_overrides")]


@pytest.mark.parametrize("fixture,name", CASES)
def test_run_text_matches_the_reference_decoded_by_hf(models, hf, fixture, name):
    c = next(c for c in manifest(fixture)["generate"] if c["name"] == name)
    r = run("run", "-m", models[fixture], "-p", user_message(c), "--json", *option_args(c["options"]))
    assert r.stderr == b""
    got = json.loads(r.stdout)
    exp = c["expected"]
    assert got["prompt_ids"] == c["prompt_ids"]
    assert got["ids"] == exp["tokens"]
    assert got["finish_reason"] == exp["finish_reason"]
    text = hf.decode(answer_ids(exp), skip_special_tokens=False)
    assert got["text"] == text
    reasoning, content = split_answer(text)
    assert (got["reasoning"], got["content"]) == (reasoning, content)
    assert got["think_closed"] == ("</think>" in text)


@pytest.mark.parametrize("flags", [
    ["--no-penalties"],
    ["--presence-penalty", "0", "--frequency-penalty", "0", "--repetition-penalty", "1", "--length-penalty", "0",
     "--think-end-bias", "0"],
])
def test_penalty_options(models, hf, flags):
    """The reference's no_penalties case ran with the record's penalties
    zeroed; the same through the CLI's overrides."""
    c = next(c for c in manifest("tiny_clover")["generate"] if c["name"] == "no_penalties")
    assert c["record_overrides"] == {"presence_penalty": 0.0, "frequency_penalty": 0.0, "repetition_penalty": 1.0,
                                     "length_penalty": 0.0, "think_end_bias": 0.0}
    got = json.loads(run("run", "-m", models["tiny_clover"], "-p", user_message(c), "--json", *flags,
                         *option_args(c["options"])).stdout)
    assert got["ids"] == c["expected"]["tokens"]
    assert got["text"] == hf.decode(answer_ids(c["expected"]), skip_special_tokens=False)
    # and without the overrides the record's penalties change the answer
    plain = json.loads(run("run", "-m", models["tiny_clover"], "-p", user_message(c), "--json",
                           *option_args(c["options"])).stdout)
    assert plain["ids"] != c["expected"]["tokens"]


def test_streamed_text_is_the_answer(models, hf):
    """Without --json the answer is streamed on stdout (then a newline) and a
    summary with the passes per block follows on stderr."""
    c = next(c for c in manifest("tiny_clover")["generate"] if c["name"] == "greedy_default")
    r = run("run", "-m", models["tiny_clover"], "-p", user_message(c), *option_args(c["options"]))
    text = hf.decode(answer_ids(c["expected"]), skip_special_tokens=False)
    assert r.stdout.decode() == text + "\n"
    err = r.stderr.decode()
    assert len(err.splitlines()) == 1
    per_block = " ".join(map(str, c["expected"]["passes_per_block"]))
    assert f"passes per block {per_block}" in err and "tok/s" in err and "stop, 24 tokens" in err


def test_prompt_on_stdin_and_raw_prompts(models):
    c = next(c for c in manifest("tiny_clover")["generate"] if c["name"] == "max_tokens_13")
    opts = option_args(c["options"])
    piped = json.loads(run("run", "-m", models["tiny_clover"], "--json", *opts,
                           stdin=user_message(c).encode()).stdout)
    assert piped["prompt_ids"] == c["prompt_ids"] and piped["ids"] == c["expected"]["tokens"]
    # --raw: the text is tokenized as it is, special tokens included
    raw = json.loads(run("run", "-m", models["tiny_clover"], "--raw", "-p", c["prompt_text"], "--json",
                         *opts).stdout)
    assert raw["prompt_ids"] == c["prompt_ids"] and raw["ids"] == c["expected"]["tokens"]
    assert "reasoning" not in raw  # no chat template: no split


def test_think_off_and_system(models, hf):
    """The prompt of --no-think and --system, against Hugging Face's ids of
    the text TRUNK.md 6 gives for them."""
    got = json.loads(run("run", "-m", models["tiny_clover"], "-p", "Hi!", "--no-think", "--system", "Be brief.",
                         "--max-tokens", 8, "--json").stdout)
    text = ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert got["prompt_ids"] == hf.encode(text).ids
    # thinking off: without </think> the whole answer is content
    if "</think>" not in got["text"]:
        assert got["reasoning"] == "" and got["content"] == got["text"]


def test_skip_special(models, hf):
    c = next(c for c in manifest("tiny_clover")["generate"] if c["name"] == "greedy_default")
    got = json.loads(run("run", "-m", models["tiny_clover"], "-p", user_message(c), "--json", "--skip-special",
                         *option_args(c["options"])).stdout)
    assert got["ids"] == c["expected"]["tokens"]
    assert got["text"] == hf.decode(answer_ids(c["expected"]), skip_special_tokens=True)
    assert got["text"] != hf.decode(answer_ids(c["expected"]), skip_special_tokens=False)


def test_ids_mode_has_the_text_too(models, hf):
    c = next(c for c in manifest("tiny_clover")["generate"] if c["name"] == "threshold_0")
    got = json.loads(run("run", "-m", models["tiny_clover"], "--ids", ",".join(map(str, c["prompt_ids"])),
                         "--json", *option_args(c["options"])).stdout)
    assert got["text"] == hf.decode(answer_ids(c["expected"]), skip_special_tokens=False)


def test_default_model_text():
    got = json.loads(run("run", "-p", "Hello", "--max-tokens", 4, "--json", "--threads", 2).stdout)
    assert got["mode"] == "diffusion" and isinstance(got["text"], str) and len(got["ids"]) <= 4
    assert run("tokenize", "Hello").stdout == b"39,68,75,75,78\n"  # byte-level: GPT-2's byte order


# ---------------------------------------------------------------- chat through pipes

def test_chat_turns_reuse_the_committed_prefix(models, hf):
    """Two turns of `clover chat` read from a pipe: the first is
    greedy_default, the second the reference's prefix_reuse request (its
    prompt is the first prompt + the answer + the follow-up turn), which
    reuses 47 committed tokens and answers the reference's tokens."""
    m = manifest("tiny_clover")
    first = next(c for c in m["generate"] if c["name"] == "greedy_default")
    pr = m["prefix_reuse"]
    assert pr["first"] == "greedy_default"
    follow_up = CHAT_PROMPT.match(hf.decode(pr["second_prompt_ids"][len(first["prompt_ids"])
                                                                     + len(first["expected"]["tokens"]) + 1:],
                                            skip_special_tokens=False)).group(1)
    turns = f"{user_message(first)}\n{follow_up}\n/stats\n/quit\n".encode()
    r = run("chat", "-m", models["tiny_clover"], "--max-tokens", pr["options"]["max_tokens"], "--threads", 2,
            stdin=turns)
    out = r.stdout.decode()
    a1 = hf.decode(answer_ids(first["expected"]), skip_special_tokens=False)
    a2 = hf.decode(answer_ids(pr["expected"]), skip_special_tokens=False)
    assert out.startswith(a1 + "\n" + a2 + "\n"), out
    exp = pr["expected"]
    n_prompt = len(pr["second_prompt_ids"])
    assert (f"prompt {n_prompt} tokens: {exp['reused_tokens']} reused from the session "
            f"(it held {first['expected']['committed_after']}), {n_prompt - exp['reused_tokens']} committed now") in out
    assert f"answer {len(exp['tokens'])} tokens ({exp['finish_reason']})" in out
    assert f"session      {exp['committed_after']} tokens committed" in out


def test_chat_commands(models):
    r = run("chat", "-m", models["tiny_clover"], "--max-tokens", 8, "--threads", 2,
            stdin=b"/stats\n/think off\n/think\nHi\n/reset\n/stats\n/nope\n/help\n")
    out = r.stdout.decode()
    assert "no answer yet" in out
    assert "thinking off\nthinking off\n" in out
    assert "conversation cleared" in out and "session      0 tokens committed" in out
    assert "unknown command /nope" in out and "/think on|off" in out
    assert r.stderr == b""


def test_chat_on_an_autoregressive_model(models):
    r = run("chat", "-m", models["tiny_ar"], "--max-tokens", 6, "--threads", 2, stdin=b"Hi\nAgain\n/stats\n")
    out = r.stdout.decode()
    assert "mode autoregressive" in out
    # the session holds prompt + answer but its last token: the whole first conversation is reused
    m = re.search(r"prompt (\d+) tokens: (\d+) reused", out)
    assert m and int(m.group(2)) > 0


# ---------------------------------------------------------------- tokenize

TEXTS = [c["text"] for c in json.loads((FIXTURES / "tokenizer" / "manifest.json").read_text())["encode"]
         if c["text"] and not c["text"].startswith("-")] + ["a<|im_start|>b <think>x</think>", "naïve café 😀"]


@pytest.mark.parametrize("source", ["model", "json"])
def test_tokenize_matches_hf(models, hf, source):
    src = ["-m", models["tiny_clover"]] if source == "model" else ["--tokenizer", TOKENIZER_JSON]
    plain = Tokenizer.from_file(str(TOKENIZER_JSON))
    plain.encode_special_tokens = True
    for text in TEXTS:
        want = hf.encode(text).ids
        assert run("tokenize", *src, text).stdout.decode() == ",".join(map(str, want)) + "\n", text
        j = json.loads(run("tokenize", *src, "--json", text).stdout)
        assert j["ids"] == want
        assert j["pieces"] == [hf.decode([i], skip_special_tokens=False) for i in want]
        assert json.loads(run("tokenize", *src, "--json", "--no-special", text).stdout)["ids"] == \
            plain.encode(text).ids, text
        # stdin, byte for byte
        assert run("tokenize", *src, stdin=text.encode()).stdout.decode() == ",".join(map(str, want)) + "\n"
        # and back
        ids = ",".join(map(str, want))
        if want:
            assert run("tokenize", *src, "--decode", ids).stdout.decode() == hf.decode(want,
                                                                                        skip_special_tokens=False)
            assert json.loads(run("tokenize", *src, "--decode", ids, "--json", "--no-special").stdout)["text"] == \
                hf.decode(want, skip_special_tokens=True)


def test_tokenize_decodes_bytes_exactly(models):
    """--decode writes the bytes (a cut UTF-8 character stays cut); --json
    replaces them as Hugging Face's decode does."""
    out = run("tokenize", "-m", models["tiny_clover"], "--decode", "127").stdout
    assert out == b"\xc3"
    assert json.loads(run("tokenize", "-m", models["tiny_clover"], "--decode", "127", "--json").stdout)["text"] == \
        "\ufffd"


# ---------------------------------------------------------------- help and errors

def commands():
    out = run("--help").stdout.decode()
    return re.findall(r"^  (\w+)\s", out.split("commands:", 1)[1], re.M)


def test_every_command_has_help():
    names = commands()
    assert {"run", "chat", "tokenize", "info", "convert", "synth", "ppl"} <= set(names)
    for name in names:
        if name == "version":
            continue
        r = run(name, "--help")
        assert r.stdout.decode().startswith(f"usage: clover {name}"), name
        assert r.stderr == b""


@pytest.mark.parametrize("args,code,words", [
    (["run", "-m", "/nonexistent.gguf", "-p", "hi"], 1, "/nonexistent.gguf"),
    (["chat", "-m", "/nonexistent.gguf"], 1, "/nonexistent.gguf"),
    (["tokenize", "-m", "/nonexistent.gguf", "hi"], 1, "/nonexistent.gguf"),
    (["tokenize", "--tokenizer", "/nonexistent/tokenizer.json", "hi"], 1, "/nonexistent/tokenizer.json"),
    (["run", "--ids", "1,,2"], 2, "--ids"),
    (["run", "--ids", "-3"], 2, "--ids"),
    (["run", "-p", "hi", "--ids", "1"], 2, "once"),
    (["run", "--raw", "--system", "s", "-p", "hi"], 2, "--system"),
    (["run", "-p", "hi", "--temperature", "warm"], 2, "--temperature"),
    (["run", "-p"], 2, "needs a value"),
    (["run"], 2, "no prompt"),
    (["run", "-p", "hi", "--stop", "999999"], 1, "stop ids"),
    (["run", "-p", "hi", "--repetition-penalty", "0"], 1, "repetition_penalty"),
    (["run", "-p", "hi", "--length-penalty-start", "-1"], 2, "--length-penalty-start"),
    (["chat", "--nope", "1"], 2, "unknown option"),
    (["chat", "extra"], 2, "unexpected argument"),
    (["tokenize", "--decode", "1,x"], 2, "--decode"),
    (["tokenize", "--decode", "999999"], 1, "999999"),
    (["tokenize"], 2, "no text"),
    (["tokenize", "a", "b"], 2, "one TEXT"),
    (["tokenize", "-m", "x.gguf", "--tokenizer", "t.json", "hi"], 2, "not both"),
])
def test_errors_are_one_line(args, code, words):
    r = run(*args, check=False)
    assert r.returncode == code, (r.returncode, r.stderr)
    assert r.stdout == b""
    err = r.stderr.decode()
    assert len(err.splitlines()) == 1 and words in err, err
