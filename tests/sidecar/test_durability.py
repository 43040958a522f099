"""Crash and stop safety of a real `llmem-hooks run` (issue 9, defects 2 and 4).

Each test runs the sidecar as a subprocess over real agent stores (a COPILOT_HOME written
by `copilot_home`, an opencode.db written by `opencode_db`), kills it at an exact point
with ``LLMEM_FAULT`` (llmem_hooks/faults.py: the process exits 137 there, as if
SIGKILLed), restarts it without the fault and checks that every session got its
context file, memories, resume pack and ending exactly once.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.copilot_home import CopilotHome, Session
from support.opencode_db import OpenCodeDB
from support.waiting import wait_for

from llmem_hooks import MemoryStore

CONFIG = """\
session:
  poll_seconds: 0.2
  idle_quiet_seconds: 0
  idle_debounce_seconds: 0
  end_after_minutes: 60
ollama:
  enabled: false
"""


def now_ms() -> int:
    return int(time.time() * 1000)


class Rig:
    """An LLMEM_HOME, a COPILOT_HOME and an opencode.db in tmp_path, and sidecar runs."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.home = tmp_path / "llmem"
        self.home.mkdir(mode=0o700)
        (self.home / "config.yaml").write_text(CONFIG)
        self.ctx = self.home / "context"
        self.db_path = self.home / "memory.db"
        self.copilot = CopilotHome(tmp_path / "copilot")
        self.copilot.ms = now_ms()  # current sessions, not history
        self.oc_path = tmp_path / "oc" / "opencode.db"
        self._oc: OpenCodeDB | None = None
        self.procs: list[subprocess.Popen[bytes]] = []
        self.runs = 0

    @property
    def oc(self) -> OpenCodeDB:
        if self._oc is None:
            self._oc = OpenCodeDB(self.oc_path)
            self._oc.ms = now_ms()
        return self._oc

    def env(self, fault: str | None) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            LLMEM_HOME=str(self.home),
            COPILOT_HOME=str(self.copilot.root),
            OPENCODE_DB=str(self.oc_path),
            XDG_DATA_HOME=str(self.tmp / "xdg"),
        )
        env.pop("LLMEM_DB", None)
        env.pop("LLMEM_FAULT", None)
        if fault:
            env["LLMEM_FAULT"] = fault
        return env

    def start(self, fault: str | None = None) -> subprocess.Popen[bytes]:
        self.runs += 1
        err = open(self.tmp / f"run{self.runs}.err", "wb")  # noqa: SIM115 - the child owns it
        proc = subprocess.Popen(
            [sys.executable, "-m", "llmem_hooks.cli", "run"],
            env=self.env(fault),
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        err.close()
        self.procs.append(proc)
        return proc

    def killed(self, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
        """The run died at its fault point."""
        assert proc.wait(timeout) == 137, self.log()

    def stop(self, proc: subprocess.Popen[bytes]) -> int:
        proc.send_signal(signal.SIGTERM)
        return proc.wait(20)

    def log(self) -> str:
        path = self.home / "logs" / "sidecar.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def query(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        if not self.db_path.exists():
            return []
        conn = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, timeout=5)
        try:
            return conn.execute(sql, args).fetchall()
        except sqlite3.OperationalError:  # no schema yet
            return []
        finally:
            conn.close()

    def state(self, sid: str) -> str | None:
        rows = self.query("SELECT state FROM sessions WHERE session_id = ?", sid)
        return rows[0][0] if rows else None

    def summaries(self, sid: str) -> int:
        return self.query(
            "SELECT count(*) FROM memories WHERE session_id = ? AND source = 'session-end'"
            " AND type = 'event'",
            sid,
        )[0][0]

    def extracted(self, sid: str) -> int:
        return self.query(
            "SELECT count(*) FROM memories WHERE session_id = ? AND source = 'extract'", sid
        )[0][0]

    def pending(self) -> list[tuple[Any, ...]]:
        return self.query("SELECT session_id, event, attempts FROM pending_hooks")

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if self._oc is not None:
            self._oc.close()


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path)
    try:
        yield r
    finally:
        r.close()


