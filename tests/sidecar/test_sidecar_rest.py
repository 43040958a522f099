"""The sidecar at rest: ended sessions cost no watch and no thread (issue 18, speed).

One watchdog observer, a bounded set of watches: the stores' folders and the sessions
the sidecar still follows. With many ended Copilot sessions the thread count does not
grow with their number; a session resumed after its end, and a new session, are still
seen (the resumed one by the safety poll, then watched again), and an append in a
followed session still wakes the sidecar at once. Not timed: the CPU figures are in
bench/sidecar_rest.py and docs/benchmarks.md.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.copilot_home import REPO, CopilotHome, Session

from llmem_hooks import MemoryStore, SessionHookCoordinator
from llmem_hooks.adapters import CopilotAdapter
from llmem_hooks.config import DEFAULT_CONFIG
from llmem_hooks.sidecar.loop import MAX_WATCHES, Sidecar
from llmem_hooks.store import sessions as session_state


def _run(env: dict[str, str], err: Any) -> subprocess.Popen[bytes]:
    """A real `llmem-hooks run` with ``env``, its output into ``err``."""
    return subprocess.Popen(
        [sys.executable, "-m", "llmem_hooks.cli", "run"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=err,
        stderr=err,
    )


def _sidecar_env(tmp_path: Path, llmem: Path, copilot: Path) -> dict[str, str]:
    """This environment with every store the sidecar reads under ``tmp_path``."""
    env = {
        **os.environ,
        "LLMEM_HOME": str(llmem),
        "COPILOT_HOME": str(copilot),
        "OPENCODE_DB": str(tmp_path / "oc" / "opencode.db"),
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
    }
    env.pop("LLMEM_DB", None)
    return env


def now_ms() -> int:
    return int(time.time() * 1000)


def ended_sessions(home: CopilotHome, n: int) -> list[str]:
    ids = []
    for i in range(n):
        s = home.session(name=f"task {i}")
        s.exchange(f"remember that service {i} listens on port {7000 + i}", "Noted.")
        s.shutdown()
        ids.append(s.id)
    return ids


@pytest.fixture
def sidecar(tmp_path: Path) -> Iterator[tuple[Sidecar, CopilotHome, MemoryStore]]:
    home = CopilotHome(tmp_path / "copilot")
    home.ms = now_ms()
    cfg = {k: dict(v) for k, v in DEFAULT_CONFIG.items()}
    cfg["session"].update(idle_quiet_seconds=0, idle_debounce_seconds=0, end_after_minutes=600)
    cfg["episodes"]["enabled"] = False
    cfg["ollama"]["enabled"] = False
    store = MemoryStore(tmp_path / "memory.db")
    coord = SessionHookCoordinator(
        store, {"copilot": CopilotAdapter(home.root)}, cfg, tmp_path / "ctx"
    )
    sc = Sidecar(coord, cfg)
    try:
        yield sc, home, store
    finally:
        if sc._observer is not None:
            sc._observer.stop()
            sc._observer.join(timeout=5)
        store.close()


def settle(sc: Sidecar, passes: int = 3) -> None:
    for _ in range(passes):
        sc.tick()
        sc._ensure_watches()


def threads_within(limit: int, timeout: float = 5.0) -> int:
    """The thread count once it is at most ``limit`` (stopped watches end asynchronously)."""
    deadline = time.monotonic() + timeout
    while threading.active_count() > limit and time.monotonic() < deadline:
        time.sleep(0.05)
    return threading.active_count()


def state(store: MemoryStore, sid: str) -> str | None:
    rec = session_state.find(store.db, sid)
    return None if rec is None else rec.state


def test_ended_sessions_cost_no_thread_and_later_sessions_are_still_seen(
    sidecar: tuple[Sidecar, CopilotHome, MemoryStore],
) -> None:
    sc, home, store = sidecar
    ids = ended_sessions(home, 60)
    before = threading.active_count()
    sc._start_observer()
    settle(sc)
    assert all(state(store, sid) == "ended" for sid in ids)
    # watchdog's inotify reader, the observer and one watch (session-state): not one
    # thread per session folder (was 62).
    assert threads_within(before + 3) <= before + 3

    # A session ended long ago is resumed: the safety poll sees it, it is followed again.
    resumed = ids[5]
    events = home.sessions / resumed / "events.jsonl"
    again = Session(home, resumed, REPO, "task 5")
    again.resume()
    again.exchange("remember that the cache lives in redis", "Noted.")
    assert events.stat().st_size > 0
    # A brand-new session: its folder shows up in session-state (watched).
    sc.wake.clear()
    fresh = home.session(name="new work")
    assert sc.wake.wait(5), "a new session folder wakes the sidecar"
    settle(sc)
    assert state(store, resumed) == "active" and state(store, fresh.id) == "active"
    assert threads_within(before + 2 + MAX_WATCHES) <= before + 2 + MAX_WATCHES

    # A folder that just appeared, its events.jsonl not written yet, is watched at once:
    # the session's first lines wake the sidecar (not the 5-second safety poll).
    early = home.session(name="early", workspace=False, start=False)
    settle(sc, 1)
    sc.wake.clear()
    time.sleep(0.1)
    sc.wake.clear()
    early.start()
    assert sc.wake.wait(5), "the first lines of a new session wake the sidecar"
    early.exchange("remember that builds run on arm64", "Noted.")
    early.shutdown()
    settle(sc)
    assert state(store, early.id) == "ended"

    # Followed sessions are watched: an append to their events.jsonl wakes the sidecar.
    for s in (again, fresh):
        sc.wake.clear()
        time.sleep(0.1)
        sc.wake.clear()
        s.exchange("remember that deploys happen on fridays", "Noted.")
        assert sc.wake.wait(5), f"an append in followed session {s.id} wakes the sidecar"

    # Both end: their watches go, the threads are back where they were at rest.
    again.shutdown()
    fresh.shutdown()
    settle(sc)
    assert state(store, resumed) == "ended" and state(store, fresh.id) == "ended"
    assert threads_within(before + 3) <= before + 3


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc")
def test_a_real_sidecar_over_ended_sessions_runs_few_threads(tmp_path: Path) -> None:
    """`llmem-hooks run` over 40 ended Copilot sessions: at most 10 threads once caught up
    (before: one per session folder, 47)."""
    home = CopilotHome(tmp_path / "copilot")
    home.ms = now_ms()
    ids = ended_sessions(home, 40)
    llmem = tmp_path / "llmem-home"
    llmem.mkdir(mode=0o700)
    (llmem / "config.yaml").write_text(
        f"ollama:\n  enabled: false\nepisodes:\n  enabled: false\ncopilot:\n  home: {home.root}\n"
    )
    env = _sidecar_env(tmp_path, llmem, home.root)
    err = (tmp_path / "run.err").open("wb")
    proc = _run(env, err)
    try:
        deadline = time.monotonic() + 60
        ended = 0
        while time.monotonic() < deadline and ended < len(ids):
            time.sleep(0.5)
            assert proc.poll() is None, (tmp_path / "run.err").read_text()
            try:
                conn = sqlite3.connect(f"file:{llmem / 'memory.db'}?mode=ro", uri=True)
                try:
                    ended = conn.execute(
                        "SELECT count(*) FROM sessions WHERE state = 'ended'"
                    ).fetchone()[0]
                finally:
                    conn.close()
            except sqlite3.Error:
                continue
        assert ended == len(ids), (tmp_path / "run.err").read_text()
        time.sleep(1.0)  # a pass or two at rest
        threads = len(os.listdir(f"/proc/{proc.pid}/task"))
        assert threads <= 10, threads
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        err.close()


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_reading_an_opencode_store_does_not_wake_the_sidecar_again(tmp_path: Path) -> None:
    """OpenCode keeps its database in WAL mode and open. Reading it opens the -wal file
    read-write, and closing that file is an inotify "closed after write" event in the
    watched folder: the sidecar took its own read for the agent's write and read again,
    ~10% of a CPU for as long as it ran. At rest it must stay at rest."""
    from support.opencode_db import OpenCodeDB

    xdg = tmp_path / "xdg"
    oc = OpenCodeDB(xdg / "opencode" / "opencode.db")  # kept open, as a running OpenCode does
    sid = oc.session("tidy the logger")
    oc.assistant(
        sid,
        oc.user(sid, "remember that the logger lives in lib/log.ts"),
        {"type": "text", "text": "Noted."},
    )
    llmem = tmp_path / "llmem-home"
    llmem.mkdir(mode=0o700)
    (llmem / "config.yaml").write_text("ollama:\n  enabled: false\n")
    env = {
        **os.environ,
        "LLMEM_HOME": str(llmem),
        "COPILOT_HOME": str(tmp_path / "copilot"),
        "XDG_DATA_HOME": str(xdg),
    }
    env.pop("LLMEM_DB", None)
    env.pop("OPENCODE_DB", None)
    err = (tmp_path / "run.err").open("wb")
    proc = _run(env, err)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (llmem / "query.sock").exists():
            time.sleep(0.2)
            assert proc.poll() is None, (tmp_path / "run.err").read_text()
        # Caught up (the session read, its context written): a second with next to no CPU.
        # The loop never had one; at most 60 s of waiting either way.
        settled, last = False, _cpu_seconds(proc.pid)
        for _ in range(60):
            time.sleep(1.0)
            now = _cpu_seconds(proc.pid)
            settled, last = now - last <= 0.02, now
            if settled:
                break
        before = _cpu_seconds(proc.pid)
        time.sleep(5.0)
        spent = _cpu_seconds(proc.pid) - before
        assert settled and spent < 0.25, f"{spent:.2f} s of CPU in 5 s at rest"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        err.close()
        oc.conn.close()


@pytest.mark.parametrize("how", ["home removed", "pid file names another"])
def test_a_sidecar_nothing_can_find_stops(tmp_path: Path, how: str) -> None:
    """Its LLMEM_HOME removed (or its pid file naming another process): no hook, door or
    `stop` can find this sidecar any more, so it stops by itself instead of running on
    alone (tests that removed their home left such sidecars running for good). A pid file
    it does not own is left as it is."""
    llmem = tmp_path / "llmem-home"
    llmem.mkdir(mode=0o700)
    (llmem / "config.yaml").write_text(
        "ollama:\n  enabled: false\nsession:\n  poll_seconds: 0.5\n"
        f"copilot:\n  home: {tmp_path / 'copilot'}\n"
    )
    env = _sidecar_env(tmp_path, llmem, tmp_path / "copilot")
    err = (tmp_path / "run.err").open("wb")
    proc = _run(env, err)
    try:
        pid_file = llmem / "sidecar.pid"
        deadline = time.monotonic() + 60
        while not (pid_file.exists() and pid_file.read_text().strip() == str(proc.pid)):
            assert proc.poll() is None and time.monotonic() < deadline, "no sidecar"
            time.sleep(0.1)
        time.sleep(1.0)
        assert proc.poll() is None  # at rest, it runs on
        if how == "home removed":
            import shutil

            shutil.rmtree(llmem)
        else:
            pid_file.write_text("4194000\n")
        assert proc.wait(timeout=40) == 0
        if how != "home removed":
            assert pid_file.read_text() == "4194000\n"
            assert "no longer names this sidecar" in (llmem / "logs" / "sidecar.log").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        err.close()
