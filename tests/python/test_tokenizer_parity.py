"""
Parity of clover's tokenizer (src/text, driven through tests/tools/tokenize_tool.c)
with Hugging Face `tokenizers` (pinned in tests/requirements.txt), an
implementation written independently of clover, on Qwen3's real
tokenizer.json (151k tokens) and on a copy whose Split pattern is Qwen3.5's
(TRUNK.md section 6: \\p{M} joins the letters).

Checked, for a corpus of awkward strings and a few thousand seeded random
strings mixing the same classes:
  * encode gives HF's ids, with special tokens matched (HF's default) and not
    (HF's `encode_special_tokens = True`);
  * decode gives HF's text, and that text is the input in NFC (Python's
    unicodedata) -- a round trip;
  * the stream decoder only ever emits valid UTF-8, and its concatenated
    output equals HF's decode (Rust's from_utf8_lossy) also for random id
    sequences that cut characters between byte tokens;
  * every assigned code point, in contexts where its class decides the
    split and NFC may compose or reorder it, gives HF's ids;
  * the same files converted to GGUF metadata (with llama.cpp's `gguf`
    package) load through clover's GGUF path and give the same ids;
  * bytes that are not UTF-8 (which HF cannot take) round-trip exactly;
  * added-token options (lstrip, rstrip, single_word, normalized) and the
    GPT-2 ByteLevel regex, on modified copies, against HF again.

HF's NFC tables are older than Unicode 11 for some combining marks (51 code
points such as U+07FD, U+1ABF): for them HF's normalizer disagrees with
Python's unicodedata, and clover (utf8proc) sides with unicodedata. Strings
where HF's NFC and unicodedata's NFC differ are left out and counted.
"""
import copy
import json
import os
import random
import subprocess
import unicodedata
from pathlib import Path

import pytest

import tokenizers  # noqa: F401 (a missing test tool is a failure, not a skip)
from tokenizers import Tokenizer

from clover_paths import shared_file