def copilot_session(rig: Rig, words: str | None = None) -> Session:
    """A started session with a name of its own (equal summaries would be merged)."""
    s = rig.copilot.session(name=f"Task {len(list(rig.copilot.sessions.iterdir()))}")
    if words:
        s.exchange(f"remember that {words}", "Noted.")
    return s


# -- a kill at each point ----------------------------------------------------------------------
@pytest.mark.parametrize("agent", ["opencode", "copilot"])
def test_kill_between_the_sessions_row_and_the_context_file(rig: Rig, agent: str) -> None:
    """The replayed `created` of a session whose row exists still writes its file."""
    sid = rig.oc.session("Work") if agent == "opencode" else copilot_session(rig).id
    rig.killed(rig.start(fault=f"after-session-row={sid}"))
    assert rig.state(sid) == "active"
    assert not (rig.ctx / f"{sid}.md").exists()

    proc = rig.start()
    wait_for(lambda: (rig.ctx / f"{sid}.md").exists(), what="the context file")
    assert rig.stop(proc) == 0
    log = rig.log()
    written = log.count(f"session={sid} event=created result=success")
    assert written + log.count(f"session={sid} repaired: context file written") == 1, log


def test_kill_after_the_memories_commit_before_the_resume_pack(rig: Rig) -> None:
    s = copilot_session(rig, "the staging database listens on port 6543")
    rig.killed(rig.start(fault=f"after-memories-commit={s.id}"))
    count = rig.extracted(s.id)
    assert count >= 1
    pack = rig.ctx / f"{s.id}.compact.md"
    assert not pack.exists()

    proc = rig.start()
    wait_for(pack.exists, what="the resume pack")
    time.sleep(0.5)  # a few more passes: nothing extracted twice
    assert rig.stop(proc) == 0
    assert rig.extracted(s.id) == count
    assert "6543" in pack.read_text()


def test_kill_after_the_memories_commit_of_an_ending(rig: Rig) -> None:
    """The ending's own final extraction is killed before its pack and its summary: the
    restart replays the pending ending, which writes both, once."""
    s = copilot_session(rig, "release notes go into CHANGES.md")
    s.shutdown()
    rig.killed(rig.start(fault=f"after-memories-commit={s.id}"))
    assert rig.extracted(s.id) >= 1 and rig.summaries(s.id) == 0
    assert [(sid, ev) for sid, ev, _ in rig.pending()] == [(s.id, "ending")]

    proc = rig.start()
    wait_for(lambda: rig.state(s.id) == "ended", what="the ending")
    assert rig.stop(proc) == 0
    assert (rig.ctx / f"{s.id}.compact.md").exists()
    assert rig.summaries(s.id) == 1 and rig.pending() == []


@pytest.mark.parametrize("point", ["after-cursor", "after-dequeue", "after-hook"])
def test_kill_around_an_ending(rig: Rig, point: str) -> None:
    """A session that starts and shuts down while the sidecar runs: killed after the
    cursor moved past the shutdown (hooks not run), after the worker took the ending off
    its queue, or after the ending ran but before its row was deleted. The restart gives
    the session its context file, its memory and its ending exactly once."""
    s = copilot_session(rig, "we tag releases as vYYYY.MM")
    s.shutdown()
    key = "copilot" if point == "after-cursor" else s.id
    rig.killed(rig.start(fault=f"{point}={key}"))
    assert rig.pending(), "the consumed events are owed, not lost"

    proc = rig.start()
    wait_for(lambda: rig.state(s.id) == "ended" and not rig.pending(), what="the ending")
    time.sleep(0.5)
    assert rig.stop(proc) == 0
    assert (rig.ctx / f"{s.id}.md").exists()
    assert rig.summaries(s.id) == 1
    assert rig.extracted(s.id) >= 1
    assert rig.query("SELECT count(DISTINCT content) = count(*) FROM memories")[0][0] == 1


