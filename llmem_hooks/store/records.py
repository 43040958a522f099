"""Memory records: the limits, validators and conversions every table module shares.

What a memory may hold (`MAX_CONTENT_CHARS`, tag and id shapes, the limits every write
path and import share), the `Memory` record (a row as the public dict), the
`MemoryFilter` that becomes SQL, and embedding packing. No connection is opened here:
these are pure functions the store's table modules call.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import math
import re
import struct
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from ..config import MemorySettings
from ..errors import ValidationError
from ..redact import find_secrets, redact_json, redact_secrets
from ..registry import check_memory_type
from ..text import fuzzy
from ..timestamps import now_iso, parse_iso

MAX_CONTENT_CHARS = 10_000
MAX_ID_LENGTH = 256
MAX_EMBEDDING_BYTES = 1_048_576
MAX_TRAVERSAL_DEPTH = 5
DEFAULT_CONFIDENCE: float = MemorySettings.default_confidence
DEFAULT_EXPORT_LIMIT = 10_000
DUPLICATE_COSINE: float = MemorySettings.duplicate_cosine
REINFORCEMENT = 0.05
RELATION_TYPES = ("supersedes", "related_to", "derived_from", "references")
TARGET_TYPES = ("memory", "code")
INBOX_SOURCES = ("note", "learn", "extract", "consolidation")
# One set of limits (issue 18): every write path (add, update, invalidate, tags, import)
# enforces the same ones, so an export of any store imports again (docs/security.md).
MAX_IMPORT_TEXT = 256  # source, session_id, entered_by, type, relation fields
MAX_PROJECT_CHARS = 4_096  # a project key may be a folder path (PATH_MAX)
MAX_REASON_CHARS = 2_000  # invalidation_reason, after redaction
MAX_TAGS = 64  # tags per memory (each at most 64 characters, see _TAG)
MAX_LIST_ITEMS = 1_000  # hints, source_message_ids, relations per memory
MAX_LIST_ITEM_CHARS = 2_000  # characters of one hint or source message id
MAX_METADATA_BYTES = 65_536  # metadata as JSON, after redaction
MAX_ACCESS_COUNT = 2**31  # access_count
MAX_DIMENSIONS = 8_192  # of an embedding
# The names import used before the limits were shared.
MAX_IMPORT_REASON = MAX_REASON_CHARS
MAX_IMPORT_TAGS = MAX_TAGS
MAX_IMPORT_LIST = MAX_LIST_ITEMS
MAX_IMPORT_LIST_ITEM = MAX_LIST_ITEM_CHARS
MAX_IMPORT_METADATA_BYTES = MAX_METADATA_BYTES
MAX_IMPORT_COUNT = MAX_ACCESS_COUNT
MAX_IMPORT_DIMENSIONS = MAX_DIMENSIONS
_TAG = re.compile(r"^[a-z0-9][a-z0-9_.:/+#-]{0,63}$")
ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
SORT_COLUMNS = {
    "created": "m.created_at",
    "updated": "m.updated_at",
    "accessed": "m.accessed_at",
    "expires": "m.expires_at",
    "confidence": "m.confidence",
    "content": "m.content",
    "type": "m.type",
}
# The FTS5 columns a query searches; fts_scope is only for the project filter.
FTS_TEXT_COLUMNS = "{content summary tag_text fts_context fts_after}"
MEMORY_COLUMNS = (
    "id, type, content, summary, source, confidence, metadata, hints, created_at, updated_at, "
    "accessed_at, access_count, valid_until, invalidation_reason, expires_at, entered_by, "
    "project, session_id, source_message_ids, tag_text"
)
# What ranking a list needs (`MemoryStore.list_all(brief=True)`): no JSON to decode.
BRIEF_COLUMNS = "id, type, content, confidence, updated_at, access_count, project"


class Memory(TypedDict):
    """One memory as every caller sees it (`row_to_memory`, search results, ``--json``).

    A TypedDict rather than a class: memories stay plain dicts (JSON output, exports,
    callers that index them), but their keys are checked. It holds stored fields only;
    what a search adds (scores, how it matched) lives on `llmem_hooks.search.retriever.SearchHit`.
    """

    id: str
    type: str
    content: str
    summary: str | None
    source: str | None
    confidence: float
    metadata: dict[str, Any]
    hints: list[str]
    created_at: str
    updated_at: str
    accessed_at: str | None
    access_count: int
    valid_until: str | None
    invalidation_reason: str | None
    expires_at: str | None
    entered_by: str | None
    project: str | None
    session_id: str | None
    source_message_ids: list[str]
    tags: list[str]


@dataclass
class MemoryFilter:
    """Which memories a search or listing may return: the one spelling of the search
    filter (the CLI builds it from its options and hands it to `Retriever`).

    ``project`` selects that project's memories plus global ones (project NULL);
    ``project_only`` drops the global ones. Tags may be lists or comma-separated strings.
    ``rank_newest``: a full-text search ranks only the newest this many rows its words
    match (FTS5 computes BM25 for every match: a word in 20% of 110k rows costs ~35 ms,
    too much for per-prompt recall; the newest 3,000 cost ~5 ms).
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
    rank_newest: int | None = None

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
        check_identity(raw, "tag")
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


