"""The Python package (python/clover) against independent answers:

 * its ctypes structures against the C compiler's layout of include/clover.h
   (a small C program prints every size and offset);
 * generate() on the golden fixtures (tests/fixtures/*/manifest.json, the
   PyTorch reference): token ids, confidences, passes per block, the score's
   mean NLL and a two-request prefix reuse on one Session;
 * generate() against the `clover` command's answer for the same prompt ids,
   options and seed (`clover run --json`), ids and text, and tokenize() against
   `clover tokenize`;
 * rule= against `clover run --rule` on the demo model (ids, passes,
   causal_steps), None against the command's record default on a model whose
   record names the causal rule, and a bad rule as ValueError;
 * stream() joined equals generate() (same seed, sampling on), stop strings,
   errors as clover.Error with the engine's message, the GIL released during a
   request, and `python -m clover run`.

Runs on the build tree: CLOVER_LIBRARY / CLOVER_BINARY / CLOVER_DEFAULT_MODEL
point the package at BUILD's libclover.so, clover and the tiny model."""
import json
import os
import re
import shutil
import subprocess
import sys
import threading

import pytest

from clover_paths import BUILD, SOURCE, require_command, require_file

FIXTURES = SOURCE / "tests" / "fixtures"
sys.path.insert(0, str(SOURCE / "python"))


@pytest.fixture(scope="module")
def clover():
    os.environ["CLOVER_LIBRARY"] = str(require_file(BUILD / "libclover.so", "the shared library (cmake --build)"))
    os.environ["CLOVER_BINARY"] = str(require_command("clover"))
    os.environ["CLOVER_DEFAULT_MODEL"] = str(require_file(BUILD / "models" / "clover-tiny.gguf", "the tiny model"))
    import clover as mod
    return mod


