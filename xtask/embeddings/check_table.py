#!/usr/bin/env python3
"""Reference reader for token_vectors.bin, to check a Rust port against (see distill.py for the format).

It parses the table, tokenises with a pure-Python BERT-uncased basic tokenizer and WordPiece that uses only the
table's header settings and token list, embeds the 300-tool fixture and both query sets, and prints top-3 hits
for three scorers: static cosine, a plain BM25, and the two fused by min-max normalised sum (w = 0.5 on the
cosine). It needs numpy only:

    python3 xtask/embeddings/check_table.py [path/to/token_vectors.bin]

Expected with the committed 128-d table: static tuned 42/45 held 14/40; bm25 37/45 9/40; hybrid 40/45 17/40.
If the `tokenizers` package and the model dir are available (env MINILM_TOKENIZER=path/to/tokenizer.json),
it also checks that its token ids match the HF tokenizer's on every text.
"""
import json
import math
import os
import re
import struct
import sys
import unicodedata
from collections import Counter

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIX = os.path.join(ROOT, "crates", "ravi-agents", "tests", "fixtures")


def read_table(path):
    b = open(path, "rb").read()
    assert b[:8] == b"RAVITV01", "bad magic"
    version, dims, count, flags, max_chars, sif = struct.unpack_from("<IIIIIf", b, 8)
    off = 32

    def lp():
        nonlocal off
        n = b[off]
        s = b[off + 1:off + 1 + n].decode("utf-8")
        off += 1 + n
        return s

    prefix, unk = lp(), lp()
    vocab, vecs = {}, np.zeros((count, dims), np.float32)
    has = np.zeros(count, bool)
    for i in range(count):
        tok = lp()
        (scale,) = struct.unpack_from("<f", b, off)
        off += 4
        if scale != 0.0:
            vecs[i] = np.frombuffer(b, np.int8, dims, off).astype(np.float32) * scale
            has[i] = True
            off += dims
        vocab[tok] = i
    assert off == len(b)
    return dict(dims=dims, flags=flags, max_chars=max_chars, prefix=prefix, unk=unk, vocab=vocab, vecs=vecs, has=has)


# ---------------------------------------------------------------- BERT basic tokenizer + WordPiece
def _is_punct(c):
    o = ord(c)
    if 33 <= o <= 47 or 58 <= o <= 64 or 91 <= o <= 96 or 123 <= o <= 126:
        return True
    return unicodedata.category(c).startswith("P")


def _is_cjk(o):
    return (0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or 0x20000 <= o <= 0x2A6DF or 0x2A700 <= o <= 0x2B73F
            or 0x2B740 <= o <= 0x2B81F or 0x2B820 <= o <= 0x2CEAF or 0xF900 <= o <= 0xFAFF or 0x2F800 <= o <= 0x2FA1F)


def basic_tokenize(text):
    out = []
    for c in text:  # clean_text + CJK spacing
        o = ord(c)
        if o == 0 or o == 0xFFFD:
            continue
        if c in "\t\n\r" or unicodedata.category(c) == "Zs":
            out.append(" ")
        elif unicodedata.category(c) in ("Cc", "Cf"):
            continue
        elif _is_cjk(o):
            out.append(f" {c} ")
        else:
            out.append(c)
    text = "".join(out).lower()
    text = "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")
    words = []
    for w in text.split():
        cur = ""
        for c in w:
            if _is_punct(c):
                if cur:
                    words.append(cur)
                words.append(c)
                cur = ""
            else:
                cur += c
        if cur:
            words.append(cur)
    return words


def wordpiece(word, t):
    if len(word) > t["max_chars"]:
        return [None]
    pieces, start = [], 0
    while start < len(word):
        end, found = len(word), None
        while start < end:
            sub = word[start:end] if start == 0 else t["prefix"] + word[start:end]
            if sub in t["vocab"]:
                found = t["vocab"][sub]
                break
            end -= 1
        if found is None:
            return [None]  # whole word -> [UNK]
        pieces.append(found)
        start = end
    return pieces


def tokenize(text, t):
    return [p for w in basic_tokenize(text) for p in wordpiece(w, t)]


