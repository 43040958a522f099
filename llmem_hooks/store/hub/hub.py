"""The team hub: one PostgreSQL database, one connection per person's role.

Every call is a few round trips at most: a push is one transaction (lock the projects,
read the batch's rows, one INSERT and one UPDATE over a JSON array), a pull one indexed
query, a search one call of a SECURITY DEFINER function plus one read through RLS.
PostgreSQL's row-level security is the boundary (schema.py); the checks here are
defence in depth and give clear messages.

psycopg is imported lazily: the base install works without the ``team`` extra.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from typing import Any, Self
from urllib.parse import unquote

from ... import faults
from ...errors import HubDenied, HubUnavailable, LLMemError, ValidationError
from ...redact import redact_json, redact_transcript, strip_private
from ...timestamps import parse_iso, parse_stored, to_iso
from . import schema
from .records import HubMemory, Mutation, PushOutcome

MISSING_EXTRA = "team features need: pip install 'llmem-hooks[team]'"
ACCESS = ("read", "write", "admin")
# What provenance may carry to the hub: never transcripts, prompts, session ids or paths.
PROVENANCE_KEYS = frozenset({"source", "confidence", "created_at"})
MAX_CONTENT = 10_000
MAX_WORDS = 32
MAX_BATCH = 5000
RRF_K = 60
STATEMENT_TIMEOUT_MS = 60_000
_ROLE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,62}")
_COLUMNS = (
    "id, project, type, content, tags, provenance, revision, updated_at, device, "
    "deleted_at, supersedes, author, created_at"
)
_RECORD = (
    "id text, project text, type text, content text, tags text[], provenance jsonb, "
    "revision integer, updated_at timestamptz, device text, deleted_at timestamptz, "
    "supersedes text, created_at timestamptz, embedding text"
)


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise LLMemError(MISSING_EXTRA) from None
    return psycopg


def scrub(text: str, dsn: str = "") -> str:
    """``text`` without any password: the DSN's own (URL or key=value form) and anything
    shaped like ``user:secret@`` or ``password=secret``. One line."""
    out = text
    for secret in _passwords(dsn):
        if secret:
            out = out.replace(secret, "***")
    out = re.sub(r"(://[^:/@\s]*:)[^@\s]*@", r"\1***@", out)
    out = re.sub(r"(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", out)
    return " ".join(out.split())


def _passwords(dsn: str) -> list[str]:
    found = [m.group(1) for m in re.finditer(r"://[^:/@\s]*:([^@\s]*)@", dsn)]
    found += [m.group(2) for m in re.finditer(r"(?i)password\s*=\s*('?)([^'\s]*)\1", dsn)]
    found += [m.group(1) for m in re.finditer(r"(?i)[?&]password=([^&\s]*)", dsn)]
    return [p for s in found for p in {s, unquote(s)} if len(p) >= 1]


def _denied_at_login(message: str) -> bool:
    low = message.lower()
    return any(
        s in low
        for s in (
            "password authentication failed",
            "no pg_hba.conf entry",
            "does not exist",
            "permission denied",
            "authentication failed",
            "no password supplied",
        )
    )


def _iso(value: datetime | None) -> str | None:
    return None if value is None else to_iso(value)


def _vector_text(values: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(v)) for v in values) + "]"


def _parse_vector(text: str | None) -> tuple[float, ...] | None:
    if not text:
        return None
    return tuple(float(v) for v in text.strip("[]").split(",") if v)


def _clean(text: str) -> str:
    """Redacted again before it leaves the machine (the last line, not the first)."""
    return redact_transcript(strip_private(text.replace("\x00", "")))


class Hub:
    """A connection to the team hub as one PostgreSQL role (``role``: the author of what
    it writes). Not shared between threads."""

    def __init__(self, conn: Any, dsn: str) -> None:
        self._conn = conn
        self._dsn = dsn
        self._psycopg = _psycopg()
        self.role: str = ""
        self._dims: int | None = None
        with self._guard("connect"):
            conn.execute(
                "SELECT set_config('statement_timeout', %s, false)", (str(STATEMENT_TIMEOUT_MS),)
            )
            self.role = conn.execute("SELECT current_user").fetchone()[0]
        self._load_vectors()

    # -- connection ---------------------------------------------------------------------

    @classmethod
    def connect(cls, dsn: str, *, timeout: float = 5.0) -> Hub:
        """Connect as the DSN's role. HubUnavailable if the server cannot be reached,
        HubDenied if it refuses the login, ValidationError for a malformed DSN."""
        psycopg = _psycopg()
        if not isinstance(dsn, str) or not dsn.strip():
            raise ValidationError("no team hub address (DSN) given")
        try:
            conn = psycopg.connect(
                dsn,
                connect_timeout=max(1, round(timeout)),
                autocommit=True,
                application_name="llmem-hooks",
            )
        except psycopg.ProgrammingError as exc:
            raise ValidationError(f"team hub address not valid: {scrub(str(exc), dsn)}") from None
        except psycopg.Error as exc:
            message = scrub(str(exc), dsn)
            if _denied_at_login(message):
                raise HubDenied(f"team hub refused the login: {message}") from None
            raise HubUnavailable(f"team hub unreachable: {message}") from None
        try:
            return cls(conn, dsn)
        except BaseException:
            conn.close()
            raise

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        """psycopg's errors as ours, one line, no password."""
        psycopg = self._psycopg
        errors = psycopg.errors
        try:
            yield
        except (errors.InsufficientPrivilege, errors.InvalidAuthorizationSpecification) as exc:
            raise HubDenied(f"team hub refused {what}: {self._say(exc)}") from None
        except (errors.UndefinedTable, errors.InvalidSchemaName, errors.UndefinedFunction) as exc:
            if "llmem" not in str(exc):
                raise
            raise HubUnavailable(
                f"team hub has no llmem schema yet (run `llmem-hooks team init`): {self._say(exc)}"
            ) from None
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            raise HubUnavailable(f"team hub unreachable during {what}: {self._say(exc)}") from None
        except psycopg.DataError as exc:
            raise ValidationError(f"team hub rejected {what}: {self._say(exc)}") from None
        except psycopg.IntegrityError as exc:
            raise ValidationError(f"team hub rejected {what}: {self._say(exc)}") from None

    def _say(self, exc: BaseException) -> str:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return scrub(first, self._dsn)

    def _load_vectors(self) -> None:
        with self._guard("reading the schema"):
            row = self._conn.execute(
                "SELECT a.atttypmod FROM pg_attribute a "
                "WHERE a.attrelid = to_regclass('llmem.memories') "
                "AND a.attname = 'embedding' AND NOT a.attisdropped"
            ).fetchone()
        self._dims = int(row[0]) if row else None

    # -- schema and membership ------------------------------------------------------------

    def migrate(self, *, vectors: bool = True, dims: int = 768) -> list[int]:
        """Create or upgrade the schema (idempotent; needs the database's owner or a
        superuser). ``vectors=False`` leaves pgvector out even where it is installed."""
        if not 1 <= int(dims) <= 16000:
            raise ValidationError(f"embedding dimensions out of range: {dims}")
        ctx = schema.MigrationContext(owner=self.role, dims=int(dims))
        with self._guard("creating the hub's schema (needs the database owner)"):
            done = schema.migrate(self._conn, ctx, vectors=vectors)
        self._load_vectors()
        return done

    def has_vectors(self) -> bool:
        return self._dims is not None

    @property
    def vector_dims(self) -> int | None:
        """The size of the hub's embeddings (None without pgvector): a pushed embedding of
        another size is left out, a search vector of another size is not used."""
        return self._dims

    def register_project(self, key: str, name: str) -> None:
        """Register a project; its creator becomes its admin. Idempotent for a member; a
        key someone else registered is HubDenied (ask its admin to add you)."""
        key, name = _text(key, "project key", 200), _text(name, "project name", 300, empty=True)
        with self._guard("registering the project"), self._conn.transaction():
            try:  # not ON CONFLICT: under RLS it would need to read the row first
                with self._conn.transaction():
                    self._conn.execute(
                        "INSERT INTO llmem.projects (key, name) VALUES (%s, %s)", (key, name)
                    )
            except self._psycopg.errors.UniqueViolation:
                pass
            seen = self._conn.execute(
                "SELECT 1 FROM llmem.projects WHERE key = %s", (key,)
            ).fetchone()
        if seen is None:
            raise HubDenied(
                f"project {key} is registered on the team hub by someone else: "
                "ask one of its admins to add your role"
            )

    def create_role(self, role: str, password: str) -> None:
        """A LOGIN role for one person, with a SCRAM password hashed here (the password
        itself never reaches the server or its log); needs CREATEROLE."""
        role = _role(role)
        if not isinstance(password, str) or not password:
            raise ValidationError("a password is needed for the new role")
        sql = self._psycopg.sql
        verifier = self._conn.pgconn.encrypt_password(
            password.encode(), role.encode(), b"scram-sha-256"
        ).decode()
        try:
            with self._guard("creating the role (needs CREATEROLE)"):
                self._conn.execute(
                    sql.SQL("CREATE ROLE {} LOGIN PASSWORD {} IN ROLE {}").format(
                        sql.Identifier(role),
                        sql.Literal(verifier),
                        sql.Identifier(schema.MEMBER_ROLE),
                    )
                )
        except self._psycopg.errors.DuplicateObject:
            raise ValidationError(f"role {role} already exists on the team hub") from None

    def add_member(self, project: str, role: str, access: str = "write") -> None:
        """Let ``role`` read (and write) the project's shared memories; admins only."""
        role = _role(role)
        if access not in ACCESS:
            raise ValidationError(f"access must be one of {', '.join(ACCESS)}, not {access!r}")
        self._need_admin(project)
        with self._guard("adding the member"), self._conn.transaction():
            if (
                self._conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
                is None
            ):
                raise ValidationError(
                    f"no role {role} on the team hub: create it first (team members add "
                    "with a password, or CREATE ROLE by the database's admin)"
                )
            self._conn.execute(
                "INSERT INTO llmem.members (project, role, access) VALUES (%s, %s, %s) "
                "ON CONFLICT (project, role) DO UPDATE SET access = excluded.access",
                (project, role, access),
            )

    def remove_member(self, project: str, role: str) -> bool:
        """Take ``role`` off the project (its memories stay); False if it was not on it.
        The last admin cannot be removed."""
        role = _role(role)
        self._need_admin(project)
        with self._guard("removing the member"), self._conn.transaction():
            rows = self._conn.execute(
                "SELECT role, access FROM llmem.members WHERE project = %s FOR UPDATE",
                (project,),
            ).fetchall()
            admins = {r for r, a in rows if a == "admin"}
            if admins == {role}:
                raise ValidationError(
                    f"{role} is the last admin of {project}: add another admin first"
                )
            cur = self._conn.execute(
                "DELETE FROM llmem.members WHERE project = %s AND role = %s", (project, role)
            )
            return bool(cur.rowcount)

    def _need_admin(self, project: str) -> None:
        with self._guard("checking membership"):
            ok = self._conn.execute(
                "SELECT llmem.is_admin(%s, current_user)", (project,)
            ).fetchone()[0]
        if not ok:
            raise HubDenied(f"only an admin of project {project} may change its members")

    def members(self, project: str) -> list[tuple[str, str]]:
        with self._guard("listing members"):
            rows = self._conn.execute(
                "SELECT role, access FROM llmem.members WHERE project = %s ORDER BY role",
                (project,),
            ).fetchall()
        return [(r, a) for r, a in rows]

    def projects(self) -> list[tuple[str, str]]:
        """The projects this role is a member of: (key, name)."""
        with self._guard("listing projects"):
            rows = self._conn.execute(
                "SELECT key, name FROM llmem.projects ORDER BY name, key"
            ).fetchall()
        return [(k, n) for k, n in rows]

    def head(self, project: str) -> int:
        """The project's last seq; HubDenied if this role is not a member of it."""
        with self._guard("reading the project"):
            row = self._conn.execute(
                "SELECT last_seq FROM llmem.projects WHERE key = %s", (project,)
            ).fetchone()
        if row is None:
            raise HubDenied(f"not a member of project {project} on the team hub")
        return int(row[0])

    # -- push and pull --------------------------------------------------------------------

    def push(self, items: Sequence[HubMemory]) -> list[PushOutcome]:
        """Write a batch in ONE transaction; one outcome per item, in order. The conflict
        rule: a new id is inserted; another author's id is FOREIGN; a tombstone on the
        hub wins over everything (STALE); an incoming tombstone wins over a live row of
        the same author; else the greater (revision, updated_at, device) wins."""
        if len(items) > MAX_BATCH:
            raise ValidationError(f"a push takes at most {MAX_BATCH} memories, not {len(items)}")
        batch = [self._prepared(it) for it in items]
        if not batch:
            return []
        outcomes: list[PushOutcome | None] = [None] * len(batch)
        keys = sorted({it.project for it in batch})
        conn = self._conn
        with self._guard("push"), conn.transaction():
            writable = {
                r[0]
                for r in conn.execute(
                    "SELECT llmem.lock_projects(%s, current_user)", (keys,)
                ).fetchall()
            }
            ids = list({it.id for it in batch if it.project in writable})
            state: dict[str, tuple[str, str, int, datetime, str, bool]] = {
                r[0]: (r[1], r[2], int(r[3]), r[4], r[5], r[6] is not None)
                for r in conn.execute(
                    "SELECT id, author, project, revision, updated_at, device, deleted_at "
                    "FROM llmem.memories WHERE id = ANY(%s)",
                    (ids,),
                ).fetchall()
            }
            inserts: dict[str, HubMemory] = {}
            updates: dict[str, HubMemory] = {}
            for i, it in enumerate(batch):
                if it.project not in writable:
                    outcomes[i] = PushOutcome.DENIED
                    continue
                cur = state.get(it.id)
                mine = (self.role, it.project)
                when = parse_stored(it.updated_at)
                if cur is None:
                    outcomes[i] = PushOutcome.APPLIED
                    inserts[it.id] = it
                elif (cur[0], cur[1]) != mine:
                    outcomes[i] = PushOutcome.FOREIGN
                    continue
                elif cur[5]:
                    outcomes[i] = PushOutcome.STALE
                    continue
                elif it.deleted_at is not None or (it.revision, when, it.device) > (
                    cur[2],
                    cur[3],
                    cur[4],
                ):
                    outcomes[i] = PushOutcome.APPLIED
                    (inserts if it.id in inserts else updates)[it.id] = it
                else:
                    outcomes[i] = PushOutcome.STALE
                    continue
                state[it.id] = (*mine, it.revision, when, it.device, it.deleted_at is not None)
            if inserts:
                done = {
                    r[0]
                    for r in conn.execute(
                        self._insert_sql(), (self._json(inserts.values()),)
                    ).fetchall()
                }
                # An id taken in a project this role cannot see: someone else's.
                for i, it in enumerate(batch):
                    if it.id in inserts and it.id not in done:
                        outcomes[i] = PushOutcome.FOREIGN
            if updates:
                conn.execute(self._update_sql(), (self._json(updates.values()),))
            faults.hit("team-mid-push")  # written, not committed (the crash tests)
        return [o if o is not None else PushOutcome.STALE for o in outcomes]

    def _prepared(self, it: HubMemory) -> HubMemory:
        """One item checked and cleaned before it leaves: redacted content and tags,
        provenance cut to its allowed keys, timestamps in the canonical form."""
        if not isinstance(it, HubMemory):
            raise ValidationError(f"push takes HubMemory items, not {type(it).__name__}")
        _text(it.id, "memory id", 200)
        _text(it.project, "project key", 200)
        _text(it.type, "memory type", 64)
        _text(it.device, "device", 64)
        if not isinstance(it.revision, int) or isinstance(it.revision, bool) or it.revision < 1:
            raise ValidationError(f"memory {it.id}: revision must be a positive integer")
        if not isinstance(it.content, str) or not isinstance(it.tags, tuple | list):
            raise ValidationError(f"memory {it.id}: content must be text and tags a list")
        content = _clean(it.content) if it.deleted_at is None else ""
        if it.deleted_at is None and not content.strip():
            raise ValidationError(f"memory {it.id}: empty content")
        if len(content) > MAX_CONTENT:
            raise ValidationError(f"memory {it.id}: content over {MAX_CONTENT} characters")
        tags = tuple(t for t in (_clean(str(t)).strip()[:100] for t in it.tags) if t)[:100]
        given = it.provenance if isinstance(it.provenance, Mapping) else {}
        try:
            provenance = redact_json(
                {
                    k: v
                    for k, v in given.items()
                    if k in PROVENANCE_KEYS
                    and (v is None or isinstance(v, int | float | str))
                    and len(str(v)) <= 200
                }
            )
        except ValueError:
            provenance = {}
        embedding = it.embedding
        if embedding is not None and (self._dims is None or len(embedding) != self._dims):
            embedding = None
        return replace(
            it,
            content=content,
            tags=tags,
            provenance=provenance,
            updated_at=parse_iso(it.updated_at, field="updated_at"),
            deleted_at=None if it.deleted_at is None else parse_iso(it.deleted_at),
            created_at=None if it.created_at is None else parse_iso(it.created_at),
            supersedes=None if not it.supersedes else _text(it.supersedes, "supersedes", 200),
            embedding=None if it.deleted_at is not None else embedding,
            author="",
        )

    def _json(self, items: Any) -> Any:
        rows = [
            {
                "id": it.id,
                "project": it.project,
                "type": it.type,
                "content": it.content,
                "tags": list(it.tags),
                "provenance": dict(it.provenance),
                "revision": it.revision,
                "updated_at": it.updated_at,
                "device": it.device,
                "deleted_at": it.deleted_at,
                "supersedes": it.supersedes,
                "created_at": it.created_at,
                "embedding": None if it.embedding is None else _vector_text(it.embedding),
            }
            for it in items
        ]
        return self._psycopg.types.json.Jsonb(rows)

    def _insert_sql(self) -> str:
        vec = ", embedding" if self._dims else ""
        vec_value = ", x.embedding::vector" if self._dims else ""
        return (
            "INSERT INTO llmem.memories (id, project, type, content, tags, provenance, "
            f"revision, updated_at, device, deleted_at, supersedes, created_at{vec}) "
            "SELECT x.id, x.project, x.type, x.content, coalesce(x.tags, '{}'), "
            "coalesce(x.provenance, '{}'), x.revision, x.updated_at, x.device, "
            f"x.deleted_at, x.supersedes, coalesce(x.created_at, now()){vec_value} "
            f"FROM jsonb_to_recordset(%s::jsonb) AS x({_RECORD}) "
            "ON CONFLICT (id) DO NOTHING RETURNING id"
        )

    def _update_sql(self) -> str:
        vec = ", embedding = x.embedding::vector" if self._dims else ""
        return (
            "UPDATE llmem.memories m SET type = x.type, content = x.content, "
            "tags = coalesce(x.tags, '{}'), provenance = coalesce(x.provenance, '{}'), "
            "revision = greatest(m.revision, x.revision), updated_at = x.updated_at, "
            "device = x.device, deleted_at = x.deleted_at, supersedes = x.supersedes"
            f"{vec} FROM jsonb_to_recordset(%s::jsonb) AS x({_RECORD}) "
            "WHERE m.id = x.id AND m.author = current_user AND m.deleted_at IS NULL"
        )

    def pull(self, project: str, after: int, limit: int = 500) -> list[Mutation]:
        """What changed in ``project`` after seq ``after``, in seq order, each memory once
        in its latest state (tombstones included). HubDenied for a non-member."""
        if not isinstance(after, int) or isinstance(after, bool) or after < 0:
            raise ValidationError(f"pull cursor must be a seq (an integer >= 0), not {after!r}")
        limit = max(1, min(int(limit), 5000))
        vec = ", embedding::text" if self._dims else ""
        with self._guard("pull"):
            rows = self._conn.execute(
                f"SELECT seq, {_COLUMNS}{vec} FROM llmem.memories "
                "WHERE project = %s AND seq > %s ORDER BY seq LIMIT %s",
                (project, after, limit),
            ).fetchall()
            if (
                not rows
                and not self._conn.execute(
                    "SELECT llmem.is_member(%s, current_user)", (project,)
                ).fetchone()[0]
            ):
                raise HubDenied(f"not a member of project {project} on the team hub")
        return [Mutation(seq=int(r[0]), memory=_memory(r[1:])) for r in rows]

    # -- search ---------------------------------------------------------------------------

    def search(
        self,
        projects: Sequence[str],
        words: Sequence[str],
        *,
        limit: int = 10,
        embedding: Sequence[float] | None = None,
    ) -> list[tuple[HubMemory, float]]:
        """Live memories of ``projects`` matching any of ``words`` (full text, ranked by
        ts_rank_cd), fused by reciprocal rank with the nearest by ``embedding`` when the
        hub has vectors. Scores are RRF scores: higher is better."""
        keys = [p for p in projects if isinstance(p, str) and p]
        terms = [w.strip()[:64] for w in words if isinstance(w, str) and w.strip()][:MAX_WORDS]
        limit = max(1, min(int(limit), 200))
        if not keys or (not terms and embedding is None):
            return []
        fetch = min(200, limit * 3)
        scores: dict[str, float] = {}
        with self._guard("search"):
            if terms:
                rows = self._conn.execute(
                    "SELECT id FROM llmem.search_text(current_user, %s, %s, %s)",
                    (keys, terms, fetch),
                ).fetchall()
                for rank, (mid,) in enumerate(rows):
                    scores[mid] = scores.get(mid, 0.0) + 1.0 / (RRF_K + rank + 1)
            if embedding is not None and self._dims is not None and len(embedding) == self._dims:
                rows = self._conn.execute(
                    "SELECT id FROM llmem.search_vector(current_user, %s, %s::vector, %s)",
                    (keys, _vector_text(embedding), fetch),
                ).fetchall()
                for rank, (mid,) in enumerate(rows):
                    scores[mid] = scores.get(mid, 0.0) + 1.0 / (RRF_K + rank + 1)
            best = sorted(scores, key=lambda m: (-scores[m], m))[:limit]
            if not best:
                return []
            found = {
                r[0]: _memory(r)
                for r in self._conn.execute(
                    f"SELECT {_COLUMNS} FROM llmem.memories "
                    "WHERE id = ANY(%s) AND deleted_at IS NULL",
                    (best,),
                ).fetchall()
            }
        return [(found[m], scores[m]) for m in best if m in found]


