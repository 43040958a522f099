"""The sidecar (`llmem-hooks run`): watch the agents' session stores, fire the hooks.

One process per LLMEM_HOME (an flock on ``sidecar.lock``; the pid in ``sidecar.pid``).
It wakes on file changes in the stores' folders (watchdog; every OpenCode commit touches
``opencode.db-wal``) and on a slow safety poll, reads new lifecycle events from each
adapter since the cursor kept in the memory DB, and turns them into hook calls:

- created -> the project's citation check (`session.citation_check.StartChecks`, within
  ``citations.start_budget_seconds``), then ``on_created`` (the context file must exist
  before the first model call);
- turn_done + a quiet period with no new rows -> ``on_idle``;
- compacting -> ``on_compacting``;
- ended (deleted, archived, shut down), or no activity for ``session.end_after_minutes``
  -> ``on_ending``.

Durability: the hooks an event calls for (created, compacting, ending) are rows of
``pending_hooks`` committed in the same transaction as the adapter cursor that moves past
the event, and a row is deleted only after its hook ran. Idle is owed through the
session clocks, committed with the cursor too. A start replays every pending row,
writes a context file an active session lacks and a resume pack an extracted session
lacks, and notices sessions deleted while it was down; hooks are idempotent, so nothing
is lost or done twice whatever point a crash or a stop hits. No step of the loop can
stop the sidecar: each is guarded, logs one rate-limited line and the loop goes on.
"""

from __future__ import annotations

import contextlib
import io
import logging
import logging.handlers
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from .. import faults
from ..config import Config
from ..events import LifecycleEvent
from ..paths import ensure_private_dir, get_llmem_home
from ..redact import redact_secrets
from ..session.citation_check import StartChecks
from ..session.context import context_path
from ..session.hooks import (
    RESULT_DEBOUNCED,
    RESULT_ERROR,
    SessionEventManager,
    SessionHookCoordinator,
)
from ..store import sessions as session_state
from .lock import pid_path, single_instance

if TYPE_CHECKING:
    from ..adapters.base import SessionAdapter
    from ..service.server import Companion, Relay

log = logging.getLogger("llmem_hooks.sidecar.loop")

EXISTENCE_CHECK_S = 1.0  # how often active sessions are checked for deletion
# A session the Copilot sessionStart hook recorded may not have its events.jsonl yet:
# it is not taken for deleted until the adapter has shown it, or after this long.
UNSEEN_GRACE_MS = 60_000
COALESCE_S = 0.03  # a burst of file events becomes one pass
PID_CHECK_S = 10.0  # how often the sidecar checks that its pid file still names it
# Folders watched at once (watchdog runs a thread per watch): the stores' own folders and
# the most recently changed followed sessions. Others are read by the safety poll.
MAX_WATCHES = 6
LOG_BYTES = 1_000_000
LOG_BACKUPS = 3


# SQLite's side files: a reader of a WAL database (our adapters) opens -wal read-write
# and writes -shm, and may create or remove them.
_SQLITE_SIDE = ("-wal", "-shm", "-journal")


def _agent_wrote(event_type: str, path: str) -> bool:
    """Whether a file event can be an agent's write, not our own read of its store. Our
    reads open files (``opened``), close them (``closed``: inotify reports closing a file
    opened for writing, written or not, and SQLite opens -wal read-write), change a side
    file's metadata (``attrib``), touch -shm and may create or remove SQLite's side
    files. An agent's write always shows as ``modified`` (or ``created`` / ``moved`` /
    ``deleted`` of a file of its own); before, the sidecar woke itself up at every pass
    over a WAL-mode store and read it again, without end."""
    if event_type in ("opened", "closed", "closed_no_write", "attrib"):
        return False
    if path.endswith("-shm"):
        return False
    return not (path.endswith(_SQLITE_SIDE) and event_type in ("created", "deleted"))


class PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """A RotatingFileHandler whose every log file is 0600, whatever the umask: the stdlib
    opens the new file after a rollover with ``open()`` (0666 minus the umask), and log
    lines name sessions and projects. Never opens through a symlink."""

    def _open(self) -> io.TextIOWrapper:
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(self.baseFilename, flags, 0o600)
        try:
            os.fchmod(fd, 0o600)
        except BaseException:
            os.close(fd)
            raise
        return open(fd, "a", encoding=self.encoding or "utf-8", errors=self.errors)


