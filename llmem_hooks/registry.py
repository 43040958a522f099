"""Process-wide registries: memory types and session hooks (adapters: `llmem_hooks.adapters`).

Memory types are open-ended: the eight defaults cover most needs and a harness can add
its own with `register_memory_type`. Types already present in a database are accepted
when that database is opened, so data written by one process is readable by another.

Session hooks: `register_session_hook` from Python, or, for the processes we start
(``llmem-hooks run``, ``llmem-hooks hook copilot ...``), an installed package's entry
point in the group `SESSION_HOOK_ENTRY_POINTS`, loaded by `load_session_hook_entry_points`
(``[project.entry-points."llmem_hooks.session_hooks"] created = "mypkg.hooks:on_created"``:
the entry point's name is the event, its object the hook).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from typing import Any

from .errors import ValidationError

log = logging.getLogger(__name__)

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
SESSION_HOOK_ENTRY_POINTS = "llmem_hooks.session_hooks"
_session_hooks: dict[str, Callable[[str], Any]] = {}
_entry_points_loaded = False


def register_session_hook(event: str, fn: Callable[[str], Any]) -> None:
    """Call ``fn(session_id)`` when ``SessionEventManager.emit(event, ...)`` runs, after
    the coordinator's own hook (see `SessionEventManager`). One hook per event type."""
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


def load_session_hook_entry_points(*, reload: bool = False) -> list[str]:
    """Register the session hooks installed packages declare (once per process, unless
    ``reload``). Returns the events that got one. An entry point that cannot be loaded,
    names no event or finds its event taken is logged and skipped: a broken plugin never
    stops the sidecar or the Copilot hook."""
    global _entry_points_loaded
    with _lock:
        if _entry_points_loaded and not reload:
            return []
        _entry_points_loaded = True
    from importlib.metadata import entry_points

    loaded: list[str] = []
    try:
        found = list(entry_points(group=SESSION_HOOK_ENTRY_POINTS))
    except Exception as exc:  # a broken distribution's metadata
        log.warning("session hook entry points cannot be listed: %s", exc)
        return loaded
    for ep in found:
        try:
            register_session_hook(ep.name, ep.load())
        except Exception as exc:
            log.warning("session hook entry point %s = %s skipped: %s", ep.name, ep.value, exc)
            continue
        loaded.append(ep.name)
    return loaded
