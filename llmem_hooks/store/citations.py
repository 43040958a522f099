"""A memory's code citations: the table ``citations`` (migration 17; docs/citations.md).

One row per cited passage: the repository-relative path, the line range, the hash of the
cited lines' normalized text and the commit they were seen at (`evidence.cite.Citation`),
plus what the last check found (``status`` 'unchecked' | 'valid' | 'stale', its reason,
when, how long it took, and the commit that changed the lines when git could tell). Rows go
with their memory (ON DELETE CASCADE). Module functions over the store's `Database`
(``citations.of_memory(store.db, id)``); writes join the caller's transaction, so a memory
and its citations land together (`MemoryStore.atomic`).

A memory's state (`overall`): 'stale' if any citation is stale, 'valid' if all are valid,
'unchecked' while some are not checked yet, 'not checkable' when it has none: a memory
without citations is never 'valid'.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import ValidationError
from ..evidence.cite import MAX_LINES, MAX_PER_MEMORY, Citation, check_path
from ..timestamps import now_iso
from .db import Database

STATUSES = ("unchecked", "valid", "stale")
NOT_CHECKABLE = "not checkable"
MAX_REASON = 500
_HEX = re.compile(r"^[0-9a-f]{7,64}$")
_COLUMNS = (
    'id, memory_id, path, line_start, line_end, text_hash, "commit", status, reason, '
    "checked_at, changed_by, check_ms, created_at"
)


@dataclass(frozen=True)
class StoredCitation:
    id: int
    memory_id: str
    path: str
    line_start: int
    line_end: int
    text_hash: str | None
    commit: str | None
    status: str = "unchecked"
    reason: str | None = None
    checked_at: str | None = None
    changed_by: str | None = None  # the commit that changed the cited lines, when known
    check_ms: float | None = None
    created_at: str | None = None

    def citation(self) -> Citation:
        return Citation(self.path, self.line_start, self.line_end, self.text_hash, self.commit)

    def spec(self) -> str:
        return self.citation().spec()

    def to_dict(self) -> dict[str, Any]:
        """What ``show --json``, ``memory_get`` and the viewer print (and exports carry)."""
        out = asdict(self)
        del out["id"], out["memory_id"]
        return {"spec": self.spec(), **out}


def _check(c: Citation) -> Citation:
    """ValidationError unless ``c`` is a citation the table may hold."""
    path = check_path(c.path)
    for value in (c.line_start, c.line_end):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValidationError(f"citation {path}: lines must be whole numbers from 1")
    if c.line_end < c.line_start or c.line_end - c.line_start + 1 > MAX_LINES:
        raise ValidationError(f"citation {path}: lines must be START-END, at most {MAX_LINES}")
    for name, digest in (("text hash", c.text_hash), ("commit", c.commit)):
        if digest is not None and (not isinstance(digest, str) or not _HEX.match(digest)):
            raise ValidationError(f"citation {path}: the {name} must be hexadecimal")
    return Citation(path, c.line_start, c.line_end, c.text_hash, c.commit)


def add(db: Database, memory_id: str, cites: Iterable[Citation]) -> int:
    """Attach ``cites`` to a memory (one already cited with the same path and lines is
    skipped). All or nothing: ValidationError for a bad one or past `MAX_PER_MEMORY`.
    Returns how many rows were added."""
    checked = [_check(c) for c in cites]
    if not checked:
        return 0
    with db.transaction() as conn:
        if not conn.execute("SELECT 1 FROM memories WHERE id = ?", (memory_id,)).fetchone():
            raise ValidationError(f"no memory {memory_id} to cite for")
        have = {
            (r[0], r[1], r[2])
            for r in conn.execute(
                "SELECT path, line_start, line_end FROM citations WHERE memory_id = ?",
                (memory_id,),
            )
        }
        new = []
        for c in checked:
            if (c.path, c.line_start, c.line_end) not in have:
                have.add((c.path, c.line_start, c.line_end))
                new.append(c)
        if len(have) > MAX_PER_MEMORY:
            raise ValidationError(f"at most {MAX_PER_MEMORY} citations per memory")
        now = now_iso()
        conn.executemany(
            'INSERT INTO citations(memory_id, path, line_start, line_end, text_hash, "commit",'
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (memory_id, c.path, c.line_start, c.line_end, c.text_hash, c.commit, now)
                for c in new
            ],
        )
    return len(new)


def of_memory(db: Database, memory_id: str) -> list[StoredCitation]:
    return of_memories(db, [memory_id]).get(memory_id, [])


def of_memories(db: Database, memory_ids: Sequence[str]) -> dict[str, list[StoredCitation]]:
    """Citations of many memories in one read: memory id -> its citations (in the order
    they were added); memories without any are absent."""
    out: dict[str, list[StoredCitation]] = {}
    if not memory_ids:
        return out
    rows = db.fetchall(
        f"SELECT {_COLUMNS} FROM citations "
        "WHERE memory_id IN (SELECT value FROM json_each(?)) ORDER BY memory_id, id",
        (json.dumps(list(memory_ids)),),
    )
    for row in rows:
        out.setdefault(row[1], []).append(StoredCitation(*row))
    return out


def citing(db: Database, path: str, *, valid_memories_only: bool = True) -> list[str]:
    """Ids of the memories citing ``path`` (repository-relative), newest first; by
    default only memories not forgotten."""
    path = check_path(path)
    alive = "AND m.valid_until IS NULL" if valid_memories_only else ""
    rows = db.fetchall(
        "SELECT DISTINCT m.id, m.seq FROM citations c JOIN memories m ON m.id = c.memory_id "
        f"WHERE c.path = ? {alive} ORDER BY m.seq DESC",
        (path,),
    )
    return [r[0] for r in rows]


def record_check(
    db: Database,
    citation_id: int,
    status: str,
    *,
    reason: str | None = None,
    updated: Citation | None = None,
    changed_by: str | None = None,
    check_ms: float | None = None,
    checked_at: str | None = None,
) -> bool:
    """What a check found for one citation: its ``status`` and ``reason``, the citation as
    the checker moved it (``updated``: new path, lines, hash, commit) if it did, the commit
    that changed the lines, how long it took. False if the citation is gone."""
    if status not in STATUSES:
        raise ValidationError(f"citation status must be one of {', '.join(STATUSES)}")
    if reason is not None:
        reason = str(reason)[:MAX_REASON]
    if changed_by is not None and not _HEX.match(changed_by):
        raise ValidationError("changed_by must be a commit id")
    sets = ["status = ?", "reason = ?", "changed_by = ?", "check_ms = ?", "checked_at = ?"]
    params: list[Any] = [status, reason, changed_by, check_ms, checked_at or now_iso()]
    if updated is not None:
        u = _check(updated)
        sets += ["path = ?", "line_start = ?", "line_end = ?", "text_hash = ?", '"commit" = ?']
        params += [u.path, u.line_start, u.line_end, u.text_hash, u.commit]
    with db.transaction() as conn:
        cur = conn.execute(
            f"UPDATE citations SET {', '.join(sets)} WHERE id = ?", (*params, citation_id)
        )
    return bool(cur.rowcount)


def overall(cites: Sequence[StoredCitation]) -> str:
    """A memory's state from its citations (see the module docstring)."""
    if not cites:
        return NOT_CHECKABLE
    statuses = {c.status for c in cites}
    if "stale" in statuses:
        return "stale"
    return "valid" if statuses == {"valid"} else "unchecked"