def setup_logging(home: Path | None = None, stream: TextIO | None = sys.stderr) -> Path:
    """One line per hook to ``<LLMEM_HOME>/logs/sidecar.log`` (rotating, 0600) and to
    ``stream`` (the terminal, in the foreground)."""
    logs = ensure_private_dir((home or get_llmem_home()) / "logs")
    path = logs / "sidecar.log"
    root = logging.getLogger("llmem_hooks")
    root.setLevel(logging.INFO)
    root.propagate = False  # the CLI's basicConfig handler would print every line twice
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    for h in list(root.handlers):
        if getattr(h, "_llmem_sidecar", False):
            root.removeHandler(h)
    handlers: list[logging.Handler] = [
        PrivateRotatingFileHandler(path, maxBytes=LOG_BYTES, backupCount=LOG_BACKUPS)
    ]
    if stream is not None:
        handlers.append(logging.StreamHandler(stream))
    for h in handlers:
        h.setFormatter(fmt)
        h._llmem_sidecar = True  # type: ignore[attr-defined]
        root.addHandler(h)
    return path


@dataclass
class _Clock:
    """Per-session timing the sidecar keeps in memory (mirrored in the sessions table)."""

    last_activity_ms: int = 0
    turn_done_ms: int = 0
    idle_done_ms: int = 0
    retry_at: float = 0.0
    pending: bool = False  # an idle job is queued on the worker


SLOW_EVENTS = frozenset({"idle", "ending"})
BACKFILL = "backfill"  # the worker's idle-time job: vectors for memories stored without one
BACKFILL_EVERY_S = 30.0
DREAM = "dream"  # the worker's idle-time job: the dream cycle (docs/dream.md)
DREAM_CHECK_S = 60.0  # how often the sidecar asks whether a dream is owed
DREAM_RETRY_S = 3600.0  # after a submitted run, the next ask (the run moves the clock)
WORKER_STOP_S = 5.0  # how long a stopping sidecar drains its queue (the rest stays pending)
PENDING_RETRY_S = 10.0  # how often pending hooks that failed are tried again (a busy or slow
# moment must not leave an ending owed for a minute)
MAX_HOOK_ATTEMPTS = 6  # a pending hook that failed this often (a minute of retries) is dropped
ERROR_LOG_EVERY_S = 60.0  # one line per kind of failure and minute at most

Job = tuple[str, str, tuple[Any, ...], int, int | None]  # event, session, args, stamp, seq


class Throttled:
    """One log line per failure kind and ERROR_LOG_EVERY_S, saying how many were held back:
    a failure that repeats every pass must not fill the log."""

    def __init__(self, every: float = ERROR_LOG_EVERY_S) -> None:
        self.every = every
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def error(self, kind: str, what: str, exc: BaseException) -> None:
        now = time.monotonic()
        last = self._last.get(kind)
        if last is not None and now - last < self.every:
            self._held[kind] = self._held.get(kind, 0) + 1
            return
        self._last[kind] = now
        held = self._held.pop(kind, 0)
        more = f" ({held} more since the last report)" if held else ""
        # One line, whatever the exception says, and never a credential it may quote.
        text = redact_secrets(" ".join(str(exc).split())[:300])
        log.error("%s failed: %s: %s%s", what, type(exc).__name__, text, more)
        log.debug("%s failed", what, exc_info=exc)


def run_hook(events: SessionEventManager, event: str, sid: str, *args: Any) -> tuple[str, Any]:
    """Dispatch ``event`` (the built-in hook, then a registered one) and log one line with
    the built-in hook's result and the duration."""
    t0 = time.perf_counter()
    faults.hit("before-hook", f"{event}:{sid}")
    result: tuple[str, Any] = events.emit(event, sid, *args)
    ms = (time.perf_counter() - t0) * 1000
    log.info("session=%s event=%s result=%s value=%s ms=%.1f", sid, event, *result, ms)
    return result


