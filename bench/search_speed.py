"""Retriever.find speed (FTS mode, natural-language questions) at 10k and 100k memories.

Usage: python bench/search_speed.py [--sizes 10000,100000] [--queries 240] [--rounds 3]

Targets (issue 2): p50 <= 5 ms at 10k, <= 15 ms at 100k. Each question runs with the
project filter a session hook would use; one warm-up pass, then ``rounds`` timed passes.
With ``track_access`` on, every search also writes the access counts of its results.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus

from llmem_hooks import MemoryFilter, MemoryStore, Retriever

FTS: dict[str, Any] = {"search_mode": "fts", "track_access": False}


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def measure(size: int, count: int, rounds: int, track_access: bool) -> dict[str, float]:
    """Per-query wall times in ms over ``rounds`` passes of ``count`` questions."""
    path = corpus.CACHE_DIR / f"corpus-{size}.db"
    questions = corpus.queries(corpus.build_db(size, path), count)
    if track_access:  # writes go to a copy, so the cached corpus stays as generated
        copy = corpus.CACHE_DIR / f"corpus-{size}-touch.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{copy}{suffix}").unlink(missing_ok=True)
        with MemoryStore(path) as src:
            src.conn.execute("VACUUM INTO ?", (str(copy),))
        path = copy
    times: list[float] = []
    with MemoryStore(path) as store:
        retriever = Retriever(store)
        for q in questions:  # warm-up: page cache, statement cache
            retriever.find(q.text, MemoryFilter(project=q.project), limit=10, **FTS)
        for _ in range(rounds):
            for q in questions:
                t0 = time.perf_counter()
                retriever.find(
                    q.text,
                    MemoryFilter(project=q.project),
                    limit=10,
                    search_mode="fts",
                    track_access=track_access,
                )
                times.append((time.perf_counter() - t0) * 1000)
    return {
        "n": len(times),
        "p50": statistics.median(times),
        "p95": percentile(times, 95),
        "max": max(times),
    }


def run(sizes: list[int], count: int, rounds: int) -> str:
    lines = [
        "| memories | track_access | searches | p50 ms | p95 ms | max ms | target p50 |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for size in sizes:
        target = "5 ms" if size <= 10_000 else "15 ms"
        for track in (False, True):
            m = measure(size, count, rounds, track)
            lines.append(
                f"| {size:,} | {track} | {m['n']} | {m['p50']:.2f} | {m['p95']:.2f} | "
                f"{m['max']:.2f} | {target} |"
            )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=240)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(run([int(s) for s in args.sizes.split(",")], args.queries, args.rounds))


if __name__ == "__main__":
    main()
