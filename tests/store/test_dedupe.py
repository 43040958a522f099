"""Near-duplicate merge: a memory saying the same thing again reinforces the one stored."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from support.fake_ollama import embed_text

from llmem_hooks import MemoryStore
from llmem_hooks.store import DUPLICATE_COSINE, REINFORCEMENT, pack_embedding

DIM = 64
PARAPHRASES = [
    "We deploy the api with make deploy-staging",
    "The api is deployed with make deploy-staging",
    "Deploy the API using `make deploy-staging`",
    "To deploy the api run make deploy-staging",
    "api deploys go through make deploy-staging",
    "Use make deploy-staging to deploy the api",
    "make deploy-staging deploys the api",
    "Deploying the api: make deploy-staging",
    "The staging deploy of the api is make deploy-staging",
    "We ship the api with make deploy-staging",
]


def _unit(vec: list[float]) -> list[float]:
    n = math.sqrt(sum(x * x for x in vec)) or 1.0
    return [x / n for x in vec]


def near(base: list[float], seed: int, noise: float = 0.02) -> list[float]:
    """``base`` plus a little noise: what an embedder gives for a paraphrase."""
    rng = random.Random(seed)
    return _unit([x + rng.gauss(0, noise) for x in base])


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


BASE = embed_text("deploy the api with make deploy-staging", DIM)


def test_ten_paraphrases_leave_one_reinforced_memory(store: MemoryStore) -> None:
    vectors = [near(BASE, i) for i in range(10)]
    assert min(cosine(vectors[0], v) for v in vectors) >= DUPLICATE_COSINE
    ids = [
        store.add(
            "procedure",
            text,
            embedding=vec,
            confidence=0.6,
            tags=[f"t{i}"],
            project="github.com/acme/api",
        )
        for i, (text, vec) in enumerate(zip(PARAPHRASES, vectors, strict=True))
    ]
    assert len(set(ids)) == 1 and store.count() == 1
    mem = store.get(ids[0])
    assert mem is not None
    assert mem["content"] == PARAPHRASES[0]  # the first wording stays
    assert mem["tags"] == [f"t{i}" for i in range(10)]
    assert mem["metadata"]["reinforcements"] == 9
    assert mem["confidence"] == pytest.approx(min(1.0, 0.6 + 9 * REINFORCEMENT))
    assert mem["updated_at"] > mem["created_at"]


def test_confidence_takes_the_higher_and_is_capped(store: MemoryStore) -> None:
    a = store.add("fact", "redis runs on 6379", embedding=BASE, confidence=0.5)
    store.add("fact", "redis listens on 6379", embedding=near(BASE, 1), confidence=0.9)
    assert store.get(a)["confidence"] == pytest.approx(0.9 + REINFORCEMENT)  # type: ignore[index]
    for i in range(5):
        store.add("fact", f"redis is on port 6379 ({i})", embedding=near(BASE, 2 + i))
    assert store.get(a)["confidence"] == 1.0  # type: ignore[index]
    assert store.get(a)["metadata"]["reinforcements"] == 6  # type: ignore[index]


def test_unrelated_memories_are_not_merged(store: MemoryStore) -> None:
    texts = [
        "deploy the api with make deploy-staging",
        "redis runs on port 6379 in staging",
        "the user prefers pnpm over npm",
        "postgres backups run nightly at 02:00",
    ]
    ids = [store.add("fact", t, embedding=embed_text(t, DIM)) for t in texts]
    assert len(set(ids)) == 4 and store.count() == 4


def test_another_project_or_global_is_not_merged(store: MemoryStore) -> None:
    a = store.add("fact", PARAPHRASES[0], embedding=BASE, project="github.com/acme/api")
    b = store.add("fact", PARAPHRASES[1], embedding=near(BASE, 1), project="github.com/acme/web")
    c = store.add("fact", PARAPHRASES[2], embedding=near(BASE, 2))  # global
    d = store.add("fact", PARAPHRASES[3], embedding=near(BASE, 3))  # global again: merges
    assert len({a, b, c}) == 3 and d == c


def test_invalid_memories_and_dedupe_false_do_not_merge(store: MemoryStore) -> None:
    a = store.add("fact", PARAPHRASES[0], embedding=BASE)
    store.invalidate(a, "outdated")
    b = store.add("fact", PARAPHRASES[1], embedding=near(BASE, 1))
    assert b != a
    c = store.add("fact", PARAPHRASES[2], embedding=near(BASE, 2), dedupe=False)
    assert c != b and store.count() == 2


def test_the_threshold_is_a_store_parameter(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "strict.db", duplicate_cosine=0.9999) as st:
        a = st.add("fact", PARAPHRASES[0], embedding=BASE)
        b = st.add("fact", PARAPHRASES[1], embedding=near(BASE, 1))
        assert a != b
    with MemoryStore(tmp_path / "loose.db", duplicate_cosine=0.0) as st:
        a = st.add("fact", "one thing", embedding=embed_text("one thing", DIM))
        b = st.add("fact", "something else", embedding=embed_text("something else", DIM))
        assert a == b


def test_exact_duplicates_are_reinforced_too_and_gain_a_missing_vector(
    store: MemoryStore,
) -> None:
    a = store.add("fact", "Use pnpm for installs", confidence=0.7)
    b = store.add("fact", "use  PNPM for installs", embedding=BASE)  # default confidence 0.8
    assert a == b
    mem = store.get(a)
    assert mem is not None and mem["metadata"]["reinforcements"] == 1
    assert mem["confidence"] == pytest.approx(0.8 + REINFORCEMENT)
    assert store.get_embedding(a) == pytest.approx(BASE, abs=1e-6)
    assert [h["id"] for h in store.nearest(pack_embedding(BASE))] == [a]  # type: ignore[arg-type]


def test_near_duplicate_found_through_the_prefilter(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "m.db", prefilter_threshold=20) as st:
        for i in range(60):
            t = f"unrelated memory number {i} about topic {i * 7}"
            st.add("fact", t, embedding=embed_text(t, DIM), project="p")
        a = st.add("fact", PARAPHRASES[0], embedding=BASE, project="p")
        assert st.add("fact", PARAPHRASES[1], embedding=near(BASE, 1), project="p") == a
        assert st.count() == 61
