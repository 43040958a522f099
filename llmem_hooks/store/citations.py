"""A memory's code citations: the table ``citations`` (migration 17; docs/citations.md).

One row per cited passage: the repository-relative path, the line range, the hash of the
cited lines' normalized text and the commit they were seen at (`evidence.cite.Citation`),
plus what the last check found (``status`` 'unchecked' | 'valid' | 'stale', its reason,
when, how long it took, and the commit that changed the lines when git could tell). Rows go
with their memory (ON DELETE CASCADE). Module functions over the store's `Database`
(``citations.of_memory(store.db, id)``); writes join the caller's transaction, so a memory
and its citations land together (`MemoryStore.atomic`).

Migration 18 adds what checking needs: ``stale_since`` (set when a check finds a citation
stale, kept while it stays so, cleared when valid: the dream retires memories stale too
long) and the last attempt (``tried_at``, ``tried_note``: an 'unknown' keeps the verdict).
`to_check` / `record_results` serve `session.citation_check` (docs/citations.md).

A memory's state (`overall`): 'stale' if any citation is stale, 'valid' if all are valid,
'unchecked' while some are not checked yet, 'not checkable' when it has none: a memory
without citations is never 'valid'.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

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
    "checked_at, changed_by, check_ms, created_at, stale_since, tried_at, tried_note"
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
    stale_since: str | None = None  # when a check first found it stale (cleared when valid)
    tried_at: str | None = None  # the last check's attempt, decided or not
    tried_note: str | None = None  # why that attempt could not decide (None: it did)

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
    at = checked_at or now_iso()
    sets = ["status = ?", "reason = ?", "changed_by = ?", "check_ms = ?", "checked_at = ?"]
    sets += ["tried_at = ?", "tried_note = NULL", _STALE_SINCE]
    params: list[Any] = [status, reason, changed_by, check_ms, at, at, status, at]
    if updated is not None:
        u = _check(updated)
        sets += ["path = ?", "line_start = ?", "line_end = ?", "text_hash = ?", '"commit" = ?']
        params += [u.path, u.line_start, u.line_end, u.text_hash, u.commit]
    with db.transaction() as conn:
        cur = conn.execute(
            f"UPDATE citations SET {', '.join(sets)} WHERE id = ?", (*params, citation_id)
        )
    return bool(cur.rowcount)


# Kept while a citation stays stale, set when it turns stale, cleared otherwise (SQLite
# reads the row's old values on the right of SET).
_STALE_SINCE = (
    "stale_since = CASE WHEN ? = 'stale' THEN (CASE WHEN status = 'stale' AND stale_since"
    " IS NOT NULL THEN stale_since ELSE ? END) ELSE NULL END"
)


class Verdict(Protocol):
    """What a check found (`evidence.check.CheckResult` has this shape)."""

    @property
    def status(self) -> str: ...
    @property
    def updated(self) -> Citation | None: ...
    @property
    def reason(self) -> str: ...
    @property
    def changed_by(self) -> str | None: ...
    @property
    def ms(self) -> float: ...


@dataclass(frozen=True)
class _Unknown:
    reason: str
    status: str = "unknown"
    updated: Citation | None = None
    changed_by: str | None = None
    ms: float = 0.0


def to_check(
    db: Database, project: str, *, with_global: bool = True, limit: int = 50_000
) -> list[tuple[StoredCitation, str | None]]:
    """The citations of ``project``'s live memories (and of global ones with
    ``with_global``), each with its memory's project (None: global), the longest
    undecided first: never decided, then by the last verdict's time (an attempt that
    could not decide keeps its place, so the next check reaches it first), then by the
    last attempt."""
    scope = "(m.project = ? OR m.project IS NULL)" if with_global else "m.project = ?"
    cols = ", ".join(f"c.{c.strip()}" for c in _COLUMNS.split(","))
    rows = db.fetchall(
        f"SELECT {cols}, m.project FROM citations c JOIN memories m ON m.id = c.memory_id"
        f" WHERE m.valid_until IS NULL AND {scope}"
        " ORDER BY c.checked_at IS NOT NULL, c.checked_at, c.tried_at IS NOT NULL,"
        " c.tried_at, c.id LIMIT ?",
        (project, limit),
    )
    return [(StoredCitation(*r[:-1]), r[-1]) for r in rows]


def any_to_check(db: Database, project: str) -> bool:
    """Whether ``project`` (or a global memory) has a live memory with citations: a
    session start in a project without any asks git nothing."""
    row = db.fetchall(
        "SELECT 1 FROM citations c JOIN memories m ON m.id = c.memory_id"
        " WHERE m.valid_until IS NULL AND (m.project = ? OR m.project IS NULL) LIMIT 1",
        (project,),
    )
    return bool(row)


def record_results(
    db: Database, results: Sequence[tuple[StoredCitation, Verdict]], at: str | None = None
) -> list[bool]:
    """Record a batch of checks in one transaction; returns, for each, whether it was.

    A 'valid' or 'stale' verdict replaces the last one (with the citation moved when the
    check moved it, `stale_since` kept, set or cleared). An 'unknown' changes no verdict:
    the status, reason and check time stay, only the attempt (`tried_at`, `tried_note`) is
    noted. Each row is written only if it is still as it was read (path, lines, hash,
    commit): a check that raced another one, or a fix made meanwhile, never writes a
    result computed from an old citation (the next check sees the new one)."""
    at = at or now_iso()
    done: list[bool] = []
    same = 'path = ? AND line_start = ? AND line_end = ? AND text_hash IS ? AND "commit" IS ?'
    with db.transaction() as conn:
        for row, v in results:
            was = (row.path, row.line_start, row.line_end, row.text_hash, row.commit)
            moved = None
            if v.updated is not None:
                try:
                    moved = _check(v.updated)
                except ValidationError as exc:  # a new path we may not hold: no verdict
                    v = _Unknown(f"moved to a path not kept: {exc}")
            if v.status == "unknown":
                note = str(v.reason)[:MAX_REASON]
                cur = conn.execute(
                    f"UPDATE citations SET tried_at = ?, tried_note = ? WHERE id = ? AND {same}",
                    (at, note, row.id, *was),
                )
                done.append(cur.rowcount == 1)
                continue
            if v.status not in ("valid", "stale"):
                raise ValidationError(f"not a check's status: {v.status!r}")
            by = v.changed_by if v.changed_by and _HEX.match(v.changed_by) else None
            sets = "status = ?, reason = ?, changed_by = ?, check_ms = ?, checked_at = ?"
            sets += f", tried_at = ?, tried_note = NULL, {_STALE_SINCE}"
            params: list[Any] = [v.status, str(v.reason)[:MAX_REASON], by, v.ms, at, at]
            params += [v.status, at]
            if moved is not None:
                u = moved
                sets += ', path = ?, line_start = ?, line_end = ?, text_hash = ?, "commit" = ?'
                params += [u.path, u.line_start, u.line_end, u.text_hash, u.commit]
            cur = conn.execute(
                f"UPDATE citations SET {sets} WHERE id = ? AND {same}", (*params, row.id, *was)
            )
            done.append(cur.rowcount == 1)
    return done


def stale_memories(db: Database, since_before: str) -> list[dict[str, Any]]:
    """Live memories stale since ``since_before`` or earlier: the time their first citation
    still stale turned stale (for a row without `stale_since`, an import or an older
    writer, its check time), with that citation's spec and reason. Oldest first."""
    rows = db.fetchall(
        "SELECT m.id, MIN(COALESCE(c.stale_since, c.checked_at)) AS since"
        " FROM citations c JOIN memories m ON m.id = c.memory_id"
        " WHERE c.status = 'stale' AND m.valid_until IS NULL"
        " AND COALESCE(c.stale_since, c.checked_at) IS NOT NULL"
        " GROUP BY m.id HAVING since <= ? ORDER BY since, m.id",
        (since_before,),
    )
    out = []
    for mid, since in rows:
        first = next(
            (c for c in of_memory(db, mid)
             if c.status == "stale" and (c.stale_since or c.checked_at) == since),
            None,
        )  # fmt: skip
        if first is None:  # re-checked between the two reads: the next run decides
            continue
        out.append({"id": mid, "stale_since": since, "citation": first.spec(),
                    "why": first.reason or "stale"})  # fmt: skip
    return out


def cited_projects(db: Database) -> list[str]:
    """The projects with live memories that carry citations."""
    rows = db.fetchall(
        "SELECT DISTINCT m.project FROM citations c JOIN memories m ON m.id = c.memory_id"
        " WHERE m.valid_until IS NULL AND m.project IS NOT NULL ORDER BY m.project"
    )
    return [r[0] for r in rows]


def session_directories(db: Database, project: str, limit: int = 20) -> list[str]:
    """The directories sessions of ``project`` ran in, the most recent first."""
    rows = db.fetchall(
        "SELECT directory, MAX(last_activity_ms) AS last FROM sessions"
        " WHERE project = ? AND directory IS NOT NULL AND directory != ''"
        " GROUP BY directory ORDER BY last DESC LIMIT ?",
        (project, limit),
    )
    return [r[0] for r in rows]


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
