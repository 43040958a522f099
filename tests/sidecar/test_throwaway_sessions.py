"""Throwaway sessions leave nothing (issue 20): through the real sidecar (`llmem-hooks
run`) over a Copilot home written as Copilot writes it, a "hello there" session gets no
episode, no summary and no self-assessment, and is counted in `stats`; a session with one
real decision keeps its episode and its summary."""

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

from llmem_hooks import MemoryStore
from llmem_hooks.store import sessions as session_state


def _wait_for(cond: object, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return
        time.sleep(0.2)
    raise AssertionError("condition not met in time")


def _ended(sids: set[str]) -> bool:
    try:
        with MemoryStore.from_config({"memory": {}}) as st:
            recs = session_state.all_sessions(st.db)
    except Exception:  # the sidecar has not created the store yet
        return False
    return sids <= {r.session_id for r in recs if r.state == "ended"}


def test_a_throwaway_session_leaves_nothing_and_is_counted(
    llmem_home: Path, tmp_path: Path
) -> None:
    home = CopilotHome(tmp_path / "copilot")
    home.ms = int(time.time() * 1000) - 3_600_000
    hello = home.session(name="hello")
    hello.exchange("hello there", "Hello! How can I help you today?")
    hello.exchange("thanks!", "You're welcome, always here to help.")
    hello.shutdown()
    real = home.session(name="ledger")
    real.exchange("hi", "Hi! What can I do for you?")
    real.exchange(
        "we decided that the ledger service keeps its own Postgres database",
        "Noted: the ledger service gets a dedicated Postgres instance.",
    )
    real.shutdown()
    env = dict(os.environ, LLMEM_HOME=str(llmem_home), COPILOT_HOME=str(home.root))
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg-data")  # no OpenCode store
    env.pop("OPENCODE_DB", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmem_hooks.cli", "run"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for(lambda: _ended({hello.id, real.id}))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    with MemoryStore.from_config({"memory": {}}) as st:
        left = [m for m in st.list_all(limit=100) if m["session_id"] == hello.id]
        kept = [m for m in st.list_all(limit=100) if m["session_id"] == real.id]
    assert left == [], left  # no episode, no "Session summary. Goal: hello there", nothing
    episodes = [m for m in kept if m["type"] == "conversation"]
    assert len(episodes) == 1 and "Postgres" in episodes[0]["content"]  # "hi" is not kept
    (summary,) = [m for m in kept if m["type"] == "event"]
    assert "hello" not in summary["content"].lower()
    assert "ledger" not in summary["content"]  # the episode says it; the summary does not
    assert any(m["type"] == "decision" for m in kept)

    stats_out = run_cli(env, "stats", "--json")
    ep = json.loads(stats_out)["episodes"]
    assert ep["count"] == 1
    assert ep["noise_skipped"] == 3  # two exchanges of "hello", the "hi" of the other
    assert ep["summaries_skipped"] == 1
    plain_out = run_cli(env, "stats")
    assert "left out as small talk: 3 exchange(s), 1 session summary(ies)" in plain_out