def check_tags(tags: Iterable[str] | str | None) -> list[str]:
    """`normalize_tags` for what is stored: at most `MAX_TAGS` of them."""
    out = normalize_tags(tags)
    if len(out) > MAX_TAGS:
        raise ValidationError(f"{len(out)} tags; the limit is {MAX_TAGS} per memory")
    return out


def check_list(value: Any, what: str) -> Any:
    """Hints and source message ids: at most `MAX_LIST_ITEMS`, each at most
    `MAX_LIST_ITEM_CHARS` (what import accepts; the shapes are `json_list`'s to check)."""
    if isinstance(value, list | tuple):
        if len(value) > MAX_LIST_ITEMS:
            raise ValidationError(
                f"{what} holds {len(value):,} items; the limit is {MAX_LIST_ITEMS:,}"
            )
        for item in value:
            if isinstance(item, str) and len(item) > MAX_LIST_ITEM_CHARS:
                raise ValidationError(
                    f"an item of {what} is {len(item):,} characters;"
                    f" the limit is {MAX_LIST_ITEM_CHARS:,}"
                )
    return value


def check_reason(value: Any) -> str | None:
    """An invalidation reason: a string, redacted, at most `MAX_REASON_CHARS`."""
    if value is not None and not isinstance(value, str):
        raise ValidationError("reason must be a string")
    reason = safe_text(value or None, "reason")
    if reason is not None and len(reason) > MAX_REASON_CHARS:
        raise ValidationError(
            f"reason is {len(reason):,} characters; the limit is {MAX_REASON_CHARS:,}"
        )
    return reason


def check_metadata(value: Any) -> str:
    """Metadata as stored: redacted, a JSON object of at most `MAX_METADATA_BYTES`."""
    safe = safe_json(value, "metadata")
    if safe is not None:
        if not isinstance(safe, Mapping):
            raise ValidationError("metadata must be a JSON object")
        try:  # NaN and Infinity are not JSON: an export holding them would not import
            json.dumps(safe, allow_nan=False)
        except (TypeError, ValueError):
            raise ValidationError("metadata must be plain, finite JSON") from None
    out = json_dict(safe)
    size = len(out.encode("utf-8"))
    if size > MAX_METADATA_BYTES:
        raise ValidationError(
            f"metadata is {size:,} bytes of JSON; the limit is {MAX_METADATA_BYTES:,}"
        )
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
    if len(blob) // 4 > MAX_DIMENSIONS:
        raise ValidationError(
            f"embedding has {len(blob) // 4:,} dimensions; the limit is {MAX_DIMENSIONS:,}"
        )
    return blob


