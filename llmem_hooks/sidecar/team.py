"""The sidecar's team thread: sync with the hub every ``team.interval_seconds``.

Started only when this machine has joined a hub (``team join``); otherwise nothing runs
and nothing is imported. Its own store connection and its own hub connection, so a slow
or absent hub never holds back a hook or a recall. While the hub is unreachable it backs
off (the interval, doubling up to 10 minutes) and logs one line per state change, not per attempt;
the outbox keeps every change meanwhile.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import LLMemError

if TYPE_CHECKING:
    from ..config import Config

log = logging.getLogger(__name__)

BACKOFF_MAX_S = 600.0


class TeamThread:
    """Syncs until `stop`; `wake` asks for a pass now (e.g. ``team sync`` through the
    socket, or a test)."""

    def __init__(self, config: Config, home: Path | None = None) -> None:
        self.config = config
        self.home = home
        self.stop_event = threading.Event()
        self.wake_event = threading.Event()
        self.passes = 0
        self.last_error: str | None = None
        self._thread = threading.Thread(target=self._run, name="llmem-hooks-team", daemon=True)

    def start(self) -> TeamThread:
        self._thread.start()
        return self

    def wake(self) -> None:
        self.wake_event.set()

    def stop(self, timeout: float = 5.0) -> None:
        self.stop_event.set()
        self.wake_event.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        from ..store import MemoryStore
        from ..team import connection
        from ..team.sync import TeamSync

        settings = self.config.team
        store: Any = None
        hub: Any = None
        delay = settings.interval_seconds
        failing = False
        try:
            store = MemoryStore.from_config(self.config)
            while not self.stop_event.is_set():
                try:
                    address = connection.load(self.home, settings.hub)
                    if address is None:
                        delay = settings.interval_seconds  # left the team: idle until rejoined
                    else:
                        if hub is None:
                            hub = connection.connect(address, self.home)
                        report = TeamSync(store, hub, settings).sync()
                        self.passes += 1
                        if failing:
                            log.info("team hub reachable again")
                        failing, self.last_error = False, None
                        delay = settings.interval_seconds
                        if not report.empty():
                            log.info("team sync: %s", report.as_dict())
                except Exception as exc:  # the hub or the network: back off, keep the outbox
                    if hub is not None:
                        with contextlib.suppress(Exception):
                            hub.close()
                        hub = None
                    message = str(exc) if isinstance(exc, LLMemError) else type(exc).__name__
                    if not failing or message != self.last_error:
                        log.warning("team sync failed (retrying with back-off): %s", message)
                    delay = min(delay * 2 if failing else settings.interval_seconds, BACKOFF_MAX_S)
                    failing, self.last_error = True, message
                self.wake_event.wait(delay)
                self.wake_event.clear()
        except Exception:
            log.exception("team thread stopped")
        finally:
            if hub is not None:
                with contextlib.suppress(Exception):
                    hub.close()
            if store is not None:
                with contextlib.suppress(Exception):
                    store.close()


def start_if_joined(config: Config, home: Path | None = None) -> TeamThread | None:
    """The team thread when a hub is joined and the team extra is installed; else None."""
    from ..team import connection

    try:
        if connection.load(home, config.team.hub) is None:
            return None
        import psycopg  # noqa: F401  (the team extra)
    except Exception as exc:
        log.warning("team sync off: %s", exc)
        return None
    return TeamThread(config, home).start()
