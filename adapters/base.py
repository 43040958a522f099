"""SessionAdapter: the read-only view of one agent's session store, and the registry."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from llmem_hooks.events import LifecycleEvent, Message, SessionInfo


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
    def from_config(cls, section: Mapping[str, Any]) -> SessionAdapter:
        """An adapter configured from its config.yaml section (``opencode:``, ...)."""
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

    def watch_paths(self) -> list[str]:
        """Files or folders whose changes mean new data (for the watchdog observer)."""
        return []

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections and file handles."""

    def __enter__(self) -> SessionAdapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_ADAPTERS: dict[str, type[SessionAdapter]] = {}


def register_session_adapter(name: str, cls: type[Any]) -> None:
    """Make an adapter class available under ``name`` (e.g. "opencode")."""
    if not isinstance(cls, type) or not issubclass(cls, SessionAdapter):
        raise TypeError(f"{cls!r} is not a SessionAdapter subclass")
    if name in _ADAPTERS and _ADAPTERS[name] is not cls:
        raise ValueError(f"a session adapter named {name!r} is already registered")
    _ADAPTERS[name] = cls


def get_adapter_class(name: str) -> type[SessionAdapter]:
    try:
        return _ADAPTERS[name]
    except KeyError:
        raise KeyError(f"no session adapter named {name!r}") from None


def registered_adapters() -> dict[str, type[SessionAdapter]]:
    return dict(_ADAPTERS)
