"""Team memory, the local side: ``team_projects``, ``team_policy``, ``team_links``,
``team_outbox`` and ``team_state`` (docs/team.md).

A memory is *shared* when it has a live row in ``team_links`` (its hub id, its author
when someone else wrote it, its revision). Migration 16's triggers keep the links and
the outbox in step with every write of a shared memory, in the same transaction as the
write, so no write path can forget to queue and a crash loses neither. This module holds
what the sync engine (`llmem_hooks.team`) and the commands call: enrol a project, share
and unshare, read the outbox and acknowledge what the hub took, and apply what a pull
brought through the store's normal add path (redaction, near-duplicate merge) without
queueing it back (no echo).

Functions over the store's `Database` (``team.outbox_batch(store.db, 200)``), or over
the store where they write memories (`share`, `unshare`, `apply_remote`), like
`store.sessions`. Nothing here talks to the hub: the hub's records come in typed by
the `RemoteMemory` / `RemoteMutation` protocols.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .. import faults
from ..errors import NotFoundError, ValidationError
from ..redact import redact_secrets
from ..timestamps import now_iso, parse_iso
from .db import Database
from .migrations import TEAM_APPLYING
from .records import MAX_TAGS, check_tags, normalize_tags

if TYPE_CHECKING:
    from .memories import MemoryStore

EPISODE_TYPE = "conversation"  # episodes: never shared, whatever the policy says
TEAM_SOURCE = "team"  # the source of a memory a pull brought
MAX_ERROR_CHARS = 500
OUTCOMES = ("added", "merged", "updated", "deleted", "kept_local", "skipped")


class RemoteMemory(Protocol):
    """What `apply_remote` reads of a hub memory (`store.hub.records.HubMemory`)."""

    @property
    def id(self) -> str: ...
    @property
    def project(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def revision(self) -> int: ...
    @property
    def updated_at(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def tags(self) -> Sequence[str]: ...
    @property
    def provenance(self) -> Mapping[str, Any]: ...
    @property
    def deleted_at(self) -> str | None: ...
    @property
    def supersedes(self) -> str | None: ...
    @property
    def author(self) -> str: ...
    @property
    def embedding(self) -> Sequence[float] | None: ...
    @property
    def created_at(self) -> str | None: ...


class RemoteMutation(Protocol):
    """One change pulled from the hub (`store.hub.records.Mutation`)."""

    @property
    def seq(self) -> int: ...
    @property
    def memory(self) -> RemoteMemory: ...


@dataclass(frozen=True)
class Link:
    """A shared memory's hub identity (a row of ``team_links``). ``author`` None: mine."""

    memory_id: str
    project: str
    hub_id: str
    author: str | None
    revision: int
    pushed_revision: int
    updated_at: str
    device: str
    supersedes: str | None
    unshared_at: str | None


_LINK_COLUMNS = ", ".join(Link.__dataclass_fields__)


@dataclass(frozen=True)
class OutboxItem:
    """One change to push: the outbox row and the memory's state *now*, texts redacted
    again. ``deleted``: push a tombstone (the memory is gone, invalidated or unshared;
    ``content`` is then "" when the memory is gone). ``foreign``: someone else's memory
    edited here, pushed as a new hub memory that supersedes ``hub_id``. ``supersedes``:
    the hub id this memory replaced (shared again, or brought back, after its tombstone;
    or someone else's memory edited here and already re-pointed by `ack`)."""

    memory_id: str
    project: str
    op: str
    queued_at: str
    attempts: int
    hub_id: str
    author: str | None
    revision: int
    pushed_revision: int
    updated_at: str
    device: str
    supersedes: str | None
    deleted: bool
    type: str
    content: str
    tags: tuple[str, ...]
    created_at: str | None
    source: str | None
    confidence: float | None

    @property
    def foreign(self) -> bool:
        return self.author is not None


@dataclass(frozen=True)
class TeamProject:
    """An enrolled project: its pull cursor, clocks, conflicts and what it shares."""

    project: str
    cursor: int
    enrolled_at: str
    last_push: str | None
    last_pull: str | None
    last_error: str | None
    conflicts: int
    types: tuple[str, ...]
    outbox: int
    shared: int


