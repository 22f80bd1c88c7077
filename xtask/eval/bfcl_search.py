#!/usr/bin/env python3
"""Capability-search evaluation on the Berkeley Function Calling Leaderboard (BFCL v4) data.

`cargo xtask eval search` runs this script; it is not meant to be run by hand, but can be:

    bfcl_search.py prepare OUT_DIR
        Pools every distinct function of every BFCL category into OUT_DIR/corpus.json (an
        OpenAI-style list of {name, description, parameters}) and writes every query whose
        ground truth names its function(s) to OUT_DIR/queries.jsonl ({"id", "query"}) and
        OUT_DIR/truth.json ({id: {"category", "truth": [names]}}).
    bfcl_search.py serve PORT_FILE
        Serves the MiniLM model as an OpenAI-compatible embeddings API on 127.0.0.1 for
        Ravi's `--embeddings-url` (the port is written to PORT_FILE).
    bfcl_search.py score OUT_DIR RAVI.jsonl [--json]
        Ranks the same queries with a plain BM25 baseline (rank_bm25's BM25Okapi, the reference
        implementation on PyPI) and the full all-MiniLM-L6-v2 sentence-embedding model (numpy
        forward pass, the upper reference), reads Ravi's rankings from RAVI.jsonl (the output of
        `--queries-file`; OUT_DIR/ravi_minilm.jsonl and ravi_minilm_local.jsonl too when
        present: Ravi fused with MiniLM through the embeddings API and run in process), and
        prints Recall@1/5/10 and MRR per category and method.

Pooling. A function is identified by its name: BFCL reuses a name (`get_current_weather`) with
small wording changes across entries, and its ground truth names the function, so two entries
with one name are one tool (the first description met is kept, reading the categories in the
order of CATEGORIES). Names are made provider-valid the way BFCL's own OpenAI handler does it
(`.` becomes `_`).

Queries. The query is the user's text of the first turn (system messages dropped; several user
messages joined by a newline). An entry's truth is the set of distinct function names in its
ground truth; Recall@k is the fraction of them found in the first k results, MRR the mean of
1/rank of the first one found.
"""
import json
import os
import re
import sys
import time

import bfcl_eval
import numpy as np

DATA = os.path.join(os.path.dirname(bfcl_eval.__file__), "data")

# Categories whose entries carry their own function list and a ground truth naming the call(s).
SCORED = [
    "live_multiple", "multiple",  # tuned on
    "live_simple", "simple_python", "simple_java", "simple_javascript", "parallel", "live_parallel",
    "parallel_multiple", "live_parallel_multiple",
]
TUNED = {"live_multiple", "multiple"}
# Categories whose functions join the pool but whose entries have no single answer.
POOL_ONLY = ["irrelevance", "live_irrelevance", "live_relevance"]


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def sanitize(name):
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64]


def query_text(entry):
    turn = entry["question"][0]
    users = [m["content"] for m in turn if m.get("role") == "user"]
    return "\n".join(users)


def prepare(out):
    os.makedirs(out, exist_ok=True)
    corpus, seen = [], set()

    def add(fn):
        name = sanitize(fn["name"])
        if name in seen:
            return
        seen.add(name)
        corpus.append({"name": name, "description": fn.get("description", ""),
                       "parameters": fn.get("parameters", {})})

    queries, truth = [], {}
    for cat in SCORED + POOL_ONLY:
        entries = read_jsonl(os.path.join(DATA, f"BFCL_v4_{cat}.json"))
        answers = {}
        ans_path = os.path.join(DATA, "possible_answer", f"BFCL_v4_{cat}.json")
        if os.path.exists(ans_path):
            answers = {a["id"]: a["ground_truth"] for a in read_jsonl(ans_path)}
        for e in entries:
            for fn in e.get("function", []):
                add(fn)
            gt = answers.get(e["id"])
            if cat in SCORED and gt:
                names = sorted({sanitize(n) for call in gt for n in call})
                q = query_text(e)
                if q.strip() and names:
                    queries.append({"id": e["id"], "query": q})
                    truth[e["id"]] = {"category": cat, "truth": names}
    # The multi-turn categories' function documents (file systems, trading, travel, ...).
    doc_dir = os.path.join(DATA, "multi_turn_func_doc")
    for f in sorted(os.listdir(doc_dir)):
        for fn in read_jsonl(os.path.join(doc_dir, f)):
            add(fn)
    with open(os.path.join(out, "corpus.json"), "w", encoding="utf-8") as f:
        json.dump(corpus, f)
    with open(os.path.join(out, "queries.jsonl"), "w", encoding="utf-8") as f:
        for q in queries:
            f.write(json.dumps(q) + "\n")
    with open(os.path.join(out, "truth.json"), "w", encoding="utf-8") as f:
        json.dump(truth, f)
    print(f"corpus: {len(corpus)} distinct functions; queries: {len(queries)}", file=sys.stderr)


