"""The small typed objects that flow from adapters to the coordinator.

Adapters read an agent's session store (read-only) and report what they saw as
`LifecycleEvent`s; the sidecar turns them into hook calls (created / idle / compacting /
ending). Messages are normalized into `Message`s so the extractor and the resume pack
never see an agent's storage format.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

EventKind = Literal["created", "activity", "turn_done", "compacting", "ended"]
EVENT_KINDS: tuple[str, ...] = ("created", "activity", "turn_done", "compacting", "ended")


_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(value: Any) -> Any:
    """A string with lone UTF-16 surrogates (an emoji cut in half in JSON ``"\\ud83d"``)
    replaced by U+FFFD; anything else unchanged. Such a string cannot be encoded as UTF-8,
    so one odd title would fail every write, log line and file that holds it."""
    if isinstance(value, str) and _SURROGATE.search(value):
        return _SURROGATE.sub("\ufffd", value)
    return value


def _clean_fields(obj: Any, names: tuple[str, ...]) -> None:
    """The adapter/event boundary: what an agent's store said, made encodable once here."""
    for name in names:
        value = getattr(obj, name)
        cleaned = clean_text(value)
        if cleaned is not value:
            object.__setattr__(obj, name, cleaned)


@dataclass(frozen=True)
class SessionInfo:
    """What the coordinator needs to know about a session."""

    id: str
    agent: str  # "opencode" | "copilot"
    directory: str | None = None  # the working directory the session ran in
    native_project_id: str | None = None  # the agent's own project id (OpenCode: root commit)
    parent_id: str | None = None  # set for sub-agent sessions
    title: str | None = None
    created_ms: int = 0
    updated_ms: int = 0
    archived: bool = False

    def __post_init__(self) -> None:
        _clean_fields(self, ("directory", "native_project_id", "parent_id", "title"))


@dataclass(frozen=True)
class LifecycleEvent:
    """One thing that happened to a session, as read from the agent's store.

    ``created``: a new top-level session. ``activity``: anything written (resets the
    idle and ending clocks). ``turn_done``: the last assistant message completed with no
    newer user message (idle after a quiet period, decided by the sidecar).
    ``compacting``: a compaction was requested or done. ``ended``: deleted, archived,
    shut down. Events of a sub-agent session carry the parent's id in ``session_id`` and
    the child's in ``child_id``.
    """

    kind: EventKind
    session_id: str
    agent: str
    at_ms: int = 0
    session: SessionInfo | None = None
    child_id: str | None = None
    detail: str = ""

    def __post_init__(self) -> None:
        _clean_fields(self, ("detail",))


TouchKind = Literal["read", "edit", "write", "attach"]
MAX_TOUCH_TEXT = 20_000  # an edit's new text kept to locate it in the file (longer: not kept)


@dataclass(frozen=True)
class FileTouch:
    """One file a message's tool call read, edited or wrote, as the call said it.

    ``path`` as the agent gave it (absolute, or relative to the session's folder).
    ``line_start``/``line_end`` (1-based, inclusive) when the call named lines: OpenCode's
    ``read`` offset/limit, Copilot's ``view`` view_range. ``text``: an edit's new text
    (newString / new_str), to be found in the file when a memory is cited
    (`llmem_hooks.evidence.touched`); None when the call gave none or it was too long.
    """

    path: str
    kind: TouchKind = "read"
    line_start: int | None = None
    line_end: int | None = None
    text: str | None = None

    def __post_init__(self) -> None:
        _clean_fields(self, ("path", "text"))


