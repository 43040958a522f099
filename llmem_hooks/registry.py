"""Process-wide registries: memory types (later also adapters and session hooks).

Memory types are open-ended: the eight defaults cover most needs and a harness can add
its own with `register_memory_type`. Types already present in a database are accepted
when that database is opened, so data written by one process is readable by another.
"""

from __future__ import annotations

import re
import threading

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