# -- projects and policy ---------------------------------------------------------------------
def _check_project(project: Any) -> str:
    if not isinstance(project, str) or not project.strip() or len(project) > 256:
        raise ValidationError("team: a project key is a non-empty text of at most 256 chars")
    return project


def _check_types(types: Iterable[str]) -> list[str]:
    out = []
    for t in types:
        if not isinstance(t, str) or not t or len(t) > 64:
            raise ValidationError(f"team: invalid memory type {t!r}")
        if t != EPISODE_TYPE:  # episodes are never shared
            out.append(t)
    return sorted(set(out))


def device_id(db: Database) -> str:
    """This database's device id (uuid4 hex), made on first use."""
    row = db.fetchone("SELECT value FROM team_state WHERE key = 'device'")
    if row:
        return str(row[0])
    with db.transaction():
        db.conn.execute(
            "INSERT OR IGNORE INTO team_state(key, value) VALUES ('device', ?)",
            (uuid.uuid4().hex,),
        )
        return str(
            db.conn.execute("SELECT value FROM team_state WHERE key = 'device'").fetchone()[0]
        )


def enroll(db: Database, project: str, types: Iterable[str], *, existing: bool = False) -> int:
    """Enrol ``project`` (idempotent: the cursor stays) and set the types it shares from
    now on. ``existing``: also share the valid memories of those types it holds already.
    Returns how many existing memories that shared."""
    project = _check_project(project)
    kinds = _check_types(types)
    device_id(db)
    with db.transaction():
        db.conn.execute(
            "INSERT INTO team_projects(project, enrolled_at) VALUES (?, ?)"
            " ON CONFLICT(project) DO NOTHING",
            (project, now_iso()),
        )
        db.conn.execute("DELETE FROM team_policy WHERE project = ?", (project,))
        db.conn.executemany(
            "INSERT INTO team_policy(project, type) VALUES (?, ?)", [(project, t) for t in kinds]
        )
        if not existing or not kinds:
            return 0
        now = now_iso()
        ids = [
            r[0]
            for r in db.conn.execute(
                "SELECT id FROM memories m WHERE project = ? AND type IN "
                f"({','.join('?' * len(kinds))}) AND (valid_until IS NULL OR valid_until > ?)"
                " AND NOT EXISTS (SELECT 1 FROM team_links l WHERE l.memory_id = m.id)",
                [project, *kinds, now],
            )
        ]
        for mid in ids:
            _link_mine(db, mid, project, now)
        return len(ids)


def _link_mine(db: Database, memory_id: str, project: str, now: str) -> None:
    """A new link for a memory of mine, queued (inside the caller's transaction)."""
    db.conn.execute(
        "INSERT INTO team_links(memory_id, project, hub_id, author, revision, pushed_revision,"
        " updated_at, device) VALUES (?, ?, ?, NULL, 1, 0, ?, ?)",
        (memory_id, project, uuid.uuid4().hex, now, device_id(db)),
    )
    _queue(db, memory_id, project, "upsert", now)


def _queue(db: Database, memory_id: str, project: str, op: str, now: str) -> None:
    db.conn.execute(
        "INSERT INTO team_outbox(memory_id, project, op, queued_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT(memory_id) DO UPDATE SET op = excluded.op, queued_at = excluded.queued_at",
        (memory_id, project, op, now),
    )


def leave(db: Database, project: str) -> bool:
    """Stop sharing ``project``: its links, outbox, policy and cursor go; every memory
    (mine and those pulled) stays. False if it was not enrolled."""
    with db.transaction():
        for table in ("team_outbox", "team_links", "team_policy"):
            db.conn.execute(f"DELETE FROM {table} WHERE project = ?", (project,))
        cur = db.conn.execute("DELETE FROM team_projects WHERE project = ?", (project,))
        return bool(cur.rowcount)


