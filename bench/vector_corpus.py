"""The bench corpus with embeddings, for the hybrid benchmarks (quality.py, hybrid_speed.py).

Vectors come from the deterministic hashed bag-of-words embedder of tests/support/fake_ollama.py
(`embed_text`: words plus character trigrams, L2-normalised), computed in process: no
model, so the numbers measure the store and the fusion, not an embedding model. Computing
100k x 768 vectors in pure Python takes about 30 s, so they are cached under the work dir
as raw little-endian float32 (``vectors-<n>-<dim>.f32``, one row per memory in corpus
order). The databases are ``hybrid-<n>-<dim>.db`` next to them (built once, stamped).
"""

from __future__ import annotations

import struct
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import corpus
from support.fake_ollama import embed_text

from llmem_hooks import MemoryStore


class HashEmbedder:
    """In-process embedder with the Retriever's interface; counts the time it spends."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.seconds = 0.0
        self.calls = 0

    def embed(self, text: str) -> list[float]:
        t0 = time.perf_counter()
        vec = embed_text(text, self.dim)
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        return vec


class CachedEmbedder:
    """Answers from vectors computed beforehand, so a timed search excludes embedding."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def embed(self, text: str) -> list[float]:
        return self.vectors[text]


def vectors(texts: Sequence[str], dim: int, cache: Path) -> list[bytes]:
    """Packed float32 vectors of ``texts``, read from / written to ``cache``."""
    size = 4 * dim
    if cache.exists() and cache.stat().st_size == size * len(texts):
        data = cache.read_bytes()
        return [data[i * size : (i + 1) * size] for i in range(len(texts))]
    out = [struct.pack(f"<{dim}f", *embed_text(t, dim)) for t in texts]
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(".tmp")
    tmp.write_bytes(b"".join(out))
    tmp.replace(cache)
    return out


def build(n: int, dim: int, work: Path, seed: int = 7) -> tuple[list[corpus.Memory], Path]:
    """(memories, db path) of the ``n``-memory corpus with ``dim``-d embeddings."""
    memories = corpus.generate(n, seed)
    path = work / f"hybrid-{n}-{dim}.db"
    stamp = path.with_suffix(".ok")
    if path.exists() and stamp.exists() and stamp.read_text() == f"{n}:{dim}:{seed}":
        return memories, path
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    vecs = vectors([m.record["content"] for m in memories], dim, work / f"vectors-{n}-{dim}.f32")
    records = [{**m.record, "embedding": v} for m, v in zip(memories, vecs, strict=True)]
    with MemoryStore(path, vec_dimensions=dim) as store:
        store.import_memories(records)
    stamp.write_text(f"{n}:{dim}:{seed}")
    return memories, path