def settle(
    store: Any, seq: int | None, event: str, sid: str, result: tuple[str, Any], errors: Throttled
) -> None:
    """After a hook ran: delete its pending row, or count a failure (dropped after
    MAX_HOOK_ATTEMPTS). Runs on the thread and connection that ran the hook."""
    if seq is None:
        return
    faults.hit("after-hook", sid)
    try:
        if result[0] != RESULT_ERROR:
            session_state.done_pending(store.db, seq)
        elif session_state.failed_pending(store.db, seq, MAX_HOOK_ATTEMPTS):
            log.warning(
                "session=%s event=%s gave up after %d attempts", sid, event, MAX_HOOK_ATTEMPTS
            )
    except Exception as exc:
        errors.error("pending", f"settling {event} of session {sid!r}", exc)


class HookWorker:
    """Runs the hooks that may wait on the model (idle, ending), one at a time and in
    order, on a second coordinator with its own database connection and adapters.

    A local model can take seconds per extraction; on the sidecar's own thread that would
    hold back the next session's context file (it must exist before the session's first
    model call). Results come back through ``done`` and are applied by the sidecar's
    thread, so the per-session clocks have one writer."""

    def __init__(
        self,
        coord: SessionHookCoordinator,
        notify: Callable[[], None],
        errors: Throttled | None = None,
    ) -> None:
        self.coord = coord
        self.events = SessionEventManager(coord)
        self.jobs: queue.Queue[Job | None] = queue.Queue()
        self.done: queue.Queue[tuple[str, str, tuple[str, Any], int, int | None]] = queue.Queue()
        self._notify = notify
        self._errors = errors or Throttled()
        self._deadline: float | None = None  # set when stopping: drain until then
        self._thread = threading.Thread(target=self._run, name="llmem-hooks-worker", daemon=True)
        self._thread.start()

    def submit(
        self, event: str, sid: str, args: tuple[Any, ...], stamp: int, seq: int | None = None
    ) -> None:
        self.jobs.put((event, sid, args, stamp, seq))

    def _run(self) -> None:
        while (job := self.jobs.get()) is not None:
            event, sid, args, stamp, seq = job
            if self._deadline is not None:
                if event in (BACKFILL, DREAM) or time.monotonic() > self._deadline:
                    continue  # stopping: what is left stays in pending_hooks for the restart
                faults.hit("mid-drain", sid)
            faults.hit("after-dequeue", sid)
            try:
                if event == BACKFILL:
                    result: tuple[str, Any] = (BACKFILL, self._backfill())
                elif event == DREAM:
                    result = (DREAM, self._dream())
                else:
                    result = run_hook(self.events, event, sid, *args)
            except Exception as exc:  # the hooks never raise; keep the worker alive regardless
                self._errors.error(f"hook:{event}", f"worker: {event} for session {sid!r}", exc)
                result = (RESULT_ERROR, None)
            settle(self.coord.store, seq, event, sid, result, self._errors)
            self.done.put((event, sid, result, stamp, seq))
            self._notify()

    def _backfill(self) -> int:
        done = self.coord.backfill_embeddings()
        if done:
            log.info("backfill: %d memories got their embedding", done)
        return done

    def _dream(self) -> dict[str, dict[str, int]]:
        from ..dream.cycle import Dreamer

        run = Dreamer(self.coord.store, self.coord.settings).run(apply=True, trigger="sidecar")
        log.info("dream run %s in %.1f s: %s", run.run_id, run.seconds, run.counts())
        return run.counts()

    def close(self, timeout: float = WORKER_STOP_S) -> None:
        """Run the queued hooks for up to ``timeout`` seconds, then stop. What is left is
        not lost: endings stay in pending_hooks, idle jobs in the saved clocks, and the
        next start runs them."""
        self._deadline = time.monotonic() + timeout
        self.jobs.put(None)
        self._thread.join(timeout + 1.0)


