"""Project names: the table ``project_names`` (project key -> a name people know).

A project's key is the repository's root-commit SHA (`llmem_hooks.project`): right as an
identity, unreadable on a screen. Whoever learns a project's directory (the coordinator
when it tracks a session, the query service when a caller names its folder) records the
name `project.project_name` gives it; every display looks the name up here, and
``--project`` takes a name, a key, or a unique key prefix (`resolve`). The store only
keeps and validates names; it knows nothing of git or agents.
"""

from __future__ import annotations

from ..errors import ValidationError
from ..redact import redact_secrets
from ..timestamps import now_iso
from .db import Database

MAX_NAME_CHARS = 100
MAX_KEY_CHARS = 500
MIN_PREFIX = 4  # a key prefix shorter than this is taken as given, never searched for
SHORT_KEY = 7  # how much of a key tells two projects of the same name apart


def _clean(name: str) -> str:
    flat = " ".join("".join(ch if ch.isprintable() else " " for ch in name).split())
    return (redact_secrets(flat) or "")[:MAX_NAME_CHARS]


def set_name(db: Database, project: str, name: str) -> bool:
    """Record (or correct) ``project``'s name; True if the row changed. A name is one
    printable line of at most `MAX_NAME_CHARS`, redacted like any stored text."""
    if not isinstance(project, str) or not project or len(project) > MAX_KEY_CHARS:
        raise ValidationError("a project key is a non-empty string of at most 500 characters")
    if not isinstance(name, str):
        raise ValidationError("a project name must be a string")
    clean = _clean(name)
    if not clean:
        raise ValidationError("a project name must hold a printable character")
    with db.transaction():
        cur = db.conn.execute(
            "INSERT INTO project_names(project, name, updated_at) VALUES (?, ?, ?)"
            " ON CONFLICT(project) DO UPDATE SET name = excluded.name,"
            " updated_at = excluded.updated_at WHERE name != excluded.name",
            (project, clean, now_iso()),
        )
        return bool(cur.rowcount)


def names(db: Database) -> dict[str, str]:
    """Every recorded key -> name ({} on a database older than the table, opened read-only)."""
    try:
        rows = db.fetchall("SELECT project, name FROM project_names")
    except Exception as exc:  # no such table: a read-only open of an old schema
        if "no such table" not in str(exc):
            raise
        return {}
    return {str(r[0]): str(r[1]) for r in rows}


def name_of(db: Database, project: str) -> str | None:
    """``project``'s recorded name, or None."""
    try:
        row = db.fetchone("SELECT name FROM project_names WHERE project = ?", (project,))
    except Exception as exc:  # no such table: a read-only open of an old schema
        if "no such table" not in str(exc):
            raise
        return None
    return str(row[0]) if row else None


def display_names(db: Database) -> dict[str, str]:
    """Key -> what to show: the name, or ``name (1a2b3c4)`` when several projects share
    it (two clones of different repositories in folders of the same name)."""
    known = names(db)
    count: dict[str, int] = {}
    for name in known.values():
        count[name] = count.get(name, 0) + 1
    return {
        key: name if count[name] == 1 else f"{name} ({key[:SHORT_KEY]})"
        for key, name in known.items()
    }


def fts_scope(project: str) -> str:
    """``project``'s token in the FTS5 column ``fts_scope`` (m005_fts_scope), quoted."""
    return f'"p{project.encode().hex().upper()}"'


def _keys(db: Database) -> set[str]:
    rows = db.fetchall("SELECT DISTINCT project FROM memories WHERE project IS NOT NULL")
    return {str(r[0]) for r in rows} | set(names(db))


def is_known(db: Database, key: str) -> bool:
    """Whether ``key`` is a project this store has seen (a memory of it, or its name)."""
    return key in _keys(db)


def resolve(db: Database, text: str) -> str:
    """The key ``--project TEXT`` means: a known key as is; else the project of that name
    (or display name); else the one key starting with ``text`` (at least `MIN_PREFIX`
    characters); else ``text`` itself (a key not seen yet). Two projects of that name, or
    two keys with that prefix: `ValidationError` (one line; the CLI exits 2)."""
    keys = _keys(db)
    if text in keys:
        return text
    shown = display_names(db)
    known = names(db)
    named = sorted(
        {k for k, n in known.items() if n == text} | {k for k, n in shown.items() if n == text}
    )
    if len(named) == 1:
        return named[0]
    if len(named) > 1:
        raise ValidationError(_ambiguous(text, "names", named))
    if len(text) >= MIN_PREFIX:
        prefixed = sorted(k for k in keys if k.startswith(text))
        if len(prefixed) == 1:
            return prefixed[0]
        if len(prefixed) > 1:
            raise ValidationError(_ambiguous(text, "is the start of", prefixed))
    return text


def _ambiguous(text: str, how: str, keys: list[str]) -> str:
    listed = ", ".join(k[:12] for k in keys[:5]) + (", ..." if len(keys) > 5 else "")
    return (
        f"--project {text!r} {how} {len(keys)} projects ({listed}); "
        "give the key or a longer prefix of it"
    )
