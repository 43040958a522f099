"""SessionAdapter: the declared interface of an agent's session store, and its registry.

`SessionAdapter` is an ABC, not a `typing.Protocol`: every adapter shares real behaviour
(transcript and chunk building from `get_messages`, `existing`, the context manager,
the cursor key), registration checks ``issubclass`` at run time, and a missing method
fails when the class is instantiated rather than in the middle of a sidecar pass. The
sidecar, the hooks, the CLI and the doctor call only what is declared here.

The small helpers at the end are shared by the adapters (they read agents' JSON the same
defensive way), so each is written once.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from llmem_hooks.config import Config
from llmem_hooks.events import (
    MAX_TOUCH_TEXT,
    FileTouch,
    LifecycleEvent,
    Message,
    SessionInfo,
    TouchKind,
)
from llmem_hooks.registry import Registry
from llmem_hooks.text.lines import clip

SUMMARY_CHARS = 200  # one-line tool argument summaries in transcripts
COMMAND_CHARS = 2000  # commands kept in Message.commands
PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.MULTILINE)


class SessionAdapter(ABC):
    """Reads an agent's sessions; never writes to the agent's store.

    Besides the LLMem reference's methods (list_sessions, get_session_transcript,
    get_session_chunks, session_exists, close), an adapter can be tailed: `poll(cursor)`
    returns the lifecycle events since an opaque cursor string, which the caller
    persists (in the memory DB) and passes back.

    The agent's store is untrusted input. An adapter never lets one record stall it: a
    line or row it cannot read (see `llmem_hooks.events.BadRecord`) is skipped with a
    rate-limited log line (`SkipLog`) and the cursor moves past it. It never reports a
    session id that fails `llmem_hooks.events.session_id_problem` (ids become file
    names), and it creates nothing in the agent's folders.
    """

    agent: str = ""

    @classmethod
    def from_config(cls, config: Config | Mapping[str, Any]) -> SessionAdapter:
        """An adapter configured from the whole config (typed or the dict), of which it
        reads its own section (``opencode:``, ...); see `llmem_hooks.config`."""
        return cls()

    @abstractmethod
    def list_sessions(self, limit: int = 50) -> list[SessionInfo]: ...

    @abstractmethod
    def get_session(self, session_id: str) -> SessionInfo | None: ...

    @abstractmethod
    def get_messages(self, session_id: str, after_id: str | None = None) -> list[Message]:
        """The session's messages in order (after the last compaction only; only those
        after message ``after_id`` when given), sub-agent messages excluded."""

    def get_session_transcript(self, session_id: str) -> str | None:
        msgs = self.get_messages(session_id)
        return "\n".join(m.text for m in msgs) if msgs else None

    def get_session_chunks(self, session_id: str, max_chars: int = 8000) -> list[str]:
        chunks: list[str] = []
        cur = ""
        for m in self.get_messages(session_id):
            if cur and len(cur) + len(m.text) + 1 > max_chars:
                chunks.append(cur)
                cur = ""
            cur = f"{cur}\n{m.text}" if cur else m.text
        if cur:
            chunks.append(cur)
        return chunks

    @abstractmethod
    def session_exists(self, session_id: str) -> bool: ...

    @abstractmethod
    def poll(self, cursor: str | None) -> tuple[list[LifecycleEvent], str | None]:
        """Events since ``cursor`` (None: from the start) and the new cursor."""

    def existing(self, session_ids: Sequence[str]) -> set[str]:
        """Which of these sessions still exist (deletions leave no trace to tail)."""
        return {s for s in session_ids if self.session_exists(s)}

    def available(self) -> bool:
        """Whether the agent's store exists (the agent has run at least once). While it
        does not, missing sessions must not be taken for deleted ones."""
        return True

    def location(self) -> str:
        """Where this adapter reads (a database file, a folder); "" when it has no place."""
        return ""

    def cursor_key(self, name: str | None = None) -> str:
        """The key its `poll` cursor is saved under: the registered ``name`` (default: the
        agent) and the `location`, so pointing the adapter elsewhere starts afresh."""
        return f"{name or self.agent}:{self.location()}"

    def watch_paths(self, sessions: Collection[str] = ()) -> list[str]:
        """Files or folders whose changes mean new data, for the sidecar's one watcher
        (not recursive): the store's own folder first (a new session shows there), then,
        for an adapter with a folder per session, the folders of ``sessions`` (those the
        sidecar still follows). An ended session is not watched: its folder would cost a
        watch for nothing; a resume of it is seen by the safety poll (docs/sidecar.md)."""
        return []

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections and file handles."""

    def __enter__(self) -> SessionAdapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _adapter_class(kind: str, cls: object) -> type[SessionAdapter]:
    if not isinstance(cls, type) or not issubclass(cls, SessionAdapter):
        raise TypeError(f"{cls!r} is not a SessionAdapter subclass")
    return cls