SOURCE = Path(os.environ.get("CLOVER_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BUILD = Path(os.environ.get("CLOVER_BUILD_DIR", SOURCE / "build"))
QWEN3_JSON = "data/qwen3-tokenizer/tokenizer.json"  # under the shared directory (clover_paths.SHARED)
QWEN35_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
N_RANDOM = 3000


def tool():
    for p in (BUILD / "tests" / "tools" / "tokenize_tool", BUILD / "tests" / "tokenize_tool"):
        if p.exists():
            return str(p)
    pytest.fail(f"tokenize_tool not built under {BUILD} (cmake --build {BUILD} --target tokenize_tool)")


def run_tool(args, requests):
    """One process for a whole list of requests; returns the replies."""
    data = "".join(json.dumps(r) + "\n" for r in requests).encode()
    proc = subprocess.run([tool(), *args], input=data, capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    replies = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert len(replies) == len(requests)
    for r in replies:
        assert "error" not in r, r["error"]
    return replies


# ---------------------------------------------------------------- the corpus

AWKWARD = [
    "", " ", "  ", "a", "Hello world", "Hello, world!", " leading space", "trailing space ", "double  space",
    "tab\there", "\t\t\tindent", "line\nbreak", "crlf\r\nline", "cr\ronly", "\n\n\n", "\r\n\r\n", " \n \n ",
    "para\u2028sep\u2029end", "vt\x0bff\x0cend", "nel\x85end", "nbsp\u00a0here", "ideo\u3000space\u3000\u3000x",
    "thin\u2009space\u202fnarrow", "zw\u200bsp\u200cnj\u200dj\ufeffbom", "mongolian\u180evs", "  \u00a0 x",
    "x \u3000 y\u2028 \u2029z", "end with spaces   ", "   ", "\r", "\x0b\x0c\x85",
    "it's", "IT'S", "we'll", "WE'LL", "They're", "THEY'RE", "I've", "I'M", "you'd", "YOU'D", "don't", "DON'T",
    "x'ſx", "x'Sx", "'s 'S 'll 'LL 're 'RE 'Ll", "'''", "rock'n'roll", "l'homme", "'",
    "0", "12", "123456789012345678901234567890", "3.14159", "1,000,000", "2026-11-30", "٠١٢٣٤٥٦٧٨٩", "१२३",
    "①②③", "Ⅻ", "½ ¾", "x²+y³", "0x1F", "1e-10",
    "!!!", "???", "...", "—–-", "!!!???...", "::", "=>", "->", "<=>", "&&||", "#!/bin/sh", "@user", "$100",
    "a.b.c", "(((nested)))", "[[]]", "{{}}", "/* c */", "// comment", "\"quoted\"", "«guillemets»", "“smart”",
    "def f(x):\n    return x ** 2\n", "if (a < b) { c++; }\n", "for i in range(10):\n\tprint(i)",
    "```python\nprint('hi')\n```", "<html><body>hi</body></html>", "SELECT * FROM t WHERE x = 'y';",
    "http://example.com/path?a=1&b=2#frag", "C:\\Windows\\System32", "snake_case_name CamelCaseName",
    "    four spaces", "        eight spaces", "\t\tx = 1\n\t\ty = 2\n",
    "中文测试", "你好，世界！", "日本語のテキスト、カタカナ、ひらがな", "한국어 텍스트", "한국어\u1100\u1161 조합",
    "ไทยภาษา", "हिन्दी भाषा", "العربية", "مَرْحَبًا", "עברית", "Русский текст", "Ελληνικά", "Ἀθῆναι",
    "Tiếng Việt", "Türkçe İı", "ǅemal", "Straße STRASSE", "ﬁﬂ ligatures", "ሰላም", "ᚠᚢᚦ", "ꦗꦮ", "𐌰𐌱",
    "e\u0301", "cafe\u0301", "a\u0300\u0301\u0302", "x\u0301\u0316", "\u0301leading mark", "n\u0303o\u0308",
    "\uac00\u11a7", "\uac00\u11a7\u0301", "\u1100\u1161\u11a7", "\uac00\u11a8",
    "Å Å Å", "Ω Ω", "ﬀ", "K K", "\u1e9b\u0323", "q\u0307\u0323", "\u0958", "\u2126",
    "🎉", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷🇩🇪", "1️⃣", "❤️", "🧑🏿‍💻", "a🎉b", "🎉🎉🎉", "😀😃😄😁",
    "𝐀𝐁𝐂 𝔸𝔹", "𝟘𝟙𝟚", "\U0001F600text", "\U00010348",
    "\x00", "nul\x00inside", "\x01\x02\x03\x1f\x7f", "\x1b[31mred\x1b[0m",
    "\ufffd", "\uffff", "\U0010fffd",
    "<|im_start|>user\nhi<|im_end|>", "<|im_start|><|im_end|>", "text<|endoftext|>text",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
    "a<think>b</think>c", "<tool_call>{\"name\": \"f\"}</tool_call>", "<|fim_prefix|>x<|fim_suffix|>y<|fim_middle|>",
    "<|im_start", "<|im_start|", "im_start|>", "<<|im_start|>>", "<|im_start|><|im_start|>", "< |im_start| >",
    "<|IM_START|>", "<think >", "</think", " <|im_end|> ", "\n<|im_end|>\n", "<|endoftext|>" * 3,
    "<|vision_start|><|image_pad|><|vision_end|>", "<|object_ref_start|>x<|object_ref_end|>",
    "a" * 300, "ab" * 200, "x" * 1000, "🎉" * 50, "中" * 200, " " * 100, "\n" * 50, "!" * 100, "1" * 100,
    "supercalifragilisticexpialidocious", "Donaudampfschifffahrtsgesellschaftskapitän",
    "pneumonoultramicroscopicsilicovolcanoconiosis" * 3,
    "Mixed: English, 中文, العربية, हिन्दी, 🎉, 123, and <|im_end|>!",
]

SPACES = [" ", "  ", "\t", "\n", "\r\n", "\r", "\u2028", "\u2029", "\x0b", "\x0c", "\u00a0", "\u3000", "\x85",
          "\u200b", "\u180e", "\u2009", "\u202f", "\n\n", " \n", "\t\n"]
EMOJI = ["🎉", "👍", "👍🏽", "👨‍👩‍👧", "🏳️‍🌈", "🇯🇵", "1️⃣", "❤️", "🧑‍💻", "😀", "🙈", "🦀", "\u2764\ufe0f"]
CONTRACTIONS = ["'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'ve", "'VE", "'m", "'M", "'ll", "'LL", "'lL", "'d",
                "'D", "'ſ", "'x"]
CODE = ["def f(x):", "    return x", "{", "}", "();", "i++", "x = [1, 2, 3]", "#include <stdio.h>", "a->b",
        "/* */", "\"str\"", "'c'", "0xFF", "!=", "==", "=>", "::", "`tick`", "$var", "@decorator"]
PUNCT = "!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~'«»“”‘’—–…·•§¶†‡"


def chars_from(rng, lo, hi, k):
    out = []
    while len(out) < k:
        c = chr(rng.randint(lo, hi))
        if unicodedata.category(c) not in ("Cn", "Cs", "Co"):
            out.append(c)
    return "".join(out)


def random_piece(rng, specials):
    kind = rng.randrange(22)
    n = rng.randint(1, 8)
    if kind == 0:
        return "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(n))
    if kind == 1:
        return "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 20)))
    if kind == 2:
        return "".join(rng.choice(PUNCT) for _ in range(n))
    if kind == 3:
        return "".join(rng.choice(SPACES) for _ in range(rng.randint(1, 4)))
    if kind == 4:
        return chars_from(rng, 0x4E00, 0x9FFF, n)
    if kind == 5:
        if rng.random() < 0.5:
            return chars_from(rng, 0xAC00, 0xD7A3, n)
        return "".join(chr(rng.randint(0x1100, 0x1112)) + chr(rng.randint(0x1161, 0x1175)) for _ in range(n))
    if kind == 6:
        return chars_from(rng, 0x0E00, 0x0E7F, n)  # Thai (with marks)
    if kind == 7:
        return chars_from(rng, 0x0900, 0x097F, n)  # Devanagari (with marks)
    if kind == 8:
        return chars_from(rng, 0x0600, 0x06FF, n)  # Arabic (with harakat)
    if kind == 9:
        return chars_from(rng, 0x0590, 0x05FF, n)  # Hebrew (with points)
    if kind == 10:
        return chars_from(rng, 0x0400, 0x04FF, n)
    if kind == 11:
        return chars_from(rng, 0x0370, 0x03FF, n)
    if kind == 12:
        return chars_from(rng, 0x00C0, 0x024F, n)
    if kind == 13:  # a letter with combining marks, often not in canonical order
        return rng.choice("aeiouxnAEIOU") + "".join(chr(rng.randint(0x0300, 0x036F)) for _ in range(rng.randint(1, 3)))
    if kind == 14:
        return "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 3)))
    if kind == 15:
        return rng.choice(CONTRACTIONS)
    if kind == 16:
        s = rng.choice(specials)
        r = rng.random()
        return s if r < 0.6 else s[: rng.randint(1, len(s) - 1)] if r < 0.8 else s.upper()
    if kind == 17:
        return chars_from(rng, 0x1D400, 0x1D7FF, n)  # mathematical alphanumerics (astral)
    if kind == 18:
        return "".join(chr(rng.choice(list(range(0, 32)) + [0x7F])) for _ in range(rng.randint(1, 3)))
    if kind == 19:
        return rng.choice(CODE)
    if kind == 20:
        return rng.choice("ab中🎉 !1") * rng.randint(20, 120)
    return chars_from(rng, 0x3040, 0x30FF, n)  # kana


def random_strings(seed, n, specials):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        out.append("".join(random_piece(rng, specials) for _ in range(rng.randint(1, 12))))
    return out


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def qwen3_path():
    return shared_file(QWEN3_JSON, "Qwen3's tokenizer.json")


@pytest.fixture(scope="module")
def qwen35_path(qwen3_path, tmp_path_factory):
    d = json.loads(qwen3_path.read_text(encoding="utf-8"))
    split = d["pre_tokenizer"]["pretokenizers"][0]
    assert split["type"] == "Split"
    split["pattern"]["Regex"] = QWEN35_SPLIT
    path = tmp_path_factory.mktemp("qwen35") / "tokenizer.json"
    path.write_text(json.dumps(d, ensure_ascii=False), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def corpus(qwen3_path):
    hf = Tokenizer.from_file(str(qwen3_path))
    specials = [t.content for t in hf.get_added_tokens_decoder().values()]
    texts = AWKWARD + random_strings(20261130, N_RANDOM, specials)
    # Leave out what HF's own (older) NFC tables disagree with unicodedata on.
    nfc = hf.normalizer
    kept = [t for t in texts if nfc.normalize_str(t) == unicodedata.normalize("NFC", t)]
    assert len(texts) - len(kept) < len(texts) // 50, "too many strings left out"
    return kept


def hf_ids(path, texts, special):
    hf = Tokenizer.from_file(str(path))
    hf.encode_special_tokens = not special
    return [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]


def first_mismatches(texts, got, want, k=8):
    out = []
    for t, g, w in zip(texts, got, want):
        if g != w:
            out.append(f"{t!r}: clover {g[:24]} HF {w[:24]}")
            if len(out) == k:
                break
    return "\n".join(out)


# ---------------------------------------------------------------- tests


@pytest.mark.parametrize("variant", ["qwen3", "qwen35"])
@pytest.mark.parametrize("special", [True, False])
def test_encode_matches_hf(variant, special, qwen3_path, qwen35_path, corpus):
    path = qwen3_path if variant == "qwen3" else qwen35_path
    want = hf_ids(path, corpus, special)
    replies = run_tool(["--json", str(path)], [{"text": t, "special": special} for t in corpus])
    got = [r["ids"] for r in replies]
    bad = sum(g != w for g, w in zip(got, want))
    assert bad == 0, f"{bad} of {len(corpus)} strings differ:\n" + first_mismatches(corpus, got, want)


@pytest.mark.parametrize("variant", ["qwen3", "qwen35"])
def test_decode_round_trip(variant, qwen3_path, qwen35_path, corpus):
    path = qwen3_path if variant == "qwen3" else qwen35_path
    hf = Tokenizer.from_file(str(path))
    replies = run_tool(["--json", str(path)], [{"text": t} for t in corpus])
    for text, r in zip(corpus, replies):
        decoded = bytes.fromhex(r["decoded"])
        expect = unicodedata.normalize("NFC", text)
        assert decoded == expect.encode("utf-8"), f"{text!r} decodes to {decoded!r}"
        assert decoded.decode("utf-8") == hf.decode(r["ids"], skip_special_tokens=False)
        stream = b"".join(bytes.fromhex(c) for c in r["stream"])
        assert stream == decoded


def test_every_code_point_matches_hf(qwen35_path):
    """Each assigned code point (Python's Unicode database) in contexts where
    its letter / mark / number / space class decides the split and where
    NFC can compose or reorder it, through the Qwen3.5 pattern."""
    hf = Tokenizer.from_file(str(qwen35_path))
    texts = []
    for cp in range(0x110000):
        c = chr(cp)
        if unicodedata.category(c) in ("Cn", "Cs", "Co"):
            continue
        t = f"a{c}b 1{c}! '{c} x\u0301{c}{c}\u0301 {c}"
        if hf.normalizer.normalize_str(t) == unicodedata.normalize("NFC", t):
            texts.append(t)
    assert len(texts) > 140000
    want = hf_ids(qwen35_path, texts, True)
    got = [r["ids"] for r in run_tool(["--json", str(qwen35_path)], [{"text": t} for t in texts])]
    bad = sum(g != w for g, w in zip(got, want))
    assert bad == 0, f"{bad} of {len(texts)} differ:\n" + first_mismatches(texts, got, want)


def test_stream_decoder_on_cut_characters(qwen3_path):
    """Random id sequences, biased to byte tokens that split characters."""
    hf = Tokenizer.from_file(str(qwen3_path))
    n_tokens = hf.get_vocab_size(with_added_tokens=True)
    vocab = hf.get_vocab()
    # the single-byte tokens, by byte, through GPT-2's table
    bs = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + len(cs) - 188)
    byte_token = {b: vocab[chr(c)] for b, c in zip(bs, cs)}
    pieces = ["é", "中", "🎉", "\u0301", "a", "\ufffd"]
    rng = random.Random(7)
    requests = []
    for _ in range(1500):
        ids = []
        for _ in range(rng.randint(0, 12)):
            r = rng.random()
            if r < 0.5:  # bytes of a real character, possibly cut short or out of order
                b = rng.choice(pieces).encode()
                b = b[: rng.randint(1, len(b))] if rng.random() < 0.4 else b
                ids += [byte_token[x] for x in b]
            elif r < 0.7:
                ids.append(byte_token[rng.randint(0x80, 0xFF)])
            else:
                ids.append(rng.randrange(n_tokens))
        requests.append({"ids": ids, "skip_special": rng.random() < 0.3})
    replies = run_tool(["--json", str(qwen3_path)], requests)
    for req, r in zip(requests, replies):
        chunks = [bytes.fromhex(c) for c in r["stream"]]
        for c in chunks:
            c.decode("utf-8")  # every chunk is whole characters
        raw = bytes.fromhex(r["decoded"])
        expect = hf.decode(req["ids"], skip_special_tokens=req["skip_special"])
        assert raw.decode("utf-8", errors="replace") == expect
        assert bytes.fromhex(r["replaced"]).decode("utf-8") == expect
        assert b"".join(chunks).decode("utf-8") == expect, req


def test_invalid_utf8_round_trips(qwen3_path):
    rng = random.Random(11)
    inputs = [b"\xff", b"\x80abc", b"abc\xc3", b"\xe4\xbd", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf",
              b"ok \xfe\xff ok", "中".encode()[:2] + "文".encode(), b"<|im_end|>\xff<|im_end|>"]
    for _ in range(300):
        parts = []
        for _ in range(rng.randint(1, 6)):
            if rng.random() < 0.5:
                parts.append(bytes(rng.randrange(256) for _ in range(rng.randint(1, 4))))
            else:
                parts.append(rng.choice(["abc", " ", "中文", "🎉", "it's", "\n", "<|im_start|>"]).encode())
        inputs.append(b"".join(parts))
    replies = run_tool(["--json", str(qwen3_path)], [{"hex": b.hex()} for b in inputs])
    hf = Tokenizer.from_file(str(qwen3_path))
    for b, r in zip(inputs, replies):
        assert bytes.fromhex(r["decoded"]) == b, (b, r["ids"])
        # what a lossy reader makes of the bytes is what HF decodes the ids to
        assert hf.decode(r["ids"], skip_special_tokens=False) == b.decode("utf-8", errors="replace")


def test_special_ids(qwen3_path):
    cfg = json.loads((qwen3_path.parent / "tokenizer_config.json").read_text(encoding="utf-8"))
    hf = Tokenizer.from_file(str(qwen3_path))
    proc = subprocess.run([tool(), "--json", str(qwen3_path), "--info"], capture_output=True, check=True)
    info = json.loads(proc.stdout)
    assert info["n_tokens"] == hf.get_vocab_size(with_added_tokens=True)
    assert info["eos"] == hf.token_to_id(cfg["eos_token"])
    assert info["pad"] == hf.token_to_id(cfg["pad_token"])
    assert info["bos"] == -1 and cfg["bos_token"] is None
    assert info["add_bos"] is False
    for key, text in [("im_start", "<|im_start|>"), ("im_end", "<|im_end|>"), ("endoftext", "<|endoftext|>"),
                      ("think", "<think>"), ("think_end", "</think>")]:
        assert info[key] == hf.token_to_id(text), key
    assert info["mask"] == -1
    assert set(info["eos_ids"]) == {hf.token_to_id("<|im_end|>"), hf.token_to_id("<|endoftext|>")}


# ---------------------------------------------------------------- GGUF


def write_gguf(path, tokenizer_json, pre):
    """tokenizer.ggml.* as llama.cpp's converter writes them (special added
    tokens CONTROL, the others USER_DEFINED, merges as 'a b')."""
    import gguf
    d = json.loads(Path(tokenizer_json).read_text(encoding="utf-8"))
    vocab = d["model"]["vocab"]
    added = {a["id"]: a for a in d["added_tokens"]}
    n = max(max(vocab.values()), max(added)) + 1
    tokens = [""] * n
    types = [gguf.TokenType.UNUSED] * n
    for tok, i in vocab.items():
        tokens[i] = tok
        types[i] = gguf.TokenType.NORMAL
    for i, a in added.items():
        tokens[i] = a["content"]
        types[i] = gguf.TokenType.CONTROL if a["special"] else gguf.TokenType.USER_DEFINED
    for i in range(n):
        if not tokens[i]:
            tokens[i] = f"[PAD{i}]"
    merges = [m if isinstance(m, str) else " ".join(m) for m in d["model"]["merges"]]
    w = gguf.GGUFWriter(str(path), "qwen35moe")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_eos_token_id(vocab.get("<|im_end|>", [a["id"] for a in added.values() if a["content"] == "<|im_end|>"][0]))
    w.add_pad_token_id([a["id"] for a in added.values() if a["content"] == "<|endoftext|>"][0])
    w.add_add_bos_token(False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.mark.parametrize("variant", ["qwen2", "qwen35"])
def test_gguf_matches_hf(variant, qwen3_path, qwen35_path, corpus, tmp_path):
    path = qwen3_path if variant == "qwen2" else qwen35_path
    gguf_path = tmp_path / f"{variant}.gguf"
    write_gguf(gguf_path, path, variant)
    texts = corpus[:1200]
    for special in (True, False):
        want = hf_ids(path, texts, special)
        replies = run_tool(["--gguf", str(gguf_path)], [{"text": t, "special": special} for t in texts])
        got = [r["ids"] for r in replies]
        bad = sum(g != w for g, w in zip(got, want))
        assert bad == 0, f"special={special}: {bad} strings differ:\n" + first_mismatches(texts, got, want)
    proc = subprocess.run([tool(), "--gguf", str(gguf_path), "--info"], capture_output=True, check=True)
    info = json.loads(proc.stdout)
    hf = Tokenizer.from_file(str(path))
    assert info["eos"] == hf.token_to_id("<|im_end|>")
    assert info["pad"] == hf.token_to_id("<|endoftext|>")


# ---------------------------------------------------------------- other tokenizer.json features


def test_added_token_options_match_hf(qwen3_path, tmp_path):
    d = json.loads(qwen3_path.read_text(encoding="utf-8"))
    base = max(a["id"] for a in d["added_tokens"]) + 1
    extra = [
        ("<L>", dict(lstrip=True)), ("<R>", dict(rstrip=True)), ("<LR>", dict(lstrip=True, rstrip=True)),
        ("qzw", dict(single_word=True)), ("café", dict(normalized=True)), ("<sp>", dict(special=True, rstrip=True)),
        ("<L><R>", dict()),
    ]
    for i, (content, opts) in enumerate(extra):
        entry = dict(id=base + i, content=content, single_word=False, lstrip=False, rstrip=False, normalized=False,
                     special=False)
        entry.update(opts)
        d["added_tokens"].append(entry)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(d, ensure_ascii=False), encoding="utf-8")
    texts = ["a <L> b", "a   <L>", "<R>   b", "x \t<LR>\n y", "<L><R>", "<L> <R>", "a qzw b", "aqzwb", "qzw",
             "qzws", "a_qzw", "qzw!", "1qzw", "qzw\u0301", "中qzw", "qzw中", "caf\u00e9", "cafe\u0301", "CAFÉ",
             "x <sp>  y", "<sp>",
             "  <L>  <R>  ", "\u3000<L>\u3000", "qzwqzw", "a qzw", "é qzw é", "<L>qzw<R>"]
    rng = random.Random(5)
    pool = ["<L>", "<R>", "<LR>", "qzw", "café", "cafe\u0301", "<sp>", " ", "  ", "\n", "a", "x", "é", "_", "1",
            "<|im_end|>"]
    texts += ["".join(rng.choice(pool) for _ in range(rng.randint(1, 10))) for _ in range(800)]
    for special in (True, False):
        want = hf_ids(path, texts, special)
        got = [r["ids"] for r in run_tool(["--json", str(path)], [{"text": t, "special": special} for t in texts])]
        bad = sum(g != w for g, w in zip(got, want))
        assert bad == 0, f"special={special}: {bad} differ:\n" + first_mismatches(texts, got, want)


def test_gpt2_bytelevel_regex_matches_hf(qwen3_path, tmp_path, corpus):
    d = json.loads(qwen3_path.read_text(encoding="utf-8"))
    d["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    d["normalizer"] = None
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(d, ensure_ascii=False), encoding="utf-8")
    texts = corpus[:1500]
    want = hf_ids(path, texts, True)
    got = [r["ids"] for r in run_tool(["--json", str(path)], [{"text": t} for t in texts])]
    bad = sum(g != w for g, w in zip(got, want))
    assert bad == 0, f"{bad} differ:\n" + first_mismatches(texts, got, want)


def test_unsupported_files_fail_with_a_message(qwen3_path, tmp_path):
    d = json.loads(qwen3_path.read_text(encoding="utf-8"))
    cases = {
        "model.type": ("Unigram", lambda x: x["model"].__setitem__("type", "Unigram")),
        "byte_fallback": ("byte_fallback", lambda x: x["model"].__setitem__("byte_fallback", True)),
        "normalizer": ("Lowercase", lambda x: x.__setitem__("normalizer", {"type": "Lowercase"})),
        "behavior": ("behavior", lambda x: x["pre_tokenizer"]["pretokenizers"][0].__setitem__("behavior", "Removed")),
        "merge": ("not in the vocabulary", lambda x: x["model"]["merges"].append(["zzzq", "qqqz"])),
        "regex": ("does not compile", lambda x: x["pre_tokenizer"]["pretokenizers"][0].__setitem__(
            "pattern", {"Regex": "(unclosed"})),
    }
    for name, (needle, mutate) in cases.items():
        x = copy.deepcopy(d)
        mutate(x)
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(x, ensure_ascii=False), encoding="utf-8")
        proc = subprocess.run([tool(), "--json", str(path), "--info"], capture_output=True)
        assert proc.returncode == 1, name
        msg = proc.stderr.decode()
        assert needle in msg and str(path) in msg, (name, msg)