class Sidecar:
    """Tails every adapter of ``coordinator`` and runs the hooks (see the module doc)."""

    def __init__(
        self,
        coordinator: SessionHookCoordinator,
        config: Config | Mapping[str, Any],
        worker: SessionHookCoordinator | None = None,
    ) -> None:
        """``worker``: a second coordinator (own store connection and adapters) for idle and
        ending, run on a background thread; without one they run inline."""
        self.coord = coordinator
        self.events = SessionEventManager(coordinator)
        settings = Config.coerce(config)  # a dict from tests and the public API: typed once
        sess = settings.session
        self.dream_settings = settings.dream
        self.quiet_ms = int(sess.idle_quiet_seconds * 1000)
        self.end_after_ms = int(sess.end_after_minutes * 60_000)
        self.poll_s = sess.poll_seconds
        self.retention_days = sess.context_retention_days
        self.wake = threading.Event()
        self.stop = threading.Event()
        self._clocks: dict[str, _Clock] = {}
        self._last_existence = 0.0
        self._observer: Any = None
        self._handler: Any = None
        self._watched: dict[str, Any] = {}  # folder -> watchdog's ObservedWatch
        self.errors = Throttled()
        self.worker = HookWorker(worker, self.wake.set, self.errors) if worker is not None else None
        self._ending: set[str] = set()  # endings queued, not yet done
        self._inflight: set[int] = set()  # pending_hooks rows whose hook is queued or running
        self._pending_at = 0.0  # monotonic time of the next replay of pending hooks
        self._backfill_at = 0.0  # monotonic time of the next backfill pass
        self._dream_at = 0.0  # monotonic time of the next "is a dream owed?" check
        self._started_ms = int(time.time() * 1000)
        self.citations = StartChecks(coordinator.store, settings.citations)
        # The pid file that names this process (`run_foreground` sets it): when it no longer
        # does (its LLMEM_HOME removed, the file deleted), nothing can find this sidecar any
        # more (hooks, the door, `status`, `stop`) and it stops instead of running on alone.
        self.pid_file: Path | None = None
        self._pid_checked = 0.0
        self._load_active()

    # -- state -----------------------------------------------------------------------------
    def _load_active(self) -> None:
        for rec in session_state.active(self.coord.store.db):
            self._clocks[rec.session_id] = _Clock(
                rec.last_activity_ms, rec.turn_done_ms, rec.idle_done_ms
            )

    def _persist(self, sid: str) -> None:
        rec = session_state.find(self.coord.store.db, sid)
        clock = self._clocks.get(sid)
        if rec is None or clock is None:
            return
        rec.last_activity_ms = clock.last_activity_ms
        rec.turn_done_ms = clock.turn_done_ms
        rec.idle_done_ms = clock.idle_done_ms
        session_state.save(self.coord.store.db, rec)

    def _step(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Run one step of the loop; a failure is one rate-limited log line, never the end
        of the sidecar."""
        try:
            return fn(*args)
        except Exception as exc:
            self.errors.error(what, what, exc)
            return None

    # -- hooks with logging ------------------------------------------------------------------
    def fire(
        self, event: str, sid: str, *args: Any, seq: int | None = None
    ) -> tuple[str, Any] | None:
        """Run a hook; idle and ending go to the worker when there is one (None: queued,
        `_finished` applies the result later). ``seq``: its pending_hooks row, deleted
        once the hook ran."""
        stamp = int(time.time() * 1000)
        if seq is not None:
            self._inflight.add(seq)
        if self.worker is not None and event in SLOW_EVENTS:
            self.worker.submit(event, sid, args, stamp, seq)
            return None
        try:
            result = run_hook(self.events, event, sid, *args)
        except Exception as exc:  # the hooks never raise; the loop goes on regardless
            self.errors.error(f"hook:{event}", f"{event} for session {sid!r}", exc)
            result = (RESULT_ERROR, None)
        settle(self.coord.store, seq, event, sid, result, self.errors)
        self._finished(event, sid, result, stamp, seq)
        return result

    def _run_pending(self, seq: int | None, event: str, sid: str, arg: str) -> None:
        """Run an owed hook (its row is committed; it is deleted once the hook ran)."""
        if seq is not None and seq in self._inflight:
            return
        if event == "ending":
            self._ending.add(sid)
            self._clocks.pop(sid, None)
            self.fire("ending", sid, arg or "ended", seq=seq)
        elif event in ("created", "compacting"):
            if event == "created":  # before the context file, so it already reflects it
                self._step("citation check", self._check_citations, sid)
            self.fire(event, sid, seq=seq)

    def _check_citations(self, sid: str) -> None:
        """The session's project's citations, checked before its context file is written
        (not again once the file exists); one log line. A failure costs only the check."""
        if context_path(sid, self.coord.ctx_dir).exists():
            return
        done = self.citations.before_context(session_state.find(self.coord.store.db, sid))
        if done is not None:
            log.info("session=%s citations %s", sid, done.line())

    def _replay_pending(self) -> None:
        """Run the hooks a crash or a stop left owed (at start), and retry failed ones
        (every PENDING_RETRY_S)."""
        now = time.monotonic()
        if now < self._pending_at:
            return
        self._pending_at = now + PENDING_RETRY_S
        for p in session_state.pending(self.coord.store.db):
            if p.seq in self._inflight or (p.event == "ending" and p.session_id in self._ending):
                continue
            self._run_pending(p.seq, p.event, p.session_id, p.arg)

    def _finished(
        self, event: str, sid: str, result: tuple[str, Any], stamp: int, seq: int | None = None
    ) -> None:
        """Book a finished idle hook on its session's clock (retry if debounced)."""
        if seq is not None:
            self._inflight.discard(seq)
        if event == "ending":
            self._ending.discard(sid)
        clock = self._clocks.get(sid)
        if event != "idle" or clock is None:
            return
        clock.pending = False
        if result[0] == RESULT_DEBOUNCED:
            clock.retry_at = time.monotonic() + max(1.0, self.coord.debounce_s / 4)
        else:
            clock.idle_done_ms = max(clock.idle_done_ms, stamp)
            self._persist(sid)

    def _drain_worker(self) -> None:
        if self.worker is None:
            return
        with contextlib.suppress(queue.Empty):
            while True:
                self._finished(*self.worker.done.get_nowait())

    # -- one pass ------------------------------------------------------------------------------
    def tick(self) -> None:
        """One pass; every step guarded (see `_step`)."""
        self._step("applying worker results", self._drain_worker)
        self._step("replaying pending hooks", self._replay_pending)
        now_ms = int(time.time() * 1000)
        for agent, adapter in self.coord.adapters.items():
            self._step(f"{agent} adapter pass", self._poll_adapter, agent, adapter, now_ms)
        self._step("existence check", self._check_deleted)
        self._step("timers", self._timers, int(time.time() * 1000))
        self._step("backfill", self._maybe_backfill)
        self._step("dream", self._maybe_dream)

    def _poll_adapter(self, agent: str, adapter: SessionAdapter, now_ms: int) -> None:
        key = adapter.cursor_key(agent)
        cursor = session_state.get_cursor(self.coord.store.db, key)
        while True:
            try:
                events, new_cursor = adapter.poll(cursor)
            except Exception as exc:
                self.errors.error(f"poll:{agent}", f"{agent} adapter: poll", exc)
                break
            dirty: set[str] = set()
            due: list[tuple[str, str, str]] = []
            for ev in events:
                try:
                    self._handle(ev, now_ms, due)
                except Exception as exc:  # one event's trouble skips that event only
                    self.errors.error(
                        f"event:{agent}", f"{agent}: {ev.kind} of session {ev.session_id!r}", exc
                    )
                dirty.add(ev.session_id)
            # The hooks the events call for, the sessions' clocks (a finished turn not yet
            # idled) and the cursor past those events commit together: a crash or a stop
            # after this point loses nothing, the next start runs what is owed.
            try:
                with self.coord.store.atomic():
                    for sid in dirty:
                        self._persist(sid)
                    owed = [
                        (
                            session_state.add_pending(self.coord.store.db, sid, hook, arg),
                            hook,
                            sid,
                            arg,
                        )
                        for hook, sid, arg in due
                    ]
                    if new_cursor != cursor:
                        session_state.set_cursor(self.coord.store.db, key, new_cursor)
            except Exception:
                # Nothing committed: the next pass reads these events again, so the
                # endings they queued must not count as queued.
                self._ending.difference_update(sid for hook, sid, _ in due if hook == "ending")
                raise
            if owed:
                faults.hit("after-cursor", agent)
            for seq, hook, sid, arg in owed:
                self._run_pending(seq, hook, sid, arg)
            if not events or new_cursor == cursor:
                break
            cursor = new_cursor

    def _maybe_backfill(self) -> None:
        """Every BACKFILL_EVERY_S, when the worker has nothing queued, let it give vectors
        to a batch of memories stored without one (never ahead of a session's hooks)."""
        now = time.monotonic()
        if self.worker is None or now < self._backfill_at or not self.worker.jobs.empty():
            return
        self._backfill_at = now + BACKFILL_EVERY_S
        self.worker.submit(BACKFILL, "", (), 0)

    def _maybe_dream(self) -> None:
        """The dream cycle on the worker when the sidecar is idle (no session active for
        ``dream.idle_minutes``, nothing queued) and the last full run (kept in the store,
        so restarts count) is ``dream.interval_hours`` old. Never in the first ``idle_minutes``
        after a start."""
        now = time.monotonic()
        ds = self.dream_settings
        if not ds.enabled or self.worker is None or now < self._dream_at:
            return
        self._dream_at = now + DREAM_CHECK_S
        if not self.worker.jobs.empty():
            return
        quiet_since = int(time.time() * 1000) - int(ds.idle_minutes * 60_000)
        if self._started_ms > quiet_since:  # a start counts as activity: not at once
            return
        if any(c.last_activity_ms > quiet_since for c in self._clocks.values()):
            return
        from ..dream.cycle import Dreamer

        if not Dreamer(self.coord.store, self.coord.settings).due():
            return
        self._dream_at = now + DREAM_RETRY_S
        self.worker.submit(DREAM, "", (), 0)

    def _handle(self, ev: LifecycleEvent, now_ms: int, due: list[tuple[str, str, str]]) -> None:
        """Book one event on its session; the hooks it calls for go to ``due`` (they run
        once the cursor past the event and their pending rows are committed)."""
        sid = ev.session_id
        # Never later than now: an agent whose clock runs ahead of ours (a skewed VM, a
        # session written on another machine) would otherwise keep its session from going
        # idle until our clock caught up with its timestamps.
        at = min(ev.at_ms or now_ms, now_ms)
        clock = self._clocks.get(sid)
        # Replaying old history (a first start): a session resumed or compacted long ago
        # needs no reopening or resume pack now.
        stale = now_ms - at >= self.end_after_ms
        if ev.kind == "created":
            if sid not in self._clocks:
                self.coord.track(sid, ev.session)
                self._clocks[sid] = _Clock(last_activity_ms=at)
            # Also for a session already recorded: a crash between its sessions row and
            # its context file replays this event (on_created leaves an existing file).
            if not stale:  # a long-dead session needs no context
                due.append(("created", sid, ""))
            return
        if clock is None:
            rec = session_state.find(self.coord.store.db, sid)
            if rec is not None and rec.state == "ended":
                if ev.detail != "resume" or stale:
                    return
                self.coord.reopen(sid)  # a resumed session lives (and will end) again
            if self.coord.track(sid, ev.session) is None:
                return
            clock = self._clocks.setdefault(sid, _Clock(last_activity_ms=at))
        clock.last_activity_ms = max(clock.last_activity_ms, at)
        if ev.kind == "turn_done":
            clock.turn_done_ms = max(clock.turn_done_ms, at)
        elif ev.kind == "compacting" and not stale:
            due.append(("compacting", sid, ""))
        elif ev.kind == "ended":
            self._end(sid, ev.detail or "ended", due)

    def _end(self, sid: str, reason: str, due: list[tuple[str, str, str]] | None = None) -> None:
        """Queue a session's ending: into ``due`` (committed with the cursor), or else as a
        pending row of its own, then run."""
        if sid in self._ending:  # still active in the table until the hook is done
            return
        self._ending.add(sid)
        self._clocks.pop(sid, None)
        if due is not None:
            due.append(("ending", sid, reason))
            return
        seq = session_state.add_pending(self.coord.store.db, sid, "ending", reason)
        self._run_pending(seq, "ending", sid, reason)

    def _check_deleted(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_existence < EXISTENCE_CHECK_S:
            return
        self._last_existence = now
        now_ms = int(time.time() * 1000)
        for agent, adapter in self.coord.adapters.items():
            ids = [
                r.session_id
                for r in session_state.active(self.coord.store.db, agent)
                if r.session_id in self._clocks or now_ms - r.last_activity_ms > UNSEEN_GRACE_MS
            ]
            if not ids:
                continue
            try:
                if not adapter.available():
                    continue
                alive = adapter.existing(ids)
            except Exception:
                log.exception("%s adapter: existence check failed", agent)
                continue
            for sid in ids:
                if sid not in alive:
                    self._end(sid, "deleted")

    def _timers(self, now_ms: int) -> None:
        for sid, clock in list(self._clocks.items()):
            if (
                clock.turn_done_ms > clock.idle_done_ms
                and not clock.pending
                and now_ms - clock.last_activity_ms >= self.quiet_ms
                and time.monotonic() >= clock.retry_at
            ):
                clock.pending = True
                self.fire("idle", sid)
            if now_ms - clock.last_activity_ms >= self.end_after_ms:
                self._end(sid, "inactive")

    def next_wait(self) -> float:
        """Seconds until the next idle or ending deadline (at most the safety poll)."""
        now_ms = int(time.time() * 1000)
        wait = self.poll_s
        for clock in self._clocks.values():
            if clock.turn_done_ms > clock.idle_done_ms and not clock.pending:
                due = (clock.last_activity_ms + self.quiet_ms - now_ms) / 1000
                due = max(due, clock.retry_at - time.monotonic())
                wait = min(wait, due)
            wait = min(wait, (clock.last_activity_ms + self.end_after_ms - now_ms) / 1000)
        return max(0.01, wait)

    # -- watching ------------------------------------------------------------------------------
    def _start_observer(self) -> None:
        try:
            from watchdog.events import FileSystemEvent, FileSystemEventHandler
            from watchdog.observers import Observer
        except ImportError:  # pragma: no cover - a declared dependency
            log.warning("watchdog missing: polling every %.1f s only", self.poll_s)
            return

        wake = self.wake

        class _Handler(FileSystemEventHandler):
            def on_any_event(self, event: FileSystemEvent) -> None:
                if event.is_directory and event.event_type == "modified":
                    return  # an entry in it changed: that entry's own event says which
                if not _agent_wrote(event.event_type, str(event.src_path)):
                    return
                wake.set()

        self._handler = _Handler()
        self._watched = {}
        observer = Observer()
        observer.daemon = True
        observer.start()
        self._observer = observer
        self._ensure_watches()

    def _ensure_watches(self) -> None:
        """One observer, a bounded set of watches (each costs watchdog a thread): every
        store's folder, and the folders of the sessions still followed (at most
        MAX_WATCHES in all). A store folder that does not exist yet (the agent never ran)
        is stood in for by its nearest existing parent, so its creation wakes us; then we
        switch. A watch no longer wanted (an ended session) is dropped."""
        if self._observer is None:
            return
        wanted: list[str] = []
        followed = tuple(self._clocks)
        lists = [adapter.watch_paths(followed) for adapter in self.coord.adapters.values()]
        # Every store's own folder before any session folder, so the cap never drops one.
        for p in [*(ps[0] for ps in lists if ps), *(p for ps in lists for p in ps[1:])]:
            path = Path(p)
            folder = path if path.is_dir() or not path.suffix else path.parent
            target = folder
            while not target.is_dir() and target.parent != target:
                target = target.parent
            if str(target) not in wanted:
                wanted.append(str(target))
        wanted = wanted[:MAX_WATCHES]
        for gone in [w for w in self._watched if w not in wanted]:
            with contextlib.suppress(KeyError, OSError):
                self._observer.unschedule(self._watched[gone])
            del self._watched[gone]
        for place in wanted:
            if place in self._watched:
                continue
            try:
                self._watched[place] = self._observer.schedule(
                    self._handler, place, recursive=False
                )
            except OSError as exc:
                log.warning("cannot watch %s: %s", place, exc)

    def repair(self) -> None:
        """At start: the context file of an active session created within
        ``end_after_minutes`` and the resume pack of a session with an extraction, when a
        crash left them unwritten."""
        now_ms = int(time.time() * 1000)
        for sid in self.coord.repair_context_files(now_ms - self.end_after_ms):
            log.info("session=%s repaired: context file written", sid)
        retention_ms = int(self.retention_days * 86_400_000)
        for sid in self.coord.repair_resume_packs(now_ms - retention_ms):
            log.info("session=%s repaired: resume pack written", sid)

    def backfill_episodes(self, stream: TextIO | None = None) -> int:
        """The first start only: index every past session of every agent as episodes,
        with progress on stderr (a bar on a terminal, else plain lines; docs/episodes.md)."""
        from ..progress import Progress

        logged = [0.0]

        def report(done: int, total: int) -> None:
            bar.update(done, total)
            now = time.monotonic()
            if done == total or now - logged[0] >= 1.0:
                logged[0] = now
                log.info("episode backfill: %d/%d sessions", done, total)

        with Progress("llmem-hooks: indexing past sessions as episodes", stream=stream) as bar:
            stored = self.coord.backfill_episodes(report)
        if stored:
            log.info("episode backfill: %d episodes stored", stored)
        return stored

    def _still_named(self) -> bool:
        """Whether `pid_file` still names this process (read at most every
        `PID_CHECK_S`; True when there is none to check or it cannot be read for a
        reason other than its absence)."""
        now = time.monotonic()
        if self.pid_file is None or now - self._pid_checked < PID_CHECK_S:
            return True
        self._pid_checked = now
        try:
            named = self.pid_file.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            named = ""
        except (OSError, ValueError):
            return True
        if named == str(os.getpid()):
            return True
        log.warning(
            "%s no longer names this sidecar (%s): stopping",
            self.pid_file,
            f"it names {named[:20]!r}" if named else "it is gone",
        )
        return False

    def run(self) -> None:
        """Catch up, then loop until ``stop`` is set. No step can end the loop."""
        self._step("starting the file watcher", self._start_observer)
        try:
            self._step("existence check", self._check_deleted, True)
            self._step("context cleanup", self.coord.cleanup_context_files, self.retention_days)
            self._step("repair", self.repair)
            self._step("episode backfill", self.backfill_episodes)
            self._step("episode retention", self.coord.prune_episodes)
            last_cleanup = time.monotonic()
            while not self.stop.is_set():
                if not self._still_named():
                    break
                self._step("sidecar pass", self.tick)
                self._step("watching", self._ensure_watches)
                if time.monotonic() - last_cleanup > 3600:
                    last_cleanup = time.monotonic()
                    self._step(
                        "context cleanup", self.coord.cleanup_context_files, self.retention_days
                    )
                    self._step("episode retention", self.coord.prune_episodes)
                wait = self._step("computing the next wake-up", self.next_wait)
                if self.wake.wait(self.poll_s if wait is None else wait):
                    time.sleep(COALESCE_S)
                self.wake.clear()
        finally:
            if self._observer is not None:
                self._observer.stop()
                self._observer.join(timeout=2)
            if self.worker is not None:
                self.worker.close()


def run_foreground(
    config: Config,
    home: Path | None = None,
    relays: Mapping[str, Relay] | None = None,
    companions: Sequence[Companion] = (),
) -> int:
    """`llmem-hooks run`: the sidecar in the foreground until SIGINT / SIGTERM; ``relays``
    and ``companions`` go to the query service (`service.server.Relay`, `.Companion`)."""
    from ..registry import load_session_hook_entry_points
    from ..session.hooks import create_session_hook_coordinator

    # Handlers before the pid file names us: a stop signal while the coordinators are
    # built must end the run cleanly, not kill it.
    stopping: list[int] = []
    sidecar: Sidecar | None = None

    def _stop(signum: int, _frame: Any) -> None:
        log.info("signal %d: stopping", signum)
        stopping.append(signum)
        if sidecar is not None:
            sidecar.stop.set()
            sidecar.wake.set()

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    with single_instance(home):
        setup_logging(home)
        hooks = load_session_hook_entry_points()
        if hooks:
            log.info("registered session hooks from entry points: %s", ", ".join(hooks))
        coord = create_session_hook_coordinator(config)
        # Idle and ending (which may wait on the local model) run on a second coordinator.
        slow = create_session_hook_coordinator(config)
        sidecar = Sidecar(coord, config, worker=slow)
        sidecar.pid_file = pid_path(home)
        if stopping:
            sidecar.stop.set()
        watched = {name: a.watch_paths() for name, a in coord.adapters.items()}
        log.info("sidecar started (pid %d); watching %s", os.getpid(), watched)
        # The query service (docs/query-service.md): its own store and threads; a failure
        # to start it is logged and the sidecar runs on (clients then query in-process).
        from ..service.server import serve

        server = None if stopping else serve(config, home, relays, companions)
        # The team hub (docs/team.md): only when this machine joined one; its own thread.
        from .team import start_if_joined

        team = None if stopping else start_if_joined(config, home)
        try:
            sidecar.run()
        finally:
            if team is not None:
                with contextlib.suppress(Exception):
                    team.stop()
            if server is not None:
                with contextlib.suppress(Exception):
                    server.stop()
            for c in (coord, slow):
                for adapter in c.adapters.values():
                    with contextlib.suppress(Exception):
                        adapter.close()
                c.store.close()
            log.info("sidecar stopped")
    return 0
