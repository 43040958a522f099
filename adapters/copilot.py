"""GitHub Copilot CLI (1.0.x) session adapter: a read-only view of ``$COPILOT_HOME``.

Each session is a folder ``session-state/<uuid>/`` holding ``workspace.yaml`` (metadata
written at creation) and ``events.jsonl``, an append-only JSON-lines log that every process
opening the session appends to: ``session.start``, a ``session.resume`` per reopening,
messages, tools, hooks, compactions and a ``session.shutdown`` per clean exit. Sub-agents
write into their parent's file (lines with a top-level ``agentId``). The sidecar tails
these logs by byte offset to learn about lifecycle moments and reads them again to build
transcripts. The files belong to Copilot: this module only opens them read-only and never
creates, changes or removes anything below the home.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import re
import stat
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import yaml  # type: ignore[import-untyped]  # no types-PyYAML offline

from llmem_hooks.config import Config, CopilotSettings, section_of
from llmem_hooks.events import (
    BadRecord,
    EventKind,
    FileTouch,
    LifecycleEvent,
    Message,
    SessionInfo,
    SkipLog,
    lenient_ms,
    record_ms,
    session_id_problem,
)
from llmem_hooks.paths import copilot_home

from .base import (
    SessionAdapter,
    as_dict,
    file_touch,
    make_message,
    summary_line,
    text_or_none,
)
from .copilot_jsonl import (
    F_CRASHED,
    F_CREATED,
    F_OPEN,
    F_REPLAY,
    MAX_LINE_BYTES,
    MESSAGE_LINE_BYTES,
    Tail,
    crc_before,
    decode_line,
    dump_cursor,
    open_regular,
    parse_cursor,
    read_lines,
    read_small,
    valid_session_id,
)
from .copilot_share import DOC_FILE_BYTES, read_share_transcript
from .copilot_tools import tool_command, tool_files, tool_summary, tool_touches

log = logging.getLogger(__name__)

AGENT = "copilot"
EVENTS = "events.jsonl"
WORKSPACE = "workspace.yaml"
POLL_BYTES = 64 << 20  # per poll; the sidecar polls again while events keep coming
WATCH_MAX = 4  # session folders watched: the followed ones most recently changed
FRESH_S = 60  # a session folder changed this recently is watched even before it is followed
SMALL_FILE_BYTES = 256 * 1024  # workspace.yaml

_LOCK_NAME = re.compile(r"^inuse\.(\d{1,10})\.lock$")
_LEADING_TYPE = re.compile(rb'\s*\{\s*"type"\s*:\s*"([^"\\]{1,100})"')  # how the CLI writes
_TRANSCRIPT_TYPES = frozenset(
    {
        "user.message",
        "assistant.message",
        "assistant.reasoning",
        "tool.execution_start",
        "tool.execution_complete",
        "session.error",
        "session.compaction_complete",
        "session.context_cleared",
    }
)

# Every type the 1.0.102 schema marks as persisted, plus the undocumented ``model.*`` lines
# written during compaction. Anything else is skipped (and logged once per type).
KNOWN_TYPES = frozenset(
    {
        "abort", "assistant.fusion_phase_completed", "assistant.fusion_phase_failed",
        "assistant.message", "assistant.reasoning", "assistant.turn_end", "assistant.turn_start",
        "audio", "blob", "external_tool.requested", "hook.end", "hook.start",
        "human_response.recorded", "image", "mcp.oauth_recovery_completed",
        "permission.assentDetected", "permission.carriedForward", "permission.completed",
        "permission.contextualAuthorization", "permission.messageAuthorization",
        "permission.messageAuthorizationDegraded", "permission.messageAuthorizationRead",
        "permission.requested", "session.auto_mode_resolved", "session.autopilot_objective_changed",
        "session.binary_asset", "session.canvas.recorded", "session.canvas.removed",
        "session.compaction_complete", "session.compaction_start", "session.completion_receipt",
        "session.context_changed", "session.context_cleared", "session.error",
        "session.fusion_change_checkpoint", "session.fusion_commit_started",
        "session.fusion_completed", "session.fusion_handoff", "session.fusion_resolved",
        "session.fusion_route_failed", "session.handoff", "session.info", "session.mode_changed",
        "session.mode_notice_delivered", "session.model_change", "session.model_deselected",
        "session.permission_recovery", "session.permissions_changed", "session.plan_changed",
        "session.remote_steerable_changed", "session.request_body_compression_disabled",
        "session.resume", "session.schedule_cancelled", "session.schedule_created",
        "session.schedule_rearmed", "session.session_limits_changed", "session.shutdown",
        "session.start", "session.task_complete", "session.truncation", "session.usage_checkpoint",
        "session.usage_record", "session.warning", "session.workspace_file_changed",
        "skill.context_delivered", "skill.context_delivered_ref", "skill.invoked",
        "skill.invoked_ref", "subagent.completed", "subagent.configured", "subagent.deselected",
        "subagent.failed", "subagent.selected", "subagent.started", "system.message",
        "system.notification", "tool.execution_complete", "tool.execution_start",
        "tool.user_requested", "tool_search.activated", "user.message",
        "model.turn_started", "model.model_call_started", "model.model_call_success",
        "model.message", "model.response", "model.turn_ended", "model.messages_snapshot",
    }
)  # fmt: skip


# -- locating the home ---------------------------------------------------------------------


def validate_home(path: str | Path) -> Path:
    """The absolute home path, or ValueError for a path with ``..`` components (the path
    is user configuration; ``..`` is the usual way to point a reader elsewhere). A missing
    folder is fine: the sidecar may start before Copilot ever ran."""
    raw = Path(path).expanduser()
    if ".." in raw.parts:
        raise ValueError(f"Copilot home must not contain '..': {path}")
    return Path(os.path.abspath(raw))


# -- small helpers -------------------------------------------------------------------------


def _scalar(value: Any) -> str | None:
    """A YAML scalar as text (``name: 123`` loads as an int)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str | int | float):
        return str(value).strip() or None
    return None


