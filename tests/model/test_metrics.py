"""Embedding quality metrics (llmem_hooks.model.metrics), the store helpers that feed them, and
``llmem-hooks stats --embeddings``.

Values are checked on hand-made vectors and against a brute-force pairwise computation.
"""

from __future__ import annotations

import json
import math
import random
import struct
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from llmem_hooks import MemoryStore
from llmem_hooks.cli import main
from llmem_hooks.errors import ValidationError
from llmem_hooks.model.metrics import (
    ANISOTROPY_WARNING_THRESHOLD,
    METRICS_MAX_EMBEDDINGS,
    SIMILARITY_RANGE_WARNING_THRESHOLD,
    EmbeddingMetrics,
    anisotropy,
    bytes_to_vec,
    compute_metrics,
    cosine_similarity,
    discrimination_gap,
    metrics_from_rows,
    similarity_range,
)


def pack(vec: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(vec)}f", *vec)


def brute(vectors: list[list[float]], labels: list[str] | None = None) -> dict[str, float]:
    """The definitions, pair by pair."""
    sims, intra, inter = [], [], []
    for i in range(len(vectors)):
        for j in range(i + 1, len(vectors)):
            c = cosine_similarity(vectors[i], vectors[j])
            sims.append(c)
            if labels:
                (intra if labels[i] == labels[j] else inter).append(c)
    out = {
        "anisotropy": max(0.0, min(1.0, sum(sims) / len(sims))),
        "similarity_range": max(sims) - min(sims),
    }
    if labels:
        out["discrimination_gap"] = sum(intra) / len(intra) - sum(inter) / len(inter)
    return out


def clustered(n: int, dims: int, classes: int, seed: int = 1) -> tuple[list[list[float]], list]:
    rng = random.Random(seed)
    vecs, labels = [], []
    for i in range(n):
        c = i % classes
        vecs.append([rng.gauss(0, 1) + (1.5 if k % classes == c else 0.0) for k in range(dims)])
        labels.append(f"type{c}")
    return vecs, labels


# -- thresholds and helpers -----------------------------------------------------------------
def test_reference_constants() -> None:
    assert ANISOTROPY_WARNING_THRESHOLD == 0.5
    assert SIMILARITY_RANGE_WARNING_THRESHOLD == 0.1
    assert METRICS_MAX_EMBEDDINGS == 10_000