def is_enrolled(db: Database, project: str | None) -> bool:
    return project is not None and bool(
        db.fetchone("SELECT 1 FROM team_projects WHERE project = ?", (project,))
    )


def projects(db: Database) -> list[TeamProject]:
    """The enrolled projects with their state (``team status``, ``doctor``)."""
    with db.lock:
        rows = db.conn.execute(
            "SELECT p.project, p.cursor, p.enrolled_at, p.last_push, p.last_pull, p.last_error,"
            " p.conflicts,"
            " (SELECT group_concat(type, ' ') FROM team_policy t WHERE t.project = p.project),"
            " (SELECT count(*) FROM team_outbox o WHERE o.project = p.project),"
            " (SELECT count(*) FROM team_links l WHERE l.project = p.project"
            "  AND l.unshared_at IS NULL)"
            " FROM team_projects p ORDER BY p.project"
        ).fetchall()
    return [
        TeamProject(
            project=r[0],
            cursor=r[1],
            enrolled_at=r[2],
            last_push=r[3],
            last_pull=r[4],
            last_error=r[5],
            conflicts=r[6],
            types=tuple(sorted((r[7] or "").split())),
            outbox=r[8],
            shared=r[9],
        )
        for r in rows
    ]


def cursor(db: Database, project: str) -> int:
    """The last hub sequence number applied for ``project`` (0: none, or not enrolled)."""
    row = db.fetchone("SELECT cursor FROM team_projects WHERE project = ?", (project,))
    return int(row[0]) if row else 0


def set_cursor(db: Database, project: str, seq: int) -> None:
    """Move ``project``'s cursor forward to ``seq`` (never back): a pull with nothing to
    apply, or mutations skipped as a whole."""
    with db.transaction():
        db.conn.execute(
            "UPDATE team_projects SET cursor = max(cursor, ?) WHERE project = ?",
            (int(seq), project),
        )


def _error_text(error: str | None) -> str | None:
    if error is None:
        return None
    text = redact_secrets(" ".join(str(error).split())) or "[REDACTED]"
    return text[:MAX_ERROR_CHARS]


def record_push(db: Database, project: str, error: str | None = None) -> None:
    """A push of ``project`` ended: success stamps ``last_push``; a failure keeps the
    error (redacted, one line) for ``team status``."""
    _record(db, project, "last_push", error)


def record_pull(db: Database, project: str, error: str | None = None) -> None:
    """As `record_push`, for a pull."""
    _record(db, project, "last_pull", error)


def _record(db: Database, project: str, column: str, error: str | None) -> None:
    with db.transaction():
        if error is None:
            db.conn.execute(
                f"UPDATE team_projects SET {column} = ?, last_error = NULL WHERE project = ?",
                (now_iso(), project),
            )
        else:
            db.conn.execute(
                "UPDATE team_projects SET last_error = ? WHERE project = ?",
                (_error_text(error), project),
            )


# -- links: share, unshare -------------------------------------------------------------------
def link(db: Database, memory_id: str) -> Link | None:
    """The link of ``memory_id`` (live or unshared), or None."""
    row = db.fetchone(f"SELECT {_LINK_COLUMNS} FROM team_links WHERE memory_id = ?", (memory_id,))
    return Link(*row) if row else None


def link_by_hub_id(db: Database, hub_id: str) -> Link | None:
    row = db.fetchone(f"SELECT {_LINK_COLUMNS} FROM team_links WHERE hub_id = ?", (hub_id,))
    return Link(*row) if row else None


def is_shared(db: Database, memory_id: str) -> bool:
    return bool(
        db.fetchone(
            "SELECT 1 FROM team_links WHERE memory_id = ? AND unshared_at IS NULL", (memory_id,)
        )
    )


def shared_ids(db: Database, memory_ids: Sequence[str]) -> set[str]:
    """Which of ``memory_ids`` are shared (the viewer's mark, one query per 500)."""
    out: set[str] = set()
    with db.lock:
        for i in range(0, len(memory_ids), 500):
            chunk = list(memory_ids[i : i + 500])
            out.update(
                r[0]
                for r in db.conn.execute(
                    "SELECT memory_id FROM team_links WHERE unshared_at IS NULL AND memory_id IN"
                    f" ({','.join('?' * len(chunk))})",
                    chunk,
                )
            )
    return out


