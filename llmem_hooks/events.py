"""The small typed objects that flow from adapters to the coordinator.

Adapters read an agent's session store (read-only) and report what they saw as
`LifecycleEvent`s; the sidecar turns them into hook calls (created / idle / compacting /
ending). Messages are normalized into `Message`s so the extractor and the resume pack
never see an agent's storage format.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

EventKind = Literal["created", "activity", "turn_done", "compacting", "ended"]
EVENT_KINDS: tuple[str, ...] = ("created", "activity", "turn_done", "compacting", "ended")


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


@dataclass(frozen=True)
class Message:
    """One message of a transcript, normalized.

    ``text`` is already in transcript form (``User: ...`` / ``Assistant: ...`` lines,
    ``Reasoning:``, ``Tool: <name>``, ``Patch``). ``files`` and ``commands`` are what the
    message's tool calls touched and ran, for the resume pack.
    """

    id: str
    session_id: str
    role: Literal["user", "assistant"]
    text: str
    created_ms: int = 0
    files: tuple[str, ...] = field(default_factory=tuple)
    commands: tuple[str, ...] = field(default_factory=tuple)