def test_cosine_similarity() -> None:
    assert cosine_similarity([1, 0], [0, 1]) == 0.0
    assert cosine_similarity([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert cosine_similarity([1, 0], [-3, 0]) == pytest.approx(-1.0)
    assert cosine_similarity([0, 0], [1, 1]) == 0.0  # zero vector
    assert cosine_similarity([0.0], [0.0]) == 0.0
    assert cosine_similarity(pack([1, 1]), [1, 1]) == pytest.approx(1.0)  # bytes accepted
    with pytest.raises(ValidationError, match="dimensions"):
        cosine_similarity([1, 2], [1, 2, 3])


def test_bytes_to_vec_round_trip() -> None:
    assert bytes_to_vec(pack([0.5, -2.0, 3.25])) == [0.5, -2.0, 3.25]
    assert bytes_to_vec(b"") == []
    with pytest.raises(ValidationError):
        bytes_to_vec(b"\x00\x01\x02")


# -- the three metrics ------------------------------------------------------------------------
def test_identical_vectors() -> None:
    vecs = [[0.3, -1.2, 2.0, 0.5]] * 5
    assert anisotropy(vecs) == pytest.approx(1.0)
    assert similarity_range(vecs) == pytest.approx(0.0, abs=1e-7)
    m = compute_metrics(vecs)
    assert m.anisotropy > ANISOTROPY_WARNING_THRESHOLD
    assert len(m.warnings) == 2  # crowded and no spread
    assert "anisotropy" in m.warnings[0] and "similarity range" in m.warnings[1]


def test_orthogonal_vectors() -> None:
    vecs = [[1.0 if i == j else 0.0 for j in range(6)] for i in range(6)]
    assert anisotropy(vecs) == pytest.approx(0.0, abs=1e-12)
    assert similarity_range(vecs) == pytest.approx(0.0, abs=1e-12)  # every pair is 0


def test_opposite_vectors_clamp_anisotropy_and_span_two() -> None:
    vecs = [[1.0, 0.0], [-1.0, 0.0]]
    assert anisotropy(vecs) == 0.0  # mean -1, clamped to [0, 1]
    assert similarity_range([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]]) == pytest.approx(1.0)
    assert similarity_range([[1.0, 0.0], [-1.0, 0.0], [1.0, 0.0]]) == pytest.approx(2.0)


def test_edge_cases_empty_and_single() -> None:
    for vecs in ([], [[1.0, 2.0]]):
        assert anisotropy(vecs) == 0.0
        assert similarity_range(vecs) == 0.0
        m = compute_metrics(vecs)
        assert (m.anisotropy, m.similarity_range, m.pairs, m.warnings) == (0.0, 0.0, 0, ())
        assert m.discrimination_gap is None


def test_zero_vectors_count_as_cosine_zero() -> None:
    vecs = [[1.0, 0.0], [1.0, 0.0], [0.0, 0.0]]
    # pairs: 1.0, 0.0, 0.0
    assert anisotropy(vecs) == pytest.approx(1 / 3)
    assert similarity_range(vecs) == pytest.approx(1.0)
    assert anisotropy([[0.0, 0.0]] * 3) == 0.0
    assert similarity_range([[0.0, 0.0]] * 3) == 0.0


def test_matches_brute_force_on_random_vectors() -> None:
    vecs, labels = clustered(60, 24, 3)
    vecs[7] = [0.0] * 24
    expected = brute(vecs, labels)
    m = compute_metrics(vecs, labels)
    assert m.anisotropy == pytest.approx(expected["anisotropy"], abs=1e-12)
    assert m.similarity_range == pytest.approx(expected["similarity_range"], abs=1e-12)
    assert m.discrimination_gap == pytest.approx(expected["discrimination_gap"], abs=1e-12)
    assert discrimination_gap(vecs, labels) == pytest.approx(m.discrimination_gap)
    assert m.discrimination_gap > 0.1  # the clusters are visible
    assert (m.count, m.dimensions, m.classes, m.pairs) == (60, 24, 3, 1770)
    assert m.sampled_pairs is None and not m.capped and m.warnings == ()


def test_discrimination_gap_hand_made() -> None:
    a, b = [1.0, 0.0], [0.0, 1.0]
    # same type = same vector (intra 1.0), different types orthogonal (inter 0.0)
    assert discrimination_gap([a, a, b, b], ["x", "x", "y", "y"]) == pytest.approx(1.0)
    # labels that do not follow the geometry: intra 0, inter 2/4
    assert discrimination_gap([a, b, a, b], ["x", "x", "y", "y"]) == pytest.approx(-0.5)


def test_discrimination_gap_edge_cases() -> None:
    vecs = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    assert discrimination_gap(vecs, None) == 0.0
    assert discrimination_gap(vecs, []) == 0.0
    assert discrimination_gap(vecs, ["a", "a", "a"]) == 0.0  # one class
    assert discrimination_gap(vecs, ["a", "b", "c"]) == 0.0  # no pair within a class
    with pytest.raises(ValidationError, match="2 labels for 3 embeddings"):
        discrimination_gap(vecs, ["a", "b"])
    with pytest.raises(ValidationError):
        compute_metrics(vecs, ["a", "b", "c", "d"])
    assert compute_metrics(vecs, ["a", "a", "a"]).discrimination_gap == 0.0
    assert compute_metrics(vecs).discrimination_gap is None


def test_mixed_dimensions_are_rejected() -> None:
    with pytest.raises(ValidationError, match="different dimensions"):
        compute_metrics([[1.0, 0.0], [1.0, 0.0, 0.0]])


def test_bytes_and_lists_give_the_same_metrics() -> None:
    vecs, labels = clustered(30, 16, 2)
    vecs = [bytes_to_vec(pack(v)) for v in vecs]  # float32-rounded
    a = compute_metrics(vecs, labels)
    b = compute_metrics([pack(v) for v in vecs], labels)
    assert a == b


# -- cap and sampling -------------------------------------------------------------------------
def test_cap_on_vectors_and_labels() -> None:
    vecs, labels = clustered(50, 8, 2)
    m = compute_metrics(vecs, labels, max_embeddings=20)
    assert (m.count, m.input_count, m.capped, m.pairs) == (20, 50, True, 190)
    assert m == replace(compute_metrics(vecs[:20], labels[:20]), input_count=50)
    expected = brute(vecs[:20], labels[:20])
    assert m.discrimination_gap == pytest.approx(expected["discrimination_gap"])
    # <= 0 means the default cap
    assert compute_metrics(vecs, max_embeddings=0).count == 50
    assert compute_metrics(vecs, max_embeddings=-5).count == 50


def test_default_cap_is_ten_thousand() -> None:
    vecs = [[1.0, float(i % 3)] for i in range(METRICS_MAX_EMBEDDINGS + 25)]
    m = compute_metrics(vecs)
    assert (m.count, m.input_count, m.capped) == (METRICS_MAX_EMBEDDINGS, 10_025, True)


def test_sampled_range_is_deterministic_and_a_lower_bound() -> None:
    vecs, _ = clustered(200, 12, 4)
    exact = compute_metrics(vecs)
    sampled = compute_metrics(vecs, max_pairs=300)
    assert exact.sampled_pairs is None
    assert sampled.sampled_pairs is not None and 0 < sampled.sampled_pairs <= 300
    assert sampled.similarity_range <= exact.similarity_range
    assert sampled.similarity_range > 0.5 * exact.similarity_range
    assert sampled.anisotropy == pytest.approx(exact.anisotropy)  # the means stay exact
    assert compute_metrics(vecs, max_pairs=300) == sampled  # same seed, same sample
    assert similarity_range(vecs, max_pairs=300) == sampled.similarity_range
    assert compute_metrics(vecs, max_pairs=300, seed=7).sampled_pairs == sampled.sampled_pairs


def test_ten_thousand_vectors_of_768_dims_in_a_few_seconds() -> None:
    rng = random.Random(5)
    rows = []
    for i in range(10_000):
        kind = ("fact", "decision", "preference", "procedure")[i % 4]
        vec = [rng.random() - 0.5 + (0.2 if k % 4 == i % 4 else 0.0) for k in range(768)]
        rows.append((pack(vec), kind))
    started = time.monotonic()
    m = metrics_from_rows(rows)
    seconds = time.monotonic() - started
    assert (m.count, m.dimensions, m.classes) == (10_000, 768, 4)
    assert m.pairs == 49_995_000 and m.sampled_pairs is not None
    assert m.sampled_pairs <= 200_000
    assert 0.0 <= m.anisotropy < 0.1 and m.discrimination_gap > 0
    assert seconds < 15, f"{seconds:.1f} s"  # about 2 s on a laptop; generous for CI


def test_metrics_to_dict() -> None:
    m = compute_metrics([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], ["a", "b", "a"])
    d = m.to_dict()
    assert d["count"] == 3 and d["warnings"] == [] and d["capped"] is False
    assert json.loads(json.dumps(d)) == d
    assert isinstance(m, EmbeddingMetrics)


def test_metrics_from_rows_skips_other_dimensions() -> None:
    rows = [(pack([1.0, 0.0, 0.0]), "fact")] * 3 + [(pack([1.0, 0.0]), "fact")]
    m = metrics_from_rows(rows)
    assert (m.count, m.dimensions, m.skipped) == (3, 3, 1)
    assert "another dimension" in m.warnings[-1]
    assert metrics_from_rows([]).count == 0


# -- store helpers ----------------------------------------------------------------------------
def test_store_embedding_helpers(store: MemoryStore) -> None:
    ids = []
    for i in range(5):
        ids.append(
            store.add(
                type="fact" if i % 2 else "decision",
                content=f"memory {i}",
                embedding=[1.0 if k == i else 0.0 for k in range(6)],  # orthogonal
            )
        )
    store.add(type="fact", content="no vector here")
    store.invalidate(ids[0])
    assert store.count_embeddings() == 4
    rows = store.get_embeddings_with_types()
    assert [bytes_to_vec(b).index(1.0) for b, _ in rows] == [4, 3, 2, 1]  # newest first
    assert [t for _, t in rows] == ["decision", "fact", "decision", "fact"]
    assert all(isinstance(b, bytes) for b, _ in rows)
    assert len(store.get_embeddings_with_types(limit=2)) == 2
    assert len(store.get_embeddings_with_types(limit=None)) == 4
    assert len(store.get_embeddings_with_types(limit=0)) == 4
    assert len(store.get_embeddings_with_types(limit=-1)) == 4


# -- llmem-hooks stats --embeddings -----------------------------------------------------------
def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def db(llmem_home: Path) -> Path:
    return llmem_home / "memory.db"


def test_stats_embeddings_empty(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    MemoryStore(db).close()  # an empty database (a missing one is exit 1: test_cli_reads)
    code, out, _ = run_cli(capsys, "stats", "--embeddings")
    assert code == 0 and "none stored" in out
    code, out, _ = run_cli(capsys, "stats", "--embeddings", "--json")
    data = json.loads(out)
    assert code == 0 and data["embedded_memories"] == 0 and data["count"] == 0


def test_stats_embeddings_text_json_markdown(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    vecs, labels = clustered(30, 768, 3)
    with MemoryStore(db) as st:
        for i, (vec, kind) in enumerate(zip(vecs, labels, strict=True)):
            memory_type = ("fact", "decision", "preference")[int(kind[-1])]
            st.add(type=memory_type, content=f"m {i}", embedding=vec)
        st.add(type="fact", content="without a vector")
    code, out, err = run_cli(capsys, "stats", "--embeddings")
    assert code == 0, err
    assert out.startswith("embeddings: 30 memories, 768 dimensions\n")
    assert "anisotropy: " in out and "similarity range: " in out
    assert "discrimination gap: " in out and "across 3 memory types" in out
    assert "pairs: 435\n" in out and "warning:" not in out

    code, out, _ = run_cli(capsys, "stats", "--embeddings", "--json")
    data = json.loads(out)
    expected = compute_metrics(
        [bytes_to_vec(pack(v)) for v in reversed(vecs)],
        [("fact", "decision", "preference")[int(k[-1])] for k in reversed(labels)],
    )
    assert data["embedded_memories"] == 30 and data["count"] == 30
    assert data["anisotropy"] == pytest.approx(expected.anisotropy)
    assert data["similarity_range"] == pytest.approx(expected.similarity_range)
    assert data["discrimination_gap"] == pytest.approx(expected.discrimination_gap)
    assert data["sampled_pairs"] is None and data["warnings"] == []
    assert math.isfinite(data["seconds"])

    code, out, _ = run_cli(capsys, "stats", "--embeddings", "--markdown")
    assert code == 0 and "- anisotropy: " in out


def test_stats_embeddings_warns_past_thresholds(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    with MemoryStore(db) as st:
        for i in range(4):
            # one project each: the store would merge near-duplicates within a project
            st.add(
                type="fact", content=f"alike {i}", embedding=[1.0, 0.001 * i, 0.0], project=f"p{i}"
            )
    code, out, _ = run_cli(capsys, "stats", "--embeddings")
    assert code == 0
    assert "warning: anisotropy" in out and "warning: similarity range" in out
    assert "n/a (one memory type)" in out
    code, out, _ = run_cli(capsys, "stats", "--embeddings", "--markdown")
    assert "- **warning**: anisotropy" in out
    data: dict[str, Any] = json.loads(run_cli(capsys, "stats", "--embeddings", "--json")[1])
    assert len(data["warnings"]) == 2


def test_plain_stats_unchanged_without_the_option(
    capsys: pytest.CaptureFixture[str], db: Path
) -> None:
    with MemoryStore(db) as st:
        st.add(type="fact", content="x", embedding=[1.0, 0.0])
    code, out, _ = run_cli(capsys, "stats")
    assert code == 0 and "memories: 1 active" in out and "anisotropy" not in out
