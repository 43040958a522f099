"""Episodes in the store: their size and their retention (docs/episodes.md).

Episodes are ``conversation`` memories with ``source = 'episode'`` (written by
`llmem_hooks.session.hooks`); this module only counts and prunes them, so growth stays
bounded by ``episodes.retention_days`` and ``episodes.max_count``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..timestamps import to_iso
from .db import Database
from .sessions import log_extraction

if TYPE_CHECKING:
    from .memories import MemoryStore

EPISODE_WHERE = "type = 'conversation' AND source = 'episode'"
PRUNE_BATCH = 5000
# What retention removed, kept as two extraction_log rows (source_type "episodes", like the
# backfill marker; memory_count adds up): no migration, and `stats` can say it.
RETENTION_LOG = "episodes"
RETENTION_SKIPPED = "retention-skipped"  # exchanges too old to store at all (backfill, idle)
RETENTION_PRUNED = "retention-pruned"  # stored episodes deleted later by retention or the cap
# Throwaways (issue 20): exchanges with nothing worth keeping, never stored as episodes, and
# sessions that got no summary (nothing of substance, or nothing the exchanges don't say).
NOISE_SKIPPED = "noise-skipped"
SUMMARY_SKIPPED = "summary-skipped"


def episode_stats(db: Database) -> dict[str, Any]:
    """How many episodes, of how many sessions, how many bytes of text (content and
    metadata, the index aside), the oldest and newest time."""
    row = db.fetchone(
        "SELECT count(*), count(DISTINCT session_id),"
        " coalesce(sum(length(CAST(content AS BLOB)) + length(CAST(metadata AS BLOB))), 0),"
        f" min(created_at), max(created_at) FROM memories WHERE {EPISODE_WHERE}",
        (),
    )
    count, sessions, text_bytes, oldest, newest = row
    return {
        "count": count,
        "sessions": sessions,
        "text_bytes": text_bytes,
        "bytes_per_episode": round(text_bytes / count) if count else 0,
        "oldest": oldest,
        "newest": newest,
        **retention_counts(db),
        **noise_counts(db),
    }


def retention_counts(db: Database) -> dict[str, int]:
    """How many exchanges retention kept out (never stored: older than the window when
    read) and how many stored episodes it deleted since the store was created."""
    out = {"retention_skipped": 0, "retention_pruned": 0}
    for source_id, count in db.fetchall(
        "SELECT source_id, memory_count FROM extraction_log"
        " WHERE source_type = ? AND source_id IN (?, ?)",
        (RETENTION_LOG, RETENTION_SKIPPED, RETENTION_PRUNED),
    ):
        out["retention_skipped" if source_id == RETENTION_SKIPPED else "retention_pruned"] = int(
            count or 0
        )
    return out


def noise_counts(db: Database) -> dict[str, int]:
    """How many exchanges were not stored as episodes for holding nothing worth keeping
    (``noise_skipped``), and how many ended sessions got no summary (``summaries_skipped``)."""
    out = {"noise_skipped": 0, "summaries_skipped": 0}
    for source_id, count in db.fetchall(
        "SELECT source_id, memory_count FROM extraction_log"
        " WHERE source_type = ? AND source_id IN (?, ?)",
        (RETENTION_LOG, NOISE_SKIPPED, SUMMARY_SKIPPED),
    ):
        out["noise_skipped" if source_id == NOISE_SKIPPED else "summaries_skipped"] = int(
            count or 0
        )
    return out


def count_noise(db: Database, *, exchanges: int = 0, summaries: int = 0) -> None:
    """Add to the persisted throwaway counts (joins the caller's transaction)."""
    with db.transaction():
        if exchanges:
            log_extraction(db, RETENTION_LOG, NOISE_SKIPPED, memory_count=exchanges)
        if summaries:
            log_extraction(db, RETENTION_LOG, SUMMARY_SKIPPED, memory_count=summaries)


def count_retention(db: Database, *, skipped: int = 0, pruned: int = 0) -> None:
    """Add to the persisted retention counts (joins the caller's transaction)."""
    with db.transaction():
        if skipped:
            log_extraction(db, RETENTION_LOG, RETENTION_SKIPPED, memory_count=skipped)
        if pruned:
            log_extraction(db, RETENTION_LOG, RETENTION_PRUNED, memory_count=pruned)


def retention_cutoff_ms(retention_days: float, now_s: float) -> int:
    """Epoch ms before which an exchange is older than ``retention_days`` (0: keep all)."""
    return int((now_s - retention_days * 86400) * 1000) if retention_days > 0 else 0


def episodes_to_prune(db: Database, cutoff: str | None, max_count: int) -> list[tuple[int, str]]:
    """(seq, id) of episodes created before ``cutoff`` and, with ``max_count``, the oldest
    beyond that many."""
    found: dict[int, str] = {}
    if cutoff is not None:
        for seq, mid in db.fetchall(
            f"SELECT seq, id FROM memories WHERE {EPISODE_WHERE} AND created_at < ?", (cutoff,)
        ):
            found[seq] = mid
    if max_count > 0:
        for seq, mid in db.fetchall(
            f"SELECT seq, id FROM memories WHERE {EPISODE_WHERE}"
            " ORDER BY created_at DESC, seq DESC LIMIT -1 OFFSET ?",
            (max_count,),
        ):
            found[seq] = mid
    return sorted(found.items())


def prune_episodes(
    store: MemoryStore,
    retention_days: float,
    max_count: int,
    backup: Callable[[list[str]], object] | None = None,
) -> int:
    """Delete episodes older than ``retention_days`` (0: none by age), then the oldest
    beyond ``max_count`` (0: no cap). ``backup(ids)`` runs first (a failure there
    deletes nothing). Returns how many were deleted."""
    cutoff = (
        to_iso(datetime.now(UTC) - timedelta(days=retention_days)) if retention_days > 0 else None
    )
    doomed = dict(episodes_to_prune(store.db, cutoff, max_count))
    if doomed and backup is not None:
        backup(list(doomed.values()))
    seqs = list(doomed)
    for start in range(0, len(seqs), PRUNE_BATCH):
        batch = seqs[start : start + PRUNE_BATCH]
        marks = ",".join("?" * len(batch))
        with store.db.transaction() as conn:
            conn.execute(f"DELETE FROM memories WHERE seq IN ({marks})", batch)
            store.vectors.remove(batch)
            count_retention(store.db, pruned=len(batch))
    return len(seqs)


def episode_message_ids(db: Database, session_id: str) -> set[str]:
    """The message ids the session's stored episodes came from: an exchange is never
    stored twice, even when its cursor was lost."""
    out: set[str] = set()
    for (ids,) in db.fetchall(
        f"SELECT source_message_ids FROM memories WHERE {EPISODE_WHERE} AND session_id = ?",
        (session_id,),
    ):
        out.update(json.loads(ids or "[]"))
    return out


def set_episode_after(db: Database, memory_id: str, words: str) -> None:
    """Set the words an episode is found by from the exchange after it
    (``metadata.fts_after``; the FTS column follows through the update trigger), once:
    an episode that has them keeps them. Nothing else of the memory changes."""
    with db.transaction():
        db.conn.execute(
            "UPDATE memories SET metadata = json_set(coalesce(metadata, '{}'), '$.fts_after', ?)"
            f" WHERE id = ? AND {EPISODE_WHERE}"
            " AND coalesce(json_extract(metadata, '$.fts_after'), '') = ''",
            (words, memory_id),
        )