def test_kill_while_draining_at_stop(rig: Rig) -> None:
    """SIGTERM while endings are queued, and the drain is killed: the restart runs them."""
    sessions = [copilot_session(rig) for _ in range(6)]
    proc = rig.start(fault="slow:before-hook=ending,mid-drain")
    wait_for(lambda: all((rig.ctx / f"{s.id}.md").exists() for s in sessions), what="contexts")
    for s in sessions:
        s.shutdown()
    wait_for(lambda: "event=ending" in rig.log(), what="a first ending")
    proc.send_signal(signal.SIGTERM)
    rig.killed(proc)
    assert 1 <= len(rig.pending()) < 6

    proc = rig.start()
    wait_for(lambda: all(rig.state(s.id) == "ended" for s in sessions), what="all endings")
    assert rig.stop(proc) == 0
    assert [rig.summaries(s.id) for s in sessions] == [1] * 6
    assert rig.pending() == []


# -- a stop ------------------------------------------------------------------------------------
def test_sigterm_at_the_first_ending_of_40_loses_none(rig: Rig) -> None:
    """40 Copilot sessions shut down at once; SIGTERM at the first logged ending. The
    stop drains what it can in its time budget and leaves the rest pending; the restart
    ends all 40 at once (end_after_minutes is 60: not through the inactivity rule)."""
    sessions = [copilot_session(rig) for _ in range(40)]
    proc = rig.start(fault="slow:before-hook=ending")  # a slow model: 0.2 s per ending
    wait_for(lambda: all((rig.ctx / f"{s.id}.md").exists() for s in sessions), what="contexts")
    for s in sessions:
        s.shutdown()
    wait_for(lambda: "event=ending" in rig.log(), what="a first ending")
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0
    stop_s = time.monotonic() - t0
    ended = sum(rig.state(s.id) == "ended" for s in sessions)
    assert ended < 40 and len(rig.pending()) == 40 - ended, "the rest is owed"
    assert stop_s < 10

    t0 = time.monotonic()
    proc = rig.start()
    try:
        wait_for(lambda: all(rig.state(s.id) == "ended" for s in sessions), what="all 40 endings")
    except AssertionError as exc:
        raise AssertionError(
            f"{exc}; pending {rig.pending()}; log tail:\n{rig.log()[-3000:]}"
        ) from None
    caught_up_s = time.monotonic() - t0
    assert rig.stop(proc) == 0
    assert caught_up_s < 15
    assert [rig.summaries(s.id) for s in sessions] == [1] * 40
    assert rig.pending() == []
    reasons = rig.query("SELECT DISTINCT end_reason FROM sessions")
    assert reasons == [("shutdown",)]