def hub_ids(db: Database, memory_ids: Sequence[str]) -> dict[str, str]:
    """Local memory id -> its hub id, for those of ``memory_ids`` linked to the hub
    (``search --team`` shows a memory held both places once)."""
    out: dict[str, str] = {}
    with db.lock:
        for i in range(0, len(memory_ids), 500):
            chunk = list(memory_ids[i : i + 500])
            out.update(
                (r[0], r[1])
                for r in db.conn.execute(
                    "SELECT memory_id, hub_id FROM team_links WHERE memory_id IN"
                    f" ({','.join('?' * len(chunk))})",
                    chunk,
                )
            )
    return out


def share(store: MemoryStore, memory_id: str) -> bool:
    """Share a memory of an enrolled project (``llmem-hooks share ID``); False if it was
    shared already. Global memories, episodes and invalidated memories never are."""
    db = store.db
    now = now_iso()
    with store.atomic():
        row = db.conn.execute(
            "SELECT project, type, valid_until FROM memories WHERE id = ?", (memory_id,)
        ).fetchone()
        if row is None:
            raise NotFoundError(f"no memory with id {memory_id!r}")
        project, mtype, valid_until = row
        if project is None:
            raise ValidationError("a global memory (no project) is never shared")
        if mtype == EPISODE_TYPE:
            raise ValidationError("episodes (conversation memories) are never shared")
        if valid_until is not None and valid_until <= now:
            raise ValidationError("an invalidated memory cannot be shared")
        if not is_enrolled(db, project):
            raise ValidationError(
                "this memory's project is not in a team: run `llmem-hooks team join` first"
            )
        old = link(db, memory_id)
        if old is None:
            _link_mine(db, memory_id, project, now)
            return True
        if old.unshared_at is None:
            return False
        # Shared again after an unshare: the hub keeps the tombstone of the old id (a
        # tombstone wins over every edit), so a memory of mine comes back under a new one.
        fresh = old.author is None and old.pushed_revision > 0
        db.conn.execute(
            "UPDATE team_links SET unshared_at = NULL, revision = revision + 1, updated_at = ?,"
            " device = ?, hub_id = ?, supersedes = ?, pushed_revision = ?"
            " WHERE memory_id = ?",
            (
                now,
                device_id(db),
                uuid.uuid4().hex if fresh else old.hub_id,
                old.hub_id if fresh else old.supersedes,
                0 if fresh else old.pushed_revision,
                memory_id,
            ),
        )
        _queue(db, memory_id, project, "upsert", now)
        return True


def share_outcome(store: MemoryStore, memory_id: str) -> dict[str, Any]:
    """`share` for an agent tool's answer: ``{"shared": True}``, or ``{"shared": False,
    "share_note": why}`` (not a team project, a global memory, an episode)."""
    try:
        share(store, memory_id)
    except ValidationError as exc:
        return {"shared": False, "share_note": str(exc).rstrip(".")}
    return {"shared": True}


def unshare(store: MemoryStore, memory_id: str) -> bool:
    """Stop sharing a memory (it stays here). One of mine the hub has gets a tombstone
    queued; the link stays as a marker, so a later pull does not bring it back. False if
    it was not shared."""
    db = store.db
    now = now_iso()
    with store.atomic():
        old = link(db, memory_id)
        if old is None or old.unshared_at is not None:
            return False
        if old.author is None and old.pushed_revision > 0:
            db.conn.execute(
                "UPDATE team_links SET revision = revision + 1, updated_at = ?, device = ?"
                " WHERE memory_id = ?",
                (now, device_id(db), memory_id),
            )
            _queue(db, memory_id, old.project, "delete", now)
        else:
            db.conn.execute("DELETE FROM team_outbox WHERE memory_id = ?", (memory_id,))
        db.conn.execute(
            "UPDATE team_links SET unshared_at = ? WHERE memory_id = ?", (now, memory_id)
        )
        return True


