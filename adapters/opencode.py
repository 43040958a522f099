"""OpenCode (1.18.x) session adapter: a read-only view of ``opencode.db``.

OpenCode keeps everything in one SQLite file (WAL mode): ``session``, ``message`` and
``part`` rows (JSON in ``data``), plus ``event``, an append-only log of every write. The
sidecar tails ``event`` by rowid to learn about lifecycle moments, and reads ``message`` /
``part`` to build transcripts. The file belongs to OpenCode, so this module only ever
opens it with ``mode=ro`` and never runs a statement or pragma that writes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from llmem_hooks.config import Config, OpenCodeSettings, section_of
from llmem_hooks.events import (
    MAX_JSON_BYTES,
    BadRecord,
    EventKind,
    FileTouch,
    LifecycleEvent,
    Message,
    SessionInfo,
    SkipLog,
    load_json_object,
    record_ms,
    session_id_problem,
    valid_session_id,
)
from llmem_hooks.paths import is_system_path  # the one list of system folders

from .base import (
    COMMAND_CHARS,
    PATCH_FILE,
    SessionAdapter,
    as_dict,
    file_touch,
    make_message,
    patch_touches,
    summary_line,
    text_or_none,
)

log = logging.getLogger(__name__)

AGENT = "opencode"
DEFAULT_BUSY_TIMEOUT_MS = 5000  # what OpenCode itself uses
POLL_BATCH = 5000  # event rows per poll; the sidecar polls again while rows keep coming
_SEEN_MAX = 20_000  # completion / compaction ids remembered to report each only once

_SESSION_COLUMNS = (
    "id, project_id, directory, parent_id, title, time_created, time_updated, time_archived"
)
_FILE_PATH_TOOLS = frozenset({"read", "edit", "write", "multiedit"})
READ_DEFAULT_LIMIT = 2000  # lines OpenCode's read tool returns when no limit is given
_SUMMARY_KEYS = ("command", "filePath", "pattern", "url", "query", "path", "description")

T = TypeVar("T")


# -- locating and validating the database ------------------------------------------------


def opencode_data_dir() -> Path:
    """``$XDG_DATA_HOME/opencode`` (a relative XDG value is ignored, per the XDG spec)."""
    xdg = os.environ.get("XDG_DATA_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / "opencode"


def default_db_path() -> Path:
    """Where OpenCode keeps its DB: ``$OPENCODE_DB`` (a relative value resolves against the
    data dir, as OpenCode does), else ``<data dir>/opencode.db``."""
    data = opencode_data_dir()
    env = os.environ.get("OPENCODE_DB", "")
    if env:
        p = Path(env).expanduser()
        return p if p.is_absolute() else data / p
    return data / "opencode.db"


def validate_db_path(path: str | Path) -> Path:
    """The absolute DB path, or ValueError for a path we refuse to open.

    Refused: ``..`` components, system directories, a symlink as the file itself (the
    path is user configuration; these are the usual ways to point a reader elsewhere), a
    non-regular file and a file we cannot read. A missing file is fine: the sidecar may
    start before OpenCode ever ran.
    """
    raw = Path(path).expanduser()
    if ".." in raw.parts:
        raise ValueError(f"OpenCode DB path must not contain '..': {path}")
    absolute = Path(os.path.abspath(raw))
    try:
        resolved = absolute.resolve()
    except (OSError, RuntimeError) as exc:
        raise ValueError(f"OpenCode DB path cannot be resolved: {path} ({exc})") from None
    if is_system_path(absolute) or is_system_path(resolved):
        raise ValueError(f"OpenCode DB path points into a system directory: {path}")
    try:
        st = os.lstat(absolute)
    except FileNotFoundError:
        return absolute
    except OSError as exc:
        raise ValueError(f"OpenCode DB path cannot be accessed: {path} ({exc})") from None
    if stat.S_ISLNK(st.st_mode):
        raise ValueError(f"OpenCode DB path is a symlink (refused): {path}")
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"OpenCode DB path is not a regular file: {path}")
    if not os.access(absolute, os.R_OK):
        raise ValueError(f"OpenCode DB is not readable: {path}")
    return absolute


# -- small helpers -------------------------------------------------------------------------


def _ms(value: Any) -> int:
    """An epoch-ms value as int (0 when absent); `BadRecord` for anything that is not a
    sane time (text in an integer column, NaN, 1e308, a bool, ...)."""
    return record_ms(value)


def _sid(value: Any) -> str:
    """A session id we may report, or `BadRecord` (ids end up in file names)."""
    problem = session_id_problem(value)
    if problem is not None:
        raise BadRecord(f"session id {str(value)[:80]!r}: {problem}")
    return value


def _id_time_ms(ident: str, now_ms: int) -> int:
    """The write time encoded in an ascending OpenCode id (``evt_``, ``msg_``, ``prt_``).

    The 12 hex chars after the prefix are ``(ms * 4096 + counter) mod 2**48``, so the ms is
    known modulo 2**36 (~795 days); the latest such time not after ``now_ms`` is taken.
    Used only when a row's JSON carries no time of its own.
    """
    try:
        ms_mod = int(ident[4:16], 16) >> 12
    except (ValueError, IndexError):
        return 0
    return now_ms - ((now_ms - ms_mod) % (1 << 36))


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return True
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _project_id(value: Any) -> str | None:
    """OpenCode's project id (the root commit), None outside git ('global')."""
    return value if isinstance(value, str) and value and value != "global" else None


