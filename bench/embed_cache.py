"""EmbeddingEngine cache hit rate on a realistic stream, through the fake Ollama.

Usage: python bench/embed_cache.py [--sessions 40] [--idles 12] [--cache-sizes 2048,256,32]

The stream is what the sidecar sends while agents work: every session opens with its
project's context query (the same text for every session of a project); at each idle
event the transcript so far is extracted again, so the memories found at earlier idle
events come back next to the new ones and are embedded as one batch (before the store
merges duplicates); now and then the agent searches with a question. Memory texts and
questions come from ``bench/corpus.py``. The fake Ollama (tests/support/fake_ollama.py) runs
in-process on 127.0.0.1, so times are HTTP + JSON overhead, not model time; the fake
counts one prompt token per word; its handler gets TCP_NODELAY here, as real Ollama has.
Prints markdown (nothing is written).
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import corpus
import report
from support import fake_ollama

from llmem_hooks.model.embed import EmbeddingEngine

# Real Ollama (Go) sets TCP_NODELAY; the stdlib fake writes headers and body separately,
# and with Nagle's algorithm on, every answer would wait ~40 ms for a delayed ACK.
fake_ollama.Handler.disable_nagle_algorithm = True


def stream(sessions: int, idles: int, seed: int = 3) -> Iterator[list[str]]:
    """Batches of texts, one per embedding call the sidecar would make."""
    rng = random.Random(seed)
    memories = corpus.generate(sessions * idles * 2, seed=seed)
    questions = [q.text for q in corpus.queries(memories, count=sessions * 3, seed=seed)]
    projects = sorted({m.record["project"] for m in memories if m.record["project"]})[:8]
    pool = iter(memories)
    for _ in range(sessions):
        project = rng.choice(projects)
        yield [f"context for project {project}: decisions, conventions, open work"]
        found: list[str] = []
        for _ in range(idles):
            for _ in range(rng.choice((0, 1, 1, 2))):
                found.append(next(pool).record["content"])
            if found:
                yield list(found)
            if rng.random() < 0.2:
                yield [rng.choice(questions)]


def words(text: str) -> list[str]:
    """Words, as the fake Ollama counts prompt tokens."""
    return re.findall(r"[A-Za-z0-9_]+", text)


def run(url: str, batches: list[list[str]], cache_size: int) -> dict[str, float]:
    with EmbeddingEngine(url, cache_size=cache_size) as engine:
        started = time.perf_counter()
        for texts in batches:
            engine.embed_batch(texts)
        wall = time.perf_counter() - started
        s = engine.stats()
    return {
        "cache": cache_size,
        "texts": s.hits + s.misses,
        "hits": s.hits,
        "misses": s.misses,
        "hit_rate": s.hit_rate,
        "requests": s.requests,
        "tokens": s.tokens,
        "wall": wall,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=40)
    ap.add_argument("--idles", type=int, default=12)
    ap.add_argument("--cache-sizes", default="2048,256,32")
    args = ap.parse_args()
    batches = list(stream(args.sessions, args.idles))
    calls = len(batches)
    texts = sum(len(b) for b in batches)
    tokens_uncached = sum(len(words(t)) for b in batches for t in b)
    server, url = fake_ollama.start_server()
    try:
        rows = [run(url, batches, int(size)) for size in args.cache_sizes.split(",")]
    finally:
        server.shutdown()
        server.server_close()
    print("## Embedding cache (fake Ollama)\n")
    print(report.machine_line())
    print(
        f"\n{args.sessions} sessions x {args.idles} idle events: {calls} embedding calls "
        f"holding {texts} texts; without a cache that is {calls} requests and "
        f"{tokens_uncached} prompt tokens.\n"
    )
    print("| cache entries | hits | misses | hit rate | requests | tokens | wall s |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['cache']} | {r['hits']} | {r['misses']} | {r['hit_rate']:.1%} | "
            f"{r['requests']} | {r['tokens']} | {r['wall']:.2f} |"
        )


if __name__ == "__main__":
    main()