@dataclass(frozen=True)
class Message:
    """One message of a transcript, normalized.

    ``text`` is already in transcript form (``User: ...`` / ``Assistant: ...`` lines,
    ``Reasoning:``, ``Tool: <name>``, ``Patch``). ``files`` and ``commands`` are what the
    message's tool calls touched and ran, for the resume pack. ``touches`` says more about
    the files where the tool call did (which lines were read, what an edit wrote), for
    the citations of memories learned from the exchange (docs/citations.md).
    """

    id: str
    session_id: str
    role: Literal["user", "assistant"]
    text: str
    created_ms: int = 0
    files: tuple[str, ...] = field(default_factory=tuple)
    commands: tuple[str, ...] = field(default_factory=tuple)
    touches: tuple[FileTouch, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        _clean_fields(self, ("text",))
        if any(_SURROGATE.search(x) for x in (*self.files, *self.commands)):
            object.__setattr__(self, "files", tuple(map(clean_text, self.files)))
            object.__setattr__(self, "commands", tuple(map(clean_text, self.commands)))


# -- reading an agent's records defensively -------------------------------------------------
# An agent's store is input we do not control: one line or row that cannot be read must be
# skipped (and said once), never stall the adapter. These helpers turn "cannot be read"
# into one exception type, `BadRecord`, that the adapters catch per record.

MAX_RECORD_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
MAX_JSON_BYTES = 16 << 20  # one message/part/event row's JSON
MAX_JSON_DEPTH = 128  # nesting beyond this is no agent's data, and recursion is finite
SKIP_LOG_SECONDS = 60.0

_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


class BadRecord(ValueError):
    """A record of an agent's store that cannot be read; the caller skips it."""


def record_ms(value: Any) -> int:
    """Epoch ms from an int/float (epoch ms), an ISO-8601 string or a datetime (naive =
    UTC); 0 for None. Raises `BadRecord` for bools, other types, non-finite numbers and
    times outside 1970..9999, which downstream code (SQLite integers, datetime) cannot
    hold."""
    if value is None:
        return 0
    if isinstance(value, bool):
        raise BadRecord("a boolean where a time was expected")
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise BadRecord("a non-finite time")
        if not 0 <= value <= MAX_RECORD_MS:
            raise BadRecord("a time outside the years 1970..9999")
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        if not text or len(text) > 64:
            raise BadRecord("an unreadable time string")
        try:
            value = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise BadRecord("an unreadable time string") from None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        try:
            ms = int(value.timestamp() * 1000)
        except (OverflowError, OSError, ValueError):
            raise BadRecord("a time outside the years 1970..9999") from None
        return record_ms(ms)
    raise BadRecord(f"a {type(value).__name__} where a time was expected")


def lenient_ms(value: Any) -> int:
    """`record_ms`, but 0 for anything unreadable: for optional, informative times."""
    try:
        return record_ms(value)
    except BadRecord:
        return 0


def json_too_deep(text: str, max_depth: int = MAX_JSON_DEPTH) -> bool:
    """Whether JSON ``text`` nests arrays/objects deeper than ``max_depth``, decided
    without recursing (brackets inside strings do not count)."""
    if text.count("[") + text.count("{") <= max_depth:
        return False
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    depth = 0
    for c in brackets:
        depth += 1 if c in "[{" else -1
        if depth > max_depth:
            return True
    return False


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BadRecord("a non-finite number")
    return value


def _no_constant(name: str) -> Any:
    raise BadRecord(f"{name} is not a JSON number")


def load_json_object(raw: Any, max_bytes: int = MAX_JSON_BYTES) -> dict[str, Any]:
    """A JSON object from ``raw`` (str or UTF-8 bytes), or `BadRecord`: larger than
    ``max_bytes``, nested deeper than `MAX_JSON_DEPTH`, not JSON, holding NaN/Infinity or
    a number too large for a float, or not an object."""
    if isinstance(raw, bytes | bytearray | memoryview):
        if len(raw) > max_bytes:
            raise BadRecord(f"larger than {max_bytes} bytes")
        try:
            raw = bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise BadRecord("not UTF-8") from None
    if not isinstance(raw, str):
        raise BadRecord(f"a {type(raw).__name__}, not JSON text")
    if len(raw) > max_bytes:
        raise BadRecord(f"larger than {max_bytes} bytes")
    if json_too_deep(raw):
        raise BadRecord(f"nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        obj = json.loads(raw, parse_float=_finite_float, parse_constant=_no_constant)
    except BadRecord:
        raise
    except (ValueError, RecursionError, MemoryError):
        raise BadRecord("not JSON") from None
    if not isinstance(obj, dict):
        raise BadRecord(f"a JSON {type(obj).__name__}, not an object")
    return obj


def session_id_problem(session_id: Any) -> str | None:
    """Why ``session_id`` cannot be used (None: it can). The rule of
    `llmem_hooks.paths.validate_session_id` (ids end up in file names) plus: no control
    characters (a newline in a file name or a log line is never an agent's id)."""
    from .errors import ValidationError
    from .paths import validate_session_id

    if not isinstance(session_id, str):
        return f"a {type(session_id).__name__}, not a string"
    try:
        validate_session_id(session_id)
    except ValidationError as exc:
        return str(exc)
    if _CONTROL.search(session_id):
        return "contains control characters"
    if session_id != session_id.strip():
        return "has leading or trailing white space"
    return None


def valid_session_id(session_id: Any) -> bool:
    """Whether ``session_id`` is safe to report (see `session_id_problem`)."""
    return session_id_problem(session_id) is None


class SkipLog:
    """Rate-limited "skipped a bad record" warnings: the first skip per (adapter, reason)
    is logged at once, later ones at most once per ``interval`` seconds with a count, so a
    poisoned store cannot flood the log while every skip is still accounted for."""

    def __init__(
        self,
        logger: logging.Logger,
        interval: float = SKIP_LOG_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.interval = interval
        self.clock = clock
        self._state: dict[tuple[str, str], tuple[float, int]] = {}  # key -> (last log, n)
        self.total = 0

    def skip(self, adapter: str, reason: str, where: str = "", count: int = 1) -> None:
        """Count ``count`` skipped records; log if this (adapter, reason) is due. ``where``
        (which file, row or byte; the first bad record's own problem) is only logged."""
        self.total += count
        reason = _CONTROL.sub("?", reason)[:200]
        key = (adapter, reason)
        now = self.clock()
        last, pending = self._state.get(key, (None, 0))
        pending += count
        if last is not None and now - last < self.interval:
            self._state[key] = (last, pending)
            return
        if len(self._state) > 1000:
            self._state.clear()
        self._state[key] = (now, 0)
        at = f" ({_CONTROL.sub('?', where)[:400]})" if where else ""
        since = "" if last is None else f" in the last {now - last:.0f} s"
        self.logger.warning(
            "%s: skipped %d bad record(s)%s: %s%s", adapter, pending, since, reason, at
        )