def _session_from_row(row: Sequence[Any]) -> SessionInfo:
    """A SessionInfo from a ``session`` row; `BadRecord` when its id or times are not."""
    sid, project, directory, parent, title, created, updated, archived = row
    parent = text_or_none(parent)
    return SessionInfo(
        id=_sid(sid),
        agent=AGENT,
        directory=text_or_none(directory),
        native_project_id=_project_id(project),
        parent_id=_sid(parent) if parent else None,
        title=text_or_none(title),
        created_ms=_ms(created),
        updated_ms=_ms(updated),
        archived=archived is not None,
    )


def _session_from_info(info: dict[str, Any], session_id: str) -> SessionInfo | None:
    """A SessionInfo from an event's ``data.info`` (None when it is not a Session object)."""
    t = as_dict(info.get("time"))
    if not t.get("created"):
        return None
    sid = info.get("id")
    parent = text_or_none(info.get("parentID"))
    return SessionInfo(
        id=_sid(sid) if isinstance(sid, str) and sid else session_id,
        agent=AGENT,
        directory=text_or_none(info.get("directory")),
        native_project_id=_project_id(info.get("projectID")),
        parent_id=_sid(parent) if parent else None,
        title=text_or_none(info.get("title")),
        created_ms=_ms(t.get("created")),
        updated_ms=_ms(t.get("updated")),
        archived=bool(t.get("archived")),
    )


def _lenient_text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


# OpenCode 2.x keeps new sessions in other tables of the same file (session_v2, rows in
# session_message; the 1.x session/message/part tables stay, frozen). 1.18's own schema
# already has an (empty) session_message table, and names changed during 2.x's beta, so
# the tables are looked up in sqlite_master and session_message counts only when it holds
# rows newer than the newest 1.x message.
V2_TABLES = ("session_v2",)
V1_TABLES = ("session", "message", "part", "event")
UNSUPPORTED_RECHECK_S = 300.0  # how often poll looks at the schema again


def unsupported_store(conn: sqlite3.Connection) -> str | None:
    """Why this opencode.db is one we cannot read (written by OpenCode 2.x, or without the
    1.x tables), or None for a 1.x store."""
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    v2 = [t for t in V2_TABLES if t in names]
    if "session_message" in names and "message" in names:
        newest_v2, newest_v1 = conn.execute(
            "SELECT (SELECT max(time_created) FROM session_message),"
            " (SELECT max(time_created) FROM message)"
        ).fetchone()
        if newest_v2 is not None and (newest_v1 is None or newest_v2 > newest_v1):
            v2.append("session_message")
    if v2:
        return (
            f"it holds OpenCode 2.x tables ({', '.join(v2)}): llmem-hooks reads OpenCode 1.x"
            " sessions only, so sessions written by OpenCode 2 are not learned"
        )
    missing = [t for t in V1_TABLES if t not in names]
    if names and missing:
        return f"it lacks the OpenCode 1.x tables {', '.join(missing)} (another OpenCode version?)"
    return None


def _wal_mode(path: Path) -> bool:
    """Whether the database file's header says WAL (read/write versions 2)."""
    try:
        with open(path, "rb") as f:
            header = f.read(20)
    except OSError:
        return False
    return len(header) == 20 and header[:16] == b"SQLite format 3\x00" and header[18] == 2


