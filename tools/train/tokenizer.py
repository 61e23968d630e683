"""The trained model's tokenizer: a byte-level BPE trained with Hugging Face
`tokenizers` on the corpus, in the exact shape of Qwen3.5's (the fixture
tokenizer's recipe in tools/reference/clover_ref/tiny_tokenizer.py: NFC, the
qwen35 split regex, ByteLevel, Qwen3.5's 33 added tokens in their order, then
`<|mask|>`), only larger: 8192 ids in all.

The added tokens are cut out of the training text first, so no merge is
spent on their pieces. Single threaded, so one corpus gives one file.

    python3 tools/train/tokenizer.py --corpus /tmp/clover-corpus --out DIR
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


def train(corpus_dir: str, vocab: int = VOCAB, limit: int | None = None) -> Tokenizer:
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
    tok.train_from_iterator((strip_added(s["text"]) for s in corpus_texts(corpus_dir, limit)),
                            trainer)
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
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab", type=int, default=VOCAB)
    ap.add_argument("--limit", type=int, default=None)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    tok = train(a.corpus, a.vocab, a.limit)
    write_tokenizer(tok, a.out)
    print(f"tokenizer: {tok.get_vocab_size()} ids -> {a.out}/tokenizer.json")


if __name__ == "__main__":
    main()
