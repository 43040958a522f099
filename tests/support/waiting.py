"""Waiting for what a real process does in its own time (a sidecar writing a file, a
memory appearing): poll a condition, fail with what was awaited."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(cond: Callable[[], Any], timeout: float = 15.0, what: str = "") -> Any:
    """``cond()``'s first truthy value, polled every 50 ms; AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"not in {timeout} s: {what}")
