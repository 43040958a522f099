"""Each project's session-start context, built once per store version.

Every new session of a project starts with the same text until a memory changes, and
building it ranks hundreds of memories: ~3 ms of CPU in each Copilot ``sessionStart``,
which Copilot feels while it starts up on a small machine (issue 18, docs/benchmarks.md).
`QueryService.start` keeps the text here, keyed by what it was built for and by the
store's version: ``PRAGMA data_version`` on the service's writer connection, which every
commit of another connection or process changes (the sidecar's coordinator, the CLI, the
dream cycle, a team pull) and the service's own records of what a session was given do
not. The service clears the cache after its own writes to memories and project names.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable

TTL_S = 300.0  # rebuilt at least this often: the order weighs recency
MAX_ENTRIES = 64


class StartContexts:
    """``(context, ids shown)`` per key, while the store's version is the one it was
    built at and it is at most `TTL_S` old. Thread-safe; a build runs outside the lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[Hashable, tuple[int, float, str, tuple[str, ...]]] = {}

    def get(
        self, key: Hashable, version: int, build: Callable[[], tuple[str, list[str]]]
    ) -> tuple[str, list[str]]:
        """The entry for ``key`` at ``version`` (read before building: a commit made
        meanwhile only causes a rebuild next time), else ``build()``, kept."""
        now = time.monotonic()
        with self._lock:
            hit = self._entries.get(key)
        if hit is not None and hit[0] == version and now - hit[1] < TTL_S:
            return hit[2], list(hit[3])
        context, shown = build()
        with self._lock:
            if len(self._entries) >= MAX_ENTRIES:
                self._entries.clear()
            self._entries[key] = (version, now, context, tuple(shown))
        return context, shown

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
