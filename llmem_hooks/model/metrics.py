"""Embedding quality metrics: do the stored vectors tell memories apart?

Names, thresholds and edge cases follow the LLMem reference (``llmem.metrics`` / Go
``internal/metrics``):

- `anisotropy`: mean pairwise cosine similarity, clamped to [0, 1]. Lower is better; above
  ANISOTROPY_WARNING_THRESHOLD (0.5) every vector points the same way and nearest-neighbour
  search separates memories poorly.
- `similarity_range`: max - min pairwise cosine similarity. Higher is better; below
  SIMILARITY_RANGE_WARNING_THRESHOLD (0.1) all memories look alike to the model.
- `discrimination_gap`: intra-class minus inter-class mean cosine similarity, with memory
  types as classes. Higher is better: memories of one type resemble each other more
  than memories of different types. 0.0 without labels or with a single class.

How it stays fast without numpy: 10,000 vectors make 50M pairs, far too many for Python.
Both means are exact anyway, in O(n x d): over unit vectors u_i with sum S,
``sum_{i<j} u_i . u_j = (|S|^2 - sum |u_i|^2) / 2``, per class and overall. Only the
range needs individual pairs: when there are more than ``max_pairs`` (200,000), it is
taken over all pairs of a deterministic random subset of rows (632 rows: 199,396 pairs)
and the result says so in ``sampled_pairs``. A sampled range can only be smaller than
the true one (it may miss the closest and the farthest pair). Pair similarities come
from ``math.dist`` (C speed): for unit vectors ``cos = 1 - |u - v|^2 / 2``.
METRICS_MAX_EMBEDDINGS (10,000) still caps the number of vectors read.
"""

from __future__ import annotations

import math
import operator
import random
import struct
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass, field, replace
from itertools import repeat
from typing import Any

from ..errors import ValidationError

ANISOTROPY_WARNING_THRESHOLD = 0.5
SIMILARITY_RANGE_WARNING_THRESHOLD = 0.1
METRICS_MAX_EMBEDDINGS = 10_000
METRICS_MAX_PAIRS = 200_000
DEFAULT_SEED = 0

Vector = Sequence[float] | bytes | bytearray | memoryview


@dataclass(frozen=True)
class EmbeddingMetrics:
    """The three quality metrics of a set of vectors, and what they were computed on."""

    anisotropy: float  # [0, 1], lower is better
    similarity_range: float  # higher is better
    discrimination_gap: float | None  # higher is better; None without labels
    count: int  # vectors measured (after the cap)
    dimensions: int
    input_count: int = 0  # vectors given, before the cap
    classes: int = 0  # distinct labels
    pairs: int = 0  # n (n - 1) / 2
    sampled_pairs: int | None = None  # pairs behind similarity_range if sampled, else None
    skipped: int = 0  # vectors of another dimension left out (`metrics_from_rows`)
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def capped(self) -> bool:
        return self.input_count > self.count

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "warnings": list(self.warnings), "capped": self.capped}


def bytes_to_vec(data: bytes | bytearray | memoryview) -> list[float]:
    """Packed little-endian float32 (the store's BLOB format) -> list of floats."""
    if len(data) % 4:
        raise ValidationError(f"embedding of {len(data)} bytes is not packed float32")
    return list(struct.unpack(f"<{len(data) // 4}f", data))


def _as_vector(vec: Vector) -> Sequence[float]:
    return bytes_to_vec(vec) if isinstance(vec, bytes | bytearray | memoryview) else vec


def cosine_similarity(a: Vector, b: Vector) -> float:
    """Cosine similarity in [-1, 1]; 0.0 when either vector is zero (or not finite)."""
    va, vb = _as_vector(a), _as_vector(b)
    if len(va) != len(vb):
        raise ValidationError(f"vectors of different dimensions: {len(va)} and {len(vb)}")
    na, nb = math.hypot(*va), math.hypot(*vb)
    if not (na and nb and math.isfinite(na) and math.isfinite(nb)):
        return 0.0
    dot = sum(map(operator.mul, va, vb))
    return max(-1.0, min(1.0, dot / (na * nb)))


def _unit(vec: Sequence[float]) -> list[float] | None:
    """``vec`` scaled to length 1; None for a zero or non-finite vector (cosine 0)."""
    norm = math.hypot(*vec)
    if not norm or not math.isfinite(norm):
        return None
    inv = 1.0 / norm
    return [x * inv for x in vec]


