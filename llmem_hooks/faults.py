"""Deterministic fault injection for the crash and shutdown tests.

The durability tests kill a real ``llmem-hooks run`` at an exact point and check that a
restart repairs everything. ``LLMEM_FAULT`` names the points, comma-separated:

- ``<point>`` -- the process exits at once with status 137 (as if SIGKILLed: no
  ``finally`` blocks, no flushing, no rollback beyond what SQLite itself does);
- ``<point>=<key>`` -- only where the point is hit with that key, or a key that starts
  with ``<key>:`` (a session id; ``<event>:<session id>`` for ``before-hook``, so
  ``before-hook=ending`` is every ending);
- ``raise:<point>[=<key>]`` -- raise `FaultInjected` there instead (a hook that fails);
- ``slow:<point>[=<key>]`` -- sleep SLOW_S there (a slow model, so that a stop finds
  work still queued).

Unset (always, outside tests) every `hit` is a dictionary lookup and nothing else.
The points are listed in `POINTS` and documented in docs/sidecar.md.
"""

from __future__ import annotations

import os
import time

ENV = "LLMEM_FAULT"
EXIT_STATUS = 137  # what a shell reports for a SIGKILLed process
SLOW_S = 0.2

POINTS = (
    "after-session-row",  # on_created: the sessions row exists, the context file not yet
    "after-memories-commit",  # on_idle: memories and their cursor committed, no resume pack yet
    "after-cursor",  # sidecar: hook rows and cursor committed, no hook run yet (key: agent)
    "after-dequeue",  # worker: a job taken off the queue, not yet run
    "after-hook",  # a hook finished, its pending row not yet deleted
    "mid-drain",  # stopping: the worker is draining its queue
    "before-hook",  # just before a hook runs (with raise: a hook that raises)
    "cleanup",  # while removing one ended session's context files
    "team-mid-push",  # a push batch written on the hub, its transaction not committed
    "team-pushed",  # a push batch committed on the hub, the local outbox not yet acked
    "team-mid-pull",  # a pulled mutation applied locally, the next not yet
    "team-apply",  # a pulled change written, the pull cursor not yet (key: hub memory id)
)


class FaultInjected(RuntimeError):
    """Raised at a ``raise:`` fault point."""


def _specs() -> list[tuple[str, str, str | None]]:
    out = []
    for part in os.environ.get(ENV, "").split(","):
        part = part.strip()
        if not part:
            continue
        action = "exit"
        for prefix in ("raise:", "slow:"):
            if part.startswith(prefix):
                action, part = prefix[:-1], part[len(prefix) :]
        point, _, key = part.partition("=")
        out.append((action, point, key or None))
    return out


def _matches(want: str | None, key: str | None) -> bool:
    if want is None:
        return True
    return key is not None and (key == want or key.startswith(want + ":"))


def hit(point: str, key: str | None = None) -> None:
    """Exit (or raise, or sleep) here when ``LLMEM_FAULT`` names this point (and key)."""
    if ENV not in os.environ:
        return
    for action, name, want in _specs():
        if name != point or not _matches(want, key):
            continue
        if action == "raise":
            raise FaultInjected(f"fault injected at {point} ({key})")
        if action == "slow":
            time.sleep(SLOW_S)
            continue
        os._exit(EXIT_STATUS)
