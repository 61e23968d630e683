"""Shared fixtures: the two tiny models, built fresh into a temporary
directory by the same code that makes tests/fixtures (so the tests do not
depend on the committed files, except test_fixtures.py which checks them)."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_NUM_THREADS", "1")

from transformers.utils import logging as hf_logging  # noqa: E402

from clover_ref import tiny_models  # noqa: E402
from clover_ref.checkpoint import CloverModel, set_deterministic  # noqa: E402
from clover_ref.tiny_tokenizer import build_tokenizer, write_tokenizer  # noqa: E402

hf_logging.set_verbosity_error()
hf_logging.disable_progress_bar()
set_deterministic()   # before any test computes (CloverModel pins the thread again)


def _build(tmp_path_factory, name, build):
    d = str(tmp_path_factory.mktemp(name))
    build(d)
    write_tokenizer(build_tokenizer(), d)
    tiny_models.generation_config().save_pretrained(d)
    return d


@pytest.fixture(scope="session")
def clover_dir(tmp_path_factory):
    return _build(tmp_path_factory, "tiny_clover", tiny_models.build_clover)


@pytest.fixture(scope="session")
def ar_dir(tmp_path_factory):
    return _build(tmp_path_factory, "tiny_ar", tiny_models.build_ar)


@pytest.fixture(scope="session")
def clover(clover_dir):
    return CloverModel(clover_dir)


@pytest.fixture(scope="session")
def ar(ar_dir):
    return CloverModel(ar_dir)


@pytest.fixture(scope="session")
def prompt_ids():
    tok = build_tokenizer()
    return tok.encode("<|im_start|>user\nWrite a short poem about the sea.<|im_end|>\n"
                      "<|im_start|>assistant\n<think>\n").ids