# -- the outbox ------------------------------------------------------------------------------
def outbox_size(db: Database, project: str | None = None) -> int:
    if project is None:
        return int(db.fetchone("SELECT count(*) FROM team_outbox")[0])
    return int(db.fetchone("SELECT count(*) FROM team_outbox WHERE project = ?", (project,))[0])


def _clean(text: str | None) -> str:
    """A text about to leave the machine, redacted again (the rules may have grown since
    it was stored); a text holding a private key leaves as nothing but the marker."""
    if not text:
        return ""
    cleaned = redact_secrets(text)
    return "[REDACTED]" if cleaned is None else cleaned


def outbox_batch(db: Database, limit: int = 200) -> list[OutboxItem]:
    """The oldest ``limit`` queued changes, each with its memory's current state (a
    memory changed five times is pushed once, as it is now)."""
    now = now_iso()
    with db.lock:
        rows = db.conn.execute(
            "SELECT o.memory_id, o.project, o.op, o.queued_at, o.attempts, l.hub_id, l.author,"
            " l.revision, l.pushed_revision, l.updated_at, l.device, l.unshared_at, l.supersedes,"
            " m.id IS NULL AS gone, m.valid_until, m.type, m.content, m.tag_text, m.created_at,"
            " m.source, m.confidence"
            " FROM team_outbox o JOIN team_links l ON l.memory_id = o.memory_id"
            " LEFT JOIN memories m ON m.id = o.memory_id"
            " ORDER BY o.queued_at, o.memory_id LIMIT ?",
            (max(0, int(limit)),),
        ).fetchall()
    items = []
    for r in rows:
        invalid = r["valid_until"] is not None and r["valid_until"] <= now
        episode = r["type"] == EPISODE_TYPE  # a shared memory turned into an episode
        deleted = (
            r["op"] == "delete"
            or bool(r["gone"])
            or invalid
            or episode
            or r["unshared_at"] is not None
        )
        tags = tuple(t for t in (r["tag_text"] or "").split() if _clean(t) == t)
        items.append(
            OutboxItem(
                memory_id=r["memory_id"],
                project=r["project"],
                op="delete" if deleted else "upsert",
                queued_at=r["queued_at"],
                attempts=r["attempts"],
                hub_id=r["hub_id"],
                author=r["author"],
                revision=r["revision"],
                pushed_revision=r["pushed_revision"],
                updated_at=r["updated_at"],
                device=r["device"],
                supersedes=r["supersedes"],
                deleted=deleted,
                type=r["type"] or "",
                content="" if episode else _clean(r["content"]),
                tags=tags,
                created_at=r["created_at"],
                source=_clean(r["source"]) or None,
                confidence=r["confidence"],
            )
        )
    return items


def record_attempt(db: Database, memory_ids: Sequence[str]) -> None:
    """Count a failed push of these outbox rows (``team status`` shows what keeps failing)."""
    with db.transaction():
        db.conn.executemany(
            "UPDATE team_outbox SET attempts = attempts + 1 WHERE memory_id = ?",
            [(m,) for m in memory_ids],
        )