def cli(*args):
    r = subprocess.run([str(require_command("clover")), *map(str, args)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def manifest(name):
    return json.loads((FIXTURES / name / "manifest.json").read_text())


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    out = {}
    for name in ("tiny_clover", "tiny_ar"):
        out[name] = d / f"{name}.gguf"
        cli("convert", FIXTURES / name / "hf", "-o", out[name], "--type", "f32", "--threads", "1")
    return out


# ---- layout ----

LAYOUT_C = r"""
#include <stddef.h>
#include <stdio.h>
#include "clover.h"
#define S(T) printf("%s size %zu\n", #T, sizeof(T));
#define F(T, f) printf("%s.%s %zu\n", #T, #f, offsetof(T, f));
int main(void) {
@BODY@
    return 0;
}
"""


def test_ctypes_structures_match_the_header(clover, tmp_path):
    from clover import _lib as L
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        pytest.fail("no C compiler (cc) to check the structure layout with")
    lines = []
    for st in L.STRUCTS:
        lines.append(f"S({st.__name__})")
        for name, *_ in st._fields_:
            lines.append(f"F({st.__name__}, {'pass' if name == 'pass_' else name})")
    (tmp_path / "layout.c").write_text(LAYOUT_C.replace("@BODY@", "\n".join(lines)))
    subprocess.run([cc, "-std=c11", "-I", str(SOURCE / "include"), "-o", str(tmp_path / "layout"),
                    str(tmp_path / "layout.c")], check=True, timeout=120)
    got = subprocess.run([str(tmp_path / "layout")], capture_output=True, text=True, check=True).stdout
    c_side = dict(line.rsplit(" ", 1) for line in got.splitlines())
    import ctypes
    checked = 0
    for st in L.STRUCTS:
        assert int(c_side[f"{st.__name__} size"]) == ctypes.sizeof(st), st.__name__
        for name, *_ in st._fields_:
            key = f"{st.__name__}.{'pass' if name == 'pass_' else name}"
            assert int(c_side[key]) == getattr(st, name).offset, key
            checked += 1
    assert checked > 150


# ---- the golden fixtures ----

def fixture_case(m, name):
    return next(c for c in m["generate"] if c["name"] == name)


def generate_case(model, c, session=None):
    o = c["options"]
    target = session or model
    text = target.generate(c["prompt_ids"], max_tokens=o["max_tokens"], temperature=o["temperature"],
                           top_k=o["top_k"], top_p=o["top_p"], seed=o["seed"], threshold=o["threshold"],
                           ignore_eos=o["ignore_eos"])
    return text, target.last_stats


def check(stats, exp):
    assert stats.ids == exp["tokens"]
    assert stats.finish_reason == exp["finish_reason"]
    assert stats.prompt_tokens == exp["prompt_tokens"]
    assert max(abs(a - b) for a, b in zip(stats.confidences, exp["confidences"])) <= 1e-5
    if "passes_per_block" in exp:
        assert stats.passes_per_block == exp["passes_per_block"]


DIFFUSION_CASES = [c["name"] for c in manifest("tiny_clover")["generate"]
                   if not c["record_overrides"] and not c["options"]["suppress"] and c["options"]["block_size"] is None]


@pytest.mark.parametrize("name", DIFFUSION_CASES)
def test_generate_block_diffusion_matches_the_reference(clover, models, name):
    m = clover.Model(models["tiny_clover"], threads=2)
    text, stats = generate_case(m, fixture_case(manifest("tiny_clover"), name))
    assert stats.mode == "diffusion"
    check(stats, fixture_case(manifest("tiny_clover"), name)["expected"])


def test_generate_autoregressive_matches_the_reference(clover, models):
    m = clover.Model(models["tiny_ar"], threads=2)
    for c in manifest("tiny_ar")["generate"]:
        if c["options"]["suppress"] or c["options"]["block_size"] is not None:
            continue
        _, stats = generate_case(m, c)
        assert stats.mode == "ar"
        check(stats, c["expected"])


def test_score_matches_the_reference_nll(clover, models):
    m = clover.Model(models["tiny_clover"], threads=2)
    nll = manifest("tiny_clover")["nll"]
    assert abs(m.score(nll["ids"]) - nll["mean_nll"]) <= 1e-4


def test_session_reuses_the_prefix_as_the_reference(clover, models):
    m = clover.Model(models["tiny_clover"], threads=2)
    man = manifest("tiny_clover")
    pr = man["prefix_reuse"]
    s = m.session()
    generate_case(m, fixture_case(man, pr["first"]), session=s)
    _, stats = generate_case(m, {"prompt_ids": pr["second_prompt_ids"], "options": pr["options"]}, session=s)
    check(stats, pr["expected"])
    assert stats.reused_tokens == pr["expected"]["reused_tokens"]
    s.close()


# ---- the CLI's answers ----

@pytest.mark.parametrize("opts", [dict(seed=5, temperature=0.7, top_k=0, top_p=1.0),
                                  dict(seed=11, temperature=1.0, top_k=20, top_p=0.9)])
def test_generate_equals_the_command_line(clover, opts):
    got = json.loads(cli("run", "-p", "Tell me about rivers", "--max-tokens", 40, "--json", "--threads", 2,
                         "--seed", opts["seed"], "--temperature", opts["temperature"], "--top-k", opts["top_k"],
                         "--top-p", opts["top_p"]))
    m = clover.Model(threads=2)
    text = m.generate(got["prompt_ids"], max_tokens=40, **opts)
    assert m.last_stats.ids == got["ids"]
    assert text == got["text"]
    assert m.last_stats.passes_per_block == got["passes_per_block"]


def test_tokenize_equals_the_command_line(clover):
    m = clover.Model(threads=1)
    for text in ["Hello world", "<|im_start|>user\nhé ü 🙂<|im_end|>", "  spaces\t\ttabs\n\n"]:
        want = [int(x) for x in cli("tokenize", text).strip().split(",")]
        assert m.tokenize(text, special=True) == want
        assert m.detokenize(want) == text
        plain = [int(x) for x in cli("tokenize", "--no-special", text).strip().split(",")]
        assert m.tokenize(text) == plain


# ---- the decoding rule (rule=) ----

DEMO = SOURCE / "models" / "clover-demo-q8_0.gguf"


@pytest.mark.parametrize("rule", ["threshold", "causal"])
def test_rule_matches_the_command_line(clover, rule):
    # The trained demo model (the confident rows make the two rules differ), through
    # `clover run --rule` (the CLI's own option parsing and report) and rule=.
    demo = require_file(DEMO, "the demo model")
    opts = dict(seed=7, temperature=0.7, threshold=0.9)
    got = json.loads(cli("run", "-m", demo, "-p", "The sky is blue because", "--max-tokens", 48, "--json",
                         "--threads", 2, "--seed", opts["seed"], "--temperature", opts["temperature"],
                         "--threshold", opts["threshold"], "--rule", rule))
    m = clover.Model(demo, threads=2)
    text = m.generate(got["prompt_ids"], max_tokens=48, rule=rule, **opts)
    s = m.last_stats
    assert s.ids == got["ids"] and text == got["text"]
    assert s.passes_per_block == got["passes_per_block"] and s.passes == got["stats"]["passes"]
    assert s.causal_steps == got["stats"]["causal_steps"]
    if rule == "causal":
        assert s.causal_steps > 0  # some rows fell back to the causal pick at threshold 0.9
        assert m.generate(got["prompt_ids"], max_tokens=48, rule="causal_fallback", **opts) == text
        assert m.last_stats.causal_steps == s.causal_steps
        assert "".join(m.stream(got["prompt_ids"], max_tokens=48, rule=rule, **opts)) == text
        assert m.last_stats.causal_steps == s.causal_steps
        m.chat([{"role": "user", "content": "Hi"}], max_tokens=16, rule=rule, ignore_eos=True)
        assert m.last_stats.causal_steps > 0
        # the demo model's record is the causal-fallback rule: None keeps it
        assert m.info["record"]["decode_rule"] == "causal_fallback"
        assert m.generate(got["prompt_ids"], max_tokens=48, **opts) == text
        assert m.last_stats.ids == s.ids and m.last_stats.causal_steps == s.causal_steps
    else:
        assert s.causal_steps == 0


@pytest.fixture(scope="module")
def causal_record_model(tmp_path_factory):
    """The tiny_clover fixture converted with clover.decode_rule = causal_fallback in its record."""
    d = tmp_path_factory.mktemp("causal")
    shutil.copytree(FIXTURES / "tiny_clover" / "hf", d / "hf")
    cfg = json.loads((d / "hf" / "config.json").read_text())
    cfg["block_diffusion"]["decode_rule"] = "causal_fallback"
    (d / "hf" / "config.json").write_text(json.dumps(cfg))
    cli("convert", d / "hf", "-o", d / "causal.gguf", "--type", "f32", "--threads", "1")
    return d / "causal.gguf"


def test_rule_none_keeps_the_models_default(clover, causal_record_model):
    m = clover.Model(causal_record_model, threads=2)
    assert m.info["record"]["decode_rule"] == "causal_fallback"
    prompt = fixture_case(manifest("tiny_clover"), DIFFUSION_CASES[0])["prompt_ids"]
    kw = dict(max_tokens=24, temperature=0.8, seed=3, ignore_eos=True)
    # the command without --rule takes the record's rule: the reference for rule=None
    want = json.loads(cli("run", "-m", causal_record_model, "--ids", ",".join(map(str, prompt)),
                          "--max-tokens", 24, "--temperature", 0.8, "--seed", 3, "--ignore-eos", "--json",
                          "--threads", 2))
    m.generate(prompt, **kw)
    default = m.last_stats
    assert default.ids == want["ids"] and default.causal_steps == want["stats"]["causal_steps"] > 0
    m.generate(prompt, rule="causal", **kw)
    assert m.last_stats.ids == default.ids and m.last_stats.causal_steps == default.causal_steps
    m.generate(prompt, rule="threshold", **kw)
    assert m.last_stats.causal_steps == 0
    # the record's causal rule gives way where it cannot run; asking for it there is refused
    m.generate(prompt, mode="lossless", **kw)
    with pytest.raises(clover.Error, match="lossless"):
        m.generate(prompt, mode="lossless", rule="causal", **kw)


def test_a_bad_rule_raises_value_error(clover):
    m = clover.Model(threads=1)
    for bad in ("Causal", "fallback", "", 2):
        with pytest.raises(ValueError, match="threshold, causal or causal_fallback"):
            m.generate("x", max_tokens=4, rule=bad)
    with pytest.raises(ValueError, match="'sideways'"):
        list(m.stream("x", max_tokens=4, rule="sideways"))
    with pytest.raises(ValueError, match="causal_fallback"):
        m.chat([{"role": "user", "content": "Hi"}], max_tokens=4, rule="x")
    assert m.generate("x", max_tokens=4, rule="causal") is not None  # the model still works afterwards


# ---- streaming, stops, chat, errors, threads ----

def test_stream_joined_equals_generate(clover):
    m = clover.Model(threads=2)
    kw = dict(max_tokens=70, temperature=0.9, top_k=30, top_p=0.95, seed=1234, ignore_eos=True)
    text = m.generate("Once upon a time", **kw)
    ids = m.last_stats.ids
    pieces = list(m.stream("Once upon a time", **kw))
    assert "".join(pieces) == text
    assert m.last_stats.ids == ids
    assert len(pieces) >= 2  # 70 tokens over blocks of 32: at least one piece per block
    ar = m.generate("Once upon a time", mode="ar", **kw)
    assert "".join(m.stream("Once upon a time", mode="ar", **kw)) == ar


def test_stop_strings_cut_the_answer(clover):
    m = clover.Model(threads=2)
    kw = dict(max_tokens=60, temperature=1.0, seed=3, ignore_eos=True)
    full = m.generate("abc", **kw)
    stop = full[10:12]
    assert len(stop) == 2
    cut = m.generate("abc", stop=[stop], **kw)
    assert cut == full[:full.index(stop)]
    assert "".join(m.stream("abc", stop=[stop], **kw)) == cut
    assert m.last_stats.finish_reason == "stop"


def test_json_schema_answers_validate(clover):
    # The tiny model's answer under a schema is a JSON document the schema
    # accepts, by the jsonschema package (independent of the engine's grammar);
    # a schema the compiler refuses is clover.Error naming the construct.
    jsonschema = pytest.importorskip("jsonschema")
    m = clover.Model(threads=2)
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                               "n": {"type": "integer"}},
              "required": ["name", "n"], "additionalProperties": False}
    for mode in ("diffusion", "ar"):
        text = m.generate("abc", max_tokens=96, mode=mode, temperature=1.0, seed=5, json_schema=schema)
        jsonschema.validate(json.loads(text), schema)
        assert "".join(m.stream("abc", max_tokens=96, mode=mode, temperature=1.0, seed=5,
                                json_schema=json.dumps(schema))) == text
    with pytest.raises(clover.Error, match="patternProperties"):
        m.generate("abc", max_tokens=8, json_schema={"type": "object", "patternProperties": {"a": {}}})


