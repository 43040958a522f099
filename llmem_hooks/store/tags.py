"""The ``tags`` and ``memory_tags`` tables: a memory's tags, written inside the caller's
transaction (the memory write, a dream step or an undo that changes them)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from . import vocabulary
from .records import MAX_TAGS


def tag_ids(conn: Any, names: Iterable[str]) -> dict[str, int]:
    """The ids of ``names``, created where missing."""
    names = sorted(set(names))
    if not names:
        return {}
    conn.executemany("INSERT OR IGNORE INTO tags(name) VALUES (?)", [(n,) for n in names])
    ids: dict[str, int] = {}
    for i in range(0, len(names), 500):
        chunk = names[i : i + 500]
        for tid, name in conn.execute(
            f"SELECT id, name FROM tags WHERE name IN ({','.join('?' * len(chunk))})", chunk
        ):
            ids[name.lower()] = tid
    return ids


def set_tags(conn: Any, seq: int, tags: list[str]) -> None:
    """Replace a memory's tags. A merge (a reinforcement, a dream) keeps the first
    `MAX_TAGS`: more would make the memory's export fail to import."""
    tags = tags[:MAX_TAGS]
    conn.execute("DELETE FROM memory_tags WHERE memory_seq = ?", (seq,))
    ids = tag_ids(conn, tags)
    conn.executemany(
        "INSERT INTO memory_tags(memory_seq, tag_id) VALUES (?, ?)",
        [(seq, ids[t]) for t in tags],
    )
    conn.execute("UPDATE memories SET tag_text = ? WHERE seq = ?", (" ".join(tags), seq))
    vocabulary.index_terms(conn, tags)
