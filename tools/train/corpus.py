"""The training corpus of issue 16, from Debian packages, on the dev box.

Fetches the packages with `apt-get download` (no install, no root needed for
the files), unpacks them with `dpkg-deb -x`, and writes a carriable folder
(the H200 machine has no package registry) with:

  train.jsonl.gz  one sample a line: {"text": ..., "prose": ...}: the exchange in
                  the chat template, and its answer alone as a plain line of prose
                  ("word (pos): gloss.", the causal path's warm-up text)
  SOURCES.json  every package, its version, its licence file's first lines

The domain is English definitions from WordNet 3.0 (`wordnet-base`, the
WordNet licence: free use with the copyright notice kept). A definition is a
short, predictable answer, so a small model can do well at it, and it is
written as a chat: user asks, the assistant answers inside Qwen3.5's
template, with a think block that is either empty (what `--no-think` gives)
or one short sentence (what the default `<think>` prompt leads into).

Every sense of the held-out words (heldout_prompts.json) is left out, so the
20 prompts measure the model on words it has not seen defined.

    python3 tools/train/corpus.py --out /tmp/clover-corpus [--limit N]
"""
from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import random
import re
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGES = ["wordnet-base"]
POS = {"n": "noun", "v": "verb", "a": "adjective", "s": "adjective", "r": "adverb"}
QUESTIONS = ['What does "{w}" mean?', 'Define the word "{w}".', 'What is the meaning of "{w}"?',
             'What is a {w}?', 'Define "{w}".', 'What does the word "{w}" mean?']
THINKS = ['The user asks for the meaning of "{w}". It is a {p}.',
          '"{w}" is a {p}; I give its definition.']
SEED = 16


def fetch(packages: list[str], work: str) -> dict:
    """apt-get download + dpkg-deb -x into work/root; returns {package: version}."""
    root = os.path.join(work, "root")
    os.makedirs(root, exist_ok=True)
    got = {}
    for p in packages:
        subprocess.run(["apt-get", "download", p], cwd=work, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deb = sorted(glob.glob(os.path.join(work, p + "_*.deb")))[-1]
        subprocess.run(["dpkg-deb", "-x", deb, root], check=True)
        ver = subprocess.run(["dpkg-deb", "-f", deb, "Version"], check=True,
                             capture_output=True, text=True).stdout.strip()
        got[p] = ver
    return got


def read_wordnet(root: str):
    """(lemma, part of speech, gloss, examples) per synset lemma, in file order.
    data.* lines: offset lex_filenum ss_type w_cnt(hex) word lex_id ... | gloss."""
    for part in ("noun", "verb", "adj", "adv"):
        with open(os.path.join(root, "usr/share/wordnet", "data." + part), encoding="latin-1") as f:
            for line in f:
                if line.startswith("  ") or "|" not in line:
                    continue                             # the licence header
                head, gloss = line.split("|", 1)
                fields = head.split()
                pos = POS[fields[2]]
                n = int(fields[3], 16)
                words = [fields[4 + 2 * i] for i in range(n)]
                parts = [s.strip() for s in gloss.strip().split(";")]
                defs = [s for s in parts if not s.startswith('"')]
                exs = [s.strip('"') for s in parts if s.startswith('"')]
                definition = "; ".join(defs).strip()
                for w in words:
                    w = re.sub(r"\([a-z]+\)$", "", w).replace("_", " ")
                    yield w, pos, definition, exs


def chat(question: str, think: str, answer: str) -> str:
    """One exchange in Qwen3.5's template (as clover's chat_template.c renders
    a prompt, plus the answer and its end)."""
    return (f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"
            f"<think>\n{think}\n</think>\n\n{answer}<|im_end|>\n")


def build(root: str, heldout: set[str], limit: int | None, rng: random.Random):
    samples = []
    for w, pos, d, exs in read_wordnet(root):
        if w.lower() in heldout or not d:
            continue
        ans = f"{w} ({pos}): {d}."
        if exs:
            ans += f' For example: "{exs[0]}".'
        q = rng.choice(QUESTIONS).format(w=w)
        think = "" if rng.random() < 0.5 else rng.choice(THINKS).format(w=w, p=pos)
        # an empty think block renders as "<think>\n\n</think>\n\n", as --no-think does
        samples.append({"text": chat(q, think, ans), "prose": ans})
        if limit and len(samples) >= limit:
            break
    return samples


def licence(root: str, pkg: str) -> str:
    p = os.path.join(root, "usr/share/doc", pkg, "copyright")
    with open(p, encoding="utf-8", errors="replace") as f:
        return f.read()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--limit", type=int, default=None, help="stop after N samples (CPU smoke runs)")
    a = ap.parse_args()
    with open(os.path.join(HERE, "heldout_prompts.json")) as f:
        heldout = {p["word"].lower() for p in json.load(f)["prompts"]}
    os.makedirs(a.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        versions = fetch(PACKAGES, work)
        root = os.path.join(work, "root")
        rng = random.Random(SEED)
        samples = build(root, heldout, a.limit, rng)
        sources = {p: {"version": v, "copyright": licence(root, p)} for p, v in versions.items()}
    rng.shuffle(samples)
    # mtime 0: the same corpus gives the same bytes
    with gzip.GzipFile(os.path.join(a.out, "train.jsonl.gz"), "wb", mtime=0) as f:
        for s in samples:
            f.write((json.dumps(s, ensure_ascii=False) + "\n").encode())
    with open(os.path.join(a.out, "SOURCES.json"), "w") as f:
        json.dump(sources, f, indent=1)
    size = sum(os.path.getsize(os.path.join(a.out, n)) for n in os.listdir(a.out))
    print(f"corpus: {len(samples)} samples, {size / 2**20:.1f} MiB in {a.out} "
          f"(from {', '.join(f'{p} {v}' for p, v in versions.items())})")
    if size >= 64 * 2**20:
        raise SystemExit("corpus: over 64 MiB, it would not travel to the device machine")


if __name__ == "__main__":
    main()