def test_chat_renders_the_template_and_reuses_the_session(clover):
    m = clover.Model(threads=2)
    msgs = [{"role": "user", "content": "Hi"}]
    rendered = m.render_chat(msgs)
    assert rendered == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n"
    reply = m.chat(msgs, max_tokens=8, ignore_eos=True)
    assert reply["role"] == "assistant" and set(reply) == {"role", "content", "reasoning_content"}
    first_prompt = m.last_stats.prompt_tokens
    m.chat(msgs + [reply, {"role": "user", "content": "More"}], max_tokens=8, ignore_eos=True)
    # the first turn's prompt up to its generation prompt (the snapshot), at least
    base = len(m.tokenize(m.render_chat(msgs, add_generation_prompt=False), special=True))
    assert first_prompt > base and m.last_stats.reused_tokens >= base


def test_errors_carry_the_engine_message(clover, tmp_path):
    with pytest.raises(clover.Error) as e:
        clover.Model(tmp_path / "missing.gguf")
    assert "missing.gguf" in str(e.value) and e.value.code < 0
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 20)
    with pytest.raises(clover.Error):
        clover.Model(bad)
    m = clover.Model(threads=1)
    with pytest.raises(clover.Error, match=r"threshold"):
        m.generate("x", threshold=3.0)
    with pytest.raises(clover.Error, match=r"mode"):
        m.generate("x", mode="sideways")
    with pytest.raises(clover.Error):
        m.score([1])
    assert m.generate("x", max_tokens=4) is not None  # the model still works afterwards


