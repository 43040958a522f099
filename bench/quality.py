"""Retrieval quality on the generated corpus: recall@5, recall@10 and MRR.

Usage: python bench/quality.py [--sizes 10000,100000] [--queries 240] [--show-misses N]

Each question has one memory that answers it; recall@k is the share of questions whose
answer is in the top k, MRR the mean of 1/rank (0 when not in the top 10). Questions run
through `Retriever.search` (FTS mode) with the project filter a session hook would use.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus

from llmem_hooks import MemoryStore, Retriever


def evaluate(store: MemoryStore, questions: list[corpus.Query], limit: int = 10) -> dict[str, Any]:
    """Run every question; return overall and per-kind metrics and the misses."""
    retriever = Retriever(store)
    per_kind: dict[str, list[int | None]] = defaultdict(list)
    misses: list[tuple[corpus.Query, list[str]]] = []
    for q in questions:
        hits = retriever.search(q.text, limit=limit, project=q.project, track_access=False)
        ids = [h["id"] for h in hits]
        rank = next((i + 1 for i, mid in enumerate(ids) if mid in q.relevant), None)
        per_kind[q.kind].append(rank)
        per_kind["all"].append(rank)
        if rank is None or rank > 5:
            misses.append((q, [h["content"][:90] for h in hits[:3]]))
    return {"metrics": {k: metrics(v) for k, v in per_kind.items()}, "misses": misses}


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
        for kind in ("all", "nl", "synonym", "typo", "keyword"):
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=240)
    ap.add_argument("--show-misses", type=int, default=0)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(run(sizes, args.queries, args.show_misses))


if __name__ == "__main__":
    main()
