"""Process-wide registries: memory types, session hooks, dream hooks (adapters: in adapters/).

Memory types are open-ended: the eight defaults cover most needs and a harness can add
its own with `register_memory_type`. Types already present in a database are accepted
when that database is opened, so data written by one process is readable by another.

Session hooks: `register_session_hook` from Python, or, for the processes we start
(``llmem-hooks run``, ``llmem-hooks hook copilot ...``), an installed package's entry
point in the group `SESSION_HOOK_ENTRY_POINTS`, loaded by `load_session_hook_entry_points`
(``[project.entry-points."llmem_hooks.session.hooks"] created = "mypkg.hooks:on_created"``:
the entry point's name is the event, its object the hook).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from pathlib import Path
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
SESSION_HOOK_ENTRY_POINTS = "llmem_hooks.session.hooks"
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


VALID_DREAM_PHASES: tuple[str, ...] = ("light", "deep", "rem")
_dream_hooks: dict[str, Callable[[Any, Any, bool], Any]] = {}


def register_dream_hook(phase: str, fn: Callable[[Any, Any, bool], Any]) -> None:
    """Call ``fn(dreamer, result, apply)`` after the dream cycle's ``phase`` (light, deep,
    rem) ran. One hook per phase; its errors are logged and never stop the cycle."""
    if phase not in VALID_DREAM_PHASES:
        raise ValueError(f"invalid dream phase {phase!r} (use {', '.join(VALID_DREAM_PHASES)})")
    if not callable(fn):
        raise TypeError("a dream hook must be callable")
    with _lock:
        if phase in _dream_hooks:
            raise ValueError(f"a dream hook for {phase!r} is already registered")
        _dream_hooks[phase] = fn


def unregister_dream_hook(phase: str) -> None:
    with _lock:
        _dream_hooks.pop(phase, None)


def get_registered_dream_hooks() -> dict[str, Callable[[Any, Any, bool], Any]]:
    with _lock:
        return dict(_dream_hooks)


_ENTRY_POINT_VALUE = re.compile(
    r"^\s*(?P<module>[\w.]+)\s*(?::\s*(?P<attr>[\w.]+)\s*)?(?:\[.*\]\s*)?$"
)


def session_hook_entry_points() -> list[tuple[str, str]]:
    """``(event, "module:attr")`` of every installed session hook entry point."""
    from importlib.metadata import entry_points

    return [(ep.name, ep.value) for ep in entry_points(group=SESSION_HOOK_ENTRY_POINTS)]


def cached_session_hook_entry_points(cache: Path) -> list[tuple[str, str]]:
    """`session_hook_entry_points`, kept in ``cache`` while no folder of ``sys.path``
    changed (installing or removing a package changes its site-packages folder). For the
    Copilot hook command: importing ``importlib.metadata`` and scanning every
    distribution costs ~40 ms, a stat of each path folder well under one."""
    import json
    import os
    import sys

    stamp: list[Any] = []
    for entry in sys.path:
        try:
            stamp.append([entry, os.stat(entry or ".").st_mtime_ns])
        except OSError:
            stamp.append([entry, None])
    try:
        cached = json.loads(cache.read_text(encoding="utf-8"))
        if cached["stamp"] == stamp:
            return [(str(name), str(value)) for name, value in cached["entry_points"]]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    found = session_hook_entry_points()
    try:
        from .paths import write_private_file

        write_private_file(cache, json.dumps({"stamp": stamp, "entry_points": found}) + "\n")
    except OSError as exc:
        log.warning("cannot write %s: %s", cache, exc)
    return found


def _load_entry_point(value: str) -> Any:
    """The object an entry point's ``module:attr`` value names (what ``EntryPoint.load``
    does, without importing ``importlib.metadata``)."""
    import importlib

    m = _ENTRY_POINT_VALUE.match(value)
    if m is None:
        raise ValueError(f"not an entry point value: {value!r}")
    obj: Any = importlib.import_module(m.group("module"))
    for part in (m.group("attr") or "").split("."):
        if part:
            obj = getattr(obj, part)
    return obj


def load_session_hook_entry_points(*, reload: bool = False, cache: Path | None = None) -> list[str]:
    """Register the session hooks installed packages declare (once per process, unless
    ``reload``; through `cached_session_hook_entry_points` when ``cache`` is given).
    Returns the events that got one. An entry point that cannot be loaded, names no event
    or finds its event taken is logged and skipped: a broken plugin never stops the
    sidecar or the Copilot hook."""
    global _entry_points_loaded
    with _lock:
        if _entry_points_loaded and not reload:
            return []
        _entry_points_loaded = True
    loaded: list[str] = []
    try:
        found = (
            session_hook_entry_points()
            if cache is None
            else (cached_session_hook_entry_points(cache))
        )
    except Exception as exc:  # a broken distribution's metadata
        log.warning("session hook entry points cannot be listed: %s", exc)
        return loaded
    for name, value in found:
        try:
            register_session_hook(name, _load_entry_point(value))
        except Exception as exc:
            log.warning("session hook entry point %s = %s skipped: %s", name, value, exc)
            continue
        loaded.append(name)
    return loaded