# ---------------------------------------------------------------- the two reference rankers
def words(text):
    """Plain BM25 tokens: lower-case runs of letters and digits, camelCase split."""
    text = re.sub(r"([a-z])([A-Z])", r"\1 \2", text)
    return re.findall(r"[a-z0-9]+", text.lower())


def tool_text(t):
    return f"{t['name'].replace('_', ' ')}: {t['description']}"


def bm25_rankings(corpus, queries, k):
    from rank_bm25 import BM25Okapi

    bm = BM25Okapi([words(tool_text(t)) for t in corpus])
    out = {}
    for q in queries:
        s = bm.get_scores(words(q["query"]))
        order = np.argsort(-s, kind="stable")[:k]
        out[q["id"]] = [corpus[i]["name"] for i in order if s[i] > 0]
    return out


def minilm_model():
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "embeddings"))
    import distill  # the numpy BERT forward pass and the checksums of the model files

    model_dir = distill.find_model_dir()
    for f, want in distill.EXPECTED_SHA256.items():
        if distill.sha256(os.path.join(model_dir, f)) != want:
            sys.exit(f"{f} of all-MiniLM-L6-v2 does not match its pinned SHA-256")
    w = distill.load_file(os.path.join(model_dir, "model.safetensors"))
    vocab = [l.rstrip("\n") for l in open(os.path.join(model_dir, "vocab.txt"), encoding="utf-8")]
    return distill, w, {"vocab": {t: i for i, t in enumerate(vocab)}, "prefix": "##", "max_chars": 100}


def minilm_embed(texts, model, max_len=256, batch=64):
    """Sentence embeddings as sentence-transformers computes them: [CLS] pieces [SEP], mean of
    every position, L2-normalised. Texts of equal length are batched (no padding needed)."""
    import check_table

    distill, w, tok = model
    unk = tok["vocab"]["[UNK]"]
    ids = []
    for t in texts:
        pieces = [p if p is not None else unk
                  for word in check_table.basic_tokenize(t) for p in check_table.wordpiece(word, tok)]
        ids.append([distill.CLS_ID] + pieces[: max_len - 2] + [distill.SEP_ID])
    out = np.zeros((len(texts), w["embeddings.word_embeddings.weight"].shape[1]), np.float32)
    by_len = {}
    for i, s in enumerate(ids):
        by_len.setdefault(len(s), []).append(i)
    for n, idx in sorted(by_len.items()):
        for j in range(0, len(idx), batch):
            chunk = idx[j:j + batch]
            h = distill.bert_forward(w, np.array([ids[i] for i in chunk], np.int64))
            out[chunk] = h.mean(1)
    out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
    return out


def minilm_rankings(corpus, queries, k, cache_dir):
    import hashlib

    model = minilm_model()
    key = hashlib.sha256(json.dumps([tool_text(t) for t in corpus]).encode()).hexdigest()[:16]
    path = os.path.join(cache_dir, f"minilm-tools-{key}.npy")
    if os.path.exists(path):
        T = np.load(path)
    else:
        t0 = time.time()
        T = minilm_embed([tool_text(t) for t in corpus], model)
        np.save(path, T)
        print(f"MiniLM: embedded {len(corpus)} tools in {time.time() - t0:.0f} s", file=sys.stderr)
    key = hashlib.sha256(json.dumps([q["query"] for q in queries]).encode()).hexdigest()[:16]
    path = os.path.join(cache_dir, f"minilm-queries-{key}.npy")
    if os.path.exists(path):
        Q = np.load(path)
    else:
        t0 = time.time()
        Q = minilm_embed([q["query"] for q in queries], model)
        np.save(path, Q)
        print(f"MiniLM: embedded {len(queries)} queries in {time.time() - t0:.0f} s", file=sys.stderr)
    S = Q @ T.T
    out = {}
    for qi, q in enumerate(queries):
        order = np.argsort(-S[qi], kind="stable")[:k]
        out[q["id"]] = [corpus[i]["name"] for i in order]
    return out