def ack(
    db: Database,
    memory_id: str,
    queued_at: str,
    pushed_revision: int,
    new_hub_id: str | None = None,
) -> bool:
    """The hub has ``memory_id`` at ``pushed_revision`` (the item `outbox_batch` gave).
    Its outbox row goes only if nothing re-queued it since the batch was read (same
    ``queued_at`` and no newer revision): a change made during the push is pushed next
    time. ``new_hub_id``: a foreign memory was pushed as a new hub memory that supersedes
    it; the link now points there and the memory is mine. Returns whether the row went."""
    with db.transaction():
        row = db.conn.execute(
            "SELECT o.queued_at, o.op, l.revision, l.hub_id, l.unshared_at,"
            " EXISTS (SELECT 1 FROM memories m WHERE m.id = o.memory_id)"
            " FROM team_outbox o LEFT JOIN team_links l ON l.memory_id = o.memory_id"
            " WHERE o.memory_id = ?",
            (memory_id,),
        ).fetchone()
        done = (
            row is not None
            and row[0] == queued_at
            and (row[2] is None or row[2] <= pushed_revision)
        )
        if done:
            db.conn.execute("DELETE FROM team_outbox WHERE memory_id = ?", (memory_id,))
        db.conn.execute(
            "UPDATE team_links SET pushed_revision = max(pushed_revision, ?) WHERE memory_id = ?",
            (int(pushed_revision), memory_id),
        )
        if new_hub_id is not None:
            db.conn.execute(
                "UPDATE team_links SET supersedes = hub_id, hub_id = ?, author = NULL"
                " WHERE memory_id = ? AND hub_id <> ?",
                (new_hub_id, memory_id, new_hub_id),
            )
        if done and row[1] == "delete" and not row[5] and row[4] is None:
            # a tombstone of a memory deleted here is on the hub: nothing left to track
            db.conn.execute("DELETE FROM team_links WHERE memory_id = ?", (memory_id,))
        return done


# -- applying a pull -------------------------------------------------------------------------
def _stamp(value: str | None) -> str:
    """A timestamp in the canonical form, so text order is time order ("" if unreadable)."""
    if not value:
        return ""
    try:
        return parse_iso(value, field="updated_at")
    except ValidationError:
        return ""


def _key(revision: int, updated_at: str, device: str) -> tuple[int, str, str]:
    """Last writer wins on (revision, updated_at, device)."""
    return (int(revision), _stamp(updated_at), device or "")


def apply_remote(store: MemoryStore, mutation: RemoteMutation, me: str, device: str) -> str:
    """Apply one pulled mutation in one local transaction, and advance the project's
    cursor in it. ``me``: my hub role (a memory I authored links as mine); ``device``:
    this database's device id. Returns what happened: 'added', 'merged' (into a local
    near-duplicate), 'updated', 'deleted', 'kept_local' (a pending local change won)
    or 'skipped'. Nothing it writes is queued for pushing (no echo)."""
    memory = mutation.memory
    db = store.db
    seq = _bounded_int(mutation.seq)
    if seq is None:
        raise ValidationError("team: a pulled mutation without a valid sequence number")
    with store.atomic():
        if not is_enrolled(db, memory.project):
            raise ValidationError("team: a pull for a project that is not enrolled here")
        done = db.conn.execute(
            "SELECT cursor FROM team_projects WHERE project = ?", (memory.project,)
        ).fetchone()
        if done is not None and seq <= done[0]:
            return "skipped"  # applied already (another sync of this store got there first)
        db.conn.execute(
            "INSERT OR REPLACE INTO team_state(key, value) VALUES (?, '1')", (TEAM_APPLYING,)
        )
        try:
            outcome = _apply(store, memory, me) if _well_formed(memory) else "skipped"
        finally:
            db.conn.execute("DELETE FROM team_state WHERE key = ?", (TEAM_APPLYING,))
        faults.hit("team-apply", memory.id)
        db.conn.execute(
            "UPDATE team_projects SET cursor = max(cursor, ?), last_pull = ? WHERE project = ?",
            (seq, now_iso(), memory.project),
        )
    return outcome


MAX_HUB_TEXT = 256  # a hub id, device or author: a longer one is not ours


