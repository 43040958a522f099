"""MemoryStore: the SQLite database of memories, tags, relations, the inbox and cursors.

The store knows nothing of agents or sessions beyond the provenance columns it keeps;
adapters and hooks write through its methods. Every write runs in one ``BEGIN IMMEDIATE``
transaction, so a failure leaves nothing half-written and concurrent writers queue on
the lock (busy_timeout) instead of losing data.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import json
import math
import os
import re
import stat
import struct
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import fuzzy
from .db import connect, connect_readonly, has_function, is_sqlite_file, transaction
from .errors import NotFoundError, ValidationError
from .migrations import migrate, schema_lag
from .paths import FILE_MODE, ensure_private_dir, get_db_path
from .redact import find_secrets, redact_json, redact_secrets
from .registry import check_memory_type, register_memory_type
from .timestamps import now_iso, parse_iso
from .vectors import PREFILTER_THRESHOLD, SCOPE_GLOBAL, SCOPE_PROJECT, VectorIndex

MAX_CONTENT_CHARS = 10_000
MAX_ID_LENGTH = 256
MAX_EMBEDDING_BYTES = 1_048_576
MAX_TRAVERSAL_DEPTH = 5
DEFAULT_CONFIDENCE = 0.8
DEFAULT_EXPORT_LIMIT = 10_000
BRUTE_FORCE_MAX_ROWS = 10_000
DUPLICATE_COSINE = 0.92
REINFORCEMENT = 0.05
KNN_OVERFETCH = 2
KNN_MIN_K = 20
KNN_MAX_ROUNDS = 3
OWN_SCAN_MAX = 2_000
RELATION_TYPES = ("supersedes", "related_to", "derived_from", "references")
TARGET_TYPES = ("memory", "code")
INBOX_SOURCES = ("note", "learn", "extract", "consolidation")
_TAG = re.compile(r"^[a-z0-9][a-z0-9_.:/+#-]{0,63}$")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
_SORT_COLUMNS = {
    "created": "m.created_at",
    "updated": "m.updated_at",
    "accessed": "m.accessed_at",
    "expires": "m.expires_at",
    "confidence": "m.confidence",
    "content": "m.content",
    "type": "m.type",
}
# The FTS5 columns a query searches; fts_scope is only for the project filter.
_TEXT_COLUMNS = "{content summary tag_text}"
_MEMORY_COLUMNS = (
    "id, type, content, summary, source, confidence, metadata, hints, created_at, updated_at, "
    "accessed_at, access_count, valid_until, invalidation_reason, expires_at, entered_by, "
    "project, session_id, source_message_ids, tag_text"
)


@dataclass
class MemoryFilter:
    """Which memories a search or listing may return.

    ``project`` selects that project's memories plus global ones (project NULL);
    ``project_only`` drops the global ones.
    """

    type: str | Sequence[str] | None = None
    tags_all: Sequence[str] = ()
    tags_any: Sequence[str] = ()
    after: str | None = None
    before: str | None = None
    entered_by: str | None = None
    project: str | None = None
    project_only: bool = False
    session_id: str | None = None
    valid_only: bool = True
    include_expired: bool = False
    exclude_ids: Sequence[str] = field(default_factory=tuple)

    def to_sql(self, now: str) -> tuple[str, list[Any]]:
        """SQL condition over alias ``m`` and its parameters."""
        where: list[str] = []
        params: list[Any] = []
        if self.valid_only:
            where.append("(m.valid_until IS NULL OR m.valid_until > ?)")
            params.append(now)
        if not self.include_expired:
            where.append("(m.expires_at IS NULL OR m.expires_at > ?)")
            params.append(now)
        if self.type:
            types = [self.type] if isinstance(self.type, str) else list(self.type)
            where.append(f"m.type IN ({','.join('?' * len(types))})")
            params.extend(types)
        if self.entered_by:
            where.append("m.entered_by = ?")
            params.append(self.entered_by)
        if self.project:
            where.append(
                "m.project = ?" if self.project_only else "(m.project = ? OR m.project IS NULL)"
            )
            params.append(self.project)
        if self.session_id:
            where.append("m.session_id = ?")
            params.append(self.session_id)
        if self.after:
            where.append("m.created_at >= ?")
            params.append(parse_iso(self.after, field="--after date"))
        if self.before:
            where.append("m.created_at < ?")
            params.append(parse_iso(self.before, field="--before date"))
        tags_all = normalize_tags(self.tags_all)
        if tags_all:
            where.append(
                "m.seq IN (SELECT mt.memory_seq FROM memory_tags mt JOIN tags t ON t.id = mt.tag_id"
                f" WHERE t.name IN ({','.join('?' * len(tags_all))})"
                " GROUP BY mt.memory_seq HAVING COUNT(*) = ?)"
            )
            params.extend([*tags_all, len(tags_all)])
        tags_any = normalize_tags(self.tags_any)
        if tags_any:
            where.append(
                "EXISTS (SELECT 1 FROM memory_tags mt JOIN tags t ON t.id = mt.tag_id"
                f" WHERE mt.memory_seq = m.seq AND t.name IN ({','.join('?' * len(tags_any))}))"
            )
            params.extend(tags_any)
        if self.exclude_ids:
            where.append(f"m.id NOT IN ({','.join('?' * len(self.exclude_ids))})")
            params.extend(self.exclude_ids)
        return (" AND ".join(where) or "1"), params


def normalize_tags(tags: Iterable[str] | str | None) -> list[str]:
    """Lower-case, de-duplicated tags; a comma-separated string is split."""
    if not tags:
        return []
    if isinstance(tags, str):
        tags = tags.split(",")
    if not isinstance(tags, Iterable) or isinstance(tags, Mapping | bytes):
        raise ValidationError(f"invalid tags {tags!r}: expected a list of strings")
    out: list[str] = []
    for raw in tags:
        if not isinstance(raw, str):
            raise ValidationError(f"invalid tag {raw!r}: tags are strings")
        _check_identity(raw, "tag")
        tag = raw.strip().lower()
        if not tag:
            continue
        if not _TAG.match(tag):
            raise ValidationError(
                f"invalid tag {raw!r}: use letters, digits and _.:/+#- (no spaces), at most 64"
            )
        if tag not in out:
            out.append(tag)
    return out


def content_hash(content: str) -> str:
    """Hash of the content with case and whitespace folded, for exact-duplicate detection."""
    norm = " ".join(fuzzy.fold(content).split())
    return hashlib.sha256(norm.encode("utf-8")).hexdigest()


def pack_embedding(vec: Sequence[float] | bytes | None) -> bytes | None:
    """Float vector -> little-endian float32 bytes (bytes pass through)."""
    if vec is None:
        return None
    blob = (
        bytes(vec)
        if isinstance(vec, bytes | bytearray | memoryview)
        else struct.pack(f"<{len(vec)}f", *vec)
    )
    if len(blob) > MAX_EMBEDDING_BYTES or len(blob) % 4:
        raise ValidationError("embedding must be packed float32 and at most 1 MB")
    return blob


def unpack_embedding(blob: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(blob) // 4}f", blob))


def _cosine_distance(a: bytes, b: bytes) -> float:
    va, vb = unpack_embedding(a), unpack_embedding(b)
    dot = sum(x * y for x, y in zip(va, vb, strict=True))
    na = math.sqrt(sum(x * x for x in va))
    nb = math.sqrt(sum(y * y for y in vb))
    return 1.0 - dot / (na * nb) if na and nb else 1.0


def _check_content(content: Any, what: str = "content") -> str:
    """Valid text with credentials replaced by ``[REDACTED]``: whoever writes (an extractor,
    the CLI, an import), a secret never reaches the database. A private key block cannot be
    cut out reliably, so text holding one is refused."""
    if not isinstance(content, str) or not content.strip():
        raise ValidationError(f"{what} must be a non-empty string")
    if len(content) > MAX_CONTENT_CHARS:
        raise ValidationError(
            f"{what} is {len(content):,} characters; the limit is {MAX_CONTENT_CHARS:,}"
        )
    redacted = redact_secrets(content)
    if redacted is None:
        raise ValidationError(
            f"{what} holds a private key; store where the key lives instead, not the key"
        )
    return redacted


# -- the one redaction choke point (issue 9): every text this module writes passes here --


def _safe_text(value: str | None, what: str) -> str | None:
    """Free text (a reason, a hint) with credentials replaced by ``[REDACTED]``."""
    if value is None:
        return None
    redacted = redact_secrets(value)
    if redacted is None:
        raise ValidationError(f"{what} holds a private key; store where the key lives instead")
    return redacted


@functools.lru_cache(maxsize=4096)
def _holds_secret(value: str) -> bool:
    """Cached: sources, projects and authors repeat across thousands of imported rows."""
    return bool(find_secrets(value))


def _check_identity(value: Any, what: str) -> Any:
    """Ids and names (source, entered_by, project, session id, tags, code paths) are
    matched and grouped on; a redacted one would silently merge or split records, so one
    that holds a credential is refused instead. The message never repeats the value."""
    if isinstance(value, str) and value and _holds_secret(value):
        raise ValidationError(f"{what} looks like it holds a credential; refused")
    return value


def _safe_json(value: Any, what: str) -> Any:
    """Metadata: every string (keys too) redacted, a credential-named key's value too."""
    if value is None:
        return None
    try:
        return redact_json(value)
    except ValueError:
        raise ValidationError(f"{what} holds a private key") from None
    except RecursionError:
        raise ValidationError(f"{what} is nested too deeply") from None