def _parse_cursor(cursor: str | None) -> tuple[int, str | None]:
    """``"<rowid>:<event id>"`` (or a bare rowid) -> (rowid, event id)."""
    if not cursor:
        return 0, None
    head, _, evt = cursor.partition(":")
    try:
        rowid = int(head)
    except ValueError:
        log.warning("opencode: unreadable cursor %r; reading events from the start", cursor)
        return 0, None
    return max(rowid, 0), (evt or None)


@dataclass
class _Msg:
    id: str
    created_ms: int
    data: dict[str, Any]
    parts: list[dict[str, Any]] = field(default_factory=list)


def _is_compaction_summary(data: dict[str, Any]) -> bool:
    """A finished compaction summary: from here on it stands for everything before it."""
    if data.get("role") != "assistant":
        return False
    if data.get("summary") is not True and data.get("mode") != "compaction":
        return False
    return bool(as_dict(data.get("time")).get("completed") or data.get("finish"))


def _tool_summary(tool: str, inp: dict[str, Any]) -> str:
    if tool in ("apply_patch", "patch") and isinstance(inp.get("patchText"), str):
        return ", ".join(PATCH_FILE.findall(inp["patchText"]))
    for key in _SUMMARY_KEYS:
        value = inp.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return ""


def _touches(tool: str, inp: dict[str, Any]) -> list[FileTouch]:
    """What a tool call says about the files it touched (OpenCode 1.18's tools): ``read``
    {filePath, offset (1-based), limit (default 2000)}, ``edit`` {filePath, newString},
    ``multiedit`` {filePath, edits: [{newString}]}, ``write`` {filePath, content} (the
    whole file: no text kept), ``apply_patch`` {patchText}."""
    path = inp.get("filePath")
    if tool == "read":
        offset, limit = inp.get("offset"), inp.get("limit")
        if offset is None and limit is None:  # the whole file (its first 2000 lines)
            return [t for t in [file_touch(path)] if t]
        start = offset if offset is not None else 1
        count = limit if limit is not None else READ_DEFAULT_LIMIT
        ok = all(isinstance(v, int) and not isinstance(v, bool) for v in (start, count))
        end = start + count - 1 if ok else 0  # 0: no range (an odd offset or limit)
        return [t for t in [file_touch(path, "read", start, end)] if t]
    if tool == "edit":
        return [t for t in [file_touch(path, "edit", text=inp.get("newString"))] if t]
    if tool == "multiedit":
        raw = inp.get("edits")
        edits = [as_dict(e).get("newString") for e in raw] if isinstance(raw, list) else []
        found = [file_touch(path, "edit", text=e) for e in edits if isinstance(e, str)]
        return [t for t in found if t] or [t for t in [file_touch(path, "edit")] if t]
    if tool == "write":
        return [t for t in [file_touch(path, "write")] if t]
    if tool in ("apply_patch", "patch") and isinstance(inp.get("patchText"), str):
        return patch_touches(inp["patchText"])
    return []