# ---------------------------------------------------------------- an embeddings API for Ravi
def serve(port_file):
    """Serves all-MiniLM-L6-v2 as an OpenAI-compatible `POST /v1/embeddings` on 127.0.0.1 (a
    free port, written to PORT_FILE), so Ravi's `--embeddings-url` path is measured against
    the same model as the reference: the way a user would plug in Ollama or a provider."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    model = minilm_model()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            if self.path.rstrip("/") != "/v1/embeddings":
                self.send_error(404)
                return
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            vectors = minilm_embed(texts, model)
            answer = {"object": "list", "model": body.get("model", ""),
                      "data": [{"object": "embedding", "index": i, "embedding": v.tolist()}
                               for i, v in enumerate(vectors)]}
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(port_file + ".tmp", port_file)
    server.serve_forever()


# ---------------------------------------------------------------- metrics
def metrics(rankings, truth, category):
    ids = [i for i, v in truth.items() if v["category"] == category]
    r = {1: 0.0, 5: 0.0, 10: 0.0}
    mrr = 0.0
    for i in ids:
        ranked, want = rankings.get(i, []), truth[i]["truth"]
        for k in r:
            r[k] += sum(1 for n in want if n in ranked[:k]) / len(want)
        ranks = [ranked.index(n) + 1 for n in want if n in ranked]
        mrr += 1.0 / min(ranks) if ranks else 0.0
    n = max(len(ids), 1)
    return {"queries": len(ids), "recall_at_1": r[1] / n, "recall_at_5": r[5] / n,
            "recall_at_10": r[10] / n, "mrr": mrr / n}


def score(out, ravi_path, as_json):
    corpus = json.load(open(os.path.join(out, "corpus.json"), encoding="utf-8"))
    queries = read_jsonl(os.path.join(out, "queries.jsonl"))
    truth = json.load(open(os.path.join(out, "truth.json"), encoding="utf-8"))
    ravi = {v["id"]: [h["name"] for h in v["results"]] for v in read_jsonl(ravi_path)}
    methods = {"ravi": ravi}
    plugged = os.path.join(out, "ravi_minilm.jsonl")
    if os.path.exists(plugged):
        methods["ravi+minilm"] = {v["id"]: [h["name"] for h in v["results"]] for v in read_jsonl(plugged)}
    local = os.path.join(out, "ravi_minilm_local.jsonl")
    if os.path.exists(local):
        methods["ravi+local"] = {v["id"]: [h["name"] for h in v["results"]] for v in read_jsonl(local)}
    methods["bm25"] = bm25_rankings(corpus, queries, 10)
    methods["minilm"] = minilm_rankings(corpus, queries, 10, out)
    rows = []
    for cat in SCORED:
        for m, rk in methods.items():
            row = {"category": cat, "tuned": cat in TUNED, "method": m, "tools": len(corpus)}
            row.update(metrics(rk, truth, cat))
            rows.append(row)
    if as_json:
        for row in rows:
            print(json.dumps(row))
        return
    print(f"BFCL v4, {len(corpus)} pooled tools. Recall@1 / @5 / @10 and MRR; categories marked * were tuned on.")
    print(f"{'category':26} {'queries':>7}  {'method':11} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'MRR':>6}")
    for row in rows:
        name = row["category"] + (" *" if row["tuned"] else "")
        print(f"{name:26} {row['queries']:>7}  {row['method']:11} {row['recall_at_1']:6.3f} "
              f"{row['recall_at_5']:6.3f} {row['recall_at_10']:6.3f} {row['mrr']:6.3f}")


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "prepare" and len(sys.argv) == 3:
        prepare(sys.argv[2])
    elif cmd == "serve" and len(sys.argv) == 3:
        serve(sys.argv[2])
    elif cmd == "score" and len(sys.argv) in (4, 5):
        score(sys.argv[2], sys.argv[3], sys.argv[4:] == ["--json"])
    else:
        sys.exit(__doc__)
