"""Stale memories: which of a set of memories are stale, why, and the review a person does
of them in the viewer (docs/citations.md, "What an agent and a person see").

Reads for the hot paths take a list of candidate ids and ask one indexed query
(``idx_citations_memory``) for all of them: recall and the session-start context filter
what they found, never one query per memory. A memory is stale when any of its citations
is (`citations.overall`); one without citations, unchecked or valid is kept. An episode
(the raw exchange) is never cited, but it says what a memory learned from it says: the
episode whose messages a stale memory was learned from is stale with it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from ..evidence.cite import Citation
from ..timestamps import now_iso
from . import citations
from .db import Database
from .episodes import EPISODE_WHERE
from .records import MEMORY_COLUMNS, row_to_memory

MAX_STALE_REASON = 300  # one memory's reason as a search result shows it
CONFIRMED = "confirmed by a person in the viewer"


# The episodes among the candidates (?1) whose exchange a stale memory was learned from:
# same session, and one of the memory's source messages among the episode's. Indexed by
# the candidates' ids, memories' session, and citations' memory.
_STALE_EPISODES = (
    "SELECT DISTINCT e.id, m.id FROM memories e "
    "JOIN memories m ON m.session_id = e.session_id AND m.id != e.id "
    "JOIN citations c ON c.memory_id = m.id AND c.status = 'stale' "
    "WHERE e.id IN (SELECT value FROM json_each(?1)) "
    f"AND e.{EPISODE_WHERE.replace(' AND ', ' AND e.')} "
    "AND m.valid_until IS NULL AND EXISTS (SELECT 1 FROM json_each(m.source_message_ids) s "
    "WHERE s.value IN (SELECT value FROM json_each(e.source_message_ids)))"
)


def stale_among(db: Database, memory_ids: Iterable[str]) -> set[str]:
    """The ids among ``memory_ids`` with a stale citation, and the episodes among them that
    a stale memory was learned from (two indexed queries)."""
    ids = list(dict.fromkeys(memory_ids))
    if not ids:
        return set()
    arg = json.dumps(ids)
    rows = db.fetchall(
        "SELECT DISTINCT memory_id FROM citations "
        "WHERE memory_id IN (SELECT value FROM json_each(?)) AND status = 'stale'",
        (arg,),
    )
    return {str(r[0]) for r in rows} | set(stale_episodes(db, ids))


def stale_episodes(db: Database, memory_ids: Sequence[str]) -> dict[str, list[str]]:
    """``{episode id: [stale memory ids]}`` for the episodes among ``memory_ids`` that a
    stale memory was learned from."""
    out: dict[str, list[str]] = {}
    if memory_ids:
        for eid, mid in db.fetchall(_STALE_EPISODES, (json.dumps(list(memory_ids)),)):
            out.setdefault(str(eid), []).append(str(mid))
    return out


def stale_reasons(db: Database, memory_ids: Iterable[str]) -> dict[str, str]:
    """``{memory id: reason}`` for the stale ones among ``memory_ids`` (one query): each
    stale citation as ``path:12-30 <what the check found> (changed in <commit>)``, joined
    by ``; ``, on one line, at most `MAX_STALE_REASON` characters."""
    ids = list(dict.fromkeys(memory_ids))
    if not ids:
        return {}
    rows = db.fetchall(
        "SELECT memory_id, path, line_start, line_end, reason, changed_by FROM citations "
        "WHERE memory_id IN (SELECT value FROM json_each(?)) AND status = 'stale' "
        "ORDER BY memory_id, id",
        (json.dumps(ids),),
    )
    parts: dict[str, list[str]] = {}
    for mid, path, start, end, reason, changed_by in rows:
        text = f"{Citation(path, start, end).spec()} {reason or 'the cited lines changed'}"
        if changed_by:
            text += f" (changed in {str(changed_by)[:10]})"
        parts.setdefault(str(mid), []).append(text)
    for eid, learned in stale_episodes(db, ids).items():
        if eid not in parts:
            mine = stale_reasons(db, learned)
            parts[eid] = [f"says what {m[:8]} said: {mine.get(m, 'stale')}" for m in learned]
    out = {}
    for mid, texts in parts.items():
        line = " ".join("; ".join(texts).split())
        out[mid] = line if len(line) <= MAX_STALE_REASON else line[: MAX_STALE_REASON - 1] + "…"
    return out


def stale_memories(db: Database, limit: int, project: str | None = None) -> list[dict[str, Any]]:
    """Memories not forgotten with a stale citation, the most recently checked first (the
    viewer's review list); ``project``: that project's only."""
    where = "AND m.project = ?" if project is not None else ""
    params: tuple[Any, ...] = (project, limit) if project is not None else (limit,)
    rows = db.fetchall(
        f"SELECT {MEMORY_COLUMNS} FROM memories m JOIN ("
        "SELECT memory_id, MAX(checked_at) AS checked FROM citations WHERE status = 'stale' "
        "GROUP BY memory_id) s ON s.memory_id = m.id "
        f"WHERE m.valid_until IS NULL {where} ORDER BY s.checked DESC, m.seq DESC LIMIT ?",
        params,
    )
    return [row_to_memory(r) for r in rows]


def project_directory(db: Database, project: str | None) -> str | None:
    """The working directory of the project's most recent session (where its files are
    on this machine), or None when no session of it is known."""
    if project is None:
        return None
    row = db.fetchone(
        "SELECT directory FROM sessions WHERE project = ? AND directory IS NOT NULL "
        "AND directory != '' ORDER BY last_activity_ms DESC, created_ms DESC LIMIT 1",
        (project,),
    )
    return str(row[0]) if row else None


def rewrite(
    db: Database,
    memory_id: str,
    drop: Iterable[int],
    cites: Sequence[Citation],
    reason: str = CONFIRMED,
) -> None:
    """Replace a memory's citations ``drop`` (row ids) by ``cites``, captured from the
    working tree just now and so recorded valid with ``reason``, in one transaction: all of
    it lands or nothing changes. A kept row at the same path and lines as a new one goes
    too (the new capture replaces it)."""
    new = {(c.path, c.line_start, c.line_end) for c in cites}
    with db.transaction() as conn:
        rows = conn.execute(
            "SELECT id, path, line_start, line_end FROM citations WHERE memory_id = ?",
            (memory_id,),
        ).fetchall()
        gone = set(drop) | {r[0] for r in rows if (r[1], r[2], r[3]) in new}
        conn.executemany("DELETE FROM citations WHERE id = ?", [(i,) for i in sorted(gone)])
        citations.add(db, memory_id, cites)
        conn.executemany(
            "UPDATE citations SET status = 'valid', reason = ?, checked_at = ?, "
            "changed_by = NULL, check_ms = NULL "
            "WHERE memory_id = ? AND path = ? AND line_start = ? AND line_end = ?",
            [(reason, now_iso(), memory_id, *key) for key in sorted(new)],
        )
