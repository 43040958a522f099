"""Process-wide registries: memory types and session hooks (adapters: `llmem_hooks.adapters`).

Memory types are open-ended: the eight defaults cover most needs and a harness can add
its own with `register_memory_type`. Types already present in a database are accepted
when that database is opened, so data written by one process is readable by another.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

from .errors import ValidationError

DEFAULT_MEMORY_TYPES: tuple[str, ...] = (
    "fact",
    "decision",
    "preference",
    "event",
    "project_state",
    "procedure",
    "conversation",
    "self_assessment",
)
_TYPE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_lock = threading.Lock()
_types: set[str] = set(DEFAULT_MEMORY_TYPES)


def register_memory_type(name: str) -> str:
    """Allow memories of type ``name`` (``^[a-z][a-z0-9_]*$``, at most 64 characters)."""
    if not isinstance(name, str) or len(name) > 64 or not _TYPE_NAME.match(name):
        raise ValidationError(
            f"invalid memory type name {name!r}: use ^[a-z][a-z0-9_]*$, at most 64 characters"
        )
    with _lock:
        _types.add(name)
    return name


def get_registered_types() -> frozenset[str]:
    with _lock:
        return frozenset(_types)


def check_memory_type(name: str) -> str:
    """Return ``name`` if it is a registered type, else raise a ValidationError."""
    if name not in get_registered_types():
        known = ", ".join(sorted(get_registered_types()))
        raise ValidationError(f"unknown memory type {name!r} (known: {known})")
    return name


VALID_SESSION_EVENT_TYPES: tuple[str, ...] = ("created", "idle", "compacting", "ending")
_session_hooks: dict[str, Callable[[str], Any]] = {}


def register_session_hook(event: str, fn: Callable[[str], Any]) -> None:
    """Call ``fn(session_id)`` when ``SessionEventManager.emit(event, ...)`` runs, instead
    of the coordinator's own hook. One hook per event type."""
    if event not in VALID_SESSION_EVENT_TYPES:
        raise ValueError(
            f"invalid session event {event!r} (use {', '.join(VALID_SESSION_EVENT_TYPES)})"
        )
    if not callable(fn):
        raise TypeError("a session hook must be callable")
    with _lock:
        if event in _session_hooks:
            raise ValueError(f"a session hook for {event!r} is already registered")
        _session_hooks[event] = fn


def unregister_session_hook(event: str) -> None:
    with _lock:
        _session_hooks.pop(event, None)


def get_registered_session_hooks() -> dict[str, Callable[[str], Any]]:
    with _lock:
        return dict(_session_hooks)
