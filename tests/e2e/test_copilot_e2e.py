"""End-to-end proof: real GitHub Copilot CLI 1.0.102 + this repository as a Copilot plugin
(``hooks.json`` -> ``llmem-hooks hook copilot <event>``) + the `llmem-hooks run` sidecar
tailing ``$COPILOT_HOME/session-state``, against the fake provider (BYOK, offline).

1. a memory stored beforehand reaches the first model request of a new session;
2. "remember that ..." in a turn becomes a memory once the session is idle, and the next
   session gets it in its first request;
3. ``/compact`` is seen as compacting, and the next prompt carries the resume pack (once);
4. exiting a session stores its summary; a SIGKILLed session is ended once its stale
   ``inuse.<pid>.lock`` is noticed;
5. a memory learned in a real OpenCode session reaches a new Copilot session in the same
   repository (one sidecar for both agents);
6. with autostart on, the hook starts the sidecar when none runs.

One world (HOME, COPILOT_HOME, LLMEM_HOME, repo) and one sidecar for the module.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from copilot_harness import CopilotEnv, last_user_text, session_context
from oc_harness import OpenCodeEnv, SidecarProcess, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.copilot]

MEMORY_WAIT_S = 20
KNOWLEDGE_TYPES = {"fact", "decision", "preference", "project_state", "procedure"}


@pytest.fixture(scope="module")
def sidecar(cp_sidecar: SidecarProcess) -> SidecarProcess:
    return cp_sidecar  # conftest.py


def _knowledge_with(world: CopilotEnv, token: str) -> list[dict[str, Any]]:
    return [
        m
        for m in world.memories()
        if m["type"] in KNOWLEDGE_TYPES and token.lower() in m["content"].lower()
    ]


def _summaries(world: CopilotEnv, sid: str) -> list[dict[str, Any]]:
    return [m for m in world.memories("--type", "event") if m.get("session_id") == sid]


def test_stored_memory_reaches_the_first_request(cp_env: CopilotEnv) -> None:
    """No sidecar yet: the sessionStart hook builds the context itself."""
    fact = "The staging database is called pg-staging-copilot (MARKER-CP-STORED)"
    cp_env.llmem("store", fact, "--project", cp_env.project_key)

    run = cp_env.prompt("hello there")

    injected = session_context(run.first)
    assert "MARKER-CP-STORED" in injected, f"first request lacks the memory:\n{run.first}"
    ctx = (cp_env.context_dir / f"{run.session_id}.md").read_text()
    assert injected == ctx
    assert all(session_context(r) == ctx for r in run.requests)
    # Resumed: the same context again, first, once.
    again = cp_env.prompt("hello again", resume=run.session_id)
    texts = [m.get("content") for m in again.first["body"]["messages"]]
    assert session_context(again.first) == ctx and texts.count(ctx) == 1


def test_remembered_fact_is_stored_when_idle_and_reaches_the_next_session(
    cp_env: CopilotEnv, sidecar: SidecarProcess
) -> None:
    sid = str(uuid.uuid4())
    tui = cp_env.interactive(
        "remember that integration tests need the local Postgres on port 5433", sid
    )
    hits = wait_until(
        lambda: _knowledge_with(cp_env, "5433"),
        MEMORY_WAIT_S,
        0.3,
        f"the sidecar to store the port-5433 memory\n{tui.screen()}\n{sidecar.log()}",
    )
    assert tui.alive(), "the session must still be open: the memory came from idle"
    assert f"session={sid} event=idle result=success" in cp_env.sidecar_log()
    assert all(m.get("session_id") == sid for m in hits)
    assert not _summaries(cp_env, sid), "an open session has no summary yet"

    run = cp_env.prompt("hello from a new session")
    assert "5433" in session_context(run.first), run.first
    tui.close()


def test_compact_is_seen_and_the_next_prompt_carries_the_resume_pack(
    cp_env: CopilotEnv, sidecar: SidecarProcess
) -> None:
    run = cp_env.prompt("we decided to migrate the build to bazel (MARKER-CP-BAZEL)")
    sid = run.session_id

    compact = cp_env.prompt("/compact", resume=sid)
    assert any(
        r["headers"].get("x-interaction-type") == "conversation-compaction"
        for r in compact.requests
    ), "no compaction request"
    assert list((cp_env.session_dir(sid) / "checkpoints").glob("001-*.md"))
    cp_env.wait_for_hook(sid, "compacting")
    pack_path = cp_env.context_dir / f"{sid}.compact.md"
    pack = wait_until(
        lambda: pack_path.exists() and pack_path.read_text().strip(),
        MEMORY_WAIT_S,
        0.1,
        "the resume pack",
    )

    nxt = cp_env.prompt("next", resume=sid)
    prompt = last_user_text(nxt.first)
    assert "next" in prompt
    assert pack in prompt, f"no resume pack in the first prompt after /compact:\n{prompt}"
    assert "<system_reminder>" in prompt

    later = cp_env.prompt("and after that", resume=sid)
    assert pack not in last_user_text(later.first), "the resume pack must come once"


def test_exiting_a_session_stores_its_summary(cp_env: CopilotEnv, sidecar: SidecarProcess) -> None:
    run = cp_env.prompt("we decided that the on-call rotation changes on mondays")
    sid = run.session_id
    assert [e["type"] for e in cp_env.events(sid)][-1] == "session.shutdown"

    found = wait_until(
        lambda: _summaries(cp_env, sid), MEMORY_WAIT_S, 0.3, "the summary of the exited session"
    )
    assert all(m["type"] == "event" and m["entered_by"] == "copilot" for m in found)
    assert cp_env.sessions()[sid]["state"] == "ended"
    time.sleep(1.5)  # a second ending must not add another summary
    assert len(_summaries(cp_env, sid)) == 1


def test_a_killed_session_is_ended_once_its_stale_lock_is_noticed(
    cp_env: CopilotEnv, sidecar: SidecarProcess
) -> None:
    sid = str(uuid.uuid4())
    tui = cp_env.interactive("we decided to keep the staging cluster on kubernetes 1.30", sid)
    wait_until(lambda: cp_env.turn_done(sid), 30, 0.2, f"the first turn\n{tui.screen()}")
    pids = cp_env.lock_pids(sid)
    assert pids, "no inuse.<pid>.lock while the session is open"
    cp_env.wait_for_hook(sid, "created")
    assert not _summaries(cp_env, sid)

    tui.kill(signal.SIGKILL)

    assert cp_env.lock_pids(sid) == pids, "SIGKILL leaves the stale lock behind"
    events = [e["type"] for e in cp_env.events(sid)]
    assert "session.shutdown" not in events
    found = wait_until(
        lambda: _summaries(cp_env, sid),
        MEMORY_WAIT_S,
        0.3,
        f"the killed session to be ended\n{sidecar.log()}",
    )
    assert len(found) == 1 and found[0]["type"] == "event"
    assert cp_env.sessions()[sid]["state"] == "ended"


@pytest.mark.opencode
def test_a_memory_learned_in_opencode_reaches_copilot(
    make_opencode_env: Callable[..., OpenCodeEnv],
    make_copilot_env: Callable[..., CopilotEnv],
) -> None:
    oc_world = make_opencode_env()
    world = make_copilot_env(base=oc_world)  # same repo, HOME and LLMEM_HOME
    oc_world.opencode("session", "list")  # OpenCode's data folder exists
    sc = world.sidecar().start()

    oc_sid = oc_world.run("remember that we deploy with blue-green releases")
    hits = wait_until(
        lambda: _knowledge_with(world, "blue-green"),
        MEMORY_WAIT_S,
        0.3,
        f"the sidecar to store the OpenCode memory\n{sc.log()}",
    )
    assert all(m["entered_by"] == "opencode" and m.get("session_id") == oc_sid for m in hits)

    run = world.prompt("hello from copilot")
    assert "blue-green" in session_context(run.first), run.first
    record = world.sessions()
    assert record[run.session_id]["project"] == record[oc_sid]["project"] == oc_world.project_key


def _sidecar_pid(world: CopilotEnv) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        pid = int((world.llmem_home / "sidecar.pid").read_text().strip())
        os.kill(pid, 0)
        return pid
    return None


def test_the_hook_autostarts_the_sidecar(make_copilot_env: Callable[..., CopilotEnv]) -> None:
    world = make_copilot_env()
    world.set_autostart(True)
    pid = 0
    try:
        run = world.prompt("hello with no sidecar running")
        pid = wait_until(lambda: _sidecar_pid(world), 20, 0.1, "an autostarted sidecar")
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert f"LLMEM_HOME={world.llmem_home}".encode() in environ
        assert f"COPILOT_HOME={world.copilot_home}".encode() in environ
        # It picks the session up (created and, as -p exits, ended).
        wait_until(
            lambda: world.sessions().get(run.session_id, {}).get("state") == "ended",
            MEMORY_WAIT_S,
            0.2,
            "the autostarted sidecar to end the session",
        )
        world.prompt("hello again", resume=run.session_id)
        assert _sidecar_pid(world) == pid, "a running sidecar is left alone"
    finally:
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            with contextlib.suppress(Exception):
                wait_until(lambda: _sidecar_pid(world) is None, 10, 0.1, "the sidecar to stop")


def test_no_hook_call_failed(cp_env: CopilotEnv) -> None:
    """Copilot recorded every llmem-hooks hook call of the module as successful."""
    errors = [
        e
        for sid_dir in (cp_env.copilot_home / "session-state").iterdir()
        if sid_dir.is_dir()
        for e in cp_env.events(sid_dir.name)
        if e["type"] == "hook.end" and not e["data"].get("success", True)
    ]
    assert not errors, json.dumps(errors[:3], indent=1)
