"""Retriever: query syntax, natural-language questions, fuzzy matching, filters, rerank."""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from llmem_hooks import MemoryStore, Retriever, SearchError, ValidationError
from llmem_hooks.search.retriever import (
    DEFAULT_ALPHA,
    DEFAULT_RRF_K,
    DEFAULT_RRF_K_SEMANTIC,
    SearchHit,
    _rrf_score,
    rerank_signals,
)
from llmem_hooks.store import MemoryFilter

CORPUS = {
    "deploy": (
        "procedure",
        "Staging deploys run `make deploy-staging` from the ops box; "
        "production needs a tagged release.",
    ),
    "pg": (
        "fact",
        "Integration tests need the local Postgres on port 5433, started with "
        "docker compose up db.",
    ),
    "pnpm": ("preference", "The user prefers pnpm over npm for JavaScript projects."),
    "redis": (
        "fact",
        "ECONNREFUSED 127.0.0.1:6379 in the worker tests means Redis is not "
        "running; start it with docker compose up redis.",
    ),
    "k8s": (
        "decision",
        "We decided to run the API on Kubernetes instead of Nomad because the "
        "platform team supports it.",
    ),
    "tabs": ("preference", "Always indent Go files with tabs, never spaces."),
}


@pytest.fixture
def seeded(store: MemoryStore) -> tuple[MemoryStore, dict[str, str]]:
    ids = {key: store.add(t, text) for key, (t, text) in CORPUS.items()}
    return store, ids


def top(
    r: Retriever,
    query: str,
    n: int = 3,
    *,
    fuzzy: bool | None = None,
    threshold: float | None = None,
    **flt: Any,
) -> list[str]:
    """The ids of a keyword search's first ``n`` hits; ``flt``: `MemoryFilter` fields."""
    hits = r.find(
        query,
        MemoryFilter(**flt),
        limit=n,
        search_mode="fts",
        track_access=False,
        fuzzy=fuzzy,
        threshold=threshold,
    )
    return [h.id for h in hits]


@pytest.mark.parametrize(
    ("question", "key"),
    [
        ("how do we deploy the staging server?", "deploy"),
        ("what port does the local postgres use for integration tests?", "pg"),
        ("which package manager does the user like?", "pnpm"),
        ("why am I getting ECONNREFUSED on 6379 in the worker tests", "redis"),
        ("why did we choose kubernetes?", "k8s"),
        ("should I use tabs or spaces in go code", "tabs"),
    ],
)
def test_natural_language_questions(
    seeded: tuple[MemoryStore, dict[str, str]], question: str, key: str
) -> None:
    store, ids = seeded
    assert top(Retriever(store), question, 1) == [ids[key]]


def test_grep_syntax(seeded: tuple[MemoryStore, dict[str, str]]) -> None:
    store, ids = seeded
    r = Retriever(store)
    assert set(top(r, "docker compose", 10)) == {ids["pg"], ids["redis"]}  # implicit AND
    assert set(top(r, "docker AND redis", 10)) == {ids["redis"]}
    assert set(top(r, "nomad OR pnpm", 10)) == {ids["k8s"], ids["pnpm"]}
    assert set(top(r, "docker NOT redis", 10)) == {ids["pg"]}
    assert set(top(r, '"tagged release"', 10)) == {ids["deploy"]}
    assert top(r, '"release tagged"', 10) == []  # a phrase keeps word order
    assert set(top(r, "kube*", 10)) == {ids["k8s"]}
    assert set(top(r, "(nomad OR pnpm) AND platform", 10)) == {ids["k8s"]}
    # A group beside a word is an AND (FTS5 itself rejects `"a" ( ... )` as a syntax error).
    assert set(top(r, "(nomad OR pnpm) platform", 10)) == {ids["k8s"]}
    assert set(top(r, "docker (redis OR nomad)", 10)) == {ids["redis"]}
    with pytest.raises(ValidationError):
        r.find("NOT redis")


def test_parentheses_in_a_question_are_an_aside_not_a_group(
    seeded: tuple[MemoryStore, dict[str, str]],
) -> None:
    """A person writes "(or ...)" in a sentence; read as search syntax it was an FTS5
    syntax error ("invalid search query") and the question found nothing."""
    store, ids = seeded
    r = Retriever(store)
    assert top(r, "which package manager (or tool) does the user like?", 1) == [ids["pnpm"]]
    assert top(r, "why did we choose kubernetes (and not nomad)?", 1) == [ids["k8s"]]


