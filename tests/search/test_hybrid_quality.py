"""Hybrid search must not rank worse than FTS alone (the reason DEFAULT_ALPHA is what it is).

A small version of ``bench/quality.py --mode fts,hybrid``: 2,000 generated memories with
hashed bag-of-words embeddings (tests/support/fake_ollama.py), 240 labelled questions asked with
the project filter, default Retriever settings.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.fake_ollama import embed_text

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import corpus
import quality

from llmem_hooks import MemoryStore, Retriever
from llmem_hooks.search.retriever import DEFAULT_ALPHA

DIM = 384


class Embedder:
    def embed(self, text: str) -> list[float]:
        return embed_text(text, DIM)


@pytest.fixture(scope="module")
def bench_store(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[MemoryStore, list[corpus.Query]]]:
    memories = corpus.generate(2000, seed=7)
    records = [{**m.record, "embedding": embed_text(m.record["content"], DIM)} for m in memories]
    path = tmp_path_factory.mktemp("quality") / "memory.db"
    store = MemoryStore(path, vec_dimensions=DIM)
    store.import_memories(records)
    yield store, corpus.queries(memories, 240)
    store.close()


def _both(
    store: MemoryStore, questions: list[corpus.Query], retriever: Retriever
) -> tuple[dict[str, float], dict[str, float]]:
    fts = quality.evaluate(store, questions, retriever=retriever, mode="fts")["metrics"]["all"]
    hybrid = quality.evaluate(store, questions, retriever=retriever, mode="hybrid")["metrics"]
    return fts, hybrid["all"]


def test_weak_model_settings_are_never_worse_than_fts(
    bench_store: tuple[MemoryStore, list[corpus.Query]],
) -> None:
    """The settings docs/retrieval.md gives for a weak model (semantic k 60, alpha 0.08)."""
    store, questions = bench_store
    retriever = Retriever(store, embedder=Embedder(), alpha=0.08, rrf_k_semantic=60)
    fts, hybrid = _both(store, questions, retriever)
    assert fts["recall@5"] > 0.8  # the benchmark still means something
    assert hybrid["recall@5"] >= fts["recall@5"]
    assert hybrid["recall@10"] >= fts["recall@10"]
    assert hybrid["mrr"] >= fts["mrr"]


def test_defaults_cannot_cost_recall_even_with_a_useless_model(
    bench_store: tuple[MemoryStore, list[corpus.Query]],
) -> None:
    """The defaults (alpha 0.3, semantic k 10) were chosen with a real model
    (bench/minilm_sweep.py); a bag-of-words hash may reorder a few near-ties, no more."""
    store, questions = bench_store
    retriever = Retriever(store, embedder=Embedder())
    assert (retriever.alpha, retriever.rrf_k_semantic) == (DEFAULT_ALPHA, 10)
    fts, hybrid = _both(store, questions, retriever)
    assert hybrid["recall@10"] >= fts["recall@10"]
    assert hybrid["recall@5"] >= fts["recall@5"] - 0.01
    assert hybrid["mrr"] >= fts["mrr"] - 0.06


def test_semantic_mode_finds_answers_on_its_own(
    bench_store: tuple[MemoryStore, list[corpus.Query]],
) -> None:
    store, questions = bench_store
    retriever = Retriever(store, embedder=Embedder())
    sem = quality.evaluate(store, questions, retriever=retriever, mode="semantic")["metrics"]
    assert sem["all"]["recall@10"] > 0.6  # weaker than FTS with a hashing embedder, but real
