"""Registries: one small kind, `Registry`, for each pluggable family (docs/architecture.md).

Four instances, each with its entry-point group, so an installed package extends the
processes we start (``llmem-hooks run``, ``llmem-hooks hook copilot ...``) without code:

- `memory_types` (``llmem_hooks.memory_types``): the eight defaults, registered here
  through the same `Registry.register` a plugin uses; an entry point's name is the type,
  its object the type's description (a string).
- `session_hooks` (``llmem_hooks.session_hooks``): ``fn(session_id)`` after the
  coordinator's own hook for an event (``created``, ``idle``, ``compacting``, ``ending``);
  the entry point's name is the event.
- `dream_hooks` (``llmem_hooks.dream_hooks``): ``fn(dreamer, result, apply)`` after a
  dream phase (``light``, ``deep``, ``rem``); the entry point's name is the phase.
- adapters (``llmem_hooks.adapters``): the instance lives in ``adapters/base.py`` (its
  check needs `SessionAdapter`); the built-in ones register in ``adapters/__init__.py``.

Several hooks per event (as pluggy allows), run in registration order, each failing open;
registering an equal object twice under one name is a no-op (a reload changes nothing).
Entry points are read once per process: session hooks where the sidecar and the Copilot
hook command ask for them (the hook command through a cache, `Registry.cached_entry_points`),
the other kinds the first time they are looked up. A store never writes here: the types
already in a database are accepted by that store alone (`MemoryStore`).
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any, Generic, TypeVar

from .errors import ValidationError

log = logging.getLogger(__name__)

T = TypeVar("T")

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_ENTRY_POINT_VALUE = re.compile(
    r"^\s*(?P<module>[\w.]+)\s*(?::\s*(?P<attr>[\w.]+)\s*)?(?:\[.*\]\s*)?$"
)


def check_name(kind: str, name: object) -> str:
    """``name`` if it is ``^[a-z][a-z0-9_]*$`` and at most 64 characters."""
    if not isinstance(name, str) or len(name) > 64 or not _NAME.match(name):
        raise ValidationError(
            f"invalid {kind} name {name!r}: use ^[a-z][a-z0-9_]*$, at most 64 characters"
        )
    return name


def check_callable(kind: str, item: object) -> Any:
    if not callable(item):
        raise TypeError(f"a {kind} must be callable")
    return item


class Registry(Generic[T]):
    """Named items of one kind, built-in and plugged in, registered the same way.

    ``names``: the only names allowed (events, phases; ``names_are`` says which in an
    error), else any `check_name` name.
    ``check(kind, item)`` returns the item or raises. ``several``: several items per name
    (hooks); else one, and a different one under a taken name is refused (adapters).
    ``autoload``: the first lookup reads the entry points (`load_entry_points`)."""

    def __init__(
        self,
        kind: str,
        group: str,
        *,
        check: Callable[[str, Any], T],
        names: Collection[str] | None = None,
        names_are: str = "",
        several: bool = True,
        autoload: bool = True,
    ) -> None:
        self.kind = kind
        self.group = group
        self.names = tuple(names) if names is not None else None
        self.names_are = names_are or f"{kind} name"
        self.several = several
        self.autoload = autoload
        self._check = check
        self._items: dict[str, list[T]] = {}
        self._lock = threading.RLock()
        # Held while entry points load, so a second thread waits for them instead of
        # seeing a half-filled registry; reentrant: a plugin may look things up on import.
        self._load_lock = threading.RLock()
        self._loaded = False

    # -- registering ---------------------------------------------------------------------
    def register(self, name: str, item: T) -> T:
        """Add ``item`` under ``name`` (ValueError: a name not allowed, or taken by another
        item where only one is; TypeError / ValidationError: what `check` refuses)."""
        if self.names is not None:
            if name not in self.names:
                raise ValueError(f"invalid {self.names_are} {name!r} (use {', '.join(self.names)})")
        else:
            check_name(self.kind, name)
        item = self._check(self.kind, item)
        with self._lock:
            items = self._items.setdefault(name, [])
            if item in items:  # equal: a bound method made twice is one hook
                return item
            if items and not self.several:
                raise ValueError(f"a {self.kind} named {name!r} is already registered")
            items.append(item)
        return item

    def unregister(self, name: str, item: T | None = None) -> None:
        """Remove ``item`` from ``name`` (every item of ``name`` when None)."""
        with self._lock:
            items = self._items.get(name, [])
            kept = [] if item is None else [x for x in items if x != item]
            if kept:
                self._items[name] = kept
            else:
                self._items.pop(name, None)

    # -- looking up ----------------------------------------------------------------------
    def get(self, name: str) -> tuple[T, ...]:
        """The items of ``name``, in registration order (empty: none)."""
        with self._lock:
            found = tuple(self._items.get(name, ()))
        if found or not self.autoload:
            return found
        self.load_entry_points()  # at once when loaded; else waits for the loading thread
        with self._lock:
            return tuple(self._items.get(name, ()))

    def all(self) -> dict[str, tuple[T, ...]]:
        """Every name with its items."""
        if self.autoload:
            self.load_entry_points()
        with self._lock:
            return {name: tuple(items) for name, items in self._items.items()}

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and bool(self.get(name))

    # -- entry points --------------------------------------------------------------------
    def entry_points(self) -> list[tuple[str, str]]:
        """``(name, "module:attr")`` of every installed entry point of `group`."""
        from importlib.metadata import entry_points

        return [(ep.name, ep.value) for ep in entry_points(group=self.group)]

    def cached_entry_points(self, cache: Path) -> list[tuple[str, str]]:
        """`entry_points`, kept in ``cache`` while no folder of ``sys.path`` changed
        (installing or removing a package changes its site-packages folder). For the
        Copilot hook command: importing ``importlib.metadata`` and scanning every
        distribution costs ~40 ms, a stat of each path folder well under one."""
        import json
        import os
        import sys

        stamp: list[Any] = [self.group]
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
        found = self.entry_points()
        try:
            from .paths import write_private_file

            write_private_file(cache, json.dumps({"stamp": stamp, "entry_points": found}) + "\n")
        except OSError as exc:
            log.warning("cannot write %s: %s", cache, exc)
        return found

    def load_entry_points(self, *, reload: bool = False, cache: Path | None = None) -> list[str]:
        """Register what installed packages declare in `group` (once per process, unless
        ``reload``; through `cached_entry_points` when ``cache`` is given). Returns the
        names that got an item. An entry point that cannot be loaded, or that the registry
        refuses, is logged and skipped: a broken plugin never stops the sidecar or a hook."""
        with self._load_lock:
            if self._loaded and not reload:
                return []
            self._loaded = True
            loaded: list[str] = []
            try:
                found = self.entry_points() if cache is None else self.cached_entry_points(cache)
            except Exception as exc:  # a broken distribution's metadata
                log.warning("%s entry points cannot be listed: %s", self.kind, exc)
                return loaded
            for name, value in found:
                try:
                    self.register(name, _load_entry_point(value))
                except Exception as exc:
                    log.warning("%s entry point %s = %s skipped: %s", self.kind, name, value, exc)
                    continue
                loaded.append(name)
            return loaded


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


# -- memory types ------------------------------------------------------------------------


def _description(kind: str, item: object) -> str:
    if not isinstance(item, str):
        raise TypeError(f"a {kind}'s entry point must name its description (a string)")
    return item


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
MEMORY_TYPE_ENTRY_POINTS = "llmem_hooks.memory_types"
memory_types: Registry[str] = Registry(
    "memory type", MEMORY_TYPE_ENTRY_POINTS, check=_description, several=False
)
for _name in DEFAULT_MEMORY_TYPES:  # the built-in types, through the plugins' own API
    memory_types.register(_name, "")


def register_memory_type(name: str, description: str = "") -> str:
    """Allow memories of type ``name`` (``^[a-z][a-z0-9_]*$``, at most 64 characters)."""
    check_name("memory type", name)
    with contextlib.suppress(ValueError):  # already registered: its first description stays
        memory_types.register(name, description)
    return name


def get_registered_types() -> frozenset[str]:
    """Every memory type: the defaults, registered ones, installed packages' ones."""
    return frozenset(memory_types.all())