def _check_confidence(value: Any, what: str = "confidence") -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ValidationError(f"{what} must be a number between 0 and 1, got {value!r}")
    return float(value)


def _check_id(value: Any, what: str = "id") -> str:
    if (
        not isinstance(value, str)
        or not value
        or len(value) > MAX_ID_LENGTH
        or not _ID.match(value)
    ):
        raise ValidationError(f"invalid {what} {value!r}")
    return value


def _json_list(value: Any, what: str) -> str:
    if value is None:
        return "[]"
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ValidationError(f"{what} must be a list of strings")
    return json.dumps(list(value))


def _json_dict(value: Any, what: str = "metadata") -> str:
    if value is None:
        return "{}"
    if not isinstance(value, Mapping):
        raise ValidationError(f"{what} must be a JSON object")
    try:
        return json.dumps(dict(value), sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{what} is not JSON-serializable: {exc}") from None


# Limits on imported records (an export file is untrusted input: it may be hand-written).
MAX_IMPORT_TEXT = 256  # source, session_id, entered_by, type, relation fields
MAX_PROJECT_CHARS = 4_096  # a project key may be a folder path (PATH_MAX)
MAX_IMPORT_REASON = 2_000  # invalidation_reason
MAX_IMPORT_TAGS = 64  # tags per memory (each at most 64 characters, see _TAG)
MAX_IMPORT_LIST = 1_000  # hints, source_message_ids, relations per memory
MAX_IMPORT_LIST_ITEM = 2_000  # characters of one hint or source message id
MAX_IMPORT_METADATA_BYTES = 65_536  # metadata as JSON
MAX_IMPORT_COUNT = 2**31  # access_count
MAX_IMPORT_DIMENSIONS = 8_192
_IMPORT_TIMES = ("created_at", "updated_at", "accessed_at", "expires_at", "valid_until")


def _identity_limit(key: str) -> int:
    return MAX_PROJECT_CHARS if key == "project" else MAX_IMPORT_TEXT


def _check_identity_length(value: Any, key: str) -> None:
    """Every route in (CLI, API, import, extraction) gets the same bounds on ids and names:
    a 200,000-character project or source is a mistake or an attack, never a key."""
    limit = _identity_limit(key)
    if isinstance(value, str) and len(value) > limit:
        raise ValidationError(f"{key} is {len(value):,} characters; the limit is {limit}")


def _import_field_error(field: str, problem: str) -> ValidationError:
    return ValidationError(f"field {field!r} {problem}")


def validate_import_record(item: Mapping[str, Any]) -> None:
    """Types, lengths and ranges of one imported memory, before `_prepare` sees it.

    Why a separate pass: `_prepare` trusts the shapes its own callers pass; an import file
    can hold anything (a number for the embedding, 10**30 for a count, 200,000-character
    ids), which must be a one-line ValidationError naming the field, never a traceback or
    an oversized row. Raises ValidationError("field 'x' ...").
    """
    for key in ("source", "project", "session_id", "entered_by", "type"):
        value = item.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise _import_field_error(key, f"must be a string, got {type(value).__name__}")
        limit = _identity_limit(key)
        if len(value) > limit:
            raise _import_field_error(key, f"is {len(value):,} characters; the limit is {limit}")
    for key, limit in (
        ("content", MAX_CONTENT_CHARS),
        ("summary", MAX_CONTENT_CHARS),
        ("invalidation_reason", MAX_IMPORT_REASON),
        ("id", MAX_ID_LENGTH),
    ):
        value = item.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise _import_field_error(key, f"must be a string, got {type(value).__name__}")
        if len(value) > limit:
            raise _import_field_error(key, f"is {len(value):,} characters; the limit is {limit:,}")
    for key in _IMPORT_TIMES:
        value = item.get(key)
        if value is not None and (not isinstance(value, str) or len(value) > 64):
            raise _import_field_error(key, "must be an ISO 8601 date string")
    tags = item.get("tags")
    if tags is not None:
        if isinstance(tags, str):
            tags = tags.split(",")
        if not isinstance(tags, list) or len(tags) > MAX_IMPORT_TAGS:
            raise _import_field_error("tags", f"must be a list of at most {MAX_IMPORT_TAGS} tags")
        if not all(isinstance(t, str) and len(t) <= 64 for t in tags):
            raise _import_field_error("tags", "must hold strings of at most 64 characters")
    for key in ("hints", "source_message_ids", "relations"):
        value = item.get(key)
        if value is None:
            continue
        if not isinstance(value, list) or len(value) > MAX_IMPORT_LIST:
            raise _import_field_error(key, f"must be a list of at most {MAX_IMPORT_LIST:,} items")
        if key != "relations" and not all(
            isinstance(v, str) and len(v) <= MAX_IMPORT_LIST_ITEM for v in value
        ):
            raise _import_field_error(
                key, f"must hold strings of at most {MAX_IMPORT_LIST_ITEM:,} characters"
            )
    for rel in item.get("relations") or []:
        if not isinstance(rel, Mapping) or not all(
            v is None or (isinstance(v, str) and len(v) <= MAX_PROJECT_CHARS) for v in rel.values()
        ):
            raise _import_field_error("relations", "must hold objects of short strings")
    metadata = item.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, Mapping):
            raise _import_field_error("metadata", "must be a JSON object")
        try:
            size = len(json.dumps(metadata, allow_nan=False).encode("utf-8"))
        except (TypeError, ValueError, RecursionError):
            raise _import_field_error("metadata", "must be plain, finite JSON") from None
        if size > MAX_IMPORT_METADATA_BYTES:
            raise _import_field_error(
                "metadata", f"is {size:,} bytes of JSON; the limit is {MAX_IMPORT_METADATA_BYTES:,}"
            )
    for key in ("access_count",):
        value = item.get(key)
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not 0 <= value <= MAX_IMPORT_COUNT
        ):
            raise _import_field_error(key, f"must be an integer from 0 to {MAX_IMPORT_COUNT}")
    confidence = item.get("confidence")
    if confidence is not None and (
        isinstance(confidence, bool)
        or not isinstance(confidence, int | float)
        or not 0.0 <= confidence <= 1.0  # false for nan
    ):
        raise _import_field_error("confidence", "must be a number between 0 and 1")
    _validate_import_embedding(item.get("embedding"))


def _validate_import_embedding(value: Any) -> None:
    """Absent, a list of finite floats, or base64 of packed finite float32 (export_all's)."""
    if value is None:
        return
    if isinstance(value, str):
        if len(value) > MAX_EMBEDDING_BYTES * 2:
            raise _import_field_error("embedding", "is too large")
        try:
            blob = base64.b64decode(value, validate=True)
        except ValueError:
            raise _import_field_error("embedding", "must be base64 of packed float32") from None
        if not blob or len(blob) % 4 or len(blob) // 4 > MAX_IMPORT_DIMENSIONS:
            raise _import_field_error(
                "embedding", f"must hold 1 to {MAX_IMPORT_DIMENSIONS} packed float32 values"
            )
        floats: Sequence[float] = unpack_embedding(blob)
    elif isinstance(value, list):
        if not value or len(value) > MAX_IMPORT_DIMENSIONS:
            raise _import_field_error(
                "embedding", f"must hold 1 to {MAX_IMPORT_DIMENSIONS} numbers"
            )
        if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in value):
            raise _import_field_error("embedding", "must be a list of numbers")
        floats = value
    else:
        raise _import_field_error(
            "embedding", f"must be a list of numbers or absent, got {type(value).__name__}"
        )
    try:
        finite = all(math.isfinite(x) and abs(x) <= 3.4e38 for x in floats)
    except OverflowError:  # an integer too large for a float
        finite = False
    if not finite:
        raise _import_field_error("embedding", "must hold finite float32 values")


