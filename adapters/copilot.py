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
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import yaml

from llmem_hooks.events import (
    BadRecord,
    EventKind,
    LifecycleEvent,
    Message,
    SessionInfo,
    SkipLog,
    lenient_ms,
    load_json_object,
    record_ms,
    session_id_problem,
)
from llmem_hooks.paths import copilot_home

from .base import SessionAdapter

log = logging.getLogger(__name__)

AGENT = "copilot"
EVENTS = "events.jsonl"
WORKSPACE = "workspace.yaml"
READ_CHUNK = 256 * 1024
MAX_LINE_BYTES = 1 << 20  # poll: longer lines are skipped (model.* lines carry whole requests)
MESSAGE_LINE_BYTES = 8 << 20  # transcripts: a long answer or file write is still worth reading
POLL_BYTES = 64 << 20  # per poll; the sidecar polls again while events keep coming
WATCH_MAX = 512  # session folders watched (most recently changed first)
SUMMARY_CHARS = 200  # one-line tool argument summaries in transcripts
COMMAND_CHARS = 2000  # commands kept in Message.commands
SMALL_FILE_BYTES = 256 * 1024  # workspace.yaml
DOC_FILE_BYTES = 8 << 20  # checkpoint summaries, --share transcripts
TAIL_BYTES = 32  # bytes before the cursor offset whose checksum detects in-place rewrites
CURSOR_VERSION = 1

# Per-session cursor flags.
F_CREATED = 1  # ``created`` was reported (never again, even after a rewrite)
F_OPEN = 2  # a start/resume with no shutdown after it: a process may still run it
F_CRASHED = 4  # ``ended crashed`` was reported for the current run
F_REPLAY = 8  # re-reading a rewritten file: lines not newer than ``mark`` were reported