ADAPTER_ENTRY_POINTS = "llmem_hooks.adapters"
# One class per agent name; an installed package adds one with an entry point in
# ``llmem_hooks.adapters`` (its name the agent, its object the class).
adapters: Registry[type[SessionAdapter]] = Registry(
    "session adapter", ADAPTER_ENTRY_POINTS, check=_adapter_class, several=False
)


def register_session_adapter(name: str, cls: type[Any]) -> None:
    """Make an adapter class available under ``name`` (e.g. "opencode")."""
    adapters.register(name, cls)


def get_adapter_class(name: str) -> type[SessionAdapter]:
    found = adapters.get(name)
    if not found:
        raise KeyError(f"no session adapter named {name!r}")
    return found[0]


def registered_adapters() -> dict[str, type[SessionAdapter]]:
    """Every adapter class by name: the built-in ones and installed packages' ones."""
    return {name: classes[0] for name, classes in adapters.all().items()}


# -- helpers the adapters share ----------------------------------------------------------------


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` if it is a dict, else an empty one (agents' JSON is untrusted)."""
    return value if isinstance(value, dict) else {}


def text_or_none(value: Any) -> str | None:
    """An optional text field: None unless a non-empty string."""
    return value if isinstance(value, str) and value else None


def summary_line(text: str) -> str:
    """A tool's argument or an error on one line, at most `SUMMARY_CHARS` (cut with "...")."""
    return clip(text, SUMMARY_CHARS)


def make_message(
    mid: str,
    session_id: str,
    role: str,
    lines: Iterable[str],
    created_ms: int,
    files: Iterable[str] | None = None,
    commands: Iterable[str] | None = None,
    touches: Iterable[FileTouch] | None = None,
) -> Message:
    """A `Message` from transcript lines; files, commands and touches deduplicated in
    order."""
    return Message(
        id=mid,
        session_id=session_id,
        role="user" if role == "user" else "assistant",
        text="\n".join(lines),
        created_ms=created_ms,
        files=tuple(dict.fromkeys(files or ())),
        commands=tuple(dict.fromkeys(commands or ())),
        touches=tuple(dict.fromkeys(touches or ())),
    )


def _line_number(value: Any) -> int | None:
    """A 1-based line number from an agent's JSON (None: absent, not a whole number, < 1)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        return None
    return int(value) if 1 <= value <= 10_000_000 else None


def file_touch(
    path: Any,
    kind: TouchKind = "read",
    start: Any = None,
    end: Any = None,
    text: Any = None,
) -> FileTouch | None:
    """A `FileTouch` from a tool call's untrusted arguments (None: no usable path). A range
    that is not two sensible line numbers is dropped (``end`` None: to the end of the
    file); ``text`` is kept only when it is a non-blank string of at most
    `MAX_TOUCH_TEXT` characters."""
    if not isinstance(path, str) or not path.strip() or len(path) > 4096:
        return None
    first, last = _line_number(start), _line_number(end)
    if first is None or (end is not None and (last is None or last < first)):
        first = last = None
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_TOUCH_TEXT:
        text = None
    return FileTouch(path.strip(), kind, first, last, text)


def patch_touches(patch: str) -> list[FileTouch]:
    """The files of an ``*** Begin Patch`` text: one edit touch per hunk that adds lines
    (its added lines: what the file holds afterwards, to be located later), one without
    text for a file with none (a deletion); an added file is a write (no text kept: its
    lines are all of it, not a passage)."""
    out: list[FileTouch] = []
    files: list[tuple[str, TouchKind, list[str]]] = []  # (path, kind, hunks' added texts)
    added: list[str] = []

    def end_hunk() -> None:
        if files and added and files[-1][1] == "edit":
            files[-1][2].append("\n".join(added))
        added.clear()

    for line in patch.splitlines():
        header = PATCH_FILE.match(line)
        if header or line.startswith(("@@", "*** End Patch", "*** Move to: ")):
            end_hunk()
            if header:
                kind: TouchKind = "write" if line.startswith("*** Add File") else "edit"
                files.append((header.group(1).strip(), kind, []))
        elif line.startswith("+"):
            added.append(line[1:])
    end_hunk()
    for path, kind, texts in files:
        found = [file_touch(path, kind, text=t) for t in texts] or [file_touch(path, kind)]
        out.extend(t for t in found if t)
    return out