# -- nothing in the loop stops the sidecar -----------------------------------------------------
def test_bad_ids_past_retention_and_a_raising_hook_do_not_stop_the_sidecar(rig: Rig) -> None:
    """An ended session whose id no file may be named after (``backup..2026-01-01``, put
    in with SQL as an older version let it in), past context_retention_days, and a
    created hook that raises: `llmem-hooks run` keeps running and serves a later session."""
    with MemoryStore(rig.db_path) as st:
        old = now_ms() - 30 * 86_400_000
        for bad in ("backup..2026-01-01", "a/b", "../escape"):
            st.conn.execute(
                "INSERT INTO sessions(agent, session_id, state, created_ms, last_activity_ms,"
                " ended_ms, end_reason) VALUES ('copilot', ?, 'ended', ?, ?, ?, 'shutdown')",
                (bad, old, old, old),
            )
    rig.ctx.mkdir(mode=0o700)
    (rig.ctx / "backup..2026-01-01.md").write_text("old\n")
    first, ended = copilot_session(rig), copilot_session(rig)
    ended.shutdown()
    faults = f"raise:before-hook=created:{first.id},raise:before-hook=ending:{ended.id}"
    proc = rig.start(fault=faults)
    wait_for(lambda: f"created for session '{first.id}' failed" in rig.log(), what="the raise")
    wait_for(lambda: f"ending for session '{ended.id}' failed" in rig.log(), what="the raise")
    second = copilot_session(rig)
    wait_for(lambda: (rig.ctx / f"{second.id}.md").exists(), what="the later session")
    assert proc.poll() is None, "the sidecar is still running"
    log = rig.log()
    assert "cleanup: skipped 3 session(s)" in log
    assert "Traceback" not in log
    assert rig.stop(proc) == 0
    assert (rig.ctx / "backup..2026-01-01.md").exists()  # not ours to guess at
    owed = {(sid, ev, n) for sid, ev, n in rig.pending()}
    assert owed == {(first.id, "created", 1), (ended.id, "ending", 1)}

    proc = rig.start()  # the owed hooks run at the next start
    wait_for(lambda: (rig.ctx / f"{first.id}.md").exists(), what="the owed context file")
    wait_for(lambda: rig.state(ended.id) == "ended", what="the owed ending")
    assert rig.stop(proc) == 0
    assert rig.pending() == [] and rig.summaries(ended.id) == 1


# -- in process: the retry and the log budget --------------------------------------------------
def test_a_failing_pending_hook_is_retried_then_dropped(
    store: MemoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    """A hook that keeps failing stays owed for MAX_HOOK_ATTEMPTS passes of the replay,
    then is dropped with one line; a later success deletes the row at once."""
    from llmem_hooks import SessionHookCoordinator
    from llmem_hooks.adapters import OpenCodeAdapter
    from llmem_hooks.config import DEFAULT_CONFIG
    from llmem_hooks.sidecar.loop import MAX_HOOK_ATTEMPTS, Sidecar

    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    db.ms = now_ms()
    cfg = {k: dict(v) for k, v in DEFAULT_CONFIG.items()}
    coord = SessionHookCoordinator(
        store, {"opencode": OpenCodeAdapter(db.path)}, cfg, tmp_path / "ctx"
    )
    sidecar = Sidecar(coord, cfg)
    a, b = db.session("A"), db.session("B")
    monkeypatch.setenv("LLMEM_FAULT", f"raise:before-hook=created:{a}")
    for attempt in range(1, MAX_HOOK_ATTEMPTS + 1):
        sidecar._pending_at = 0.0  # the retry is due
        sidecar.tick()
        rows = [
            tuple(r) for r in store.conn.execute("SELECT session_id, attempts FROM pending_hooks")
        ]
        assert rows == ([(a, attempt)] if attempt < MAX_HOOK_ATTEMPTS else [])
    assert (tmp_path / "ctx" / f"{b}.md").exists()
    assert not (tmp_path / "ctx" / f"{a}.md").exists()
    assert f"session={a} event=created gave up after {MAX_HOOK_ATTEMPTS} attempts" in caplog.text
    db.close()


def test_a_repeating_failure_logs_one_line_a_minute(caplog: Any) -> None:
    from llmem_hooks.sidecar.loop import Throttled

    errors = Throttled(every=0.2)
    with caplog.at_level("ERROR", logger="llmem_hooks"):
        for _ in range(5):
            errors.error("poll:x", "x adapter: poll", ValueError("bad\nrecord"))
        assert len(caplog.records) == 1
        time.sleep(0.25)
        errors.error("poll:x", "x adapter: poll", ValueError("bad record"))
    assert len(caplog.records) == 2
    assert "(4 more since the last report)" in caplog.records[1].getMessage()
    assert all("\n" not in r.getMessage() for r in caplog.records)