_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_LOCK_NAME = re.compile(r"^inuse\.(\d{1,10})\.lock$")
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.MULTILINE)
_SHELL_TOOLS = frozenset({"bash", "shell", "powershell", "pwsh", "sh", "zsh"})
_SEARCH_TOOLS = frozenset({"grep", "glob", "rg", "search", "find", "ls"})  # path = where to look
_FILE_KEYS = ("path", "file_path", "filePath", "filename", "file")
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
_SUMMARY_KEYS = (
    "command",
    "pattern",
    "path",
    "file_path",
    "filePath",
    "url",
    "query",
    "description",
    "skill",
    "prompt",
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


def valid_session_id(session_id: Any) -> bool:
    """A plausible session folder name (Copilot uses UUIDs); never a path, never ``..``
    or a control character (the rule of `llmem_hooks.events.session_id_problem`)."""
    return (
        isinstance(session_id, str)
        and _SESSION_ID.fullmatch(session_id) is not None
        and session_id_problem(session_id) is None
    )


# -- small helpers -------------------------------------------------------------------------


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _scalar(value: Any) -> str | None:
    """A YAML scalar as text (``name: 123`` loads as an int)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str | int | float):
        return str(value).strip() or None
    return None


def _one_line(text: str, limit: int = SUMMARY_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3].rstrip() + "..."


def _ms(value: Any) -> int:
    """Epoch ms of an ISO-8601 string or datetime (naive = UTC) or an epoch-ms number;
    0 when absent or unreadable (for optional times; a line's own timestamp is checked
    strictly in `_line`)."""
    return lenient_ms(value)


def _open_regular(path: Path) -> BinaryIO | None:
    """``path`` opened read-only if it is a regular file (not a symlink, FIFO or device,
    which could point elsewhere or block); None otherwise."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        return os.fdopen(fd, "rb", buffering=0)
    except OSError:
        os.close(fd)
        return None


def _read_small(path: Path, cap: int) -> bytes | None:
    """A regular file's bytes, None if missing, irregular or larger than ``cap``."""
    f = _open_regular(path)
    if f is None:
        return None
    with f:
        data = b""
        try:
            while len(data) <= cap:
                chunk = f.read(min(READ_CHUNK, cap + 1 - len(data)))
                if not chunk:
                    break
                data += chunk
        except OSError:
            return None
    return None if len(data) > cap else data


def _lines(f: BinaryIO, offset: int, max_line: int) -> Iterator[tuple[int, bytes | None]]:
    """``(end offset, line)`` for each complete line from ``offset`` (``line`` without its
    newline; None when longer than ``max_line``, which is skipped without being held in
    memory). A last line without its newline is not yielded: it is still being written."""
    f.seek(offset)
    buf = b""
    pos = offset  # file offset of buf[0]
    skipping = False
    while True:
        chunk = f.read(READ_CHUNK)
        if not chunk:
            return
        buf += chunk
        start = 0
        while (nl := buf.find(b"\n", start)) >= 0:
            too_long = skipping or nl - start > max_line
            yield pos + nl + 1, None if too_long else buf[start:nl]
            skipping = False
            start = nl + 1
        buf = buf[start:]
        pos += start
        if len(buf) > max_line:
            skipping = True
            pos += len(buf)
            buf = b""


def _decode(raw: bytes) -> dict[str, Any] | str:
    """The line's event object, or why it is not one (bounded size and depth, no
    NaN/Infinity: see `load_json_object`)."""
    try:
        obj = load_json_object(raw, MESSAGE_LINE_BYTES)
    except BadRecord as exc:
        return str(exc)
    if not isinstance(obj.get("type"), str) or not obj["type"]:
        return "no event type"
    return obj


def _sub_agent(obj: Mapping[str, Any]) -> str | None:
    return _str(obj.get("agentId"))


def _crc_before(f: BinaryIO, offset: int) -> int:
    """Checksum of the bytes just before ``offset``: unchanged unless the file was
    rewritten in place (a growing file never changes what lies before the offset)."""
    if offset <= 0:
        return 0
    start = max(0, offset - TAIL_BYTES)
    try:
        f.seek(start)
        return zlib.crc32(f.read(offset - start))
    except OSError:
        return -1


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


def _patch_files(text: str) -> list[str]:
    return [f.strip() for f in _PATCH_FILE.findall(text) if f.strip()]


def tool_summary(name: str, args: Any) -> str:
    """A one-line description of a tool call's arguments (command, path, pattern, ...)."""
    if isinstance(args, str):
        files = _patch_files(args)
        return _one_line(", ".join(files) if files else args)
    args = _dict(args)
    for key in _SUMMARY_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return _one_line(value)
    for value in args.values():  # e.g. apply_patch {"input": "*** Begin Patch ..."}
        if isinstance(value, str) and "*** Begin Patch" in value:
            return _one_line(", ".join(_patch_files(value)))
    return ""


def tool_files(name: str, args: Any) -> list[str]:
    """Files a tool call reads or writes: path-like arguments and patch headers."""
    if isinstance(args, str):
        return _patch_files(args)
    args = _dict(args)
    out: list[str] = []
    if name not in _SEARCH_TOOLS:
        for key in _FILE_KEYS:
            value = args.get(key)
            if isinstance(value, str) and value.strip():
                out.append(value.strip())
        paths = args.get("paths")
        if isinstance(paths, list):
            out.extend(p.strip() for p in paths if isinstance(p, str) and p.strip())
    for value in args.values():
        if isinstance(value, str) and "*** Begin Patch" in value:
            out.extend(_patch_files(value))
    return out


def tool_command(name: str, args: Any) -> str | None:
    """The command line of a shell tool call."""
    command = _dict(args).get("command") if name in _SHELL_TOOLS else None
    if isinstance(command, str) and command.strip():
        return command.strip()[:COMMAND_CHARS]
    return None


def _tool_line(name: str, args: Any, failed: bool) -> str:
    summary = tool_summary(name, args)
    line = f"Assistant: Tool: {name}" + (f": {summary}" if summary else "")
    return line + (" [error]" if failed else "")


def _message(
    mid: str,
    session_id: str,
    role: str,
    lines: list[str],
    created_ms: int,
    files: list[str] | None = None,
    commands: list[str] | None = None,
) -> Message:
    return Message(
        id=mid,
        session_id=session_id,
        role="user" if role == "user" else "assistant",
        text="\n".join(lines),
        created_ms=created_ms,
        files=tuple(dict.fromkeys(files or ())),
        commands=tuple(dict.fromkeys(commands or ())),
    )


def _after(msgs: list[Message], after_id: str | None) -> list[Message]:
    if after_id is None:
        return msgs
    ids = [m.id for m in msgs]
    return msgs[ids.index(after_id) + 1 :] if after_id in ids else msgs


# -- --share markdown ----------------------------------------------------------------------

_SHARE_SUB = re.compile(r"^<sub>(.*?)</sub>\s*$")
_SHARE_HEADING = re.compile(r"^###\s+(.*?)\s*$")
_SHARE_ICON = re.compile(r"^(?P<icon>[^\w`]*)(?P<label>.*)$")
_SHARE_SESSION = re.compile(r"Session ID:\**\s*`?([A-Za-z0-9][A-Za-z0-9._-]*)`?")
_SHARE_FILE = re.compile(r"^copilot-session-(.+)\.md$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_WIN_PATH = re.compile(r"^[A-Za-z]:[\\/]")


def _closes(line: str, fence: str) -> bool:
    """Whether ``line`` closes a code block opened with ``fence``."""
    text = line.strip()
    return len(text) >= len(fence) and set(text) == {fence[0]}


def _share_entries(lines: list[str]) -> list[tuple[str, list[str]]]:
    """(heading, body lines) of each ``<sub>time</sub>`` + ``### heading`` entry, with
    fenced blocks kept intact (a ``<sub>`` or ``---`` inside code is content)."""
    entries: list[tuple[str, list[str]]] = []
    fence: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if fence is None and _SHARE_SUB.match(line):
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            heading = _SHARE_HEADING.match(lines[j]) if j < len(lines) else None
            if heading:
                entries.append((heading.group(1), []))
                i = j + 1
                continue
        if entries:
            entries[-1][1].append(line)
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None and _closes(line, fence):
            fence = None
        i += 1
    for _, body in entries:
        while body and (not body[-1].strip() or body[-1].strip() == "---"):
            body.pop()
        while body and not body[0].strip():
            body.pop(0)
    return entries


def _share_tool(name: str, body: list[str]) -> tuple[str, Any, str | None, str | None]:
    """(title, arguments, ``$`` command, path line) of a tool entry's body."""
    title = ""
    args: Any = None
    command: str | None = None
    path: str | None = None
    fence: str | None = None
    block: list[str] = []
    in_args = False
    details = 0
    for line in body:
        stripped = line.strip()
        m = _FENCE.match(line)
        if fence is not None:
            if _closes(line, fence):
                if in_args:
                    with contextlib.suppress(ValueError, RecursionError):
                        args = json.loads("\n".join(block))
                fence, block, in_args = None, [], False
            else:
                block.append(line)
            continue
        if m:
            fence = m.group(1)
            continue
        if stripped.startswith("<details"):
            details += 1
        elif stripped.startswith("</details"):
            details = max(0, details - 1)
        elif stripped.startswith("<summary>"):
            in_args = "Arguments" in stripped
        elif not title and stripped.startswith("**") and stripped.endswith("**"):
            title = stripped.strip("*").strip()
        elif command is None and stripped.startswith("$ "):
            command = stripped[2:].strip()
        elif (
            path is None
            and not details
            and (stripped.startswith(("/", "~")) or _WIN_PATH.match(stripped))
        ):
            path = stripped
    return title, args, command, path


def read_share_transcript(path: str | Path, session_id: str | None = None) -> list[Message]:
    """Messages of a ``--share`` / ``/share`` markdown export (``copilot-session-<id>.md``).

    The fallback for a session whose events.jsonl holds no messages. Entries are
    ``<sub>elapsed</sub>`` + ``### User`` / ``### Copilot`` / ``### `tool` `` (optionally
    with an icon; ❌ marks a failed tool) separated by ``---``; info entries are skipped.
    Ids are ``share-<n>``; times are unknown (the export has only local-time text).
    """
    p = Path(path)
    raw = _read_small(p, DOC_FILE_BYTES)
    if raw is None:
        return []
    text = raw.decode("utf-8", errors="replace")
    if session_id is None:
        m = _SHARE_SESSION.search(text) or _SHARE_FILE.match(p.name)
        session_id = m.group(1) if m else ""
    out: list[Message] = []
    for n, (heading, body) in enumerate(_share_entries(text.splitlines()), start=1):
        parts = _SHARE_ICON.match(heading)
        icon, label = (parts.group("icon"), parts.group("label").strip()) if parts else ("", "")
        mid = f"share-{n}"
        content = "\n".join(body).strip()
        if label.lower() == "user" and content:
            out.append(_message(mid, session_id, "user", [f"User: {content}"], 0))
        elif label.lower() in ("copilot", "assistant") and content:
            out.append(_message(mid, session_id, "assistant", [f"Assistant: {content}"], 0))
        elif label.lower() == "error" and content:
            line = f"Assistant: Error: {_one_line(content)}"
            out.append(_message(mid, session_id, "assistant", [line], 0))
        elif len(label) > 2 and label.startswith("`") and label.endswith("`"):
            name = label.strip("`").strip() or "tool"
            title, args, command, where = _share_tool(name, body)
            summary = _one_line(command) if command else tool_summary(name, args)
            summary = summary or _one_line(where or title)
            line = f"Assistant: Tool: {name}" + (f": {summary}" if summary else "")
            line += " [error]" if "❌" in icon else ""
            files = tool_files(name, args)
            if where and name not in _SEARCH_TOOLS and name not in _SHELL_TOOLS:
                files.append(where)
            commands: list[str] = []
            if name in _SHELL_TOOLS:
                commands = [c for c in (tool_command(name, args), command) if c]
            out.append(_message(mid, session_id, "assistant", [line], 0, files, commands))
    return out


# -- cursor --------------------------------------------------------------------------------


@dataclass
class _Tail:
    """Where reading one session's events.jsonl stands (one cursor entry)."""

    offset: int = 0  # bytes consumed: always the end of a complete line
    ino: int = 0  # the file's inode at that offset (a new inode = a rewritten file)
    flags: int = 0
    mark: int = 0  # newest line time (ms) consumed: replayed lines up to it stay quiet
    crc: int = 0  # checksum of the TAIL_BYTES before offset

    def dump(self) -> list[int]:
        return [self.offset, self.ino, self.flags, self.mark, self.crc]

    @classmethod
    def load(cls, value: Any) -> _Tail | None:
        if (
            not isinstance(value, list)
            or len(value) != 5
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
            or not all(-1 <= v < 1 << 63 for v in value)
        ):
            return None
        return cls(*value)


def parse_cursor(cursor: str | None) -> dict[str, _Tail]:
    """``{"v": 1, "s": {"<session id>": [offset, inode, flags, mark_ms, crc], ...}}``;
    an unreadable cursor (logged) reads every session again from the start."""
    if not cursor:
        return {}
    try:
        obj = json.loads(cursor)
    except (ValueError, RecursionError):
        obj = None
    if not isinstance(obj, dict) or obj.get("v") != CURSOR_VERSION:
        log.warning("copilot: unreadable cursor; reading every session from the start")
        return {}
    out: dict[str, _Tail] = {}
    for sid, value in _dict(obj.get("s")).items():
        tail = _Tail.load(value)
        if valid_session_id(sid) and tail is not None:
            out[sid] = tail
    return out


def dump_cursor(tails: Mapping[str, _Tail]) -> str:
    entries = {sid: tails[sid].dump() for sid in sorted(tails)}
    return json.dumps({"v": CURSOR_VERSION, "s": entries}, separators=(",", ":"))


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
        self._skips = SkipLog(log)

    read_share_transcript = staticmethod(read_share_transcript)

    def __repr__(self) -> str:
        return f"CopilotAdapter({str(self.root)!r})"

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> CopilotAdapter:
        return cls(section.get("home"))

    @property
    def home(self) -> Path:
        return self.root

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
                out[entry.name] = Path(entry.path)
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

    def watch_paths(self) -> list[str]:
        """``session-state`` (new sessions) and the session folders (the watcher is not
        recursive: appends to events.jsonl and lock files show up in the folder). The
        sidecar asks again each pass, so new folders are added as they appear."""
        dirs = self._session_dirs() or {}
        recent: list[tuple[int, str]] = []
        for folder in dirs.values():
            try:
                recent.append((os.lstat(folder).st_mtime_ns, str(folder)))
            except OSError:
                continue
        recent.sort(reverse=True)
        return [str(self.sessions_dir), *sorted(p for _, p in recent[:WATCH_MAX])]

    def _workspace(self, folder: Path) -> dict[str, Any]:
        """workspace.yaml as a dict; {} when missing, too large or not YAML."""
        raw = _read_small(folder / WORKSPACE, SMALL_FILE_BYTES)
        if raw is None:
            return {}
        try:
            data = yaml.safe_load(raw.decode("utf-8", errors="replace"))
        except (yaml.YAMLError, RecursionError, ValueError):
            log.debug("copilot: %s is not valid YAML", folder / WORKSPACE)
            return {}
        return _dict(data)

    def _first_event(self, folder: Path) -> dict[str, Any] | None:
        f = _open_regular(folder / EVENTS)
        if f is None:
            return None
        with f:
            try:
                for _end, raw in _lines(f, 0, self.max_line_bytes):
                    obj = _decode(raw) if raw is not None and raw.strip() else None
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
                start, start_ms = _dict(first.get("data")), _ms(first.get("timestamp"))
        start = start or {}
        ws = self._workspace(folder)
        st = self._events_stat(folder)
        created = _ms(start.get("startTime")) or _ms(ws.get("created_at")) or start_ms
        updated = int(st.st_mtime_ns // 1_000_000) if st else 0
        return SessionInfo(
            id=session_id,
            agent=AGENT,
            directory=_str(_dict(start.get("context")).get("cwd")) or _str(ws.get("cwd")),
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
        tails = parse_cursor(cursor)
        dirs = self._session_dirs()
        if dirs is None:
            return [], cursor
        events: list[LifecycleEvent] = []
        budget = self.poll_bytes
        out: dict[str, _Tail] = {}
        for sid in sorted(dirs):
            tail = dataclasses.replace(tails[sid]) if sid in tails else _Tail()
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
        return events, dump_cursor(out)

    def _tail(
        self, sid: str, folder: Path, t: _Tail, out: list[LifecycleEvent], budget: int
    ) -> tuple[int, bool]:
        """Read one session's new lines into ``out``; (bytes consumed, file exists).
        ``t`` and the events move together line by line, so a read error keeps both."""
        path = folder / EVENTS
        f = _open_regular(path)
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
            elif st.st_size > t.offset and t.offset and _crc_before(f, t.offset) != t.crc:
                self._rewound(t, path, "was rewritten")
            t.ino = st.st_ino
            start = t.offset
            eof = True
            try:
                if st.st_size > t.offset:
                    for end, raw in _lines(f, t.offset, self.max_line_bytes):
                        line_start, t.offset = t.offset, end
                        if raw is None:
                            bad.append((line_start, f"longer than {self.max_line_bytes} bytes"))
                        elif raw.strip():
                            obj = _decode(raw)
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
                t.crc = _crc_before(f, t.offset)
            if eof:
                t.flags &= ~F_REPLAY  # whatever is appended after this pass is new
                with contextlib.suppress(OSError):
                    self._check_crash(sid, folder, f, t, st.st_size, evs)
        self._report(path, bad, unknown)
        out.extend(evs)
        return t.offset - start, True

    @staticmethod
    def _rewound(t: _Tail, path: Path, why: str) -> None:
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
        t: _Tail,
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
        t: _Tail,
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
        data = _dict(obj.get("data"))
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
        t: _Tail,
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
        f = _open_regular(folder / EVENTS)
        if f is None:
            return []
        out: list[dict[str, Any]] = []
        skipped = 0
        with f:
            try:
                for _end, raw in _lines(f, 0, MESSAGE_LINE_BYTES):
                    peek = _LEADING_TYPE.match(raw) if raw is not None else None
                    if peek and peek.group(1).decode("utf-8", "replace") not in _TRANSCRIPT_TYPES:
                        continue
                    obj = _decode(raw) if raw is not None and raw.strip() else None
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
                data = _dict(obj.get("data"))
                at = _ms(obj.get("timestamp"))
                line_id = _str(obj.get("id")) or f"line-{len(out)}"
                mid = _str(data.get("messageId")) or line_id
                if typ == "session.compaction_complete" and data.get("success") is not False:
                    # Without a readable summary nothing is cut (as with one still running).
                    summary = self._compaction_summary(folder, data)
                    if summary:
                        out = [_message(line_id, sid, "assistant", [f"Assistant: {summary}"], at)]
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
                    name = _str(data.get("toolName")) or "tool"
                    args = data.get("arguments")
                    failed_here = data.get("toolCallId") in failed
                    out.append(
                        _message(
                            line_id,
                            sid,
                            "assistant",
                            [_tool_line(name, args, failed_here)],
                            at,
                            tool_files(name, args),
                            [c for c in [tool_command(name, args)] if c],
                        )
                    )
                elif typ == "assistant.reasoning":
                    text = data.get("content")
                    if isinstance(text, str) and text.strip() and text.strip() not in reasoning:
                        rid = _str(data.get("reasoningId")) or line_id
                        line = f"Assistant: Reasoning: {text.strip()}"
                        out.append(_message(rid, sid, "assistant", [line], at))
                elif typ == "session.error":
                    detail = _str(data.get("message")) or _str(data.get("errorType")) or "error"
                    line = f"Assistant: Error: {_one_line(detail)}"
                    out.append(_message(line_id, sid, "assistant", [line], at))
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
        recorded = _str(data.get("checkpointPath"))
        if recorded:
            name = recorded.replace("\\", "/").rsplit("/", 1)[-1]
            if name and name not in (".", ".."):
                raw = _read_small(folder / "checkpoints" / name, DOC_FILE_BYTES)
                if raw is not None:
                    return raw.decode("utf-8", errors="replace").strip()
        return ""


def _index_tools(
    obj: Mapping[str, Any], failed: set[str], requested: set[str], reasoning: set[str]
) -> None:
    """Note a line's failed tool calls, requested tool calls and reasoning text."""
    data = _dict(obj.get("data"))
    call = _str(data.get("toolCallId"))
    if obj["type"] == "tool.execution_complete" and data.get("success") is False and call:
        failed.add(call)
    elif obj["type"] == "assistant.message":
        for req in data.get("toolRequests") or []:
            if isinstance(req, dict) and _str(req.get("toolCallId")):
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
    return _message(mid, sid, "user", [f"User: {content.strip()}"], at, files)


def _assistant_message(
    mid: str, sid: str, data: Mapping[str, Any], at: int, failed: set[str]
) -> Message | None:
    lines: list[str] = []
    files: list[str] = []
    commands: list[str] = []
    reasoning = data.get("reasoningText")
    if isinstance(reasoning, str) and reasoning.strip():
        lines.append(f"Assistant: Reasoning: {reasoning.strip()}")
    content = data.get("content")
    if isinstance(content, str) and content.strip():
        lines.append(f"Assistant: {content.strip()}")
    for req in data.get("toolRequests") or []:
        if not isinstance(req, dict):
            continue
        name = _str(req.get("name")) or "tool"
        args = req.get("arguments")
        if isinstance(args, str) and args.lstrip().startswith("{"):
            with contextlib.suppress(ValueError, RecursionError):
                args = json.loads(args)
        lines.append(_tool_line(name, args, req.get("toolCallId") in failed))
        files.extend(tool_files(name, args))
        command = tool_command(name, args)
        if command:
            commands.append(command)
    if not lines:
        return None
    return _message(mid, sid, "assistant", lines, at, files, commands)