def row_to_memory(row: Any) -> dict[str, Any]:
    """A memories row (selected with _MEMORY_COLUMNS) as the public dict."""
    mem = {k: row[k] for k in row.keys() if k not in ("tag_text", "embedding", "seq")}  # noqa: SIM118 - a Row iterates values
    mem["metadata"] = json.loads(row["metadata"] or "{}")
    mem["hints"] = json.loads(row["hints"] or "[]")
    mem["source_message_ids"] = json.loads(row["source_message_ids"] or "[]")
    mem["tags"] = row["tag_text"].split() if row["tag_text"] else []
    return mem


class SchemaBehind(ValidationError):
    """A read-only open found a database older than this version's schema."""


def _check_db_file(path: Path, read_only: bool) -> None:
    """Refuse, before SQLite opens it, a path that is not a database: SQLite would create
    a journal next to it or fail later with a less clear message."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if read_only:
            raise NotFoundError(f"no database at {path}") from None
        return
    if not stat.S_ISREG(st.st_mode):
        raise ValidationError(f"database: {path} is not a regular file")
    # With a -wal beside it, SQLite has the file open (maybe this very process: closing
    # any descriptor of it would drop that connection's POSIX locks), so it is a database.
    if not os.path.exists(f"{path}-wal") and not is_sqlite_file(path):
        raise ValidationError(f"database: {path} is not an SQLite database; nothing was changed")


class MemoryStore:
    """Memories in one SQLite file (default ``<LLMEM_HOME>/memory.db``).

    Usable as a context manager; thread-safe (one connection guarded by a lock).

    ``vec_dimensions``: the embedding size (config memory.vec_dimensions); None adopts the
    one recorded in the database, or the first stored vector's. ``duplicate_cosine``: a
    new memory at least this similar to a valid one of its project is merged into it.
    ``load_vec=False`` opens without sqlite-vec (FTS and a Python scan only), as a Python
    that cannot load extensions would. ``prefilter_threshold``: from this many vectors on,
    KNN goes through the binary prefilter (see `llmem_hooks.vectors`).
    """

    def __init__(
        self,
        db_path: Path | str | None = None,
        *,
        inbox_capacity: int = 100,
        default_confidence: float = DEFAULT_CONFIDENCE,
        vec_dimensions: int | None = None,
        duplicate_cosine: float = DUPLICATE_COSINE,
        load_vec: bool = True,
        prefilter_threshold: int = PREFILTER_THRESHOLD,
        read_only: bool = False,
    ) -> None:
        path = Path(db_path) if db_path is not None else get_db_path()
        in_memory = str(path) == ":memory:"
        if not in_memory:
            _check_db_file(path, read_only)
        if not in_memory and not read_only:
            ensure_private_dir(path.parent)
            # Create the file 0600 before SQLite opens it: SQLite gives the -wal and -shm
            # files the database file's mode, so they are private from the first write.
            # Only when it does not exist: closing any descriptor of a file drops every
            # POSIX lock this process holds on it, including those of a connection already
            # open here; another process would then think itself the last user and delete
            # the WAL under that connection, whose later commits nobody else would see.
            if not path.exists():
                with contextlib.suppress(FileExistsError):
                    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, FILE_MODE))
        self.db_path = path
        self.read_only = read_only
        self.inbox_capacity = inbox_capacity
        self.default_confidence = _check_confidence(default_confidence, "default confidence")
        self.duplicate_cosine = _check_confidence(duplicate_cosine, "duplicate cosine")
        self._lock = threading.RLock()
        self._has_vec: bool | None = None
        if read_only:
            # Readers never write: no migrations, no vector reconcile, no access counts.
            self._conn = connect_readonly(path, load_vec=load_vec)
            lag = schema_lag(self._conn)
            if lag:
                self._conn.close()
                raise SchemaBehind(
                    f"database {path} lacks {lag} schema upgrade(s) and cannot be written;"
                    " run any llmem-hooks command once with write access to upgrade it"
                )
        else:
            self._conn = connect(path, load_vec=load_vec)
            migrate(self._conn)
        try:
            self.vectors = VectorIndex(
                self._conn,
                None if read_only else vec_dimensions,
                enabled=load_vec,
                prefilter_threshold=prefilter_threshold,
            )
            if read_only:
                self.vectors.refresh()
            else:
                self.vectors.open()
        except BaseException:
            self._conn.close()
            raise
        for (name,) in self._conn.execute("SELECT DISTINCT type FROM memories"):
            register_memory_type(name)

    @classmethod
    def from_config(
        cls,
        config: Mapping[str, Any],
        db_path: Path | str | None = None,
        *,
        read_only: bool = False,
    ) -> MemoryStore:
        """The store config.yaml's ``memory`` section describes (``db_path`` overrides its
        path): one rule for the CLI, the sidecar and the hooks. ``read_only``: see
        `connect_readonly` (for commands that only read)."""
        mem = config.get("memory") or {}
        if db_path is None and mem.get("db_path"):
            db_path = Path(str(mem["db_path"])).expanduser()
        return cls(
            db_path,
            inbox_capacity=int(mem.get("inbox_capacity", 100)),
            default_confidence=float(mem.get("default_confidence", DEFAULT_CONFIDENCE)),
            vec_dimensions=mem.get("vec_dimensions"),
            duplicate_cosine=float(mem.get("duplicate_cosine", DUPLICATE_COSINE)),
            read_only=read_only,
        )

    # -- lifecycle -----------------------------------------------------------------------
    @property
    def conn(self) -> Any:
        return self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    @contextmanager
    def atomic(self) -> Iterator[MemoryStore]:
        """Run several writes as one transaction: all of them land, or none."""
        with self._lock, transaction(self._conn):
            yield self

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- memories ------------------------------------------------------------------------
    def add(
        self,
        type: str,
        content: str,
        *,
        summary: str | None = None,
        source: str = "manual",
        confidence: float | None = None,
        metadata: Mapping[str, Any] | None = None,
        hints: Sequence[str] | None = None,
        tags: Iterable[str] | str | None = None,
        expires_at: str | None = None,
        valid_until: str | None = None,
        entered_by: str | None = None,
        project: str | None = None,
        session_id: str | None = None,
        source_message_ids: Sequence[str] | None = None,
        embedding: Sequence[float] | bytes | None = None,
        id: str | None = None,
        created_at: str | None = None,
        dedupe: bool = True,
    ) -> str:
        """Store a memory and return its id.

        With ``dedupe`` (the default) a duplicate of a valid memory is not stored twice:
        same text up to case and spacing (same type and project), or, given an embedding,
        cosine similarity >= ``duplicate_cosine`` with a memory of the same project (any
        type: an extractor may call the same statement a fact once and a decision the next
        time). The existing memory is reinforced instead (see `_reinforce`) and its id
        returned.
        """
        record = self._prepare(
            {
                "id": id,
                "type": type,
                "content": content,
                "summary": summary,
                "source": source,
                "confidence": confidence,
                "metadata": metadata,
                "hints": hints,
                "tags": tags,
                "expires_at": expires_at,
                "valid_until": valid_until,
                "entered_by": entered_by,
                "project": project,
                "session_id": session_id,
                "source_message_ids": source_message_ids,
                "embedding": embedding,
                "created_at": created_at,
            }
        )
        with self._lock, transaction(self._conn):
            if dedupe:
                existing = self._find_duplicate(record) or self._find_near_duplicate(record)
                if existing is not None:
                    self._reinforce(existing, record)
                    return existing[1]
            self._insert([record])
        return record["id"]

    def _find_near_duplicate(self, record: dict[str, Any]) -> tuple[int, str, str] | None:
        """The valid memory of the same project nearest to the new one's embedding, if its
        cosine similarity reaches ``duplicate_cosine``."""
        if record["embedding"] is None:
            return None
        now = now_iso()
        hits = self._nearest_rows(
            record["embedding"],
            "m.project IS ? AND (m.valid_until IS NULL OR m.valid_until > ?) "
            "AND (m.expires_at IS NULL OR m.expires_at > ?)",
            [record["project"], now, now],
            1,
            max_distance=1.0 - self.duplicate_cosine,
            scope=(record["project"], record["project"] is None),
        )
        if not hits:
            return None
        row = hits[0][1]
        return (row["seq"], row["id"], row["tag_text"])

    def _reinforce(self, existing: tuple[int, str, str], record: dict[str, Any]) -> None:
        """Seeing a memory again makes it more credible: tags merged, confidence raised
        to the higher of the two plus REINFORCEMENT (at most 1), ``updated_at`` bumped and
        ``metadata.reinforcements`` counted. An embedding it lacked is taken over."""
        seq, _, tag_text = existing
        row = self._conn.execute(
            "SELECT confidence, metadata, embedding IS NULL FROM memories WHERE seq = ?", (seq,)
        ).fetchone()
        meta = json.loads(row[1] or "{}")
        count = meta.get("reinforcements")
        meta["reinforcements"] = (count if isinstance(count, int) else 0) + 1
        confidence = min(1.0, max(row[0], record["confidence"]) + REINFORCEMENT)
        sets = {"confidence": confidence, "metadata": _json_dict(meta), "updated_at": now_iso()}
        if row[2] and record["embedding"] is not None:
            sets["embedding"] = record["embedding"]
        assignments = ", ".join(f"{col} = ?" for col in sets)
        self._conn.execute(
            f"UPDATE memories SET {assignments} WHERE seq = ?", [*sets.values(), seq]
        )
        if "embedding" in sets:
            self.vectors.write([(seq, record["embedding"])])
        if record["tags"]:
            self._set_tags(seq, normalize_tags(tag_text.split() + record["tags"]))

    def _find_duplicate(self, record: dict[str, Any]) -> tuple[int, str, str] | None:
        now = now_iso()
        row = self._conn.execute(
            "SELECT seq, id, tag_text FROM memories WHERE content_hash = ? AND type = ? "
            "AND project IS ? AND (valid_until IS NULL OR valid_until > ?) "
            "AND (expires_at IS NULL OR expires_at > ?) LIMIT 1",
            (record["content_hash"], record["type"], record["project"], now, now),
        ).fetchone()
        return (row[0], row[1], row[2]) if row else None

    def _prepare(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """Validate one memory's fields and return the row to insert (raises ValidationError)."""
        content = _check_content(data.get("content"))
        mtype = data.get("type")
        if not isinstance(mtype, str):
            raise ValidationError("type must be a string")
        check_memory_type(mtype)
        mid = data.get("id") or str(uuid.uuid4())
        _check_id(mid)
        confidence = data.get("confidence")
        confidence = (
            self.default_confidence if confidence is None else _check_confidence(confidence)
        )
        created = (
            parse_iso(data["created_at"], field="created_at")
            if data.get("created_at")
            else now_iso()
        )
        tags = normalize_tags(data.get("tags"))
        embedding = data.get("embedding")
        if isinstance(embedding, str):
            try:
                embedding = base64.b64decode(embedding, validate=True)
            except ValueError:
                raise ValidationError("embedding must be base64 of packed float32") from None

        def opt_text(key: str) -> str | None:
            value = data.get(key)
            if value is not None and not isinstance(value, str):
                raise ValidationError(f"{key} must be a string")
            return value or None

        summary = opt_text("summary")
        if summary is not None:
            summary = _check_content(summary, "summary")
        for key in ("source", "entered_by", "project", "session_id"):
            _check_identity_length(data.get(key), key)
            _check_identity(data.get(key), key)
        hints = data.get("hints")
        if isinstance(hints, list | tuple):
            hints = [_safe_text(h, "hints") if isinstance(h, str) else h for h in hints]
        message_ids = data.get("source_message_ids")
        if isinstance(message_ids, list | tuple):
            for mid_ in message_ids:
                _check_identity(mid_, "source_message_ids")
        access_count = data.get("access_count") or 0
        if isinstance(access_count, bool) or not isinstance(access_count, int) or access_count < 0:
            raise ValidationError("access_count must be a non-negative integer")
        opt_time = {
            key: parse_iso(data[key], field=key) if data.get(key) else None
            for key in ("expires_at", "valid_until", "accessed_at", "updated_at")
        }
        return {
            "id": mid,
            "type": mtype,
            "content": content,
            "summary": summary,
            "source": opt_text("source") or "manual",
            "confidence": confidence,
            "metadata": _json_dict(_safe_json(data.get("metadata"), "metadata")),
            "hints": _json_list(hints, "hints"),
            "created_at": created,
            "updated_at": opt_time["updated_at"] or created,
            "accessed_at": opt_time["accessed_at"],
            "access_count": access_count,
            "valid_until": opt_time["valid_until"],
            "invalidation_reason": _safe_text(
                opt_text("invalidation_reason"), "invalidation_reason"
            ),
            "expires_at": opt_time["expires_at"],
            "entered_by": opt_text("entered_by"),
            "project": opt_text("project"),
            "session_id": opt_text("session_id"),
            "source_message_ids": _json_list(data.get("source_message_ids"), "source_message_ids"),
            "content_hash": content_hash(content),
            "tags": tags,
            "tag_text": " ".join(tags),
            "embedding": self._check_vector(pack_embedding(embedding)),
        }

    def _check_vector(self, blob: bytes | None) -> bytes | None:
        self.vectors.check(blob)
        return blob

    _INSERT_COLUMNS = (
        "seq",
        "id",
        "type",
        "content",
        "summary",
        "source",
        "confidence",
        "metadata",
        "hints",
        "created_at",
        "updated_at",
        "accessed_at",
        "access_count",
        "valid_until",
        "invalidation_reason",
        "expires_at",
        "entered_by",
        "project",
        "session_id",
        "source_message_ids",
        "content_hash",
        "tag_text",
        "embedding",
    )

    def _insert(self, records: list[dict[str, Any]]) -> None:
        """Insert validated records (inside the caller's transaction)."""
        start = self._conn.execute("SELECT coalesce(max(seq), 0) FROM memories").fetchone()[0]
        for offset, rec in enumerate(records, start=1):
            rec["seq"] = start + offset
        cols = self._INSERT_COLUMNS
        self._conn.executemany(
            f"INSERT INTO memories ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
            [tuple(rec[c] for c in cols) for rec in records],
        )
        self.vectors.inserted(
            start + 1,
            [(rec["seq"], rec["embedding"]) for rec in records if rec["embedding"] is not None],
        )
        tag_ids = self._tag_ids({t for rec in records for t in rec["tags"]})
        self._conn.executemany(
            "INSERT INTO memory_tags(memory_seq, tag_id) VALUES (?, ?)",
            [(rec["seq"], tag_ids[t]) for rec in records for t in rec["tags"]],
        )
        terms: set[str] = set()
        for rec in records:
            terms |= fuzzy.extract_terms(
                f"{rec['content']} {rec['summary'] or ''} {rec['tag_text']}"
            )
        fuzzy.index_terms(self._conn, terms)

    def _tag_ids(self, names: Iterable[str]) -> dict[str, int]:
        names = sorted(set(names))
        if not names:
            return {}
        self._conn.executemany("INSERT OR IGNORE INTO tags(name) VALUES (?)", [(n,) for n in names])
        ids: dict[str, int] = {}
        for i in range(0, len(names), 500):
            chunk = names[i : i + 500]
            for tid, name in self._conn.execute(
                f"SELECT id, name FROM tags WHERE name IN ({','.join('?' * len(chunk))})", chunk
            ):
                ids[name.lower()] = tid
        return ids

    def _set_tags(self, seq: int, tags: list[str]) -> None:
        self._conn.execute("DELETE FROM memory_tags WHERE memory_seq = ?", (seq,))
        ids = self._tag_ids(tags)
        self._conn.executemany(
            "INSERT INTO memory_tags(memory_seq, tag_id) VALUES (?, ?)",
            [(seq, ids[t]) for t in tags],
        )
        self._conn.execute("UPDATE memories SET tag_text = ? WHERE seq = ?", (" ".join(tags), seq))
        fuzzy.index_terms(self._conn, tags)

    def get(self, memory_id: str, track_access: bool = False) -> dict[str, Any] | None:
        """The memory with this id (valid or not), or None."""
        with self._lock:
            row = self._conn.execute(
                f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE id = ?", (memory_id,)
            ).fetchone()
            if row is None:
                return None
            if track_access:
                self.touch_batch([memory_id])
            return row_to_memory(row)

    def resolve_id(self, id_or_prefix: str) -> str:
        """The full id of the memory whose id is, or starts with, ``id_or_prefix`` (>= 4 chars)."""
        if not id_or_prefix or len(id_or_prefix) > MAX_ID_LENGTH:
            raise NotFoundError(f"no memory with id {id_or_prefix!r}")
        row = self._conn.execute("SELECT id FROM memories WHERE id = ?", (id_or_prefix,)).fetchone()
        if row:
            return row[0]
        if len(id_or_prefix) >= 4 and _ID.match(id_or_prefix):
            rows = self._conn.execute(
                "SELECT id FROM memories WHERE id >= ? AND id < ? ORDER BY id LIMIT 2",
                (id_or_prefix, id_or_prefix + "\uffff"),
            ).fetchall()
            if len(rows) == 1:
                return rows[0][0]
            if len(rows) > 1:
                raise ValidationError(
                    f"id prefix {id_or_prefix!r} is ambiguous; give more characters"
                )
        raise NotFoundError(f"no memory with id {id_or_prefix!r}")

    def get_many(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Memories by id (missing ids are absent from the result)."""
        out: dict[str, dict[str, Any]] = {}
        with self._lock:
            for i in range(0, len(ids), 500):
                chunk = list(ids[i : i + 500])
                for row in self._conn.execute(
                    f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE id IN "
                    f"({','.join('?' * len(chunk))})",
                    chunk,
                ):
                    out[row["id"]] = row_to_memory(row)
        return out

    def get_embedding(self, memory_id: str) -> list[float] | None:
        row = self._conn.execute(
            "SELECT embedding FROM memories WHERE id = ?", (memory_id,)
        ).fetchone()
        return unpack_embedding(row[0]) if row and row[0] is not None else None

    def update(
        self,
        memory_id: str,
        *,
        content: str | None = None,
        summary: str | None = None,
        type: str | None = None,
        confidence: float | None = None,
        metadata: Mapping[str, Any] | None = None,
        hints: Sequence[str] | None = None,
        tags: Iterable[str] | str | None = None,
        expires_at: str | None = None,
        embedding: Sequence[float] | bytes | None = None,
        clear_embedding: bool = False,
    ) -> bool:
        """Change fields of a memory; returns False if the id does not exist."""
        sets: dict[str, Any] = {}
        if content is not None:
            sets["content"] = _check_content(content)
            sets["content_hash"] = content_hash(sets["content"])
        if summary is not None:
            sets["summary"] = _check_content(summary, "summary")
        if type is not None:
            sets["type"] = check_memory_type(type)
        if confidence is not None:
            sets["confidence"] = _check_confidence(confidence)
        if metadata is not None:
            sets["metadata"] = _json_dict(_safe_json(metadata, "metadata"))
        if hints is not None:
            if isinstance(hints, list | tuple):
                hints = [_safe_text(h, "hints") if isinstance(h, str) else h for h in hints]
            sets["hints"] = _json_list(hints, "hints")
        if expires_at is not None:
            sets["expires_at"] = parse_iso(expires_at, field="expires_at")
        if embedding is not None:
            sets["embedding"] = self._check_vector(pack_embedding(embedding))
        elif clear_embedding:
            sets["embedding"] = None
        new_tags = normalize_tags(tags) if tags is not None else None
        with self._lock, transaction(self._conn):
            row = self._conn.execute(
                "SELECT seq FROM memories WHERE id = ?", (memory_id,)
            ).fetchone()
            if row is None:
                return False
            sets["updated_at"] = now_iso()
            assignments = ", ".join(f"{col} = ?" for col in sets)
            self._conn.execute(
                f"UPDATE memories SET {assignments} WHERE seq = ?", [*sets.values(), row[0]]
            )
            if new_tags is not None:
                self._set_tags(row[0], new_tags)
            if "embedding" in sets:
                self.vectors.write([(row[0], sets["embedding"])])
            words = f"{sets.get('content') or ''} {sets.get('summary') or ''}"
            fuzzy.index_terms(self._conn, fuzzy.extract_terms(words))
        return True

    def invalidate(self, memory_id: str, reason: str | None = None) -> bool:
        """Soft-delete: the memory stays for history but is no longer returned by default."""
        if reason is not None and not isinstance(reason, str):
            raise ValidationError("reason must be a string")
        reason = _safe_text(reason, "reason")
        now = now_iso()
        with self._lock, transaction(self._conn):
            row = self._conn.execute(
                "SELECT seq FROM memories WHERE id = ? "
                "AND (valid_until IS NULL OR valid_until > ?)",
                (memory_id, now),
            ).fetchone()
            if row is None:
                return False
            self._conn.execute(
                "UPDATE memories SET valid_until = ?, invalidation_reason = ?, updated_at = ?, "
                "embedding = NULL WHERE seq = ?",
                (now, reason, now, row[0]),
            )
            self.vectors.remove([row[0]])
            return True

    def delete(self, memory_id: str) -> bool:
        """Remove a memory for good (its tags links and relations go with it)."""
        with self._lock, transaction(self._conn):
            row = self._conn.execute(
                "SELECT seq FROM memories WHERE id = ?", (memory_id,)
            ).fetchone()
            if row is None:
                return False
            self._conn.execute("DELETE FROM memories WHERE seq = ?", (row[0],))
            self.vectors.remove([row[0]])
            return True

    def touch_batch(self, ids: Sequence[str]) -> int:
        """Count one access for each id in one UPDATE; returns the rows updated."""
        ids = list(dict.fromkeys(ids))
        if not ids or self.read_only:  # a read-only open records no accesses
            return 0
        with self._lock, transaction(self._conn):
            cur = self._conn.execute(
                "UPDATE memories SET access_count = access_count + 1, accessed_at = ? "
                f"WHERE id IN ({','.join('?' * len(ids))})",
                [now_iso(), *ids],
            )
            return cur.rowcount

    # -- search and listing --------------------------------------------------------------
    def fts_search(
        self, match: str, flt: MemoryFilter | None = None, limit: int = 10, offset: int = 0
    ) -> list[dict[str, Any]]:
        """Memories matching the FTS5 expression ``match``, best BM25 first.

        Each result carries ``_bm25`` (lower is better, as FTS5 reports it).
        """
        flt = flt or MemoryFilter()
        cond, params = flt.to_sql(now_iso())
        if flt.project:  # narrow inside FTS5 (see m005_fts_scope); the SQL filter stays
            scopes = [f'"p{flt.project.encode().hex().upper()}"']
            if not flt.project_only:
                scopes.append('"global"')
            match = f"{_TEXT_COLUMNS} : ({match}) AND fts_scope : ({' OR '.join(scopes)})"
        else:
            match = f"{_TEXT_COLUMNS} : ({match})"
        sql = (
            f"SELECT {', '.join('m.' + c.strip() for c in _MEMORY_COLUMNS.split(','))}, "
            "memories_fts.rank AS _bm25 FROM memories_fts JOIN memories m "
            "ON m.seq = memories_fts.rowid "
            f"WHERE memories_fts MATCH ? AND {cond} ORDER BY memories_fts.rank LIMIT ? OFFSET ?"
        )
        with self._lock:
            rows = self._conn.execute(sql, [match, *params, limit, offset]).fetchall()
        out = []
        for row in rows:
            mem = row_to_memory(row)
            mem["_bm25"] = mem.pop("_bm25")
            out.append(mem)
        return out

    def size_hint(self) -> int:
        """Upper bound of the number of memories, in O(1) (the highest row number)."""
        with self._lock:
            return self._conn.execute("SELECT coalesce(max(seq), 0) FROM memories").fetchone()[0]

    def count_matching(self, match: str) -> int:
        """How many memories (valid or not) match an FTS5 expression; cheap, no ranking."""
        with self._lock:
            return self._conn.execute(
                "SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?",
                (f"{_TEXT_COLUMNS} : ({match})",),
            ).fetchone()[0]

    def has_match(self, match: str) -> bool:
        """Whether any memory matches an FTS5 expression (stems count: 'failing' finds
        'failed'); stops at the first row."""
        with self._lock:
            return (
                self._conn.execute(
                    "SELECT 1 FROM memories_fts WHERE memories_fts MATCH ? LIMIT 1",
                    (f"{_TEXT_COLUMNS} : ({match})",),
                ).fetchone()
                is not None
            )

    def nearest(
        self, query_vec: bytes, flt: MemoryFilter | None = None, limit: int = 10
    ) -> list[dict[str, Any]]:
        """Memories with an embedding of the same size, nearest (cosine) first.

        KNN over the sqlite-vec index (`llmem_hooks.vectors`): exact below the prefilter
        threshold, binary prefilter + exact re-rank above; the filter is applied to the
        neighbours, fetching more while too few pass. Without sqlite-vec, a Python scan
        capped at BRUTE_FORCE_MAX_ROWS rows. Each result carries ``_distance``.
        A query of another dimension than the store's raises ValidationError.
        """
        flt = flt or MemoryFilter()
        cond, params = flt.to_sql(now_iso())
        with self._lock:
            scope = (flt.project, not flt.project_only) if flt.project else None
            scored = self._nearest_rows(query_vec, cond, params, limit, scope=scope)
        out = []
        for dist, row in scored:
            mem = row_to_memory(row)
            mem.pop("_emb", None)
            mem.pop("_distance", None)
            mem["_distance"] = dist
            out.append(mem)
        return out

    def _nearest_rows(
        self,
        query: bytes,
        cond: str,
        params: Sequence[Any],
        limit: int,
        max_distance: float | None = None,
        scope: tuple[str | None, bool] | None = None,
    ) -> list[tuple[float, Any]]:
        """(distance, row) of the ``limit`` nearest memories satisfying ``cond`` (over
        alias ``m``), at most ``max_distance`` away. Call under the lock.

        ``scope``: None searches every vector; ``(project, with_global)`` only that
        project's memories (if project is not None) and the global ones (if with_global).
        A project's own memories are scanned exactly when at most OWN_SCAN_MAX, else found
        by KNN in the project partition; the global ones by KNN in theirs."""
        vi = self.vectors
        if limit < 1 or not vi.usable(query):
            return self._scan_rows(query, cond, params, limit, max_distance)
        total = vi.count()
        if scope is None:
            return self._knn_rows(query, cond, params, limit, max_distance, None, total)
        project, with_global = scope
        hits: list[tuple[float, Any]] = []
        n_global = vi.count_scope(None, total) if with_global else 0
        if project is not None:
            own = (f"{cond} AND m.project = ?", [*params, project])
            if vi.count_scope(project, OWN_SCAN_MAX + 1) <= OWN_SCAN_MAX:
                hits += self._scan_rows(query, *own, limit, max_distance)
            else:
                hits += self._knn_rows(
                    query, *own, limit, max_distance, SCOPE_PROJECT, total - n_global
                )
        if n_global:
            hits += self._knn_rows(
                query,
                f"{cond} AND m.project IS NULL",
                params,
                limit,
                max_distance,
                SCOPE_GLOBAL,
                n_global,
            )
        hits.sort(key=lambda dr: dr[0])
        return hits[:limit]

    def _knn_rows(
        self,
        query: bytes,
        cond: str,
        params: Sequence[Any],
        limit: int,
        max_distance: float | None,
        scope: str | None,
        searched: int,
    ) -> list[tuple[float, Any]]:
        """KNN in one partition (or all vectors), the filter applied to the neighbours;
        more are fetched while too few pass, and a filter too selective for that is
        answered by scanning its rows instead."""
        cols = ", ".join("m." + c.strip() for c in _MEMORY_COLUMNS.split(","))
        k = min(searched, max(limit * KNN_OVERFETCH, KNN_MIN_K))
        for _ in range(KNN_MAX_ROUNDS):
            if k <= 0:
                return []
            cands = self.vectors.knn(query, k, scope=scope, searched=searched)
            near = cands if max_distance is None else [c for c in cands if c[1] <= max_distance]
            dist = dict(near)
            rows = self._conn.execute(
                f"SELECT {cols}, m.seq FROM memories m WHERE m.seq IN "
                f"(SELECT value FROM json_each(?)) AND {cond}",
                [json.dumps(list(dist)), *params],
            ).fetchall()
            scored = sorted(((dist[r["seq"]], r) for r in rows), key=lambda dr: dr[0])
            # Done when enough passed the filter, or no vector is left to look at (all
            # seen, or the rest are farther than max_distance).
            if len(scored) >= limit or k >= searched or len(near) < len(cands):
                return scored[:limit]
            if not rows:
                break  # a very selective filter: scanning its rows beats a bigger KNN
            k = min(searched, 2 * k * max(2, (limit * len(cands)) // len(rows)))
            if k > searched // 4:
                break
        return self._scan_rows(query, cond, params, limit, max_distance)

    def _scan_rows(
        self,
        query: bytes,
        cond: str,
        params: Sequence[Any],
        limit: int,
        max_distance: float | None = None,
    ) -> list[tuple[float, Any]]:
        """Exact distances of every memory satisfying ``cond``: ``vec_distance_cosine``
        when sqlite-vec is loaded, else Python over at most BRUTE_FORCE_MAX_ROWS rows."""
        cols = ", ".join("m." + c.strip() for c in _MEMORY_COLUMNS.split(","))
        base = (
            f"FROM memories m WHERE m.embedding IS NOT NULL AND length(m.embedding) = ? AND {cond}"
        )
        if self._vec_loaded():
            where_d = "" if max_distance is None else "AND _distance <= ?"
            rows = self._conn.execute(
                f"SELECT {cols}, m.seq, vec_distance_cosine(m.embedding, ?) AS _distance {base} "
                f"{where_d} ORDER BY _distance LIMIT ?",
                [
                    query,
                    len(query),
                    *params,
                    *([] if max_distance is None else [max_distance]),
                    limit,
                ],
            ).fetchall()
            return [(r["_distance"], r) for r in rows if r["_distance"] is not None]
        rows = self._conn.execute(
            f"SELECT {cols}, m.seq, m.embedding AS _emb {base} LIMIT ?",
            [len(query), *params, BRUTE_FORCE_MAX_ROWS],
        ).fetchall()
        scored = sorted(
            ((_cosine_distance(query, r["_emb"]), r) for r in rows), key=lambda dr: dr[0]
        )
        if max_distance is not None:
            scored = [dr for dr in scored if dr[0] <= max_distance]
        return scored[:limit]

    def _vec_loaded(self) -> bool:
        if self._has_vec is None:
            self._has_vec = has_function(self._conn, "vec_distance_cosine")
        return self._has_vec

    def search(
        self,
        query: str,
        limit: int = 20,
        offset: int = 0,
        type: str | None = None,
        valid_only: bool = True,
        **filters: Any,
    ) -> list[dict[str, Any]]:
        """Classic FTS5 search with the grep-like syntax (see `llmem_hooks.query`)."""
        from .query import parse_query

        parsed = parse_query(query)
        if not parsed.strict_match:
            return []
        flt = MemoryFilter(type=type, valid_only=valid_only, **filters)
        return self.fts_search(parsed.strict_match, flt, limit, offset)

    def list_all(
        self,
        type: str | None = None,
        valid_only: bool = True,
        limit: int = 100,
        offset: int = 0,
        sort: str = "created",
        order: str = "desc",
        **filters: Any,
    ) -> list[dict[str, Any]]:
        """Memories matching the filters, sorted by ``sort`` (created, updated, accessed,
        expires, confidence, content, type)."""
        if sort not in _SORT_COLUMNS:
            raise ValidationError(f"invalid sort {sort!r} (use {', '.join(_SORT_COLUMNS)})")
        if order.lower() not in ("asc", "desc"):
            raise ValidationError(f"invalid order {order!r} (use asc or desc)")
        flt = MemoryFilter(type=type, valid_only=valid_only, **filters)
        cond, params = flt.to_sql(now_iso())
        sql = (
            f"SELECT {_MEMORY_COLUMNS} FROM memories m WHERE {cond} "
            f"ORDER BY {_SORT_COLUMNS[sort]} {order.upper()}, m.seq {order.upper()} "
            "LIMIT ? OFFSET ?"
        )
        with self._lock:
            rows = self._conn.execute(sql, [*params, limit, offset]).fetchall()
        return [row_to_memory(r) for r in rows]

    def count(self, valid_only: bool = True) -> int:
        cond, params = MemoryFilter(valid_only=valid_only, include_expired=True).to_sql(now_iso())
        return self._conn.execute(
            f"SELECT COUNT(*) FROM memories m WHERE {cond}", params
        ).fetchone()[0]

    def stats(self) -> dict[str, Any]:
        """Counts by type, tag and agent, plus the database size."""
        now = now_iso()
        live = (
            "(m.valid_until IS NULL OR m.valid_until > ?) AND "
            "(m.expires_at IS NULL OR m.expires_at > ?)"
        )
        q = self._conn.execute

        def counts(col: str, frm: str = "memories m", limit: int = 1000) -> list[Any]:
            return q(
                f"SELECT {col}, COUNT(*) FROM {frm} WHERE {live} GROUP BY {col} "
                f"ORDER BY COUNT(*) DESC, {col} LIMIT {limit}",
                (now, now),
            ).fetchall()

        by_type = dict(counts("m.type"))
        by_agent = {k or "(unknown)": v for k, v in counts("m.entered_by")}
        by_project = {k or "(global)": v for k, v in counts("m.project", limit=50)}
        by_tag = dict(
            counts(
                "t.name",
                "memory_tags mt JOIN tags t ON t.id = mt.tag_id "
                "JOIN memories m ON m.seq = mt.memory_seq",
                limit=50,
            )
        )
        total = q("SELECT COUNT(*) FROM memories").fetchone()[0]
        invalid = q(
            "SELECT COUNT(*) FROM memories WHERE valid_until IS NOT NULL AND valid_until <= ?",
            (now,),
        ).fetchone()[0]
        expired = q(
            "SELECT COUNT(*) FROM memories WHERE expires_at IS NOT NULL AND expires_at <= ?", (now,)
        ).fetchone()[0]
        size = 0
        if str(self.db_path) != ":memory:":
            for suffix in ("", "-wal", "-shm"):
                p = Path(f"{self.db_path}{suffix}")
                size += p.stat().st_size if p.exists() else 0
        return {
            "total": total,
            "active": sum(by_type.values()),
            "invalidated": invalid,
            "expired": expired,
            "by_type": by_type,
            "by_tag": by_tag,
            "by_agent": by_agent,
            "by_project": by_project,
            "inbox": self.inbox_count(),
            "db_path": str(self.db_path),
            "db_size_bytes": size,
        }

    def prune(
        self,
        before: str | None = None,
        dry_run: bool = False,
        only_ids: Sequence[str] | None = None,
    ) -> list[dict[str, Any]]:
        """Delete expired memories (and, with ``before``, all created before that date).

        Returns the memories that were (or, with ``dry_run``, would be) deleted. With
        ``only_ids`` (the ids a person confirmed and a backup holds), only those of them
        that still match are deleted: a memory that became prunable after the preview is
        never deleted unseen.
        """
        now = now_iso()
        cond = "((expires_at IS NOT NULL AND expires_at <= ?)"
        params: list[Any] = [now]
        if before:
            cond += " OR created_at < ?"
            params.append(parse_iso(before, field="--before date"))
        cond += ")"
        if only_ids is not None:
            cond += " AND id IN (SELECT value FROM json_each(?))"
            params.append(json.dumps(list(only_ids)))
        with self._lock, transaction(self._conn):
            rows = self._conn.execute(
                f"SELECT {_MEMORY_COLUMNS}, seq FROM memories WHERE {cond} ORDER BY seq", params
            ).fetchall()
            if not dry_run and rows:
                self._conn.execute(f"DELETE FROM memories WHERE {cond}", params)
                self.vectors.remove([r["seq"] for r in rows])
        return [row_to_memory(r) for r in rows]

    # -- export / import -----------------------------------------------------------------
    def export_all(
        self, limit: int | None = DEFAULT_EXPORT_LIMIT, ids: Sequence[str] | None = None
    ) -> list[dict[str, Any]]:
        """All memories (valid or not) with tags, outgoing relations and embeddings (base64).

        ``limit`` defaults to 10,000; pass None for no limit. ``ids``: only these memories
        (the backup `prune` writes before it deletes them).
        """
        where = ""
        params: list[Any] = []
        if ids is not None:
            where = "WHERE id IN (SELECT value FROM json_each(?))"
            params.append(json.dumps(list(ids)))
        sql = f"SELECT {_MEMORY_COLUMNS}, embedding, seq FROM memories {where} ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        with self._lock:
            rows = self._conn.execute(sql, params).fetchall()
            rels: dict[str, list[dict[str, Any]]] = {}
            for r in self._conn.execute(
                "SELECT source_id, target_id, target_type, relation_type, created_at "
                "FROM relations ORDER BY id"
            ):
                rels.setdefault(r[0], []).append(
                    {
                        "target_id": r[1],
                        "target_type": r[2],
                        "relation_type": r[3],
                        "created_at": r[4],
                    }
                )
        out = []
        for row in rows:
            mem = row_to_memory(row)
            mem["embedding"] = (
                base64.b64encode(row["embedding"]).decode("ascii")
                if row["embedding"] is not None
                else None
            )
            mem["relations"] = rels.get(mem["id"], [])
            out.append(mem)
        return out

    def import_memories(self, data: Sequence[Mapping[str, Any]] | Mapping[str, Any]) -> int:
        """Import memories (as produced by `export_all`) all-or-nothing, in one transaction.

        Every record is validated before anything is written; ids already present are
        skipped (so importing the same file twice is harmless). Returns how many were added.
        """
        if isinstance(data, Mapping):
            from .archive import unwrap

            data = unwrap(data)
        if not isinstance(data, Sequence) or isinstance(data, str | bytes):
            raise ValidationError("import data must be a list of memories")
        records: list[dict[str, Any]] = []
        relations: list[tuple[str, str, str, str, str]] = []
        seen: set[str] = set()
        first_vec: dict[str, Any] | None = None
        for i, item in enumerate(data):
            if not isinstance(item, Mapping):
                raise ValidationError(f"memory #{i + 1}: expected an object")
            try:
                validate_import_record(item)
                rec = self._prepare(item)
                rels = item.get("relations") or []
                if not isinstance(rels, list) or not all(isinstance(r, Mapping) for r in rels):
                    raise ValidationError("relations must be a list of objects")
                for rel in rels:
                    relations.append(
                        self._check_relation(
                            rec["id"],
                            rel.get("target_id"),
                            rel.get("relation_type"),
                            rel.get("target_type", "memory"),
                            rel.get("created_at"),
                        )
                    )
            except ValidationError as exc:
                mid = item.get("id")
                if isinstance(mid, str) and mid:
                    short = mid if len(mid) <= 40 else mid[:37] + "..."
                    raise ValidationError(f"memory {short}: {exc} (record #{i + 1})") from None
                raise ValidationError(f"memory #{i + 1}: {exc}") from None
            if rec["id"] in seen:
                raise ValidationError(f"memory {rec['id']}: duplicate id in import data")
            if rec["embedding"] is not None:
                # The store checked the dimension it knows; a first import sets it.
                if first_vec is None:
                    first_vec = rec
                elif len(rec["embedding"]) != len(first_vec["embedding"]):
                    raise ValidationError(
                        f"memory {rec['id']}: embedding has {len(rec['embedding']) // 4} "
                        f"dimensions, memory {first_vec['id']}'s "
                        f"{len(first_vec['embedding']) // 4}"
                    )
            seen.add(rec["id"])
            records.append(rec)
        with self._lock, transaction(self._conn):
            existing: set[str] = set()
            ids = [r["id"] for r in records]
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                existing.update(
                    r[0]
                    for r in self._conn.execute(
                        f"SELECT id FROM memories WHERE id IN ({','.join('?' * len(chunk))})", chunk
                    )
                )
            fresh = [r for r in records if r["id"] not in existing]
            if fresh:
                self._insert(fresh)
            self._conn.executemany(
                "INSERT OR IGNORE INTO relations(source_id, target_id, target_type, relation_type,"
                " created_at) VALUES (?, ?, ?, ?, ?)",
                relations,
            )
        return len(fresh)

    # -- relations -----------------------------------------------------------------------
    def _check_relation(
        self,
        source_id: Any,
        target_id: Any,
        relation_type: Any,
        target_type: Any,
        created_at: Any = None,
    ) -> tuple[str, str, str, str, str]:
        _check_id(source_id, "source id")
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
        _check_identity(target_id, "relation target")
        when = parse_iso(created_at, field="created_at") if created_at else now_iso()
        return (source_id, target_id, target_type, relation_type, when)

    def add_relation(
        self, source_id: str, target_id: str, relation_type: str, target_type: str = "memory"
    ) -> int:
        """Link two memories (or a memory to ``path:start:end`` code); returns the relation id."""
        rel = self._check_relation(source_id, target_id, relation_type, target_type)
        with self._lock, transaction(self._conn):
            for mid in (source_id, target_id) if target_type == "memory" else (source_id,):
                if not self._conn.execute("SELECT 1 FROM memories WHERE id = ?", (mid,)).fetchone():
                    raise NotFoundError(f"no memory with id {mid}")
            self._conn.execute(
                "INSERT OR IGNORE INTO relations(source_id, target_id, target_type, relation_type,"
                " created_at) VALUES (?, ?, ?, ?, ?)",
                rel,
            )
            return self._conn.execute(
                "SELECT id FROM relations WHERE source_id = ? AND target_id = ? AND "
                "relation_type = ?",
                (source_id, target_id, relation_type),
            ).fetchone()[0]

    def get_relations(self, memory_id: str) -> list[dict[str, Any]]:
        """Relations from or to this memory."""
        rows = self._conn.execute(
            "SELECT id, source_id, target_id, target_type, relation_type, created_at FROM relations"
            " WHERE source_id = ? OR (target_type = 'memory' AND target_id = ?) ORDER BY id",
            (memory_id, memory_id),
        ).fetchall()
        return [dict(r) for r in rows]

    def traverse_relations(
        self,
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
        rows = self._conn.execute(sql, [memory_id, memory_id, *tparams, *tparams, depth]).fetchall()
        out = [
            {"target_id": r[0], "target_type": r[1], "relation_type": r[2], "distance": r[3]}
            for r in rows
        ]
        if target_type:
            out = [r for r in out if r["target_type"] == target_type]
        return out

    # -- inbox (working memory) ----------------------------------------------------------
    def add_to_inbox(
        self,
        content: str,
        source: str = "note",
        attention_score: float = 0.5,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Stage a note in the capacity-limited inbox; the lowest-scored items are evicted."""
        content = _check_content(content)
        metadata = _safe_json(metadata, "metadata")
        if source not in INBOX_SOURCES:
            raise ValidationError(
                f"invalid inbox source {source!r} (use {', '.join(INBOX_SOURCES)})"
            )
        score = _check_confidence(attention_score, "attention score")
        item_id = str(uuid.uuid4())
        now = now_iso()
        with self._lock, transaction(self._conn):
            self._conn.execute(
                "INSERT INTO inbox(id, content, source, attention_score, metadata, created_at,"
                " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (item_id, content, source, score, _json_dict(metadata), now, now),
            )
            self._conn.execute(
                "DELETE FROM inbox WHERE id IN (SELECT id FROM inbox ORDER BY attention_score DESC,"
                " created_at ASC LIMIT -1 OFFSET ?)",
                (self.inbox_capacity,),
            )
        return item_id

    @staticmethod
    def _inbox_row(row: Any) -> dict[str, Any]:
        item = dict(row)
        item["metadata"] = json.loads(item["metadata"] or "{}")
        return item

    def get_from_inbox(self, item_id: str) -> dict[str, Any] | None:
        row = self._conn.execute("SELECT * FROM inbox WHERE id = ?", (item_id,)).fetchone()
        return self._inbox_row(row) if row else None

    def list_inbox(self, limit: int = 20) -> list[dict[str, Any]]:
        rows = self._conn.execute(
            "SELECT * FROM inbox ORDER BY attention_score DESC, created_at ASC LIMIT ?", (limit,)
        )
        return [self._inbox_row(r) for r in rows]

    def inbox_count(self) -> int:
        return self._conn.execute("SELECT COUNT(*) FROM inbox").fetchone()[0]

    def update_inbox_attention_score(self, item_id: str, score: float) -> bool:
        score = _check_confidence(score, "attention score")
        with self._lock, transaction(self._conn):
            cur = self._conn.execute(
                "UPDATE inbox SET attention_score = ?, updated_at = ? WHERE id = ?",
                (score, now_iso(), item_id),
            )
            return cur.rowcount > 0

    def remove_from_inbox(self, item_id: str) -> bool:
        with self._lock, transaction(self._conn):
            return self._conn.execute("DELETE FROM inbox WHERE id = ?", (item_id,)).rowcount > 0

    def consolidate(
        self, min_score: float = 0.5, dry_run: bool = False, type: str = "fact"
    ) -> dict[str, list[dict[str, Any]]]:
        """Promote inbox items scoring >= ``min_score`` to memories; evict the rest.

        Promoted memories get source ``consolidation`` and confidence = attention score.
        The inbox is empty afterwards (unless ``dry_run``). Returns ``{"promoted", "evicted"}``
        (promoted items carry ``memory_id`` unless dry-run).
        """
        _check_confidence(min_score, "min_score")
        with self._lock, transaction(self._conn):
            items = [
                self._inbox_row(r)
                for r in self._conn.execute(
                    "SELECT * FROM inbox ORDER BY attention_score DESC, created_at ASC"
                )
            ]
            promoted = [i for i in items if i["attention_score"] >= min_score]
            evicted = [i for i in items if i["attention_score"] < min_score]
            if dry_run:
                return {"promoted": promoted, "evicted": evicted}
            records = []
            for item in promoted:
                rec = self._prepare(
                    {
                        "type": type,
                        "content": item["content"],
                        "source": "consolidation",
                        "confidence": item["attention_score"],
                        "metadata": item["metadata"],
                    }
                )
                if self._find_duplicate(rec) is None:
                    records.append(rec)
                item["memory_id"] = rec["id"]
            if records:
                self._insert(records)
            self._conn.execute("DELETE FROM inbox")
        return {"promoted": promoted, "evicted": evicted}

    # -- extraction cursors ----------------------------------------------------------------
    def log_extraction(
        self,
        source_type: str,
        source_id: str,
        cursor: str | None = None,
        memory_count: int = 0,
        message_count: int = 0,
    ) -> None:
        """Record how far a source has been extracted (call inside the same transaction as the
        memories it produced, via `transaction(store.conn)`, to keep the two consistent)."""
        with self._lock:
            self._conn.execute(
                "INSERT INTO extraction_log(source_type, source_id, cursor, memory_count,"
                " message_count, runs, extracted_at) VALUES (?, ?, ?, ?, ?, 1, ?)"
                " ON CONFLICT(source_type, source_id) DO UPDATE SET cursor = excluded.cursor,"
                " memory_count = memory_count + excluded.memory_count,"
                " message_count = message_count + excluded.message_count, runs = runs + 1,"
                " extracted_at = excluded.extracted_at",
                (source_type, source_id, cursor, memory_count, message_count, now_iso()),
            )

    def get_extraction(self, source_type: str, source_id: str) -> dict[str, Any] | None:
        row = self._conn.execute(
            "SELECT * FROM extraction_log WHERE source_type = ? AND source_id = ?",
            (source_type, source_id),
        ).fetchone()
        return dict(row) if row else None

    # -- embeddings (for llmem_hooks.metrics) ----------------------------------------------
    def get_embeddings_with_types(self, limit: int | None = 10_000) -> list[tuple[bytes, str]]:
        """(embedding BLOB, type) of live memories with an embedding, newest first; at most
        ``limit`` (None or 0: all, negative: 10,000) since the metrics are O(n^2)."""
        limit = 10_000 if limit is not None and limit < 0 else limit
        cond, params = MemoryFilter().to_sql(now_iso())
        sql = (
            f"SELECT m.embedding, m.type FROM memories m WHERE m.embedding IS NOT NULL AND {cond}"
            " ORDER BY m.seq DESC"
        )
        if limit:
            sql += " LIMIT ?"
            params.append(limit)
        with self._lock:
            rows = self._conn.execute(sql, params).fetchall()
        return [(bytes(r[0]), str(r[1])) for r in rows]

    def missing_embeddings(self, limit: int = 32) -> list[tuple[str, str]]:
        """(id, content) of live memories without a vector, newest first: the ones
        semantic search and near-duplicate merging cannot see yet."""
        cond, params = MemoryFilter().to_sql(now_iso())
        with self._lock:
            rows = self._conn.execute(
                f"SELECT m.id, m.content FROM memories m WHERE m.embedding IS NULL AND {cond} "
                "ORDER BY m.seq DESC LIMIT ?",
                [*params, limit],
            ).fetchall()
        return [(r[0], r[1]) for r in rows]

    def set_embeddings(self, vectors: Sequence[tuple[str, Sequence[float]]]) -> int:
        """Give memories their vectors (kept in step with the vec tables) without touching
        ``updated_at``: a vector added later is not news about the memory. Returns how
        many memories took one."""
        done = 0
        with self._lock, transaction(self._conn):
            for memory_id, vec in vectors:
                blob = self._check_vector(pack_embedding(vec))
                row = self._conn.execute(
                    "SELECT seq FROM memories WHERE id = ? AND embedding IS NULL", (memory_id,)
                ).fetchone()
                if row is None:
                    continue
                self._conn.execute(
                    "UPDATE memories SET embedding = ? WHERE seq = ?", (blob, row[0])
                )
                self.vectors.write([(row[0], blob)])
                done += 1
        return done

    def count_embeddings(self) -> int:
        """How many live memories have an embedding."""
        cond, params = MemoryFilter().to_sql(now_iso())
        with self._lock:
            return self._conn.execute(
                f"SELECT COUNT(*) FROM memories m WHERE m.embedding IS NOT NULL AND {cond}", params
            ).fetchone()[0]