def embed(text, t):
    ids = [i for i in tokenize(text, t) if i is not None and t["has"][i]]
    if not ids:
        return np.zeros(t["dims"], np.float32)
    v = t["vecs"][ids].mean(0)
    n = np.linalg.norm(v)
    return v / n if n > 0 else v


# ---------------------------------------------------------------- plain BM25 (k1=1.2, b=0.75, name x2)
STOP = set("""a an the of to in on for and or is are be with by from at as it this that these those my me i we our
us you your what which who whom how when where why do does did can could should would will shall please all any
some into out up about over than then so not no yes just get""".split())


def bm25_tokens(text):
    out = []
    for tok in re.findall(r"[a-z0-9]+", text.lower()):
        if tok in STOP:
            continue
        for suf in ("ing", "es", "s", "ed"):
            if len(tok) > len(suf) + 2 and tok.endswith(suf):
                tok = tok[: -len(suf)]
                break
        out.append(tok)
    return out


def bm25_matrix(tools, queries, k1=1.2, b=0.75):
    docs = [Counter(bm25_tokens(t["name"].replace("_", " ")) * 2 + bm25_tokens(t["description"])
                    + bm25_tokens(" ".join(t["tags"]))) for t in tools]
    lens = np.array([sum(d.values()) for d in docs], float)
    df = Counter(w for d in docs for w in d)
    idf = {w: math.log(1 + (len(docs) - n + 0.5) / (n + 0.5)) for w, n in df.items()}
    S = np.zeros((len(queries), len(docs)))
    for qi, q in enumerate(queries):
        for w in bm25_tokens(q):
            for di, d in enumerate(docs):
                f = d.get(w, 0)
                if f:
                    S[qi, di] += idf[w] * f * (k1 + 1) / (f + k1 * (1 - b + b * lens[di] / lens.mean()))
    return S


def top3(S, names, queries):
    hits = 0
    for i, q in enumerate(queries):
        order = np.argsort(-S[i], kind="stable")
        hits += names.index(q["expected"]) in order[:3]
    return hits


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "crates", "ravi-agents", "data", "token_vectors.bin")
    t = read_table(path)
    tools = json.load(open(os.path.join(FIX, "capabilities_300.json")))
    names = [x["name"] for x in tools]
    texts = [f"{x['name'].replace('_', ' ')}: {x['description']} tags: {', '.join(x['tags'])}" for x in tools]
    src = open(os.path.join(ROOT, "crates", "ravi-agents", "tests", "capability_search.rs")).read()
    body = src[src.index("const QUERIES"):]
    tuned = [{"query": a, "expected": e} for a, e in
             re.findall(r'\(\s*"((?:[^"\\]|\\.)*)",\s*"([^"]+)",?\s*\)', body[:body.index("];")])]
    held = json.load(open(os.path.join(FIX, "heldout_queries.json")))

    tokpath = os.environ.get("MINILM_TOKENIZER")
    if tokpath:
        from tokenizers import Tokenizer
        hf = Tokenizer.from_file(tokpath)
        hf.no_padding(); hf.no_truncation()
        inv = {i: s for s, i in t["vocab"].items()}
        bad = 0
        for s in texts + [q["query"] for q in tuned + held]:
            mine = [inv[i] if i is not None else t["unk"] for i in tokenize(s, t)]
            bad += mine != hf.encode(s, add_special_tokens=False).tokens
        print(f"tokenizer parity with HF: {bad} mismatching texts")

    D = np.stack([embed(s, t) for s in texts])
    for label, qs in (("tuned", tuned), ("held", held)):
        Q = np.stack([embed(q["query"], t) for q in qs])
        C = Q @ D.T
        B = bm25_matrix(tools, [q["query"] for q in qs])
        cn = (C - C.min(1, keepdims=True)) / np.maximum(C.max(1, keepdims=True) - C.min(1, keepdims=True), 1e-9)
        bn = B / np.maximum(B.max(1, keepdims=True), 1e-9)
        print(f"{label:5s} ({len(qs)}): static {top3(C, names, qs)}  bm25 {top3(B, names, qs)}  "
              f"hybrid(w=0.5) {top3(0.5 * cn + 0.5 * bn, names, qs)}")


if __name__ == "__main__":
    main()