def _bounded_int(value: Any) -> int | None:
    """A revision or sequence number SQLite can hold, else None."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**62:
        return None
    return value


def _short_text(value: Any, *, empty: bool = False) -> bool:
    return isinstance(value, str) and (empty or bool(value)) and len(value) <= MAX_HUB_TEXT


def _well_formed(memory: RemoteMemory) -> bool:
    """Whether a pulled record can be applied at all. Another member can write odd rows
    into the hub: one that is not well formed is skipped (its cursor still moves on, so
    one bad row never stalls a pull); its texts are checked by `MemoryStore.add`."""
    return (
        _short_text(memory.id)
        and _short_text(memory.device, empty=True)
        and _short_text(memory.author or "", empty=True)
        and (memory.supersedes is None or _short_text(memory.supersedes))
        and _bounded_int(memory.revision) is not None
        and isinstance(memory.type, str)
        and isinstance(memory.content, str)
        and isinstance(memory.updated_at, str)
    )


def _apply(store: MemoryStore, memory: RemoteMemory, me: str) -> str:
    db = store.db
    if memory.type == EPISODE_TYPE:
        return "skipped"
    known = link_by_hub_id(db, memory.id)
    if known is None:
        if db.conn.execute(
            "SELECT 1 FROM team_links WHERE supersedes = ?", (memory.id,)
        ).fetchone():
            return "skipped"  # replaced here by a memory of mine
        if memory.deleted_at:
            return "skipped"  # a tombstone of something never seen here
        return _add(store, memory, me)
    if known.unshared_at is not None:
        return "skipped"  # unshared or deleted here: never brought back
    row = db.conn.execute(
        "SELECT valid_until FROM memories WHERE id = ?", (known.memory_id,)
    ).fetchone()
    pending = db.conn.execute(
        "SELECT 1 FROM team_outbox WHERE memory_id = ?", (known.memory_id,)
    ).fetchone()
    remote = _key(memory.revision, memory.updated_at, memory.device)
    local = _key(known.revision, known.updated_at, known.device)
    if memory.deleted_at:  # a tombstone wins over every edit
        if pending:
            _conflict(db, known.project)
            db.conn.execute("DELETE FROM team_outbox WHERE memory_id = ?", (known.memory_id,))
        if row is None:
            db.conn.execute("DELETE FROM team_links WHERE memory_id = ?", (known.memory_id,))
            return "deleted" if pending else "skipped"
        _relink(db, known.memory_id, memory, me)
        if row[0] is not None and row[0] <= now_iso():
            return "skipped"
        who = memory.author or "a team member"
        store.invalidate(known.memory_id, reason=f"deleted on the team hub by {who}")
        return "deleted"
    if row is None or remote == local:
        return "skipped"  # deleted here (its tombstone is queued), or my own change echoed
    if remote < local:
        if pending:
            _conflict(db, known.project)
            return "kept_local"
        return "skipped"  # older than what is here (my newer push is on its way)
    if pending:
        _conflict(db, known.project)
        db.conn.execute("DELETE FROM team_outbox WHERE memory_id = ?", (known.memory_id,))
    current = store.get(known.memory_id)
    same_text = current is not None and current["content"] == memory.content
    try:
        store.update(
            known.memory_id,
            content=None if same_text else memory.content,
            type=memory.type,
            tags=_tags(memory),
            embedding=None if same_text else _embedding(store, memory),
            clear_embedding=not same_text,  # the local model embeds the new text
        )
    except ValidationError:
        return "skipped"
    _relink(db, known.memory_id, memory, me)
    return "updated"


def _conflict(db: Database, project: str) -> None:
    db.conn.execute(
        "UPDATE team_projects SET conflicts = conflicts + 1 WHERE project = ?", (project,)
    )


def _relink(db: Database, memory_id: str, memory: RemoteMemory, me: str) -> None:
    """The link takes the hub's state: the local copy is now that revision."""
    db.conn.execute(
        "UPDATE team_links SET revision = ?, pushed_revision = ?, updated_at = ?, device = ?,"
        " author = ? WHERE memory_id = ?",
        (
            int(memory.revision),
            int(memory.revision),
            _stamp(memory.updated_at) or now_iso(),
            memory.device or "",
            None if memory.author == me else (memory.author or None),
            memory_id,
        ),
    )


def _embedding(store: MemoryStore, memory: RemoteMemory) -> list[float] | None:
    """The hub's vector when it has this store's size (else the local model makes one)."""
    vec = memory.embedding
    if vec is None or not store.vectors.dimensions or len(vec) != store.vectors.dimensions:
        return None
    try:
        out = [float(x) for x in vec]
    except (TypeError, ValueError):
        return None
    return out if all(math.isfinite(x) for x in out) else None


