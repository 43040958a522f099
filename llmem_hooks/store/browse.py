"""What a person browsing the store reads and undoes (the viewer, `llmem_hooks.viewer.data`):
live memories counted by project and type, the episode an extracted memory came from,
and `restore`, the undo of `MemoryStore.invalidate` (forget).

Module functions over a `MemoryStore`, like `sessions`: reads take the store's lock,
writes run in one short ``BEGIN IMMEDIATE`` transaction.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..timestamps import now_iso
from .db import transaction
from .episodes import EPISODE_WHERE
from .records import MEMORY_COLUMNS, row_to_memory

if TYPE_CHECKING:
    from .memories import MemoryStore

LIVE = "(valid_until IS NULL OR valid_until > ?) AND (expires_at IS NULL OR expires_at > ?)"


def counts_by_project_type(store: MemoryStore) -> list[tuple[str | None, str, int]]:
    """(project, type, count) of the live memories, biggest projects first (None: global)."""
    now = now_iso()
    with store._lock:
        rows = store._conn.execute(
            f"SELECT project, type, COUNT(*) FROM memories WHERE {LIVE} "
            "GROUP BY project, type ORDER BY project IS NOT NULL, project, COUNT(*) DESC",
            (now, now),
        ).fetchall()
    return [(r[0], str(r[1]), int(r[2])) for r in rows]


def forgotten(store: MemoryStore, limit: int = 200) -> list[dict[str, Any]]:
    """Forgotten (invalidated) memories, most recently forgotten first: what `restore` undoes."""
    with store._lock:
        rows = store._conn.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE valid_until IS NOT NULL "
            "AND valid_until <= ? ORDER BY valid_until DESC, seq DESC LIMIT ?",
            (now_iso(), limit),
        ).fetchall()
    return [row_to_memory(r) for r in rows]


def episode_of(store: MemoryStore, memory: dict[str, Any]) -> dict[str, Any] | None:
    """The episode (``conversation`` memory of the same session) that shares a source
    message with ``memory``: where an extracted memory was learned. None for an episode
    itself, a memory without a session or messages, or when no episode overlaps."""
    sid = memory.get("session_id")
    ids = memory.get("source_message_ids") or []
    if not sid or not ids or memory.get("source") == "episode":
        return None
    with store._lock:
        row = store._conn.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.session_id = ? AND {EPISODE_WHERE}"
            " AND EXISTS (SELECT 1 FROM json_each(m.source_message_ids) j"
            "  WHERE j.value IN (SELECT value FROM json_each(?)))"
            " ORDER BY m.created_at, m.seq LIMIT 1",
            (sid, json.dumps(list(ids))),
        ).fetchone()
    return row_to_memory(row) if row is not None else None


def restore(store: MemoryStore, memory_id: str) -> bool:
    """Undo a forget: the memory is valid again (its vector, dropped by `invalidate`,
    comes back through the sidecar's embedding backfill). False if it is not forgotten."""
    now = now_iso()
    with store._lock, transaction(store._conn):
        cur = store._conn.execute(
            "UPDATE memories SET valid_until = NULL, invalidation_reason = NULL, updated_at = ?"
            " WHERE id = ? AND valid_until IS NOT NULL AND valid_until <= ?",
            (now, memory_id, now),
        )
        return cur.rowcount > 0