def test_and_relaxes_to_or_for_questions_but_not_for_syntax(
    seeded: tuple[MemoryStore, dict[str, str]],
) -> None:
    store, ids = seeded
    r = Retriever(store)
    # No memory has both words: a question still finds both, explicit AND finds none.
    assert set(top(r, "redis nomad", 10)) == {ids["redis"], ids["k8s"]}
    assert top(r, "redis AND nomad", 10) == []


@pytest.mark.parametrize(
    ("typo", "key"),
    [("dokcer", "pg"), ("kuberntes", "k8s"), ("postgress", "pg"), ("staigng enviroment", "deploy")],
)
def test_fuzzy_finds_typos(seeded: tuple[MemoryStore, dict[str, str]], typo: str, key: str) -> None:
    store, ids = seeded
    hits = Retriever(store).find(typo, limit=5, search_mode="fts", track_access=False)
    assert ids[key] in [h.id for h in hits]
    assert any(h.match == "fuzzy" for h in hits)
    assert ids[key] not in top(Retriever(store), typo, 5, fuzzy=False)


def test_abbreviations_match_their_long_form(seeded: tuple[MemoryStore, dict[str, str]]) -> None:
    store, ids = seeded
    r = Retriever(store)
    assert top(r, "why k8s?", 1) == [ids["k8s"]]
    assert top(r, "which pg port do integration tests use", 1) == [ids["pg"]]
    assert top(r, "js package manager", 1) == [ids["pnpm"]]


def test_fuzzy_threshold_and_cascade(store: MemoryStore) -> None:
    docker = [store.add("fact", f"docker tip number {i}") for i in range(6)]
    store.add("fact", "dockerfile linting uses hadolint")
    r = Retriever(store)
    # 6 exact hits >= 5: the fuzzy stage does not run, nothing is marked fuzzy.
    assert all(h.match == "fts" for h in r.find("docker", limit=10, track_access=False))
    assert set(top(r, "dokcer", 10)) == set(docker)
    assert top(r, "dokcer", 10, threshold=0.95) == []  # 1 - 1/6 = 0.83 < 0.95
    assert top(r, "xyzzy", 10) == []


def test_filters_and_project_scope(store: MemoryStore) -> None:
    a = store.add(
        "fact",
        "deploy with make",
        project="github.com/acme/api",
        tags=["ci"],
        entered_by="opencode",
    )
    b = store.add(
        "fact",
        "deploy with helm",
        project="github.com/acme/web",
        tags=["k8s"],
        entered_by="copilot",
    )
    g = store.add("preference", "deploy only on weekdays")
    r = Retriever(store)
    assert set(top(r, "deploy", 10, project="github.com/acme/api")) == {a, g}
    assert set(top(r, "deploy", 10, tags_all=["ci"])) == {a}
    assert set(top(r, "deploy", 10, tags_any=["ci", "k8s"])) == {a, b}
    assert set(top(r, "deploy", 10, entered_by="copilot")) == {b}
    assert set(top(r, "deploy", 10, type="preference")) == {g}
    store.invalidate(g)
    assert set(top(r, "deploy", 10)) == {a, b}


