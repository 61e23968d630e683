"""A small byte-level BPE tokenizer shaped like Qwen3.5's (TRUNK.md 6):
NFC normaliser, the qwen35 split regex then ByteLevel, the ByteLevel decoder,
Qwen3.5's 33 added tokens in their order after the BPE vocabulary (the
think / tool tokens non-special), plus a mask token for block diffusion.

Trained with Hugging Face `tokenizers` on a fixed in-repo corpus, single
threaded, so the result is the same file every time.
"""
from __future__ import annotations

import json
import os

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, \
    pre_tokenizers, processors, trainers

QWEN35_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                  r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# (content, special) in Qwen3.5's id order (TRUNK.md 6), then the mask token.
ADDED = [
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True),
    ("<|box_end|>", True), ("<|quad_start|>", True), ("<|quad_end|>", True),
    ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True),
    ("<|image_pad|>", True), ("<|video_pad|>", True), ("<tool_call>", False),
    ("</tool_call>", False), ("<|fim_prefix|>", True), ("<|fim_middle|>", True),
    ("<|fim_suffix|>", True), ("<|fim_pad|>", True), ("<|repo_name|>", True),
    ("<|file_sep|>", True), ("<tool_response>", False), ("</tool_response>", False),
    ("<think>", False), ("</think>", False), ("<|audio_start|>", True), ("<|audio_end|>", True),
    ("<tts_pad>", True), ("<tts_text_bos>", True), ("<tts_text_eod>", True),
    ("<tts_text_bos_single>", True), ("<|audio_pad|>", True),
    ("<|mask|>", True),
]

BPE_VOCAB = 400  # 256 byte symbols + 144 merges

CORPUS = """\
The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs away.
Once upon a time there was a small model that learned to write short answers.
It thought for a while, then it answered the question and stopped.
User: What is the capital of France? Assistant: The capital of France is Paris.
User: Write a short poem about the sea. Assistant: The sea is wide, the sea is deep.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 123 2024 3.14159 1,000,000 and 7/8.
Code: def add(a, b):\n    return a + b\n\nfor i in range(10):\n    print(i)
JSON: {"name": "clover", "block_size": 32, "threshold": 0.9, "tags": ["a", "b"]}
Don't, can't, won't, it's, I'm, you're, we've, they'll, she'd. DON'T SHOUT, IT'S LOUD.
Café, naïve, résumé, über, señor, façade, coöperate, Ångström, smörgåsbord.
Combining marks: e\u0301 a\u0308 n\u0303 o\u0302 — and the Devanagari हिन्दी नमस्ते दुनिया.
中文文本：你好，世界。日本語のテキスト：こんにちは世界。한국어: 안녕하세요 세계.
Emoji: 👍 👍🏽 🎉 ❤️ 👨‍👩‍👧 and symbols © ® ™ € £ ¥ ± × ÷ → ← ∞.
Tabs\tand\tspaces   and  newlines\r\nWindows line\rold Mac line\n\n\nthree.
The answer is short. The answer is long. The answer is neither short nor long.
Thinking step by step: first the question, then the facts, then the answer.
A block of text is resolved in a few passes, and every pass fixes the sure rows.
Diffusion models denoise a block of masked tokens; transformers predict the next one.
"""


def corpus_lines() -> list[str]:
    lines = CORPUS.split("\n")
    # A few repetitions so frequent pairs dominate the merges clearly.
    return [ln for ln in lines if ln] * 3


def build_tokenizer() -> Tokenizer:
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
    trainer = trainers.BpeTrainer(vocab_size=BPE_VOCAB, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[])
    tok.train_from_iterator(corpus_lines(), trainer)
    assert tok.get_vocab_size() == BPE_VOCAB, tok.get_vocab_size()
    for content, special in ADDED:
        at = AddedToken(content, single_word=False, lstrip=False, rstrip=False,
                        normalized=False, special=special)
        if special:
            tok.add_special_tokens([at])
        else:
            tok.add_tokens([at])
    return tok


# A ChatML-with-think template in the shape TRUNK.md 6 describes for
# Qwen3.5 (no tools): thinking on by default, `enable_thinking=false` closes it.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message.role == 'assistant' %}"
    "{%- set content = message.content %}"
    "{%- if '</think>' in content %}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') %}"
    "{%- endif %}"
    "{{- '<|im_start|>assistant\\n' + content + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- else %}"
    "{{- '<think>\\n' }}"
    "{%- endif %}"
    "{%- endif %}"
)


def write_tokenizer(tok: Tokenizer, out_dir: str) -> None:
    """tokenizer.json (tokenizers' own serialisation) and a Qwen-shaped
    tokenizer_config.json."""
    tok.save(os.path.join(out_dir, "tokenizer.json"), pretty=True)
    decoder = {}
    for content, special in ADDED:
        decoder[str(tok.token_to_id(content))] = {
            "content": content, "lstrip": False, "normalized": False, "rstrip": False,
            "single_word": False, "special": special}
    cfg = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>", "<|mask|>"],
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "mask_token": "<|mask|>",
        "model_max_length": 262144,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen3_5Tokenizer",
        "unk_token": None,
    }
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=2, ensure_ascii=False)
        f.write("\n")
