"""Relations between memories, and from a memory to code (the ``relations`` table).

Functions over the store's `Database`, called by `MemoryStore`'s methods of the same
names (``add_relation``, ``get_relations``, ``traverse_relations``); `check_relation` is
shared with import.
"""

from __future__ import annotations

from typing import Any

from ..errors import NotFoundError, ValidationError
from ..timestamps import now_iso, parse_iso
from .db import Database
from .records import (
    MAX_LIST_ITEMS,
    MAX_TRAVERSAL_DEPTH,
    RELATION_TYPES,
    TARGET_TYPES,
    check_id,
    check_identity,
)


def check_relation(
    source_id: Any,
    target_id: Any,
    relation_type: Any,
    target_type: Any,
    created_at: Any = None,
) -> tuple[str, str, str, str, str]:
    check_id(source_id, "source id")
    if relation_type not in RELATION_TYPES:
        raise ValidationError(
            f"invalid relation type {relation_type!r} (use {', '.join(RELATION_TYPES)})"
        )
    if target_type not in TARGET_TYPES:
        raise ValidationError(f"invalid target type {target_type!r} (use memory or code)")
    if not isinstance(target_id, str) or not target_id or len(target_id) > 1024:
        raise ValidationError(f"invalid relation target {target_id!r}")
    if target_type == "code" and (target_id.startswith("/") or ".." in target_id):
        raise ValidationError("code references must be relative paths without '..'")
    check_identity(target_id, "relation target")
    when = parse_iso(created_at, field="created_at") if created_at else now_iso()
    return (source_id, target_id, target_type, relation_type, when)


def relation_room(conn: Any, source_id: str) -> bool:
    """Whether ``source_id`` may have one more outgoing relation (`MAX_LIST_ITEMS`, the
    limit import checks: a memory with more would make its export fail to import)."""
    row = conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM relations WHERE source_id = ? LIMIT ?)",
        (source_id, MAX_LIST_ITEMS),
    ).fetchone()
    return int(row[0]) < MAX_LIST_ITEMS


def add_relation(
    db: Database,
    source_id: str,
    target_id: str,
    relation_type: str,
    target_type: str = "memory",
) -> int:
    """Link two memories (or a memory to ``path:start:end`` code); returns the relation id."""
    rel = check_relation(source_id, target_id, relation_type, target_type)
    with db.transaction():
        for mid in (source_id, target_id) if target_type == "memory" else (source_id,):
            if not db.conn.execute("SELECT 1 FROM memories WHERE id = ?", (mid,)).fetchone():
                raise NotFoundError(f"no memory with id {mid}")
        if not relation_room(db.conn, source_id):
            raise ValidationError(
                f"memory {source_id} has {MAX_LIST_ITEMS:,} relations; the limit per memory"
            )
        db.conn.execute(
            "INSERT OR IGNORE INTO relations(source_id, target_id, target_type, relation_type,"
            " created_at) VALUES (?, ?, ?, ?, ?)",
            rel,
        )
        return db.conn.execute(
            "SELECT id FROM relations WHERE source_id = ? AND target_id = ? AND relation_type = ?",
            (source_id, target_id, relation_type),
        ).fetchone()[0]


def get_relations(db: Database, memory_id: str) -> list[dict[str, Any]]:
    """Relations from or to this memory."""
    rows = db.fetchall(
        "SELECT id, source_id, target_id, target_type, relation_type, created_at FROM relations"
        " WHERE source_id = ? OR (target_type = 'memory' AND target_id = ?) ORDER BY id",
        (memory_id, memory_id),
    )
    return [dict(r) for r in rows]


def traverse_relations(
    db: Database,
    memory_id: str,
    relation_type: str | None = None,
    max_depth: int = 3,
    target_type: str | None = None,
) -> list[dict[str, Any]]:
    """Memories and code reachable from ``memory_id`` (both directions), nearest first.

    Depth is capped at 5. Each result: target_id, target_type, relation_type, distance.
    """
    depth = max(1, min(int(max_depth), MAX_TRAVERSAL_DEPTH))
    type_cond = "AND r.relation_type = ?" if relation_type else ""
    tparams = [relation_type] if relation_type else []
    sql = f"""
        WITH RECURSIVE walk(node, node_type, relation_type, distance, path) AS (
            SELECT ?, 'memory', NULL, 0, '|' || ? || '|'
            UNION ALL
            SELECT nxt.node, nxt.node_type, nxt.relation_type, w.distance + 1,
                   w.path || nxt.node || '|'
            FROM walk w
            JOIN (
                SELECT r.source_id AS src, r.target_id AS node, r.target_type AS node_type,
                       r.relation_type FROM relations r WHERE 1 {type_cond}
                UNION ALL
                SELECT r.target_id, r.source_id, 'memory', r.relation_type
                FROM relations r WHERE r.target_type = 'memory' {type_cond}
            ) nxt ON nxt.src = w.node AND w.node_type = 'memory'
            WHERE w.distance < ? AND instr(w.path, '|' || nxt.node || '|') = 0
        )
        SELECT node, node_type, relation_type, MIN(distance) AS distance
        FROM walk WHERE distance > 0 GROUP BY node, node_type ORDER BY distance, node
    """
    rows = db.fetchall(sql, [memory_id, memory_id, *tparams, *tparams, depth])
    out = [
        {"target_id": r[0], "target_type": r[1], "relation_type": r[2], "distance": r[3]}
        for r in rows
    ]
    if target_type:
        out = [r for r in out if r["target_type"] == target_type]
    return out