def _render(msg: _Msg) -> tuple[list[str], list[str], list[str], list[FileTouch]]:
    """Transcript lines, files, commands and file touches of one message (see
    ``get_messages``)."""
    prefix = "User" if msg.data.get("role") == "user" else "Assistant"
    lines: list[str] = []
    files: list[str] = []
    commands: list[str] = []
    touches: list[FileTouch] = []
    for part in msg.parts:
        kind = part.get("type")
        if kind == "text":
            text = part.get("text")
            if part.get("synthetic") or part.get("ignored") or not isinstance(text, str):
                continue  # injected by OpenCode (compaction "continue", file contents, ...)
            if text.strip():
                lines.append(f"{prefix}: {text.strip()}")
        elif kind == "reasoning":
            text = part.get("text")
            if isinstance(text, str) and text.strip():
                lines.append(f"{prefix}: Reasoning: {text.strip()}")
        elif kind == "tool":
            tool = str(part.get("tool") or "tool")
            state = as_dict(part.get("state"))
            inp = as_dict(state.get("input"))
            summary = summary_line(_tool_summary(tool, inp))
            line = f"{prefix}: Tool: {tool}" + (f": {summary}" if summary else "")
            if state.get("status") == "error":
                line += " [error]"
            lines.append(line)
            for key in ("filePath", "path") if tool in _FILE_PATH_TOOLS else ("filePath",):
                if isinstance(inp.get(key), str) and inp[key]:
                    files.append(inp[key])
            if tool in ("apply_patch", "patch") and isinstance(inp.get("patchText"), str):
                files.extend(PATCH_FILE.findall(inp["patchText"]))
            if state.get("status") != "error":  # a failed call touched nothing
                touches.extend(_touches(tool, inp))
            if tool == "bash" and isinstance(inp.get("command"), str) and inp["command"].strip():
                commands.append(inp["command"].strip()[:COMMAND_CHARS])
        elif kind == "patch":
            changed = [f for f in part.get("files") or [] if isinstance(f, str) and f]
            lines.append(f"{prefix}: Patch" + (f": {', '.join(changed)}" if changed else ""))
            files.extend(changed)
        elif kind == "file":
            source = as_dict(part.get("source"))
            path = source.get("path") or part.get("filename")
            if isinstance(path, str) and path:
                files.append(path)
                touches.extend(t for t in [file_touch(path, "attach")] if t)
        # step-start, step-finish, snapshot, compaction, agent, retry, subtask: bookkeeping,
        # not conversation.
    error = as_dict(msg.data.get("error"))
    if error:
        detail = as_dict(error.get("data")).get("message") or error.get("name") or "error"
        lines.append(f"{prefix}: Error: {summary_line(str(detail))}")
    return lines, list(dict.fromkeys(files)), list(dict.fromkeys(commands)), touches


# -- the adapter -------------------------------------------------------------------------


