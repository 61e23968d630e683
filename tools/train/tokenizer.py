"""The trained model's tokenizer: a byte-level BPE trained with Hugging Face
`tokenizers` on the corpus (issue 16: train.jsonl.gz) or, with --pack, on the
generator's mix of issue 26 (gen.py over fetch_corpus.py's pack: chat
exchanges and prose, seed fixed; the result is committed in tools/train/tok/), in the exact shape of Qwen3.5's (the fixture
tokenizer's recipe in tools/reference/clover_ref/tiny_tokenizer.py: NFC, the
qwen35 split regex, ByteLevel, Qwen3.5's 33 added tokens in their order, then
`<|mask|>`), only larger: 8192 ids in all.

The added tokens are cut out of the training text first, so no merge is
spent on their pieces. Single threaded, so one corpus gives one file.

    python3 tools/train/tokenizer.py --corpus /tmp/clover-corpus --out DIR
    python3 tools/train/tokenizer.py --pack .gpu-train/corpus --out tools/train/tok
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, \
    pre_tokenizers, processors, trainers  # noqa: E402

from clover_ref.tiny_tokenizer import ADDED, QWEN35_PATTERN, write_tokenizer  # noqa: E402

VOCAB = 8192                      # ids in all: BPE symbols + the added tokens
BPE_VOCAB = VOCAB - len(ADDED)


def corpus_texts(corpus_dir: str, limit: int | None = None):
    with gzip.open(os.path.join(corpus_dir, "train.jsonl.gz"), "rt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            if limit is not None and i >= limit:
                break
            yield json.loads(line)


def strip_added(text: str) -> str:
    for content, _ in ADDED:
        text = text.replace(content, "\n")
    return text


def gen_texts(pack: str, chars: int, seed: int = 26):
    """The generator's mix as training text: 3/4 exchanges, 1/4 prose."""
    import random
    sys.path.insert(0, HERE)
    from gen import Gen, load_corpus
    g = Gen(load_corpus(pack))
    r = random.Random(seed)
    n = 0
    while n < chars:
        if r.random() < 0.25:
            t = g.prose_doc(r)
        else:
            p, c = g.sample(r)
            t = p + c
        n += len(t)
        yield t


def train(corpus_dir: str | None, vocab: int = VOCAB, limit: int | None = None,
          texts=None) -> Tokenizer:
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False, fuse_unk=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN35_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False,
                                              use_regex=False)
    bpe = vocab - len(ADDED)
    trainer = trainers.BpeTrainer(vocab_size=bpe, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[])
    if texts is None:
        texts = (s["text"] for s in corpus_texts(corpus_dir, limit))
    tok.train_from_iterator((strip_added(t) for t in texts), trainer)
    if tok.get_vocab_size() != bpe:
        # a small corpus (the CPU smoke run) has fewer merges than asked for
        print(f"tokenizer: {tok.get_vocab_size()} BPE symbols (asked {bpe})", file=sys.stderr)
    for content, special in ADDED:
        at = AddedToken(content, single_word=False, lstrip=False, rstrip=False,
                        normalized=False, special=special)
        (tok.add_special_tokens if special else tok.add_tokens)([at])
    return tok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--corpus", help="issue 16's corpus folder (train.jsonl.gz)")
    src.add_argument("--pack", help="fetch_corpus.py's pack: train on gen.py's mix")
    ap.add_argument("--chars", type=int, default=40_000_000, help="--pack: characters of text")
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab", type=int, default=VOCAB)
    ap.add_argument("--limit", type=int, default=None)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    texts = gen_texts(a.pack, a.chars) if a.pack else None
    tok = train(a.corpus, a.vocab, a.limit, texts)
    write_tokenizer(tok, a.out)
    print(f"tokenizer: {tok.get_vocab_size()} ids -> {a.out}/tokenizer.json")


if __name__ == "__main__":
    main()
