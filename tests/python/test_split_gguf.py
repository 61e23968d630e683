"""Split GGUFs (NAME-00001-of-0000N.gguf, llama.cpp's gguf-split layout): a
converted fixture is re-written by llama.cpp's own `gguf` package with
`split_max_tensors` (its GGUFWriter writes split.no / split.count /
split.tensors.count as gguf-split does); `-m` on the first shard loads every
shard and scores exactly as the single file; opening another shard, or a set
with one missing, is a one-line error."""
import json
import subprocess

import pytest
from gguf import GGUFReader, GGUFValueType, GGUFWriter

import test_convert_support as cs

CLOVER = cs.BUILD / "clover"
IDS = "1,8,15,22,29,36,43,50,57,64"


def clover(*args):
    if not CLOVER.exists():
        pytest.fail(f"{CLOVER} is not built")
    return subprocess.run([str(CLOVER), *map(str, args)], capture_output=True, text=True, timeout=300)


def resplit(src, out, max_tensors):
    r = GGUFReader(str(src))
    w = GGUFWriter(str(out), r.fields["general.architecture"].contents(), split_max_tensors=max_tensors)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if f.types[0] == GGUFValueType.ARRAY:
            w.add_key_value(name, f.contents(), f.types[0], sub_type=f.types[-1])
        else:
            w.add_key_value(name, f.contents(), f.types[0])
    for t in r.tensors:
        w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)  # the shape follows from the data's
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("split")
    one = d / "whole.gguf"
    r = clover("convert", cs.SOURCE / "tests/fixtures/tiny_interop/hf", "-o", one, "--type", "q8_0")
    assert r.returncode == 0, r.stderr
    (d / "parts").mkdir()
    resplit(one, d / "parts" / "m.gguf", 40)
    shards = sorted((d / "parts").glob("m-*.gguf"))
    assert [s.name for s in shards] == [f"m-{i:05d}-of-00003.gguf" for i in (1, 2, 3)]
    return one, shards


def score(path):
    r = clover("ppl", "-m", path, "--ids", IDS, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_first_shard_loads_all(model):
    one, shards = model
    assert score(shards[0])["mean_nll"] == score(one)["mean_nll"]
    info = clover("info", shards[0])
    assert info.returncode == 0, info.stderr
    n = len(GGUFReader(str(one)).tensors)
    assert f"{n} tensors" in info.stdout


def test_other_shard_or_missing_shard(model, tmp_path):
    _, shards = model
    r = clover("ppl", "-m", shards[1], "--ids", IDS)
    assert r.returncode == 1 and "shard 2 of 3" in r.stderr and "open the first" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    for s in shards[:2]:
        (tmp_path / s.name).symlink_to(s)
    r = clover("ppl", "-m", tmp_path / shards[0].name, "--ids", IDS)
    assert r.returncode == 1 and "shard 3 of 3" in r.stderr and "00003-of-00003" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