def _memory(row: Sequence[Any]) -> HubMemory:
    """A row of ``_COLUMNS`` (+ embedding text) as a HubMemory."""
    provenance = row[5] if isinstance(row[5], Mapping) else json.loads(row[5] or "{}")
    return HubMemory(
        id=row[0],
        project=row[1],
        type=row[2],
        content=row[3],
        tags=tuple(row[4] or ()),
        provenance=dict(provenance),
        revision=int(row[6]),
        updated_at=to_iso(row[7]),
        device=row[8],
        deleted_at=_iso(row[9]),
        supersedes=row[10],
        author=row[11],
        created_at=_iso(row[12]),
        embedding=_parse_vector(row[13]) if len(row) > 13 else None,
    )


def _text(value: Any, what: str, most: int, *, empty: bool = False) -> str:
    if not isinstance(value, str) or (not empty and not value.strip()):
        raise ValidationError(f"{what} must be a non-empty string")
    if len(value) > most or "\x00" in value:
        raise ValidationError(f"{what} too long (at most {most} characters) or not text")
    return value


def _role(role: Any) -> str:
    if not isinstance(role, str) or not _ROLE.fullmatch(role):
        raise ValidationError(
            f"not a role name: {role!r} (letters, digits, _ . -; at most 63 characters)"
        )
    if role.startswith("pg_") or role == schema.MEMBER_ROLE:
        raise ValidationError(f"{role} is reserved")
    return role