def _ms(value: Any) -> int:
    """Epoch ms of an ISO-8601 string or datetime (naive = UTC) or an epoch-ms number;
    0 when absent or unreadable (for optional times; a line's own timestamp is checked
    strictly in `_line`)."""
    return lenient_ms(value)


def _sub_agent(obj: Mapping[str, Any]) -> str | None:
    return text_or_none(obj.get("agentId"))


def _pid_dead(pid: int) -> bool:
    """True only when no process has this pid (a process we may not signal is alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


# -- transcripts ---------------------------------------------------------------------------


def _tool_line(name: str, args: Any, failed: bool) -> str:
    summary = tool_summary(name, args)
    line = f"Assistant: Tool: {name}" + (f": {summary}" if summary else "")
    return line + (" [error]" if failed else "")


def _after(msgs: list[Message], after_id: str | None) -> list[Message]:
    if after_id is None:
        return msgs
    ids = [m.id for m in msgs]
    return msgs[ids.index(after_id) + 1 :] if after_id in ids else msgs


# -- the adapter ---------------------------------------------------------------------------


class CopilotAdapter(SessionAdapter):
    """Reads Copilot CLI's sessions below ``<home>/session-state``; never writes there.

    Stateless between calls apart from log rate limiting: everything ``poll`` needs to
    resume is in its cursor. A missing home gives empty results until it appears.
    """

    agent = AGENT

    def __init__(
        self,
        home: str | Path | None = None,
        share_dir: str | Path | None = None,
    ) -> None:
        self.root: Path = validate_home(home if home is not None else copilot_home())
        self.sessions_dir: Path = self.root / "session-state"
        self.share_dir: Path | None = validate_home(share_dir) if share_dir is not None else None
        self.max_line_bytes = MAX_LINE_BYTES
        self.poll_bytes = POLL_BYTES
        self._unknown_logged: set[str] = set()
        self._last_cursor: tuple[str | None, dict[str, Tail]] = (None, {})
        self._folders: dict[str, Path] = {}
        self._skips = SkipLog(log)

    read_share_transcript = staticmethod(read_share_transcript)

    def __repr__(self) -> str:
        return f"CopilotAdapter({str(self.root)!r})"

    @classmethod
    def from_config(
        cls, config: Config | CopilotSettings | Mapping[str, Any] | None
    ) -> CopilotAdapter:
        """From the whole config, or its ``copilot`` section alone."""
        return cls(section_of(config, CopilotSettings).home)

    @property
    def home(self) -> Path:
        return self.root

    def location(self) -> str:
        return str(self.root)

    def available(self) -> bool:
        """Whether ``session-state`` exists (Copilot has run at least once). While it does
        not, the sidecar must not take missing sessions for deleted ones."""
        return self.sessions_dir.is_dir()

    # -- sessions ------------------------------------------------------------------------------
    def _session_dirs(self) -> dict[str, Path] | None:
        """Session id -> folder (real folders with a plausible id only: the legacy flat
        ``<id>.jsonl`` files and ``.session-operation-locks`` are not sessions); None when
        ``session-state`` cannot be listed."""
        try:
            with os.scandir(self.sessions_dir) as it:
                entries = list(it)
        except OSError:
            return None
        out: dict[str, Path] = {}
        for entry in entries:
            try:
                if not entry.is_dir(follow_symlinks=False):
                    continue
            except OSError:
                continue
            if valid_session_id(entry.name):
                folder = self._folders.get(entry.path)
                if folder is None:  # Path objects are kept: each pass lists every folder
                    if len(self._folders) > 10_000:
                        self._folders.clear()
                    folder = self._folders[entry.path] = Path(entry.path)
                out[entry.name] = folder
            elif not entry.name.startswith("."):
                why = session_id_problem(entry.name) or "not a session id"
                where = f"{entry.name[:80]!r}: {why}"
                self._skips.skip(AGENT, "session folder skipped (unusable id)", where)
        return out

    def _folder(self, session_id: str) -> Path | None:
        if not valid_session_id(session_id):
            return None
        folder = self.sessions_dir / session_id
        try:
            return folder if stat.S_ISDIR(os.lstat(folder).st_mode) else None
        except OSError:
            return None

    @staticmethod
    def _events_stat(folder: Path) -> os.stat_result | None:
        try:
            st = os.lstat(folder / EVENTS)
        except OSError:
            return None
        return st if stat.S_ISREG(st.st_mode) else None

    def session_exists(self, session_id: str) -> bool:
        folder = self._folder(session_id)
        return folder is not None and self._events_stat(folder) is not None

    def get_session(self, session_id: str) -> SessionInfo | None:
        folder = self._folder(session_id)
        if folder is None or self._events_stat(folder) is None:
            return None
        return self._info(session_id, folder)

    def list_sessions(self, limit: int = 50) -> list[SessionInfo]:
        """Newest first by events.jsonl mtime (``updated_at`` in workspace.yaml is not
        bumped on every turn)."""
        found: list[tuple[int, str, Path]] = []
        for sid, folder in (self._session_dirs() or {}).items():
            st = self._events_stat(folder)
            if st is not None:
                found.append((st.st_mtime_ns, sid, folder))
        found.sort(key=lambda x: (-x[0], x[1]))
        return [self._info(sid, folder) for _, sid, folder in found[: max(0, int(limit))]]

    def watch_paths(self, sessions: Collection[str] = ()) -> list[str]:
        """``session-state`` (a new session's folder appears there), then the folders of
        ``sessions`` (the watcher is not recursive: appends to events.jsonl and lock
        files show up in the folder), at most WATCH_MAX, most recently changed first. The
        sidecar asks again each pass with the sessions it follows, so a new session is
        added and an ended one dropped; an ended one is left to the safety poll."""
        recent: list[tuple[int, str]] = []
        for sid in sessions:
            folder = self._folder(sid)
            if folder is None:
                continue
            try:
                recent.append((os.lstat(folder).st_mtime_ns, str(folder)))
            except OSError:
                continue
        recent.sort(reverse=True)
        chosen = [p for _, p in recent[:WATCH_MAX]]
        if len(chosen) < WATCH_MAX:
            # A folder that just appeared, its session not read yet (Copilot writes
            # events.jsonl a moment after the folder), is watched too, so its first lines
            # wake the sidecar instead of waiting for the safety poll.
            fresh = time.time_ns() - FRESH_S * 1_000_000_000
            known = self._last_cursor[1]
            new = []
            for sid, folder in (self._session_dirs() or {}).items():
                if sid in known:
                    continue
                try:
                    mtime = os.lstat(folder).st_mtime_ns
                except OSError:
                    continue
                if mtime >= fresh and str(folder) not in chosen:
                    new.append((mtime, str(folder)))
            new.sort(reverse=True)
            chosen += [p for _, p in new[: WATCH_MAX - len(chosen)]]
        return [str(self.sessions_dir), *sorted(chosen)]

    def _workspace(self, folder: Path) -> dict[str, Any]:
        """workspace.yaml as a dict; {} when missing, too large or not YAML."""
        raw = read_small(folder / WORKSPACE, SMALL_FILE_BYTES)
        if raw is None:
            return {}
        try:
            data = yaml.safe_load(raw.decode("utf-8", errors="replace"))
        except (yaml.YAMLError, RecursionError, ValueError):
            log.debug("copilot: %s is not valid YAML", folder / WORKSPACE)
            return {}
        return as_dict(data)

    def _first_event(self, folder: Path) -> dict[str, Any] | None:
        f = open_regular(folder / EVENTS)
        if f is None:
            return None
        with f:
            try:
                for _end, raw in read_lines(f, 0, self.max_line_bytes):
                    obj = decode_line(raw) if raw is not None and raw.strip() else None
                    return obj if isinstance(obj, dict) else None
            except OSError:
                return None
        return None

    def _info(
        self,
        session_id: str,
        folder: Path,
        start: Mapping[str, Any] | None = None,
        start_ms: int = 0,
    ) -> SessionInfo:
        """SessionInfo from the ``session.start`` data (read from the file when not given)
        and workspace.yaml. The directory is the session's cwd; the coordinator derives the
        project from it."""
        if start is None:
            first = self._first_event(folder)
            if first and first.get("type") == "session.start" and not _sub_agent(first):
                start, start_ms = as_dict(first.get("data")), _ms(first.get("timestamp"))
        start = start or {}
        ws = self._workspace(folder)
        st = self._events_stat(folder)
        created = _ms(start.get("startTime")) or _ms(ws.get("created_at")) or start_ms
        updated = int(st.st_mtime_ns // 1_000_000) if st else 0
        return SessionInfo(
            id=session_id,
            agent=AGENT,
            directory=text_or_none(as_dict(start.get("context")).get("cwd"))
            or text_or_none(ws.get("cwd")),
            native_project_id=None,
            parent_id=None,
            title=_scalar(ws.get("name")),
            created_ms=created,
            updated_ms=max(updated, created),
        )

    # -- tailing -------------------------------------------------------------------------------
    def poll(self, cursor: str | None) -> tuple[list[LifecycleEvent], str | None]:
        """Lifecycle events from the lines appended to every ``events.jsonl`` since
        ``cursor`` (see `parse_cursor` for its format), at most ``poll_bytes`` per call.

        New files are read from offset 0; only complete lines are consumed; a file that
        shrank, was replaced (new inode) or rewritten in place is read again from 0,
        reporting only lines newer than those already seen. Consecutive ``activity``
        events of a session (and sub-agent) in one call are merged into the last one.
        """
        # The cursor this adapter returned last is not parsed again (its tails are never
        # changed in place: a pass copies one before moving it).
        last, parsed = self._last_cursor
        tails = parsed if cursor is not None and cursor == last else parse_cursor(cursor)
        dirs = self._session_dirs()
        if dirs is None:
            return [], cursor
        events: list[LifecycleEvent] = []
        budget = self.poll_bytes
        out: dict[str, Tail] = {}
        touched = False
        for sid in sorted(dirs):
            old = tails.get(sid)
            if old is not None and self._unchanged(f"{dirs[sid]}/{EVENTS}", old):
                out[sid] = old  # nothing new (an ended session, most of them): one lstat
                continue
            touched = True
            tail = dataclasses.replace(old) if old is not None else Tail()
            if budget > 0:
                used, seen = self._tail(sid, dirs[sid], tail, events, budget)
                budget -= used
            else:
                seen = False
            if seen or sid in tails:
                out[sid] = tail
        # Entries of folders that are gone are dropped (the listing succeeded). The dump is
        # canonical: an unchanged state gives back the very same string.
        if not out and cursor is None:
            return events, None
        if not touched and cursor is not None and out.keys() == tails.keys():
            return events, cursor  # nothing moved: the very same cursor, no dump
        new_cursor = dump_cursor(out)
        self._last_cursor = (new_cursor, out)
        return events, new_cursor

    def _tail(
        self, sid: str, folder: Path, t: Tail, out: list[LifecycleEvent], budget: int
    ) -> tuple[int, bool]:
        """Read one session's new lines into ``out``; (bytes consumed, file exists).
        ``t`` and the events move together line by line, so a read error keeps both."""
        path = folder / EVENTS
        f = open_regular(path)
        if f is None:
            return 0, False
        evs: list[LifecycleEvent] = []
        bad: list[tuple[int, str]] = []
        unknown: set[str] = set()
        with f:
            try:
                st = os.fstat(f.fileno())
            except OSError:
                return 0, True
            if t.ino != st.st_ino and t.offset:
                self._rewound(t, path, "was replaced")
            elif st.st_size < t.offset:
                self._rewound(t, path, "shrank")
            elif st.st_size > t.offset and t.offset and crc_before(f, t.offset) != t.crc:
                self._rewound(t, path, "was rewritten")
            t.ino = st.st_ino
            start = t.offset
            eof = True
            try:
                if st.st_size > t.offset:
                    for end, raw in read_lines(f, t.offset, self.max_line_bytes):
                        line_start, t.offset = t.offset, end
                        if raw is None:
                            bad.append((line_start, f"longer than {self.max_line_bytes} bytes"))
                        elif raw.strip():
                            obj = decode_line(raw)
                            if isinstance(obj, str):
                                bad.append((line_start, obj))
                            elif obj["type"] not in KNOWN_TYPES:
                                unknown.add(obj["type"][:80])
                            else:
                                why = self._safe_line(sid, folder, t, obj, evs)
                                if why:
                                    bad.append((line_start, why))
                        if t.offset - start >= budget:
                            eof = t.offset >= st.st_size
                            break
            except OSError as exc:
                log.warning("copilot: cannot read %s: %s", path, exc)
                eof = False
            if t.offset != start:
                t.crc = crc_before(f, t.offset)
            if eof:
                t.flags &= ~F_REPLAY  # whatever is appended after this pass is new
                with contextlib.suppress(OSError):
                    self._check_crash(sid, folder, f, t, st.st_size, evs)
        self._report(path, bad, unknown)
        out.extend(evs)
        return t.offset - start, True

    @staticmethod
    def _unchanged(path: str, t: Tail) -> bool:
        """True when a pass over ``path`` would do nothing: the same file (inode), no byte
        past the cursor, no re-read under way, and no open run to check for a crash. One
        lstat instead of open, fstat and close: an ended session costs next to nothing
        per pass, however many there are. (A rewrite to the very same size is not seen
        here, as it was not before: only growth is checked against the CRC.)"""
        if t.flags & F_REPLAY or t.flags & (F_OPEN | F_CRASHED) == F_OPEN or not t.offset:
            return False
        try:
            st = os.lstat(path)
        except OSError:
            return False
        return stat.S_ISREG(st.st_mode) and st.st_ino == t.ino and st.st_size == t.offset

    @staticmethod
    def _rewound(t: Tail, path: Path, why: str) -> None:
        log.info("copilot: %s %s; reading it again from the start", path, why)
        t.offset, t.crc = 0, 0
        t.flags = (t.flags & (F_CREATED | F_CRASHED)) | F_REPLAY

    def _report(self, path: Path, bad: list[tuple[int, str]], unknown: set[str]) -> None:
        """Malformed lines go to the rate-limited skip log (the first at once, then at
        most one line a minute with a count); event types not seen before by this
        adapter are named once (new CLI versions add types)."""
        if bad:
            offset, why = bad[0]
            where = f"{path}: first at byte {offset}: {why}"
            self._skips.skip(AGENT, "malformed events.jsonl line(s)", where, len(bad))
        new = sorted(unknown - self._unknown_logged)
        self._unknown_logged.update(new)
        if new:
            log.warning("copilot: %s: ignoring unknown event type(s) %s", path, ", ".join(new))

    def _safe_line(
        self,
        sid: str,
        folder: Path,
        t: Tail,
        obj: dict[str, Any],
        evs: list[LifecycleEvent],
    ) -> str | None:
        """`_line`, turning a line that cannot be read into why (None: it was read). The
        line's time is checked before anything changes, so a bad one leaves ``t`` as it
        was; the offset moves past it either way."""
        try:
            self._line(sid, folder, t, obj, evs)
        except BadRecord as exc:
            return str(exc)
        except Exception as exc:  # one odd line must never stall the session's tail
            return f"unreadable ({type(exc).__name__})"
        return None

    def _line(
        self,
        sid: str,
        folder: Path,
        t: Tail,
        obj: dict[str, Any],
        evs: list[LifecycleEvent],
    ) -> None:
        """Update ``t`` for one event line and append what it means to ``evs``; raises
        `BadRecord` (before changing anything) for a timestamp that is not a sane time."""
        at = record_ms(obj.get("timestamp"))
        quiet = bool(t.flags & F_REPLAY) and at <= t.mark
        if not quiet:
            t.flags &= ~F_REPLAY
        t.mark = max(t.mark, at)
        typ: str = obj["type"]
        data = as_dict(obj.get("data"))
        child = _sub_agent(obj)
        kind: EventKind = "activity"
        detail = typ
        session: SessionInfo | None = None
        if child:
            # A sub-agent's lines live in the parent's file and only keep it alive.
            detail = f"subagent {typ}"
        elif typ in ("session.start", "session.resume"):
            t.flags |= F_OPEN
            if not quiet:
                t.flags &= ~F_CRASHED
            if typ == "session.start" and not t.flags & F_CREATED:
                t.flags |= F_CREATED
                evs.append(
                    LifecycleEvent(
                        "created", sid, AGENT, at, self._info(sid, folder, data, at), None, ""
                    )
                )
                return
            if quiet:
                return
            if typ == "session.resume":
                detail, session = "resume", self._info(sid, folder)
        elif typ == "session.shutdown":
            t.flags &= ~F_OPEN
            kind, detail = "ended", "shutdown"
        elif typ == "session.compaction_start":
            kind, detail = "compacting", "requested"
        elif typ == "session.compaction_complete":
            if data.get("success") is False:
                detail = "compaction failed"
            else:
                kind, detail = "compacting", "done"
        elif typ == "assistant.turn_end":
            kind, detail = "turn_done", "turn_end"
        if quiet:
            return
        ev = LifecycleEvent(kind, sid, AGENT, at, session, child, detail)
        prev = evs[-1] if evs else None
        if _mergeable(ev) and prev is not None and _mergeable(prev) and prev.child_id == child:
            evs[-1] = dataclasses.replace(ev, at_ms=max(ev.at_ms, prev.at_ms))
        else:
            evs.append(ev)

    def _check_crash(
        self,
        sid: str,
        folder: Path,
        f: BinaryIO,
        t: Tail,
        size: int,
        evs: list[LifecycleEvent],
    ) -> None:
        """``ended crashed`` once for a run with no shutdown whose ``inuse.<pid>.lock``
        files all name dead processes (SIGKILL leaves them behind). No lock: no verdict."""
        if t.flags & (F_OPEN | F_CRASHED) != F_OPEN:
            return
        pids: list[int] = []
        try:
            with os.scandir(folder) as it:
                for entry in it:
                    m = _LOCK_NAME.match(entry.name)
                    if m and 0 < int(m.group(1)) < 1 << 31:
                        pids.append(int(m.group(1)))
        except OSError:
            return
        if not pids or not all(_pid_dead(p) for p in pids):
            return
        st = os.fstat(f.fileno())
        if st.st_size != size:  # it wrote a last line (a shutdown?) meanwhile: next poll
            return
        t.flags |= F_CRASHED
        at = int(st.st_mtime_ns // 1_000_000)
        evs.append(LifecycleEvent("ended", sid, AGENT, at, None, None, "crashed"))

    # -- transcripts ---------------------------------------------------------------------------
    def get_messages(self, session_id: str, after_id: str | None = None) -> list[Message]:
        """The root agent's messages in file order, from the last finished compaction on.

        ``User: <content>`` (as typed, not the transformed prompt), ``Assistant: <text>``
        with ``Assistant: Reasoning: ...`` and ``Assistant: Tool: <name>: <arguments>``
        lines (`` [error]`` when the execution failed), ``Assistant: Error: ...`` for a
        failed model call. After a compaction only its summary (``Assistant: <summary>``)
        and later messages remain, because that is what the model still sees; a cleared
        context cuts the same way. Sub-agent lines are left out. When events.jsonl holds
        no messages, a ``--share`` export (``copilot-session-<id>.md`` in ``share_dir``,
        else in the session's cwd, where ``--share`` writes it) is used instead.
        ``after_id``: only messages after that one (all when it is unknown).
        """
        if not valid_session_id(session_id):
            return []
        folder = self._folder(session_id)
        msgs = self._event_messages(session_id, folder) if folder is not None else []
        if not msgs:
            share = self._share_file(session_id, folder)
            if share is not None:
                msgs = read_share_transcript(share, session_id)
        return _after(msgs, after_id)

    def _share_file(self, session_id: str, folder: Path | None) -> Path | None:
        name = f"copilot-session-{session_id}.md"
        where = self.share_dir
        if where is None and folder is not None:
            cwd = self._info(session_id, folder).directory
            where = Path(cwd) if cwd and os.path.isabs(cwd) else None
        return where / name if where is not None else None

    def _root_lines(self, folder: Path) -> list[dict[str, Any]]:
        """The root agent's transcript events in file order (malformed lines skipped).
        Lines whose leading ``"type"`` says they cannot matter (system prompts, hooks,
        ``model.*`` copies of whole requests) are not even decoded."""
        f = open_regular(folder / EVENTS)
        if f is None:
            return []
        out: list[dict[str, Any]] = []
        skipped = 0
        with f:
            try:
                for _end, raw in read_lines(f, 0, MESSAGE_LINE_BYTES):
                    peek = _LEADING_TYPE.match(raw) if raw is not None else None
                    if peek and peek.group(1).decode("utf-8", "replace") not in _TRANSCRIPT_TYPES:
                        continue
                    obj = decode_line(raw) if raw is not None and raw.strip() else None
                    if isinstance(obj, dict):
                        if not _sub_agent(obj) and obj["type"] in _TRANSCRIPT_TYPES:
                            out.append(obj)
                    elif raw is None or raw.strip():
                        skipped += 1
            except OSError as exc:
                log.warning("copilot: cannot read %s: %s", folder / EVENTS, exc)
        if skipped:
            log.debug("copilot: %s: %d malformed line(s) skipped", folder / EVENTS, skipped)
        return out

    def _event_messages(self, sid: str, folder: Path) -> list[Message]:
        lines = self._root_lines(folder)
        failed: set[str] = set()
        requested: set[str] = set()
        reasoning: set[str] = set()
        for obj in lines:
            with contextlib.suppress(Exception):  # an odd line is skipped below
                _index_tools(obj, failed, requested, reasoning)
        out: list[Message] = []
        skipped = 0
        for obj in lines:
            try:
                typ = obj["type"]
                data = as_dict(obj.get("data"))
                at = _ms(obj.get("timestamp"))
                line_id = text_or_none(obj.get("id")) or f"line-{len(out)}"
                mid = text_or_none(data.get("messageId")) or line_id
                if typ == "session.compaction_complete" and data.get("success") is not False:
                    # Without a readable summary nothing is cut (as with one still running).
                    summary = self._compaction_summary(folder, data)
                    if summary:
                        out = [
                            make_message(line_id, sid, "assistant", [f"Assistant: {summary}"], at)
                        ]
                elif typ == "session.context_cleared":
                    out = []
                elif typ == "user.message":
                    msg = _user_message(mid, sid, data, at)
                    if msg is not None:
                        out.append(msg)
                elif typ == "assistant.message":
                    msg = _assistant_message(mid, sid, data, at, failed)
                    if msg is not None:
                        out.append(msg)
                elif typ == "tool.execution_start" and data.get("toolCallId") not in requested:
                    # a tool the user ran, or one whose request line is missing
                    name = text_or_none(data.get("toolName")) or "tool"
                    args = data.get("arguments")
                    failed_here = data.get("toolCallId") in failed
                    out.append(
                        make_message(
                            line_id,
                            sid,
                            "assistant",
                            [_tool_line(name, args, failed_here)],
                            at,
                            tool_files(name, args),
                            [c for c in [tool_command(name, args)] if c],
                            [] if failed_here else tool_touches(name, args),
                        )
                    )
                elif typ == "assistant.reasoning":
                    text = data.get("content")
                    if isinstance(text, str) and text.strip() and text.strip() not in reasoning:
                        rid = text_or_none(data.get("reasoningId")) or line_id
                        line = f"Assistant: Reasoning: {text.strip()}"
                        out.append(make_message(rid, sid, "assistant", [line], at))
                elif typ == "session.error":
                    detail = (
                        text_or_none(data.get("message"))
                        or text_or_none(data.get("errorType"))
                        or "error"
                    )
                    line = f"Assistant: Error: {summary_line(detail)}"
                    out.append(make_message(line_id, sid, "assistant", [line], at))
            except Exception:  # one odd line costs only itself, not the transcript
                skipped += 1
        if skipped:
            self._skips.skip(AGENT, "unreadable transcript line(s)", str(folder / EVENTS), skipped)
        return out

    def _compaction_summary(self, folder: Path, data: Mapping[str, Any]) -> str:
        """The compaction's summary: ``summaryContent``, else its checkpoint file (looked
        up by name in this session's ``checkpoints/``: the recorded path may be from
        another machine or home)."""
        summary = data.get("summaryContent")
        if isinstance(summary, str) and summary.strip():
            return summary.strip()
        recorded = text_or_none(data.get("checkpointPath"))
        if recorded:
            name = recorded.replace("\\", "/").rsplit("/", 1)[-1]
            if name and name not in (".", ".."):
                raw = read_small(folder / "checkpoints" / name, DOC_FILE_BYTES)
                if raw is not None:
                    return raw.decode("utf-8", errors="replace").strip()
        return ""


def _index_tools(
    obj: Mapping[str, Any], failed: set[str], requested: set[str], reasoning: set[str]
) -> None:
    """Note a line's failed tool calls, requested tool calls and reasoning text."""
    data = as_dict(obj.get("data"))
    call = text_or_none(data.get("toolCallId"))
    if obj["type"] == "tool.execution_complete" and data.get("success") is False and call:
        failed.add(call)
    elif obj["type"] == "assistant.message":
        for req in data.get("toolRequests") or []:
            if isinstance(req, dict) and text_or_none(req.get("toolCallId")):
                requested.add(req["toolCallId"])
        if isinstance(data.get("reasoningText"), str):
            reasoning.add(data["reasoningText"].strip())


def _mergeable(ev: LifecycleEvent) -> bool:
    return ev.kind == "activity" and ev.detail != "resume"


def _user_message(mid: str, sid: str, data: Mapping[str, Any], at: int) -> Message | None:
    """A prompt as typed; autopilot continuations and hidden skill injections are not the
    user speaking."""
    content = data.get("content")
    if not isinstance(content, str) or not content.strip():
        return None
    if data.get("isAutopilotContinuation") is True:
        return None
    source = data.get("source")
    if isinstance(source, str) and source.startswith("skill"):
        return None
    files = [
        a["path"]
        for a in data.get("attachments") or []
        if isinstance(a, dict) and isinstance(a.get("path"), str) and a["path"]
    ]
    touches = [t for t in (file_touch(f, "attach") for f in files) if t]
    return make_message(mid, sid, "user", [f"User: {content.strip()}"], at, files, (), touches)


def _assistant_message(
    mid: str, sid: str, data: Mapping[str, Any], at: int, failed: set[str]
) -> Message | None:
    lines: list[str] = []
    files: list[str] = []
    commands: list[str] = []
    touches: list[FileTouch] = []
    reasoning = data.get("reasoningText")
    if isinstance(reasoning, str) and reasoning.strip():
        lines.append(f"Assistant: Reasoning: {reasoning.strip()}")
    content = data.get("content")
    if isinstance(content, str) and content.strip():
        lines.append(f"Assistant: {content.strip()}")
    for req in data.get("toolRequests") or []:
        if not isinstance(req, dict):
            continue
        name = text_or_none(req.get("name")) or "tool"
        args = req.get("arguments")
        if isinstance(args, str) and args.lstrip().startswith("{"):
            with contextlib.suppress(ValueError, RecursionError):
                args = json.loads(args)
        failed_here = req.get("toolCallId") in failed
        lines.append(_tool_line(name, args, failed_here))
        files.extend(tool_files(name, args))
        if not failed_here:  # a failed call touched nothing
            touches.extend(tool_touches(name, args))
        command = tool_command(name, args)
        if command:
            commands.append(command)
    if not lines:
        return None
    return make_message(mid, sid, "assistant", lines, at, files, commands, touches)