def _add(store: MemoryStore, memory: RemoteMemory, me: str) -> str:
    """A hub memory new here, through `MemoryStore.add` (redaction, near-duplicate
    merge): 'added', or 'merged' into a local memory that says the same."""
    db = store.db
    author = memory.author or None
    prov = memory.provenance or {}
    confidence = prov.get("confidence")
    if (
        not isinstance(confidence, int | float)
        or isinstance(confidence, bool)
        or not 0.0 <= confidence <= 1.0
    ):
        confidence = None
    created = _created(memory.created_at or prov.get("created_at"))
    new_id = uuid.uuid4().hex
    # The replaced memory is invalidated first (so the new one never merges into it),
    # and only if the new one is stored: a savepoint takes it back otherwise.
    db.conn.execute("SAVEPOINT team_add")
    try:
        superseded = _supersede(store, memory)
        mid = store.add(
            memory.type,
            memory.content,
            source=TEAM_SOURCE,
            confidence=confidence,
            metadata={"team": {"author": author, "hub_id": memory.id}},
            tags=_tags(memory),
            entered_by=author,
            project=memory.project,
            id=new_id,
            created_at=created,
            embedding=_embedding(store, memory),
        )
    except ValidationError:
        db.conn.execute("ROLLBACK TO team_add")
        db.conn.execute("RELEASE team_add")
        return "skipped"
    db.conn.execute("RELEASE team_add")
    if mid == new_id or _may_link(db, mid, author, me):
        db.conn.execute(
            "INSERT INTO team_links(memory_id, project, hub_id, author, revision,"
            " pushed_revision, updated_at, device) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                mid,
                memory.project,
                memory.id,
                None if author == me else author,
                int(memory.revision),
                int(memory.revision),
                _stamp(memory.updated_at) or now_iso(),
                memory.device or "",
            ),
        )
    if superseded is not None and superseded != mid:
        store.add_relation(mid, superseded, "supersedes")
    return "added" if mid == new_id else "merged"


def _may_link(db: Database, memory_id: str, author: str | None, me: str) -> bool:
    """Whether a pulled memory merged into ``memory_id`` takes over its link: when that
    one is not linked yet and is a copy from the team (left and joined again) or my own
    memory coming back. A memory of mine never links to someone else's: their later
    tombstone must not forget what I know myself."""
    row = db.conn.execute(
        "SELECT m.source, EXISTS (SELECT 1 FROM team_links l WHERE l.memory_id = m.id)"
        " FROM memories m WHERE m.id = ?",
        (memory_id,),
    ).fetchone()
    return row is not None and not row[1] and (row[0] == TEAM_SOURCE or author == me)


def _tags(memory: RemoteMemory) -> list[str]:
    """The hub's tags the store accepts, at most `MAX_TAGS`."""
    out: list[str] = []
    for tag in memory.tags if isinstance(memory.tags, list | tuple) else ():
        try:
            out.extend(check_tags([tag]) if isinstance(tag, str) else [])
        except ValidationError:
            continue  # one odd tag costs the memory that tag, not the memory
    return normalize_tags(out)[:MAX_TAGS]


def _created(value: Any) -> str | None:
    """The hub's creation time if it reads as one (else the memory is dated now)."""
    if not isinstance(value, str):
        return None
    try:
        return parse_iso(value, field="created_at")
    except ValidationError:
        return None


def _supersede(store: MemoryStore, memory: RemoteMemory) -> str | None:
    """A hub memory that replaces another (someone's edit of it): the local copy of the
    replaced one is invalidated, naming who replaced it; returns its id."""
    if not memory.supersedes:
        return None
    old = link_by_hub_id(store.db, memory.supersedes)
    if old is None or not store.get(old.memory_id):
        return None
    who = memory.author or "a team member"
    store.invalidate(old.memory_id, reason=f"superseded on the team hub by {who}'s edit")
    return old.memory_id