class OpenCodeAdapter(SessionAdapter):
    """Reads OpenCode's sessions, transcripts and event log; never writes to its DB.

    The connection is opened lazily (the DB may not exist yet) and reopened when the file
    is replaced (its inode changes). Methods return empty results while the DB or its
    tables do not exist. A DB locked by a writer raises ``sqlite3.OperationalError`` after
    the busy timeout, except in ``poll``, which then reports nothing new (the next wake-up
    retries). ``existing`` raises too, so a transient lock never looks like a deletion.
    """

    agent = AGENT

    def __init__(
        self,
        db_path: str | Path | None = None,
        *,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    ) -> None:
        self.db_path: Path = validate_db_path(db_path if db_path is not None else default_db_path())
        self.busy_timeout_ms = max(0, int(busy_timeout_ms))
        self._refused = False  # the path turned into a non-file (warned once)
        self._lock = threading.RLock()
        self._parents: dict[str, str | None] = {}  # session -> parent (None: top level)
        self._seen: OrderedDict[Any, str] = OrderedDict()  # key -> first event id
        self._skips = SkipLog(log)
        self._unsupported: str | None = None  # why the store is not one we read (warned once)
        self._schema_checked = 0.0  # monotonic time of the last look at the schema

    def __repr__(self) -> str:
        return f"OpenCodeAdapter({str(self.db_path)!r})"

    # -- connection --------------------------------------------------------------------------
    @classmethod
    def from_config(
        cls, config: Config | OpenCodeSettings | Mapping[str, Any] | None
    ) -> OpenCodeAdapter:
        """From the whole config, or its ``opencode`` section alone."""
        return cls(section_of(config, OpenCodeSettings).db_path)

    def location(self) -> str:
        return str(self.db_path)

    def available(self) -> bool:
        """Whether the DB file exists (OpenCode has run at least once)."""
        try:
            return stat.S_ISREG(os.lstat(self.db_path).st_mode)
        except OSError:
            return False

    def _connect(self) -> sqlite3.Connection | None:
        """A new read-only connection (the caller closes it); None when the file is missing.

        Short-lived on purpose: a connection held open between polls keeps
        ``opencode.db-wal`` / ``-shm`` in OpenCode's folder, which we must never leave
        behind. A WAL database without its ``-wal`` and ``-shm`` files (OpenCode is not
        running; every commit is in the main file) is opened ``immutable=1``: no lock, no
        ``-shm``, nothing created next to it. So is one whose crash left a ``-wal`` but
        no ``-shm`` (a plain read would create the ``-shm``): its last commits stay
        unseen until OpenCode runs again and recovers them. A rollback-journal database
        is opened plainly ``mode=ro``: readers there create nothing, and its locks must
        be honoured."""
        try:
            st = os.lstat(self.db_path)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):  # e.g. replaced by a symlink since validation
            if not self._refused:
                log.warning("opencode: %s is not a regular file; not reading it", self.db_path)
            self._refused = True
            return None
        self._refused = False
        live = all(os.path.lexists(f"{self.db_path}{s}") for s in ("-wal", "-shm"))
        params = "mode=ro&immutable=1" if _wal_mode(self.db_path) and not live else "mode=ro"
        conn = sqlite3.connect(
            f"file:{quote(str(self.db_path))}?{params}",
            uri=True,
            timeout=self.busy_timeout_ms / 1000,
            isolation_level=None,  # no implicit BEGIN; reads run in explicit transactions
            check_same_thread=False,  # guarded by self._lock
        )
        # Text that is not UTF-8 (a JS string with a lone surrogate, an emoji cut in half)
        # reads as U+FFFD: one odd title must not make every session unreadable.
        conn.text_factory = _lenient_text
        try:
            # Connection-level settings only; neither touches the file.
            conn.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms}")
            conn.execute("PRAGMA query_only = ON")
        except sqlite3.Error:
            conn.close()
            raise
        return conn

    def close(self) -> None:
        """Nothing to release: every call opens and closes its own connection."""

    def unsupported(self) -> str | None:
        """Why the DB is a store this adapter cannot read (`unsupported_store`), or None
        (also when it is missing or locked: nothing to say yet)."""
        try:
            return self._with_db(unsupported_store, None)
        except sqlite3.Error:
            return None

    def _check_schema(self, conn: sqlite3.Connection) -> None:
        """One warning line, in the sidecar's log, when the store turns out to be one we
        cannot read (instead of reporting "nothing new" for ever); looked at again every
        `UNSUPPORTED_RECHECK_S` (an upgrade happens while we run)."""
        now = time.monotonic()
        if self._schema_checked and now - self._schema_checked < UNSUPPORTED_RECHECK_S:
            return
        self._schema_checked = now
        why = unsupported_store(conn)
        if why is not None and why != self._unsupported:
            log.warning("opencode: %s is not supported: %s", self.db_path, why)
        self._unsupported = why

    def _with_db(self, fn: Callable[[sqlite3.Connection], T], empty: T) -> T:
        """Run ``fn`` in one read transaction (a consistent snapshot across its queries)
        on a connection of its own; ``empty`` when the DB or its tables do not exist."""
        with self._lock:
            conn = self._connect()
            if conn is None:
                return empty
            try:
                conn.execute("BEGIN")
                return fn(conn)
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):
                    return empty
                raise
            finally:
                with contextlib.suppress(sqlite3.Error):
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                with contextlib.suppress(sqlite3.Error):
                    conn.close()

    def _load(self, raw: Any, table: str, key: Any) -> dict[str, Any] | None:
        """A ``data`` column as a dict; None (and a rate-limited log line) when it is not
        a JSON object of bounded size and depth."""
        try:
            return load_json_object(raw, MAX_JSON_BYTES)
        except BadRecord as exc:
            self._skip(table, str(exc), key)
            return None

    def _skip(self, table: str, why: str, key: Any) -> None:
        self._skips.skip(AGENT, f"{table} row skipped", f"{str(key)[:80]!r}: {why}")

    def _first(self, key: Any, evt_id: str) -> bool:
        """True unless ``key`` was already reported by another event row (OpenCode rewrites
        messages in place). Re-reading the same row answers True again, so polling the
        same range twice (a pass that failed before its cursor was saved) is idempotent."""
        seen = self._seen.setdefault(key, evt_id)
        if len(self._seen) > _SEEN_MAX:
            self._seen.popitem(last=False)
        return seen == evt_id

    # -- sessions ------------------------------------------------------------------------------
    def list_sessions(self, limit: int = 50, include_children: bool = False) -> list[SessionInfo]:
        """Newest first; sub-agent sessions only with ``include_children`` (they belong to
        their parent session)."""
        where = "" if include_children else "WHERE parent_id IS NULL OR parent_id = ''"
        sql = (
            f"SELECT {_SESSION_COLUMNS} FROM session {where} ORDER BY time_created DESC, id LIMIT ?"
        )
        no_rows: list[Any] = []
        rows = self._with_db(lambda c: c.execute(sql, (max(0, int(limit)),)).fetchall(), no_rows)
        return [s for s in map(self._session_or_none, rows) if s is not None]

    def _session_or_none(self, row: Sequence[Any]) -> SessionInfo | None:
        """`_session_from_row`, or None (and a rate-limited log line) for a bad row."""
        try:
            return _session_from_row(row)
        except BadRecord as exc:
            self._skip("session", str(exc), row[0])
            return None

    def get_session(self, session_id: str) -> SessionInfo | None:
        sql = f"SELECT {_SESSION_COLUMNS} FROM session WHERE id = ?"
        row = self._with_db(lambda c: c.execute(sql, (session_id,)).fetchone(), None)
        return self._session_or_none(row) if row else None

    def session_exists(self, session_id: str) -> bool:
        sql = "SELECT 1 FROM session WHERE id = ?"
        return self._with_db(lambda c: c.execute(sql, (session_id,)).fetchone(), None) is not None

    def existing(self, session_ids: Sequence[str]) -> set[str]:
        """Which of these sessions still exist, in one indexed query. Deleting a session
        removes all its rows (and its events) within milliseconds, so this is how
        deletions are noticed. Raises on a locked DB rather than answering 'none'."""
        ids = [s for s in dict.fromkeys(session_ids) if session_id_problem(s) is None]
        if not ids:
            return set()
        sql = "SELECT id FROM session WHERE id IN (SELECT value FROM json_each(?))"
        no_rows: list[Any] = []
        rows = self._with_db(lambda c: c.execute(sql, (json.dumps(ids),)).fetchall(), no_rows)
        return {r[0] for r in rows}

    def watch_paths(self, sessions: Collection[str] = ()) -> list[str]:
        """The DB's folder: every OpenCode commit modifies ``opencode.db-wal`` there (the
        ``.db`` itself changes only at checkpoints), whichever session it is for: one
        watch, ``sessions`` is not needed. The folder may not exist yet."""
        return [str(self.db_path.parent)]

    # -- transcripts ---------------------------------------------------------------------------
    def get_messages(self, session_id: str, after_id: str | None = None) -> list[Message]:
        """The session's user and assistant messages, ordered by time then id.

        Only the part after the last finished compaction is returned, starting with the
        compaction summary (``Assistant: <summary>``), because that is what the model still
        sees. A compaction that was requested but has no finished summary yet cuts nothing
        (the sidecar reads the pre-compaction transcript exactly then). Lines are
        ``User: <text>`` / ``Assistant: <text>``, ``Assistant: Reasoning: ...``,
        ``Assistant: Tool: <name>: <input summary>``, ``Assistant: Patch: <files>``;
        synthetic text and step/snapshot/compaction parts are left out, and messages
        with nothing left are skipped. Sub-agent sessions are separate sessions and never
        included. ``after_id``: only messages after that one.
        """
        return self._with_db(lambda c: self._messages(c, session_id, after_id), [])

    def _messages(
        self, conn: sqlite3.Connection, session_id: str, after_id: str | None
    ) -> list[Message]:
        msgs: list[_Msg] = []
        for mid, created, raw in conn.execute(
            "SELECT id, time_created, data FROM message WHERE session_id = ? "
            "ORDER BY time_created, id",
            (session_id,),
        ):
            # A bad row costs only itself: the session's other messages still count.
            try:
                if not isinstance(mid, str) or not mid:
                    raise BadRecord("message id is not text")
                created_ms = _ms(created)
            except BadRecord as exc:
                self._skip("message", str(exc), mid)
                continue
            data = self._load(raw, "message", mid)
            if data is not None and data.get("role") in ("user", "assistant"):
                msgs.append(_Msg(mid, created_ms, data))
        start = 0
        for i, m in enumerate(msgs):
            if _is_compaction_summary(m.data):
                start = i
        selected = msgs[start:]
        if after_id is not None:
            ids = [m.id for m in msgs]  # all text (checked above)
            if after_id in ids:
                selected = msgs[max(start, ids.index(after_id) + 1) :]
            else:  # a removed message: ids ascend with time, so compare them
                selected = [m for m in selected if m.id > after_id]
        if not selected:
            return []
        by_id = {m.id: m for m in selected}
        for pid, message_id, raw in conn.execute(
            "SELECT id, message_id, data FROM part "
            "WHERE message_id IN (SELECT value FROM json_each(?)) ORDER BY message_id, id",
            (json.dumps(list(by_id)),),
        ):
            data = self._load(raw, "part", pid)
            if data is not None and message_id in by_id:
                by_id[message_id].parts.append(data)
        out: list[Message] = []
        for m in selected:
            try:
                lines, files, commands, touches = _render(m)
            except Exception as exc:  # odd shapes in one message cost only that message
                self._skip("message", f"unrenderable ({type(exc).__name__})", m.id)
                continue
            if lines:
                role = m.data["role"]
                out.append(
                    make_message(
                        m.id, session_id, role, lines, m.created_ms, files, commands, touches
                    )
                )
        return out

    # -- tailing the event log ---------------------------------------------------------------
    def poll(self, cursor: str | None) -> tuple[list[LifecycleEvent], str | None]:
        """Lifecycle events from the ``event`` rows after ``cursor`` (at most 5000 rows).

        The cursor is ``"<rowid>:<event id>"`` (a bare rowid is accepted). The id is there
        because ``event`` has no AUTOINCREMENT: when OpenCode deletes the session whose
        events were the newest rows, SQLite hands those rowids out again. If the row at the
        cursor is gone or different, reading resumes by event id (ids grow with time).
        A locked DB or a missing DB/table returns ``([], cursor)``.
        """
        rowid, last_id = _parse_cursor(cursor)
        try:
            nothing: tuple[list[LifecycleEvent], str | None] = ([], cursor)
            return self._with_db(lambda c: self._poll(c, rowid, last_id, cursor), nothing)
        except sqlite3.OperationalError as exc:
            if _is_busy(exc):
                log.warning("opencode: DB busy (%s); will retry on the next poll", exc)
                return [], cursor
            raise
        except sqlite3.DatabaseError as exc:
            # e.g. OpenCode started writing while we read it immutable: retry next poll.
            self._skips.skip(AGENT, "DB unreadable; will retry on the next poll", str(exc))
            return [], cursor

    def _poll(
        self, conn: sqlite3.Connection, rowid: int, last_id: str | None, cursor: str | None
    ) -> tuple[list[LifecycleEvent], str | None]:
        self._check_schema(conn)
        cols = "SELECT rowid, id, aggregate_id, type, data FROM event"
        rows: list[tuple[Any, ...]] | None = None
        if last_id is not None and rowid > 0:
            at = conn.execute("SELECT id FROM event WHERE rowid = ?", (rowid,)).fetchone()
            if at is None or at[0] != last_id:
                rows = conn.execute(
                    f"{cols} WHERE id > ? ORDER BY rowid LIMIT ?", (last_id, POLL_BATCH)
                ).fetchall()
        if rows is None:
            rows = conn.execute(
                f"{cols} WHERE rowid > ? ORDER BY rowid LIMIT ?", (rowid, POLL_BATCH)
            ).fetchall()
        if not rows:
            return [], cursor
        missing = self._prefetch_parents(conn, {r[2] for r in rows if valid_session_id(r[2])})
        now_ms = int(time.time() * 1000)
        events: list[LifecycleEvent] = []
        for _rowid, evt_id, sid, typ, raw in rows:
            # One row that cannot be read is skipped; the cursor still moves past it.
            try:
                if not isinstance(evt_id, str) or not evt_id:
                    raise BadRecord("event id is not text")
                if not isinstance(typ, str):
                    raise BadRecord("event type is not text")
                sid = _sid(sid)
                data = self._load(raw, "event", evt_id)
                if data is None:
                    continue
                ev = self._event(conn, evt_id, sid, typ, data, now_ms, missing)
            except BadRecord as exc:
                self._skip("event", str(exc), evt_id)
                continue
            except sqlite3.DatabaseError:
                raise
            except Exception as exc:  # an odd shape we did not foresee: skip, never stall
                self._skip("event", f"unreadable ({type(exc).__name__})", evt_id)
                continue
            if ev is not None:
                events.append(ev)
        last_rowid, last_id = rows[-1][0], rows[-1][1]
        if isinstance(last_id, str) and last_id and not any(c in last_id for c in "\n\r"):
            return events, f"{last_rowid}:{last_id}"
        return events, str(last_rowid)  # an id we cannot compare by: the rowid alone

    def _prefetch_parents(self, conn: sqlite3.Connection, sids: set[str]) -> set[str]:
        """Cache the parent of every session in a batch with one query; returns the ids
        that have no session row (deleted, or not visible yet)."""
        todo = [s for s in sids if s not in self._parents]
        if not todo:
            return set()
        found = conn.execute(
            "SELECT id, parent_id FROM session WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(todo),),
        ).fetchall()
        for sid, parent in found:
            self._parents[sid] = text_or_none(parent)
        return set(todo) - {r[0] for r in found}

    def _root(self, conn: sqlite3.Connection, sid: str, missing: set[str]) -> str:
        """The top-level session a (possibly sub-agent) session belongs to."""
        seen = {sid}
        cur = sid
        for _ in range(16):
            if cur in self._parents:
                parent = self._parents[cur]
            elif cur in missing:
                parent = None
            else:
                row = conn.execute("SELECT parent_id FROM session WHERE id = ?", (cur,)).fetchone()
                if row is None:
                    missing.add(cur)
                    parent = None
                else:
                    parent = self._parents[cur] = text_or_none(row[0])
            if not parent or parent in seen:
                return cur
            if session_id_problem(parent) is not None:
                raise BadRecord(f"parent session id {str(parent)[:80]!r} is not usable")
            seen.add(parent)
            cur = parent
        return cur

    def _event(
        self,
        conn: sqlite3.Connection,
        evt_id: str,
        sid: str,
        typ: str,
        data: dict[str, Any],
        now_ms: int,
        missing: set[str],
    ) -> LifecycleEvent | None:
        info = as_dict(data.get("info"))
        part = as_dict(data.get("part"))
        if typ.startswith("session.") and info:
            self._parents[sid] = text_or_none(info.get("parentID"))
        kind, detail, session, at = self._classify(conn, evt_id, sid, typ, info, part, data)
        at = at or _id_time_ms(evt_id, now_ms)
        root = self._root(conn, sid, missing)
        if root != sid:
            # A sub-agent belongs to its parent: all it does only keeps the parent alive.
            label = f"subagent {detail if kind == 'activity' else kind}"
            return LifecycleEvent("activity", root, AGENT, at, None, sid, label)
        return LifecycleEvent(kind, sid, AGENT, at, session, None, detail)

    def _classify(
        self,
        conn: sqlite3.Connection,
        evt_id: str,
        sid: str,
        typ: str,
        info: dict[str, Any],
        part: dict[str, Any],
        data: dict[str, Any],
    ) -> tuple[EventKind, str, SessionInfo | None, int]:
        """(kind, detail, session info, time in ms) of one event row of a session."""
        t = as_dict(info.get("time"))
        if typ == "session.created.1":
            session = _session_from_info(info, sid)
            if session is None:
                row = conn.execute(
                    f"SELECT {_SESSION_COLUMNS} FROM session WHERE id = ?", (sid,)
                ).fetchone()
                session = _session_from_row(row) if row else None
            at = _ms(t.get("created")) or (session.created_ms if session else 0)
            return "created", "", session, at
        if typ == "session.updated.1":
            session = _session_from_info(info, sid)
            archived = _ms(t.get("archived"))
            if archived and self._first(("archived", sid, archived), evt_id):
                return "ended", "archived", session, archived
            return "activity", "session updated", session, _ms(t.get("updated"))
        if typ == "session.deleted.1":
            return "ended", "deleted", _session_from_info(info, sid), 0
        if typ == "message.updated.1":
            role = info.get("role")
            completed = _ms(t.get("completed"))
            if role == "assistant" and completed and self._first(("done", info.get("id")), evt_id):
                if info.get("summary") is True or info.get("mode") == "compaction":
                    return "compacting", "done", None, completed
                finish = info.get("finish")
                if finish != "tool-calls":
                    return "turn_done", str(finish or ""), None, completed
            at = completed or _ms(t.get("created"))
            return "activity", f"{role or 'unknown'} message", None, at
        if typ == "message.part.updated.1":
            ptype = str(part.get("type") or "unknown")
            pt = as_dict(part.get("time"))
            at = _ms(data.get("time")) or _ms(pt.get("end")) or _ms(pt.get("start"))
            if ptype == "compaction" and self._first(("compaction", part.get("id")), evt_id):
                return "compacting", "requested", None, at
            return "activity", f"part {ptype}", None, at
        return "activity", typ, None, _ms(data.get("time"))