def test_result_shape_and_scores(seeded: tuple[MemoryStore, dict[str, str]]) -> None:
    store, _ = seeded
    hits = Retriever(store).find("docker compose", search_mode="fts", track_access=False)
    for h in hits:
        assert {"id", "type", "content", "tags", "metadata", "created_at"} <= h.memory.keys()
        assert isinstance(h.memory["metadata"], dict)
    assert hits[0].rrf == pytest.approx(_rrf_score(1, DEFAULT_RRF_K))
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_find_returns_hits_and_the_memory_stays_clean(
    seeded: tuple[MemoryStore, dict[str, str]],
) -> None:
    """Scores live on the SearchHit; the memory dict holds stored fields only."""
    store, ids = seeded
    r = Retriever(store)
    hits = r.find("docker compose", search_mode="fts", track_access=False)
    assert hits and all(isinstance(h, SearchHit) for h in hits)
    assert all(not k.startswith("_") for h in hits for k in h.memory)
    assert all(h.match == "fts" and h.bm25 is not None and h.distance is None for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert {h.id for h in hits} == {ids["pg"], ids["redis"]}


def test_one_filter_object(seeded: tuple[MemoryStore, dict[str, str]]) -> None:
    store, ids = seeded
    r = Retriever(store)
    by_object = [h.id for h in r.find("docker", MemoryFilter(type="fact"), track_access=False)]
    assert by_object == top(r, "docker", 10, type="fact")
    assert set(by_object) == {ids["pg"], ids["redis"]}
    assert top(r, "docker", 10, type="preference") == []


def test_rerank_formula(store: MemoryStore) -> None:
    now = datetime(2026, 6, 1, tzinfo=UTC)
    mem = {
        "confidence": 0.9,
        "type": "decision",
        "access_count": 10,
        "created_at": "2026-05-22T00:00:00+00:00",
        "accessed_at": "2026-05-31T00:00:00+00:00",
    }
    s = rerank_signals(mem, {"decision": 1.2, "fact": 1.0}, now)
    assert s["confidence"] == 0.9
    assert s["recency"] == pytest.approx(math.exp(-0.01 * 1))
    assert s["access"] == pytest.approx(min(1.0, math.log1p(10 / 10)))
    assert s["type"] == 1.0
    never = rerank_signals(
        {"confidence": 0.5, "type": "fact", "created_at": mem["created_at"]},
        {"decision": 1.2, "fact": 1.0},
        now,
    )
    assert never["recency"] == 0.0 and never["access"] == 0.0
    # With blend=0 the order is pure BM25; with blend=1 pure signals.
    lo = store.add("fact", "alpha alpha alpha beta", confidence=0.1)
    hi = store.add("decision", "alpha gamma delta epsilon zeta eta theta", confidence=1.0)
    assert top(Retriever(store, blend=0.0), "alpha", 2) == [lo, hi]
    assert top(Retriever(store, blend=1.0), "alpha", 2) == [hi, lo]
    with pytest.raises(ValidationError):
        Retriever(store, blend=1.5)


def test_track_access(seeded: tuple[MemoryStore, dict[str, str]]) -> None:
    store, ids = seeded
    r = Retriever(store)
    r.find("pnpm", limit=1)
    assert store.get(ids["pnpm"])["access_count"] == 1
    r.find("pnpm", limit=1, track_access=False)
    assert store.get(ids["pnpm"])["access_count"] == 1


def test_offset_pages_do_not_overlap(store: MemoryStore) -> None:
    for i in range(12):
        store.add("fact", f"release checklist item {i}")
    r = Retriever(store)
    first = top(r, "release checklist", 5)
    second = [h.id for h in r.find("release checklist", limit=5, offset=5, track_access=False)]
    assert len(first) == len(second) == 5 and not set(first) & set(second)


class HashEmbedder:
    """A deterministic bag-of-words embedder: real vectors, no model needed."""

    dim = 64

    def embed(self, text: str) -> Sequence[float]:
        vec = [0.0] * self.dim
        for word in text.lower().split():
            h = int(hashlib.md5(word.strip(".,?!").encode()).hexdigest(), 16)
            vec[h % self.dim] += 1.0
        norm = math.sqrt(sum(v * v for v in vec)) or 1.0
        return [v / norm for v in vec]


def test_modes_without_embedder(
    seeded: tuple[MemoryStore, dict[str, str]], caplog: pytest.LogCaptureFixture
) -> None:
    store, ids = seeded
    r = Retriever(store)
    with caplog.at_level(logging.WARNING):
        hits = r.find("pnpm", track_access=False)
    assert hits[0].id == ids["pnpm"]
    assert "without an embedder" in caplog.text
    with pytest.raises(SearchError):
        r.find("pnpm", search_mode="semantic")
    with pytest.raises(ValidationError):
        r.find("pnpm", search_mode="psychic")


def test_semantic_and_hybrid_with_embedder(store: MemoryStore) -> None:
    emb = HashEmbedder()
    texts = ["the user prefers pnpm", "redis runs on 6379", "deploy with make deploy-staging"]
    ids = [store.add("fact", t, embedding=emb.embed(t)) for t in texts]
    r = Retriever(store, embedder=emb)
    sem = r.find("redis runs where", search_mode="semantic", track_access=False)
    assert sem[0].id == ids[1] and sem[0].match == "semantic"
    hyb = r.find("pnpm", search_mode="hybrid", track_access=False)
    assert hyb[0].id == ids[0]
    # Found first by both FTS and semantic: its RRF score sums both contributions (the
    # semantic ranks with the flatter k, DEFAULT_RRF_K_SEMANTIC).
    assert hyb[0].rrf == pytest.approx(
        (1 - DEFAULT_ALPHA) * _rrf_score(1) + DEFAULT_ALPHA * _rrf_score(1, DEFAULT_RRF_K_SEMANTIC)
    )


def test_a_typo_is_corrected_even_when_other_words_find_plenty(store: MemoryStore) -> None:
    for i in range(8):
        store.add("fact", f"restart the api server number {i} on prod with systemctl")
    target = store.add("procedure", "Restart the scheduler on prod with `make restart-sched`.")
    hits = Retriever(store).find("how do I restart the scheduelr on prod", track_access=False)
    assert hits[0].id == target
    assert hits[0].match == "fuzzy"
    # A word that is only stored in another inflection is not a typo: no fuzzy widening.
    store.add("event", "The nightly build failed twice")
    hits = Retriever(store).find("build failing", track_access=False)
    assert hits and all(h.match == "fts" for h in hits)


def test_project_scope_is_exact_and_not_searchable(store: MemoryStore) -> None:
    api = store.add("fact", "deploy with make", project="github.com/acme/api")
    store.add("fact", "deploy with make deploy", project="github.com/acme/api-v2")
    glob = store.add("fact", "deploy only on weekdays")
    r = Retriever(store)
    assert set(top(r, "deploy", 10, project="github.com/acme/api")) == {api, glob}
    assert top(r, "deploy", 10, project="github.com/acme/api", project_only=True) == [api]
    # The scope tokens ("global", "p<hex>") live in a column a query never searches.
    assert top(r, "global", 10) == []
    # Changing a memory's project moves it between scopes (the FTS trigger follows).
    with store.conn:
        store.conn.execute(
            "UPDATE memories SET project = 'github.com/acme/web' WHERE id = ?", (api,)
        )
    assert top(r, "deploy", 10, project="github.com/acme/api", project_only=True) == []


def test_relaxed_hits_holding_more_question_words_come_first(store: MemoryStore) -> None:
    for i in range(5):
        store.add("fact", f"The preview environment banner number {i} is orange")
    target = store.add("fact", "The ledger service listens on port 7311 in preview.")
    hits = top(Retriever(store), "which port does ledger listen on in the preview cluster", 3)
    assert hits[0] == target


def test_bounded_edit_distance_agrees_with_the_full_one() -> None:
    import random

    from llmem_hooks.text.fuzzy import osa_distance

    rng = random.Random(1)
    assert osa_distance("dokcer", "docker") == 1
    for _ in range(5000):
        a = "".join(rng.choice("abcd") for _ in range(rng.randrange(0, 9)))
        b = "".join(rng.choice("abcd") for _ in range(rng.randrange(0, 9)))
        full = osa_distance(a, b)
        for cap in range(4):
            bounded = osa_distance(a, b, cap)
            assert bounded == full if full <= cap else bounded > cap, (a, b, cap)


def test_the_semantic_rrf_k_comes_from_config(
    llmem_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`retrieval.rrf_k_semantic` reaches the CLI's Retriever (10 suits a real model)."""
    from llmem_hooks.cli.quick import Invocation

    llmem_home.mkdir(parents=True, exist_ok=True)
    (llmem_home / "config.yaml").write_text("retrieval:\n  rrf_k_semantic: 10\n")
    with MemoryStore(llmem_home / "m.db") as st:
        assert Invocation().retriever(st).rrf_k_semantic == 10


def test_a_text_held_in_several_sessions_is_shown_once(tmp_path: Path) -> None:
    """Heuristic session summaries read the same in every session: a question about
    sessions got three copies in its top five. The best ranked copy stays; the places the
    others took go to other memories, and paging does not bring a copy back."""
    with MemoryStore(tmp_path / "m.db") as st:
        copies = [
            st.add(
                "event",
                "Session summary:  2 user turns, 2 assistant replies."
                if n
                else "session summary: 2 user turns, 2 assistant replies.",
                session_id=f"s{n}",
                dedupe=False,
            )
            for n in range(3)
        ]
        other = st.add("fact", "The session cookie expires after two user turns of inactivity")
        similar = st.add("event", "Session summary: 3 user turns, 3 assistant replies.")
        r = Retriever(st)
        hits = r.find("session summary user turns", limit=10, search_mode="fts")
        ids = [h.id for h in hits]
        assert len(set(ids) & set(copies)) == 1
        assert {other, similar} <= set(ids)  # another text, however alike, is its own
        pages = [
            h.id
            for page in range(3)
            for h in r.find("session summary user turns", limit=1, offset=page, search_mode="fts")
        ]
        assert pages == ids[:3]