def unpack_embedding(blob: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(blob) // 4}f", blob))


def cosine_distance(a: bytes, b: bytes) -> float:
    va, vb = unpack_embedding(a), unpack_embedding(b)
    dot = sum(x * y for x, y in zip(va, vb, strict=True))
    na = math.sqrt(sum(x * x for x in va))
    nb = math.sqrt(sum(y * y for y in vb))
    return 1.0 - dot / (na * nb) if na and nb else 1.0


def check_content(content: Any, what: str = "content") -> str:
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
    if len(redacted) > MAX_CONTENT_CHARS:  # [REDACTED] is longer than a short password
        raise ValidationError(
            f"{what} is {len(redacted):,} characters once credentials are redacted;"
            f" the limit is {MAX_CONTENT_CHARS:,}"
        )
    return redacted


# -- the one redaction choke point (issue 9): every text this module writes passes here --


def safe_text(value: str | None, what: str) -> str | None:
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


def check_identity(value: Any, what: str) -> Any:
    """Ids and names (source, entered_by, project, session id, tags, code paths) are
    matched and grouped on; a redacted one would silently merge or split records, so one
    that holds a credential is refused instead. The message never repeats the value."""
    if isinstance(value, str) and value and _holds_secret(value):
        raise ValidationError(f"{what} looks like it holds a credential; refused")
    return value


def check_hints(hints: Any) -> Any:
    """Hints as stored: each redacted, then within the list limits."""
    if isinstance(hints, list | tuple):
        hints = [safe_text(h, "hints") if isinstance(h, str) else h for h in hints]
    return check_list(hints, "hints")


def safe_json(value: Any, what: str) -> Any:
    """Metadata: every string (keys too) redacted, a credential-named key's value too."""
    if value is None:
        return None
    try:
        return redact_json(value)
    except ValueError:
        raise ValidationError(f"{what} holds a private key") from None
    except RecursionError:
        raise ValidationError(f"{what} is nested too deeply") from None


def check_confidence(value: Any, what: str = "confidence") -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ValidationError(f"{what} must be a number between 0 and 1, got {value!r}")
    return float(value)


def check_id(value: Any, what: str = "id") -> str:
    if (
        not isinstance(value, str)
        or not value
        or len(value) > MAX_ID_LENGTH
        or not ID_PATTERN.match(value)
    ):
        raise ValidationError(f"invalid {what} {value!r}")
    return value


def json_list(value: Any, what: str) -> str:
    if value is None:
        return "[]"
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ValidationError(f"{what} must be a list of strings")
    return json.dumps(list(value))


def json_dict(value: Any, what: str = "metadata") -> str:
    if value is None:
        return "{}"
    if not isinstance(value, Mapping):
        raise ValidationError(f"{what} must be a JSON object")
    try:
        return json.dumps(dict(value), sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{what} is not JSON-serializable: {exc}") from None


_IMPORT_TIMES = ("created_at", "updated_at", "accessed_at", "expires_at", "valid_until")


def _identity_limit(key: str) -> int:
    return MAX_PROJECT_CHARS if key == "project" else MAX_IMPORT_TEXT


def check_identity_length(value: Any, key: str) -> None:
    """Every route in (CLI, API, import, extraction) gets the same bounds on ids and names:
    a 200,000-character project or source is a mistake or an attack, never a key."""
    limit = _identity_limit(key)
    if isinstance(value, str) and len(value) > limit:
        raise ValidationError(f"{key} is {len(value):,} characters; the limit is {limit}")


_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")


def check_name(value: Any, key: str) -> None:
    """Names a record is grouped and filed under (issue 18): none holds a control
    character (NUL, a newline: it would forge log lines and break paths); a session id
    or an agent name is also never a path (``/``, ``\\``, ``..``), as both end up in
    file names and filters. A project may be a folder path, so only control characters
    are refused there."""
    if not isinstance(value, str) or not value:
        return
    if _CONTROL_CHARS.search(value):
        raise ValidationError(f"{key} holds a control character (NUL, newline, ...); refused")
    if key in ("session_id", "entered_by") and ("/" in value or "\\" in value or ".." in value):
        raise ValidationError(f"{key} must not contain '/', '\\' or '..'")


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
    """Absent, a list of finite floats, base64 of packed finite float32 (export_all's),
    or the packed bytes themselves (what Python callers of import_memories pass)."""
    if value is None:
        return
    if isinstance(value, str | bytes | bytearray):
        if len(value) > MAX_EMBEDDING_BYTES * 2:
            raise _import_field_error("embedding", "is too large")
        if isinstance(value, str):
            try:
                blob = base64.b64decode(value, validate=True)
            except ValueError:
                raise _import_field_error("embedding", "must be base64 of packed float32") from None
        else:
            blob = bytes(value)
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


def prepare_record(
    data: Mapping[str, Any], default_confidence: float, stored_types: Collection[str] = ()
) -> dict[str, Any]:
    """Validate one memory's fields and return the row to insert (raises ValidationError).
    ``stored_types``: types the database holds already, accepted unregistered.

    The embedding is packed but not checked against the index's dimension: the store
    does that under its lock."""
    content = check_content(data.get("content"))
    mtype = data.get("type")
    if not isinstance(mtype, str):
        raise ValidationError("type must be a string")
    if mtype not in stored_types:
        check_memory_type(mtype)
    mid = data.get("id") or str(uuid.uuid4())
    check_id(mid)
    confidence = data.get("confidence")
    confidence = default_confidence if confidence is None else check_confidence(confidence)
    created = (
        parse_iso(data["created_at"], field="created_at") if data.get("created_at") else now_iso()
    )
    tags = check_tags(data.get("tags"))
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
        summary = check_content(summary, "summary")
    for key in ("source", "entered_by", "project", "session_id"):
        check_identity_length(data.get(key), key)
        check_name(data.get(key), key)
        check_identity(data.get(key), key)
    hints = check_hints(data.get("hints"))
    message_ids = check_list(data.get("source_message_ids"), "source_message_ids")
    if isinstance(message_ids, list | tuple):
        for mid_ in message_ids:
            check_identity(mid_, "source_message_ids")
    access_count = data.get("access_count") or 0
    if (
        isinstance(access_count, bool)
        or not isinstance(access_count, int)
        or not 0 <= access_count <= MAX_ACCESS_COUNT
    ):
        raise ValidationError(f"access_count must be an integer from 0 to {MAX_ACCESS_COUNT}")
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
        "metadata": check_metadata(data.get("metadata")),
        "hints": json_list(hints, "hints"),
        "created_at": created,
        "updated_at": opt_time["updated_at"] or created,
        "accessed_at": opt_time["accessed_at"],
        "access_count": access_count,
        "valid_until": opt_time["valid_until"],
        "invalidation_reason": check_reason(opt_text("invalidation_reason")),
        "expires_at": opt_time["expires_at"],
        "entered_by": opt_text("entered_by"),
        "project": opt_text("project"),
        "session_id": opt_text("session_id"),
        "source_message_ids": json_list(message_ids, "source_message_ids"),
        "content_hash": content_hash(content),
        "tags": tags,
        "tag_text": " ".join(tags),
        "embedding": pack_embedding(embedding),
    }


def row_to_memory(row: Any) -> dict[str, Any]:
    """A memories row (selected with MEMORY_COLUMNS) as the public dict."""
    mem = {k: row[k] for k in row.keys() if k not in ("tag_text", "embedding", "seq")}  # noqa: SIM118 - a Row iterates values
    mem["metadata"] = json.loads(row["metadata"] or "{}")
    mem["hints"] = json.loads(row["hints"] or "[]")
    mem["source_message_ids"] = json.loads(row["source_message_ids"] or "[]")
    mem["tags"] = row["tag_text"].split() if row["tag_text"] else []
    return mem
