"""``search --team``: the question asked of the hub too, its answers fused with the local ones.

The hub gets the question's words as the local search makes them (`content_words`: stop
words out) and ranks with PostgreSQL's own full text (and pgvector when both sides have a
vector). Both lists are fused by reciprocal rank (the retriever's own fusion: k = 60); a
memory both hold (a shared memory pulled here) shows once, as the local copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..search.retriever import SearchHit
from ..text.query import content_words

if TYPE_CHECKING:
    from ..store.hub import Hub, HubMemory

RRF_K = 60


def hub_memory_as_local(mem: HubMemory) -> dict[str, Any]:
    """A hub record in the local `Memory` shape, so the CLI prints it like any other."""
    prov = dict(mem.provenance or {})
    confidence = prov.get("confidence")
    return {
        "id": mem.id,
        "type": mem.type,
        "content": mem.content,
        "summary": None,
        "source": "team",
        "confidence": float(confidence) if isinstance(confidence, int | float) else 0.8,
        "metadata": {"team": {"author": mem.author, "hub_id": mem.id}},
        "hints": [],
        "created_at": mem.created_at or mem.updated_at,
        "updated_at": mem.updated_at,
        "accessed_at": None,
        "access_count": 0,
        "valid_until": None,
        "invalidation_reason": None,
        "expires_at": None,
        "entered_by": mem.author,
        "project": mem.project,
        "session_id": None,
        "source_message_ids": [],
        "tags": list(mem.tags),
    }


def team_hits(
    hub: Hub,
    question: str,
    projects: Sequence[str],
    limit: int,
    embedding: Sequence[float] | None = None,
) -> list[SearchHit]:
    """The hub's answers to ``question`` in ``projects``, best first."""
    words = content_words(question)
    if not words or not projects:
        return []
    found = hub.search(projects, words, limit=limit, embedding=embedding)
    return [
        SearchHit(memory=hub_memory_as_local(mem), match="fts", score=float(score))  # type: ignore[arg-type]
        for mem, score in found
    ]


def fuse(
    local: Sequence[SearchHit],
    remote: Sequence[SearchHit],
    limit: int,
    hub_ids: dict[str, str] | None = None,
) -> list[SearchHit]:
    """Reciprocal-rank fusion of the local and hub lists. ``hub_ids`` maps a local memory
    id to its hub id: the hub's copy of a memory held here is dropped (the local one
    stays, with its local id)."""
    held = set((hub_ids or {}).values()) | {h.id for h in local}
    scores: dict[str, float] = {}
    by_id: dict[str, SearchHit] = {}
    for rank, hit in enumerate(local):
        scores[hit.id] = scores.get(hit.id, 0.0) + 1.0 / (RRF_K + rank + 1)
        by_id.setdefault(hit.id, hit)
    for rank, hit in enumerate(remote):
        if hit.id in held:
            continue
        scores[hit.id] = scores.get(hit.id, 0.0) + 1.0 / (RRF_K + rank + 1)
        by_id.setdefault(hit.id, hit)
    ordered = sorted(scores, key=lambda i: -scores[i])
    out = []
    for i in ordered[:limit]:
        hit = by_id[i]
        hit.rrf = scores[i]
        out.append(hit)
    return out
