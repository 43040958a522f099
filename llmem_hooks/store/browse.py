"""What a person browsing the store reads and undoes (the viewer, `llmem_hooks.viewer.data`):
live memories counted by project and type, the episode an extracted memory came from,
and `restore`, the undo of `MemoryStore.invalidate` (forget).

Module functions over the store's `Database` (``browse.forgotten(store.db)``), like
`sessions`: reads take its lock, writes run in one short ``BEGIN IMMEDIATE`` transaction.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..timestamps import now_iso
from .db import Database
from .episodes import EPISODE_WHERE
from .records import MEMORY_COLUMNS, row_to_memory

LIVE = "(valid_until IS NULL OR valid_until > ?) AND (expires_at IS NULL OR expires_at > ?)"


def counts_by_project_type(db: Database) -> list[tuple[str | None, str, int]]:
    """(project, type, count) of the live memories, biggest projects first (None: global)."""
    now = now_iso()
    with db.lock:
        rows = db.conn.execute(
            f"SELECT project, type, COUNT(*) FROM memories WHERE {LIVE} "
            "GROUP BY project, type ORDER BY project IS NOT NULL, project, COUNT(*) DESC",
            (now, now),
        ).fetchall()
    return [(r[0], str(r[1]), int(r[2])) for r in rows]


def live_types(db: Database) -> set[str]:
    """The types live memories have: what "every type but the episodes" spells out to."""
    now = now_iso()
    with db.lock:
        rows = db.conn.execute(
            f"SELECT DISTINCT type FROM memories WHERE {LIVE}", (now, now)
        ).fetchall()
    return {str(r[0]) for r in rows}


def forgotten(db: Database, limit: int = 200) -> list[dict[str, Any]]:
    """Forgotten (invalidated) memories, most recently forgotten first: what `restore` undoes."""
    with db.lock:
        rows = db.conn.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE valid_until IS NOT NULL "
            "AND valid_until <= ? ORDER BY valid_until DESC, seq DESC LIMIT ?",
            (now_iso(), limit),
        ).fetchall()
    return [row_to_memory(r) for r in rows]


def episode_of(db: Database, memory: dict[str, Any]) -> dict[str, Any] | None:
    """The episode (``conversation`` memory of the same session) that shares a source
    message with ``memory``: where an extracted memory was learned. None for an episode
    itself, a memory without a session or messages, or when no episode overlaps."""
    sid = memory.get("session_id")
    ids = memory.get("source_message_ids") or []
    if not sid or not ids or memory.get("source") == "episode":
        return None
    with db.lock:
        row = db.conn.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.session_id = ? AND {EPISODE_WHERE}"
            " AND EXISTS (SELECT 1 FROM json_each(m.source_message_ids) j"
            "  WHERE j.value IN (SELECT value FROM json_each(?)))"
            # the exchange's own episode, not a part of a long one's middle (same messages)
            " ORDER BY json_extract(m.metadata, '$.part') IS NOT NULL, m.created_at, m.seq"
            " LIMIT 1",
            (sid, json.dumps(list(ids))),
        ).fetchone()
    return row_to_memory(row) if row is not None else None


def restore(db: Database, memory_id: str) -> bool:
    """Undo a forget: the memory is valid again (its vector, dropped by `invalidate`,
    comes back through the sidecar's embedding backfill). False if it is not forgotten."""
    now = now_iso()
    with db.transaction():
        cur = db.conn.execute(
            "UPDATE memories SET valid_until = NULL, invalidation_reason = NULL, updated_at = ?"
            " WHERE id = ? AND valid_until IS NOT NULL AND valid_until <= ?",
            (now, memory_id, now),
        )
        return cur.rowcount > 0


def stats(db: Database, db_path: Path, inbox: int) -> dict[str, Any]:
    """`MemoryStore.stats`: counts by type, tag and agent, plus the database size (call
    under the lock, for one consistent read)."""
    now = now_iso()
    live = (
        "(m.valid_until IS NULL OR m.valid_until > ?) AND "
        "(m.expires_at IS NULL OR m.expires_at > ?)"
    )
    q = db.conn.execute

    def counts(col: str, frm: str = "memories m", limit: int = 1000) -> list[Any]:
        return q(
            f"SELECT {col}, COUNT(*) FROM {frm} WHERE {live} GROUP BY {col} "
            f"ORDER BY COUNT(*) DESC, {col} LIMIT {limit}",
            (now, now),
        ).fetchall()

    by_type = dict(counts("m.type"))
    by_agent = {k or "(unknown)": v for k, v in counts("m.entered_by")}
    by_project = {k or "(global)": v for k, v in counts("m.project", limit=50)}
    by_tag = dict(
        counts(
            "t.name",
            "memory_tags mt JOIN tags t ON t.id = mt.tag_id "
            "JOIN memories m ON m.seq = mt.memory_seq",
            limit=50,
        )
    )
    total = q("SELECT COUNT(*) FROM memories").fetchone()[0]
    invalid = q(
        "SELECT COUNT(*) FROM memories WHERE valid_until IS NOT NULL AND valid_until <= ?",
        (now,),
    ).fetchone()[0]
    # Forgotten wins over expired, so active + forgotten + expired = total (a memory both
    # forgotten and past its expiry was counted twice).
    expired = q(
        "SELECT COUNT(*) FROM memories WHERE expires_at IS NOT NULL AND expires_at <= ?"
        " AND NOT (valid_until IS NOT NULL AND valid_until <= ?)",
        (now, now),
    ).fetchone()[0]
    size = 0
    if str(db_path) != ":memory:":
        for suffix in ("", "-wal", "-shm"):
            p = Path(f"{db_path}{suffix}")
            size += p.stat().st_size if p.exists() else 0
    return {
        "total": total,
        "active": sum(by_type.values()),
        "invalidated": invalid,
        "expired": expired,
        "by_type": by_type,
        "by_tag": by_tag,
        "by_agent": by_agent,
        "by_project": by_project,
        "inbox": inbox,
        "db_path": str(db_path),
        "db_size_bytes": size,
    }