def _sample_size(max_pairs: int) -> int:
    """The most rows whose pairs number at most ``max_pairs``."""
    return max(2, (1 + math.isqrt(1 + 8 * max(max_pairs, 1))) // 2)


def _squared_norm(vec: Sequence[float]) -> float:
    return sum(map(operator.mul, vec, vec))


@dataclass
class _Summary:
    """One pass over the vectors: per-class sums of unit vectors, plus the unit vectors of
    the rows the similarity range is measured on."""

    count: int = 0
    dimensions: int = 0
    # label -> [rows, non-zero rows, sum of unit vectors]
    classes: dict[Hashable, list[Any]] = field(default_factory=dict)
    sample: list[list[float] | None] = field(default_factory=list)
    sampled: bool = False

    def total(self) -> tuple[int, float]:
        """(non-zero rows, |sum of all unit vectors|^2)."""
        nonzero = sum(c[1] for c in self.classes.values())
        sums = [c[2] for c in self.classes.values() if c[1]]
        if not sums:
            return nonzero, 0.0
        total = sums[0]
        for s in sums[1:]:
            total = list(map(operator.add, total, s))
        return nonzero, _squared_norm(total)


def _summarize(
    embeddings: Sequence[Vector],
    labels: Sequence[Hashable] | None = None,
    max_pairs: int = METRICS_MAX_PAIRS,
    seed: int = DEFAULT_SEED,
    keep_sample: bool = True,
) -> _Summary:
    n = len(embeddings)
    out = _Summary(count=n)
    keep: set[int] = set()
    if keep_sample:
        m = _sample_size(max_pairs)
        if n > m:
            out.sampled = True
            keep = set(random.Random(seed).sample(range(n), m))
    for i, raw in enumerate(embeddings):
        vec = _as_vector(raw)
        if i == 0:
            out.dimensions = len(vec)
        elif len(vec) != out.dimensions:
            raise ValidationError(
                f"embeddings of different dimensions: {out.dimensions} and {len(vec)}"
            )
        unit = _unit(vec)
        label = labels[i] if labels is not None else None
        cls = out.classes.get(label)
        if cls is None:
            cls = out.classes[label] = [0, 0, [0.0] * len(vec)]
        cls[0] += 1
        if unit is not None:
            cls[1] += 1
            cls[2] = list(map(operator.add, cls[2], unit))
        if keep_sample and (not out.sampled or i in keep):
            out.sample.append(unit)
    return out


def _anisotropy(s: _Summary) -> float:
    n = s.count
    if n < 2:
        return 0.0
    nonzero, total_sq = s.total()
    mean = (total_sq - nonzero) / (n * (n - 1))
    return max(0.0, min(1.0, mean))


def _similarity_range(s: _Summary) -> float:
    units = [u for u in s.sample if u is not None]
    has_zero = len(units) < len(s.sample)
    if len(s.sample) < 2:
        return 0.0
    lo_d, hi_d = math.inf, -math.inf  # distances between unit vectors: 0 (same) .. 2
    for i in range(len(units) - 1):
        dists = list(map(math.dist, repeat(units[i], len(units) - i - 1), units[i + 1 :]))
        lo_d, hi_d = min(lo_d, min(dists)), max(hi_d, max(dists))
    sims = [1.0 - d * d / 2.0 for d in (lo_d, hi_d) if math.isfinite(d)]
    if has_zero:
        sims.append(0.0)  # a pair with a zero vector has cosine 0
    sims = [max(-1.0, min(1.0, x)) for x in sims]
    return max(sims) - min(sims)


def _discrimination_gap(s: _Summary) -> float:
    if len(s.classes) < 2:
        return 0.0
    intra_sum = 0.0
    intra_pairs = 0
    for rows, nonzero, vec_sum in s.classes.values():
        intra_sum += (_squared_norm(vec_sum) - nonzero) / 2.0
        intra_pairs += rows * (rows - 1) // 2
    nonzero, total_sq = s.total()
    all_pairs = s.count * (s.count - 1) // 2
    inter_pairs = all_pairs - intra_pairs
    if not intra_pairs or not inter_pairs:
        return 0.0  # every class has one member: nothing to compare within a class
    inter_sum = (total_sq - nonzero) / 2.0 - intra_sum
    return intra_sum / intra_pairs - inter_sum / inter_pairs


def _check_labels(embeddings: Sequence[Vector], labels: Sequence[Hashable] | None) -> bool:
    """True if there are labels to use; raises if their number does not match."""
    if not labels:
        return False
    if len(labels) != len(embeddings):
        raise ValidationError(
            f"{len(labels)} labels for {len(embeddings)} embeddings: give one label per vector"
        )
    return True


def anisotropy(embeddings: Sequence[Vector]) -> float:
    """Mean pairwise cosine similarity, clamped to [0, 1]; 0.0 for fewer than 2 vectors."""
    return _anisotropy(_summarize(embeddings, keep_sample=False))


def similarity_range(
    embeddings: Sequence[Vector], max_pairs: int = METRICS_MAX_PAIRS, seed: int = DEFAULT_SEED
) -> float:
    """Max - min pairwise cosine similarity (over a sample of pairs beyond ``max_pairs``);
    0.0 for fewer than 2 vectors."""
    return _similarity_range(_summarize(embeddings, max_pairs=max_pairs, seed=seed))


def discrimination_gap(embeddings: Sequence[Vector], labels: Sequence[Hashable] | None) -> float:
    """Intra-class minus inter-class mean cosine similarity; 0.0 without labels or with a
    single class; ValidationError if there is not one label per vector."""
    if not _check_labels(embeddings, labels):
        return 0.0
    return _discrimination_gap(_summarize(embeddings, labels, keep_sample=False))


def _warnings(m: EmbeddingMetrics) -> tuple[str, ...]:
    out = []
    if m.count >= 2 and m.anisotropy > ANISOTROPY_WARNING_THRESHOLD:
        out.append(
            f"anisotropy {m.anisotropy:.3f} is above {ANISOTROPY_WARNING_THRESHOLD}: the "
            "vectors crowd into one direction, so similarity separates memories poorly"
        )
    if m.count >= 2 and m.similarity_range < SIMILARITY_RANGE_WARNING_THRESHOLD:
        out.append(
            f"similarity range {m.similarity_range:.3f} is below "
            f"{SIMILARITY_RANGE_WARNING_THRESHOLD}: all memories look alike to the model"
        )
    return tuple(out)


def compute_metrics(
    embeddings: Sequence[Vector],
    labels: Sequence[Hashable] | None = None,
    max_embeddings: int = METRICS_MAX_EMBEDDINGS,
    *,
    max_pairs: int = METRICS_MAX_PAIRS,
    seed: int = DEFAULT_SEED,
) -> EmbeddingMetrics:
    """All metrics in one pass over at most ``max_embeddings`` vectors (the first ones;
    <= 0 means METRICS_MAX_EMBEDDINGS), with labels cut to match."""
    use_labels = _check_labels(embeddings, labels)
    cap = max_embeddings if max_embeddings > 0 else METRICS_MAX_EMBEDDINGS
    given = len(embeddings)
    vecs = embeddings[:cap]
    labs = list(labels[:cap]) if use_labels and labels is not None else None
    s = _summarize(vecs, labs, max_pairs=max_pairs, seed=seed)
    n = s.count
    pairs = n * (n - 1) // 2
    sample_n = len(s.sample)
    metrics = EmbeddingMetrics(
        anisotropy=_anisotropy(s),
        similarity_range=_similarity_range(s),
        discrimination_gap=_discrimination_gap(s) if labs is not None else None,
        count=n,
        dimensions=s.dimensions,
        input_count=given,
        classes=len(s.classes) if labs is not None else 0,
        pairs=pairs,
        sampled_pairs=sample_n * (sample_n - 1) // 2 if s.sampled else None,
    )
    return replace(metrics, warnings=_warnings(metrics))


def metrics_from_rows(
    rows: Sequence[tuple[bytes, str]], max_embeddings: int = METRICS_MAX_EMBEDDINGS
) -> EmbeddingMetrics:
    """Metrics of ``(embedding BLOB, memory type)`` rows as the store returns them, types as
    labels. Vectors of another size than the most common one (left by an earlier
    model) are skipped and counted."""
    sizes = Counter(len(blob) for blob, _ in rows)
    if not sizes:
        return compute_metrics([], max_embeddings=max_embeddings)
    size = max(sizes, key=lambda k: (sizes[k], k == len(rows[0][0])))
    kept = [(blob, kind) for blob, kind in rows if len(blob) == size]
    m = compute_metrics(
        [blob for blob, _ in kept], [kind for _, kind in kept], max_embeddings=max_embeddings
    )
    skipped = len(rows) - len(kept)
    if not skipped:
        return m
    note = (
        f"{skipped} embeddings of another dimension were left out "
        "(written by an earlier embed model? re-embed them)"
    )
    return replace(m, skipped=skipped, warnings=(*m.warnings, note))