def test_the_gil_is_released_during_a_request(clover):
    m = clover.Model(threads=1)
    ticks = [0]
    seen = {}
    done = threading.Event()

    def work():
        seen["before"] = ticks[0]
        m.generate("go", max_tokens=200, ignore_eos=True)
        seen["after"] = ticks[0]
        done.set()

    t = threading.Thread(target=work)
    t.start()
    while not done.is_set():
        ticks[0] += 1
    t.join()
    assert seen["after"] > seen["before"]  # this thread ran while the engine worked


def test_info_describes_the_model(clover):
    m = clover.Model(threads=1)
    i = m.info
    assert i["architecture"] == "qwen35moe" and i["name"] == "clover-tiny"
    assert i["record"]["block_size"] == 32 and i["backend"] == "cpu"
    assert re.fullmatch(r"[GA]+", i["layer_kinds"]) and len(i["layer_kinds"]) == i["n_layer"]


def test_python_m_clover_runs_the_command(clover):
    env = dict(os.environ, PYTHONPATH=str(SOURCE / "python"))
    args = ["run", "-p", "Hi", "--max-tokens", "12", "--seed", "2", "--temperature", "0.5", "--json"]
    r = subprocess.run([sys.executable, "-m", "clover", *args], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ids"] == json.loads(cli(*args))["ids"]
    r = subprocess.run([sys.executable, "-m", "clover", "run", "--no-such-option"], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 2 and "no-such-option" in r.stderr
