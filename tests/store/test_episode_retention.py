"""Issue 18, defect 9: a first start over sessions older than the episode retention does
not store what retention would delete at once, and says what retention removed (log and
``stats``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from support.cli import run_cli
from support.copilot_home import CopilotHome
from support.opencode_db import OpenCodeDB, text

from llmem_hooks import MemoryStore, SessionHookCoordinator
from llmem_hooks.adapters import OpenCodeAdapter
from llmem_hooks.config import DEFAULT_CONFIG
from llmem_hooks.sidecar.loop import Sidecar
from llmem_hooks.store.episodes import episode_stats

DAY_MS = 86_400_000


def config() -> dict:
    cfg = {k: dict(v) for k, v in DEFAULT_CONFIG.items()}
    cfg["session"].update(idle_quiet_seconds=0, idle_debounce_seconds=0, end_after_minutes=600)
    return cfg


def old_copilot_session(home: CopilotHome, days_ago: int, turns: int) -> str:
    home.ms = int(time.time() * 1000) - days_ago * DAY_MS
    s = home.session()
    for i in range(turns):
        s.exchange(f"why does build {i} fail on CI?", f"The cache key of build {i} is stale.")
    s.shutdown()
    return s.id


def _wait_for(cond: object, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def test_a_first_start_over_year_old_sessions_stores_and_deletes_nothing(
    llmem_home: Path, tmp_path: Path
) -> None:
    """The real sidecar (`llmem-hooks run`) over a Copilot home with sessions of 400 and
    500 days ago and one of yesterday."""
    home = CopilotHome(tmp_path / "copilot")
    old_copilot_session(home, 500, 3)
    old_copilot_session(home, 400, 4)
    recent = old_copilot_session(home, 1, 2)
    env = dict(os.environ, LLMEM_HOME=str(llmem_home), COPILOT_HOME=str(home.root))
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg-data")  # no OpenCode store
    env.pop("OPENCODE_DB", None)
    log = llmem_home / "logs" / "sidecar.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmem_hooks.cli", "run"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for(lambda: log.exists() and "older than the 365-day" in log.read_text())
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text_ = log.read_text()
    assert "episode backfill: 7 exchange(s) older than the 365-day episode retention" in text_
    assert not (llmem_home / "backups").exists() or not list((llmem_home / "backups").iterdir())
    stats_out = run_cli(env, "stats", "--json")
    ep = json.loads(stats_out)["episodes"]
    assert ep["count"] == 2 and ep["sessions"] == 1  # yesterday's session only
    assert ep["retention_skipped"] == 7 and ep["retention_pruned"] == 0
    plain_out = run_cli(env, "stats")
    assert "retention kept out 7" in plain_out, plain_out
    with MemoryStore.from_config({"memory": {}}) as st:
        (sid,) = {m["session_id"] for m in st.list_all(type="conversation", limit=100)}
        assert sid == recent


def test_idle_on_an_old_opencode_session_and_a_later_prune_are_counted(
    store: MemoryStore, tmp_path: Path
) -> None:
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    db.ms = int(time.time() * 1000) - 400 * DAY_MS
    sid = db.session("Old work")
    for i in range(3):
        u = db.user(sid, f"why does build {i} fail?")
        db.assistant(sid, u, text("A stale cache."))
    db.ms = int(time.time() * 1000) - 30 * DAY_MS
    u = db.user(sid, "and build 4, does it fail too?")  # not a throwaway
    db.assistant(sid, u, text("The same cache."))
    cfg = config()
    coord = SessionHookCoordinator(
        store, {"opencode": OpenCodeAdapter(db.path)}, cfg, tmp_path / "ctx"
    )
    Sidecar(coord, cfg).tick()
    stats = episode_stats(store.db)
    assert stats["count"] == 1 and stats["retention_skipped"] == 3
    cfg["episodes"]["retention_days"] = 7  # now the month-old one is out of the window too
    coord = SessionHookCoordinator(
        store, {"opencode": OpenCodeAdapter(db.path)}, cfg, tmp_path / "ctx"
    )
    assert coord.prune_episodes() == 1
    stats = episode_stats(store.db)
    assert stats["count"] == 0 and stats["retention_pruned"] == 1
    assert stats["retention_skipped"] == 3
    db.close()
