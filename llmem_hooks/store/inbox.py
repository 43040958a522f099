"""The inbox: working memory of limited capacity, consolidated into memories (``inbox``).

Functions over a `MemoryStore`, bound as its methods (``add_to_inbox``, ``consolidate``,
...). The lowest-scored items (at equal score, the oldest) are evicted when the inbox is
full. Extraction stages its unsure candidates here (source ``extract``); the dream's inbox
step (`dream/inbox.py`) promotes or drops them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .memories import MemoryStore

from ..errors import ValidationError
from ..timestamps import now_iso
from .records import INBOX_SOURCES, check_confidence, check_content, check_metadata


def add_to_inbox(
    store: MemoryStore,
    content: str,
    source: str = "note",
    attention_score: float = 0.5,
    metadata: Mapping[str, Any] | None = None,
) -> str:
    """Stage a note in the capacity-limited inbox; the lowest-scored items are evicted
    (at equal score, the oldest)."""
    content = check_content(content)
    meta_json = check_metadata(metadata)  # the limits of the memory it may become
    if source not in INBOX_SOURCES:
        raise ValidationError(f"invalid inbox source {source!r} (use {', '.join(INBOX_SOURCES)})")
    score = check_confidence(attention_score, "attention score")
    item_id = str(uuid.uuid4())
    now = now_iso()
    with store.db.transaction():
        store.db.conn.execute(
            "INSERT INTO inbox(id, content, source, attention_score, metadata, created_at,"
            " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (item_id, content, source, score, meta_json, now, now),
        )
        # At equal score the oldest goes: one session's flood of unsure candidates must
        # not keep every later one out until the dream drops it (docs/dream.md#the-inbox).
        store.db.conn.execute(
            "DELETE FROM inbox WHERE id IN (SELECT id FROM inbox ORDER BY attention_score DESC,"
            " created_at DESC, rowid DESC LIMIT -1 OFFSET ?)",
            (store.inbox_capacity,),
        )
    return item_id


def inbox_row(row: Any) -> dict[str, Any]:
    item = dict(row)
    item["metadata"] = json.loads(item["metadata"] or "{}")
    return item


def get_from_inbox(store: MemoryStore, item_id: str) -> dict[str, Any] | None:
    row = store.db.fetchone("SELECT * FROM inbox WHERE id = ?", (item_id,))
    return inbox_row(row) if row else None


def list_inbox(store: MemoryStore, limit: int = 20) -> list[dict[str, Any]]:
    rows = store.db.fetchall(
        "SELECT * FROM inbox ORDER BY attention_score DESC, created_at ASC LIMIT ?", (limit,)
    )
    return [inbox_row(r) for r in rows]


def inbox_count(store: MemoryStore) -> int:
    return int(store.db.fetchone("SELECT COUNT(*) FROM inbox")[0])


def update_inbox_attention_score(store: MemoryStore, item_id: str, score: float) -> bool:
    score = check_confidence(score, "attention score")
    with store.db.transaction():
        cur = store.db.conn.execute(
            "UPDATE inbox SET attention_score = ?, updated_at = ? WHERE id = ?",
            (score, now_iso(), item_id),
        )
        return cur.rowcount > 0


def remove_from_inbox(store: MemoryStore, item_id: str) -> bool:
    with store.db.transaction():
        return store.db.conn.execute("DELETE FROM inbox WHERE id = ?", (item_id,)).rowcount > 0


def consolidate(
    store: MemoryStore, min_score: float = 0.5, dry_run: bool = False, type: str = "fact"
) -> dict[str, list[dict[str, Any]]]:
    """Promote inbox items scoring >= ``min_score`` to memories; evict the rest.

    Promoted memories get source ``consolidation`` and confidence = attention score.
    The inbox is empty afterwards (unless ``dry_run``). Returns ``{"promoted", "evicted"}``
    (promoted items carry ``memory_id`` unless dry-run).
    """
    check_confidence(min_score, "min_score")
    with store.db.transaction():
        items = [
            inbox_row(r)
            for r in store.db.conn.execute(
                "SELECT * FROM inbox ORDER BY attention_score DESC, created_at ASC"
            )
        ]
        promoted = [i for i in items if i["attention_score"] >= min_score]
        evicted = [i for i in items if i["attention_score"] < min_score]
        if dry_run:
            return {"promoted": promoted, "evicted": evicted}
        records = []
        for item in promoted:
            rec = store._prepare(
                {
                    "type": type,
                    "content": item["content"],
                    "source": "consolidation",
                    "confidence": item["attention_score"],
                    "metadata": item["metadata"],
                }
            )
            if store._find_duplicate(rec) is None:
                records.append(rec)
            item["memory_id"] = rec["id"]
        if records:
            store._insert(records)
        store.db.conn.execute("DELETE FROM inbox")
    return {"promoted": promoted, "evicted": evicted}