def check_memory_type(name: str) -> str:
    """Return ``name`` if it is a registered type, else raise a ValidationError."""
    if name not in DEFAULT_MEMORY_TYPES and name not in memory_types:
        known = ", ".join(sorted(get_registered_types()))
        raise ValidationError(f"unknown memory type {name!r} (known: {known})")
    return name


# -- session hooks -----------------------------------------------------------------------

VALID_SESSION_EVENT_TYPES: tuple[str, ...] = ("created", "idle", "compacting", "ending")
SESSION_HOOK_ENTRY_POINTS = "llmem_hooks.session_hooks"
# Read where asked (the sidecar at start, the Copilot hook command through its cache):
# the hook command's fast path must not scan the installed packages.
session_hooks: Registry[Callable[[str], Any]] = Registry(
    "session hook",
    SESSION_HOOK_ENTRY_POINTS,
    check=check_callable,
    names=VALID_SESSION_EVENT_TYPES,
    names_are="session event",
    autoload=False,
)


def register_session_hook(event: str, fn: Callable[[str], Any]) -> None:
    """Call ``fn(session_id)`` when ``SessionEventManager.emit(event, ...)`` runs, after
    the coordinator's own hook and the hooks registered before it (see
    `SessionEventManager`)."""
    session_hooks.register(event, fn)


def unregister_session_hook(event: str, fn: Callable[[str], Any] | None = None) -> None:
    """Remove ``fn`` from ``event`` (every hook of ``event`` when None)."""
    session_hooks.unregister(event, fn)


def get_registered_session_hooks() -> dict[str, tuple[Callable[[str], Any], ...]]:
    return session_hooks.all()


def cached_session_hook_entry_points(cache: Path) -> list[tuple[str, str]]:
    return session_hooks.cached_entry_points(cache)


def load_session_hook_entry_points(*, reload: bool = False, cache: Path | None = None) -> list[str]:
    """`Registry.load_entry_points` of `session_hooks` (for the processes we start)."""
    return session_hooks.load_entry_points(reload=reload, cache=cache)


# -- dream hooks -------------------------------------------------------------------------

VALID_DREAM_PHASES: tuple[str, ...] = ("light", "deep", "rem")
DREAM_HOOK_ENTRY_POINTS = "llmem_hooks.dream_hooks"
dream_hooks: Registry[Callable[[Any, Any, bool], Any]] = Registry(
    "dream hook",
    DREAM_HOOK_ENTRY_POINTS,
    check=check_callable,
    names=VALID_DREAM_PHASES,
    names_are="dream phase",
)


def register_dream_hook(phase: str, fn: Callable[[Any, Any, bool], Any]) -> None:
    """Call ``fn(dreamer, result, apply)`` after the dream cycle's ``phase`` (light, deep,
    rem) ran, after the hooks registered before it; its errors are logged and never stop
    the cycle."""
    dream_hooks.register(phase, fn)


def unregister_dream_hook(phase: str, fn: Callable[[Any, Any, bool], Any] | None = None) -> None:
    """Remove ``fn`` from ``phase`` (every hook of ``phase`` when None)."""
    dream_hooks.unregister(phase, fn)


def get_registered_dream_hooks() -> dict[str, tuple[Callable[[Any, Any, bool], Any], ...]]:
    return dream_hooks.all()