def state(db: Database, memory_id: str) -> str:
    return overall(of_memory(db, memory_id))


def shown(cites: Sequence[StoredCitation]) -> dict[str, Any]:
    """``{"citation_state", "citations": [...]}``: how a memory's citations are displayed."""
    return {"citation_state": overall(cites), "citations": [c.to_dict() for c in cites]}


def for_agent(cites: Sequence[StoredCitation]) -> dict[str, Any]:
    """``memory_get``'s two fields, plain text an agent reads as it is: the state, and
    ``"src/a.py:12-30 valid; b.py:4 stale (the lines changed)"`` (None without citations)."""
    lines = [f"{c.spec()} {c.status}" + (f" ({c.reason})" if c.reason else "") for c in cites]
    return {"citation_state": overall(cites), "citations": "; ".join(lines) or None}


# -- export / import ---------------------------------------------------------------------
_EXPORT_KEYS = ("path", "line_start", "line_end", "text_hash", "commit")
_RESULT_KEYS = ("status", "reason", "checked_at", "changed_by", "check_ms")


def from_export(items: Any) -> list[dict[str, Any]]:
    """The ``citations`` list of an exported memory, checked (ValidationError naming the
    problem); missing (an export older than citations) is an empty list."""
    if items is None:
        return []
    if not isinstance(items, list) or len(items) > MAX_PER_MEMORY:
        raise ValidationError(f"field 'citations' must be a list of at most {MAX_PER_MEMORY}")
    out = []
    for item in items:
        if not isinstance(item, Mapping):
            raise ValidationError("field 'citations' must hold objects")
        c = _check(Citation(*[item.get(k) for k in _EXPORT_KEYS]))  # type: ignore[arg-type]
        status = item.get("status") or "unchecked"
        if status not in STATUSES:
            raise ValidationError(f"citation {c.path}: unknown status {status!r}")
        rec: dict[str, Any] = {**{k: getattr(c, k) for k in _EXPORT_KEYS}, "status": status}
        for key in ("reason", "checked_at", "changed_by"):
            value = item.get(key)
            if value is not None and (not isinstance(value, str) or len(value) > MAX_REASON):
                raise ValidationError(f"citation {c.path}: {key} must be a short string")
            rec[key] = value
        ms = item.get("check_ms")
        if ms is not None and (not isinstance(ms, int | float) or isinstance(ms, bool)):
            raise ValidationError(f"citation {c.path}: check_ms must be a number")
        rec["check_ms"] = ms
        out.append(rec)
    return out


def restore(db: Database, memory_id: str, records: Sequence[Mapping[str, Any]]) -> None:
    """Insert `from_export`'s records for a memory just imported (inside the import's
    transaction)."""
    now = now_iso()
    db.conn.executemany(
        f"INSERT INTO citations(memory_id, {', '.join(_q(k) for k in _EXPORT_KEYS)}, "
        f"{', '.join(_RESULT_KEYS)}, created_at) VALUES ({', '.join('?' * 12)})",
        [
            (memory_id, *(r[k] for k in _EXPORT_KEYS), *(r[k] for k in _RESULT_KEYS), now)
            for r in records
        ],
    )


def _q(column: str) -> str:
    return '"commit"' if column == "commit" else column
