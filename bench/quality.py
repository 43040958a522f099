"""Retrieval quality on the generated corpus: recall@5, recall@10 and MRR.

Usage: python bench/quality.py [--sizes 10000,100000] [--queries 240] [--show-misses N]
       python bench/quality.py --mode fts,hybrid,semantic --alpha 0.1,0.3,0.5 --dims 384,768
           [--work DIR]

Each question has one memory that answers it; recall@k is the share of questions whose
answer is in the top k, MRR the mean of 1/rank (0 when not in the top 10). Questions run
through `Retriever.find` with the project filter a session hook would use.

Without ``--mode`` (or with ``--mode fts`` alone and no ``--dims``) the corpus has no
embeddings and this is the FTS benchmark of docs/benchmarks.md. With ``--mode`` the corpus
is embedded by the hashed bag-of-words embedder (`vector_corpus.py`, cached in the work
dir, default build/bench) and every mode runs on the same database; ``hybrid`` runs once
per ``--alpha``. The verdict column compares each hybrid row with FTS on the same corpus.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus
import vector_corpus
from keyword_floor import KeywordFloor

from llmem_hooks import MemoryFilter, MemoryStore, Retriever

KINDS = ("all", "nl", "synonym", "typo", "keyword")


def evaluate(
    store: MemoryStore,
    questions: list[corpus.Query],
    limit: int = 10,
    *,
    retriever: Retriever | None = None,
    mode: str = "fts",
    alpha: float | None = None,
) -> dict[str, Any]:
    """Run every question; return overall and per-kind metrics and the misses."""
    retriever = retriever or Retriever(store)
    floor = KeywordFloor()  # the plain FTS5 floor: one row per memory, its project kept
    for mid, content, project in store.db.fetchall(
        "SELECT id, content, coalesce(project, '') FROM memories"
    ):
        floor.add(mid, content, project)
    floor_ranks: list[int | None] = []
    per_kind: dict[str, list[int | None]] = defaultdict(list)
    misses: list[tuple[corpus.Query, list[str]]] = []
    for q in questions:
        hits = retriever.find(
            q.text,
            MemoryFilter(project=q.project),
            limit=limit,
            search_mode=mode,
            alpha=alpha,
            track_access=False,
        )
        ids = [h.id for h in hits]
        rank = next((i + 1 for i, mid in enumerate(ids) if mid in q.relevant), None)
        per_kind[q.kind].append(rank)
        per_kind["all"].append(rank)
        fl = [k for k, _ in floor.search(q.text, limit, groups=[q.project or "", ""])]
        floor_ranks.append(next((i + 1 for i, mid in enumerate(fl) if mid in q.relevant), None))
        if rank is None or rank > 5:
            misses.append((q, [h.memory["content"][:90] for h in hits[:3]]))
    floor.close()
    out = {k: metrics(v) for k, v in per_kind.items()}
    out["floor"] = metrics(floor_ranks)
    return {"metrics": out, "misses": misses}


def metrics(ranks: list[int | None]) -> dict[str, float]:
    n = len(ranks) or 1
    return {
        "n": len(ranks),
        "recall@5": sum(1 for r in ranks if r and r <= 5) / n,
        "recall@10": sum(1 for r in ranks if r and r <= 10) / n,
        "mrr": sum(1 / r for r in ranks if r) / n,
    }


def table(results: dict[int, dict[str, Any]]) -> str:
    lines = [
        "| corpus | questions | kind | recall@5 | recall@10 | MRR |",
        "|---:|---:|---|---:|---:|---:|",
    ]
    for size, res in results.items():
        for kind in (*KINDS, "floor"):
            m = res["metrics"].get(kind)
            if m:
                lines.append(
                    f"| {size:,} | {m['n']} | {kind} | {m['recall@5']:.3f} | "
                    f"{m['recall@10']:.3f} | {m['mrr']:.3f} |"
                )
    return "\n".join(lines)


def run(sizes: list[int], count: int, show_misses: int = 0) -> str:
    results: dict[int, dict[str, Any]] = {}
    for size in sizes:
        memories = corpus.build_db(size, corpus.CACHE_DIR / f"corpus-{size}.db")
        questions = corpus.queries(memories, count)
        with MemoryStore(corpus.CACHE_DIR / f"corpus-{size}.db") as store:
            results[size] = evaluate(store, questions)
        for q, top in results[size]["misses"][:show_misses]:
            print(f"MISS [{q.kind}] {q.text!r} project={q.project}", file=sys.stderr)
            for line in top:
                print(f"    {line}", file=sys.stderr)
    return table(results)


def not_worse(row: dict[str, float], base: dict[str, float]) -> bool:
    """Hybrid must not lose to FTS on any of the three measures."""
    return all(row[m] >= base[m] - 1e-9 for m in ("recall@5", "recall@10", "mrr"))


def run_modes(
    sizes: list[int],
    dims: list[int],
    modes: list[str],
    alphas: list[float],
    count: int,
    work: Path,
    show_misses: int = 0,
) -> str:
    """One row per (corpus, dim, mode, alpha) on the embedded corpus, FTS first."""
    lines = [
        "| corpus | dim | mode | alpha | recall@5 | recall@10 | MRR | MRR nl / syn / typo / kw"
        " | vs FTS |",
        "|---:|---:|---|---:|---:|---:|---:|---|---|",
    ]
    for size in sizes:
        for dim in dims:
            memories, path = vector_corpus.build(size, dim, work)
            questions = corpus.queries(memories, count)
            runs = [("fts", 0.0)] + [
                (m, a) for m in modes if m != "fts" for a in (alphas if m == "hybrid" else [1.0])
            ]
            with MemoryStore(path, vec_dimensions=dim) as store:
                retriever = Retriever(store, embedder=vector_corpus.HashEmbedder(dim))
                base: dict[str, float] | None = None
                for mode, alpha in runs:
                    res = evaluate(store, questions, retriever=retriever, mode=mode, alpha=alpha)
                    m = res["metrics"]["all"]
                    kinds = " / ".join(
                        f"{res['metrics'][k]['mrr']:.3f}" for k in KINDS[1:] if k in res["metrics"]
                    )
                    if mode == "fts":
                        base = m
                        verdict = "(baseline)"
                    else:
                        assert base is not None
                        verdict = "ok" if not_worse(m, base) else "**worse**"
                    lines.append(
                        f"| {size:,} | {dim} | {mode} | {alpha:g} | {m['recall@5']:.3f} | "
                        f"{m['recall@10']:.3f} | {m['mrr']:.3f} | {kinds} | {verdict} |"
                    )
                    for q, top in res["misses"][:show_misses]:
                        print(f"MISS {mode} {alpha} [{q.kind}] {q.text!r}", file=sys.stderr)
                        for line in top:
                            print(f"    {line}", file=sys.stderr)
                    print(lines[-1], file=sys.stderr, flush=True)
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=240)
    ap.add_argument("--show-misses", type=int, default=0)
    ap.add_argument("--mode", default=None, help="fts, hybrid, semantic (comma-separated)")
    ap.add_argument("--alpha", default="0.7", help="hybrid alphas to sweep (comma-separated)")
    ap.add_argument("--dims", default=None, help="embedding sizes (default 384,768)")
    ap.add_argument("--work", type=Path, default=corpus.CACHE_DIR, help="cache dir")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.mode is None and args.dims is None:
        print(run(sizes, args.queries, args.show_misses))
        return
    modes = (args.mode or "fts,hybrid,semantic").split(",")
    for mode in modes:
        if mode not in ("fts", "hybrid", "semantic"):
            ap.error(f"unknown mode {mode!r}")
    print(
        run_modes(
            sizes,
            [int(d) for d in (args.dims or "384,768").split(",")],
            modes,
            [float(a) for a in args.alpha.split(",")],
            args.queries,
            args.work,
            args.show_misses,
        )
    )


if __name__ == "__main__":
    main()
