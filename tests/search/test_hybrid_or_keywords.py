"""One "hybrid if the model answers, else keywords" (issue 19 §3):
`Retriever.find_hybrid_or_keywords`, used by the query service, the viewer and the CLI.

Real SQLite stores; the embedders are the tests' own small doubles (a bag-of-words
hasher, and one that stops answering), standing in for Ollama.
"""

from __future__ import annotations

import ast
import hashlib
import math
from collections.abc import Sequence
from pathlib import Path

import pytest

from llmem_hooks.errors import ValidationError
from llmem_hooks.search.retriever import Retriever
from llmem_hooks.store import MemoryFilter, MemoryStore

ROOT = Path(__file__).resolve().parents[2]


class HashEmbedder:
    """Deterministic bag-of-words vectors; ``fail_after`` calls it raises (a model that
    goes down between the probe and the search)."""

    dim = 64

    def __init__(self, fail_after: int | None = None) -> None:
        self.calls = 0
        self.fail_after = fail_after

    def embed(self, text: str) -> Sequence[float]:
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise ConnectionError("model went away")
        vec = [0.0] * self.dim
        for word in text.lower().split():
            vec[int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1.0
        norm = math.sqrt(sum(v * v for v in vec)) or 1.0
        return [v / norm for v in vec]


@pytest.fixture
def ids(store: MemoryStore) -> list[str]:
    emb = HashEmbedder()
    texts = ["the user prefers pnpm", "redis runs on 6379", "deploy with make deploy-staging"]
    return [store.add("fact", t, embedding=emb.embed(t)) for t in texts]


def test_hybrid_when_the_model_answers(store: MemoryStore, ids: list[str]) -> None:
    hits, mode = Retriever(store, embedder=HashEmbedder()).find_hybrid_or_keywords(
        "pnpm", MemoryFilter(), limit=3, track_access=False
    )
    assert mode == "hybrid" and hits[0].id == ids[0]


def test_keywords_without_a_model_or_when_it_is_down(store: MemoryStore, ids: list[str]) -> None:
    for embedder in (None, HashEmbedder(fail_after=0)):
        hits, mode = Retriever(store, embedder=embedder).find_hybrid_or_keywords(
            "redis", limit=3, track_access=False
        )
        assert mode == "fts" and [h.id for h in hits] == [ids[1]]


def test_a_model_failing_mid_search_falls_back_to_keywords(
    store: MemoryStore, ids: list[str]
) -> None:
    embedder = HashEmbedder(fail_after=1)  # answers the probe, fails in the search
    hits, mode = Retriever(store, embedder=embedder).find_hybrid_or_keywords(
        "deploy", limit=3, track_access=False
    )
    assert mode == "fts" and [h.id for h in hits] == [ids[2]] and embedder.calls == 2


def test_bad_input_is_raised_not_retried(store: MemoryStore, ids: list[str]) -> None:
    with pytest.raises(ValidationError):
        Retriever(store, embedder=HashEmbedder()).find_hybrid_or_keywords("pnpm", limit=0)


@pytest.mark.parametrize(
    "module",
    ["llmem_hooks/service/operations.py", "llmem_hooks/viewer/data.py", "llmem_hooks/cli/quick.py"],
)
def test_callers_use_the_one_method(module: str) -> None:
    """No caller picks "hybrid" itself: the string appears only in the retriever."""
    source = (ROOT / module).read_text(encoding="utf-8")
    assert "find_hybrid_or_keywords" in source
    literals = [
        n.value
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.Constant) and n.value == "hybrid"
    ]
    assert module.endswith("quick.py") or literals == []
