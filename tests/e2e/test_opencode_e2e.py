"""End-to-end proof: real OpenCode + the llmem-hooks plugin + the `llmem-hooks run` sidecar,
against the fake provider (offline after the first npm installs).

1. a memory stored beforehand reaches the first model request of a new session;
2. "remember that ..." in a turn becomes a memory that the next session gets;
3. a compaction carries the resume pack;
4. deleting a session stores its summary (an event memory with its session id);
5. kill -9 of the sidecar while it works loses and duplicates nothing.

One world (HOME, LLMEM_HOME, repo), one sidecar and one `opencode serve` for the module.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from oc_harness import (
    OpenCodeEnv,
    OpenCodeServer,
    SidecarProcess,
    system_texts,
    user_texts,
    wait_until,
)

pytestmark = [pytest.mark.e2e, pytest.mark.opencode]

MEMORY_WAIT_S = 15
KNOWLEDGE_TYPES = {"fact", "decision", "preference", "project_state", "procedure"}


@pytest.fixture(scope="module")
def sidecar(oc_sidecar: SidecarProcess) -> SidecarProcess:
    return oc_sidecar  # conftest.py: started once OpenCode has been used in this HOME


@pytest.fixture(scope="module")
def server(oc_env: OpenCodeEnv, sidecar: SidecarProcess) -> Iterator[OpenCodeServer]:
    srv = oc_env.serve()
    try:
        yield srv
    finally:
        srv.stop()


def _injected(request: dict[str, Any]) -> str:
    """The system message the plugin added ('' if none: OpenCode sends one of its own)."""
    systems = system_texts(request)
    assert len(systems) <= 2, "the plugin must add exactly one system message"
    return systems[1] if len(systems) == 2 else ""


def _knowledge_with(oc_env: OpenCodeEnv, token: str) -> list[dict[str, Any]]:
    return [
        m
        for m in oc_env.memories()
        if m["type"] in KNOWLEDGE_TYPES and token.lower() in m["content"].lower()
    ]


def _knowledge_counts(oc_env: OpenCodeEnv, tokens: Iterable[str]) -> dict[str, int]:
    """How many knowledge memories mention each token, from one ``list`` (one process for
    all tokens instead of one per token)."""
    contents = [m["content"].lower() for m in oc_env.memories() if m["type"] in KNOWLEDGE_TYPES]
    return {token: sum(token.lower() in c for c in contents) for token in tokens}


def _wait_for_session_seen(oc_env: OpenCodeEnv, sid: str) -> None:
    def seen() -> bool:
        out = oc_env.llmem("status", "--json").stdout
        return any(s["session_id"] == sid for s in json.loads(out)["sessions"])

    wait_until(seen, MEMORY_WAIT_S, 0.2, f"the sidecar to record session {sid}")


def test_stored_memory_reaches_the_first_request(
    oc_env: OpenCodeEnv, sidecar: SidecarProcess
) -> None:
    fact = "The staging database is called pg-staging-e2e (MARKER-E2E-STORED)"
    oc_env.llmem("store", fact, "--project", oc_env.project_key)

    sid = oc_env.run("hello there")

    row = oc_env.session_row(sid)
    assert row is not None and row["project_id"] == oc_env.project_key, row
    reqs = oc_env.fake.conversation_requests(sid)
    assert reqs, "no model request for the new session"
    first = _injected(reqs[0])
    assert "MARKER-E2E-STORED" in first, f"first request lacks the memory:\n{first[:2000]}"
    ctx = (oc_env.context_dir / f"{sid}.md").read_text()
    assert first == ctx
    assert all(_injected(r) == ctx for r in reqs), "the context must be byte-stable"


def test_remembered_fact_is_stored_and_reaches_the_next_session(
    oc_env: OpenCodeEnv, sidecar: SidecarProcess
) -> None:
    oc_env.run("remember that we deploy with blue-green releases")

    def stored() -> list[dict[str, Any]]:
        return [m for m in oc_env.search("blue-green") if "blue-green" in m["content"].lower()]

    hits = wait_until(stored, MEMORY_WAIT_S, 0.3, "the sidecar to store the blue-green memory")
    assert all(m["type"] != "event" for m in hits)

    sid2 = oc_env.run("hello again")
    first = _injected(oc_env.fake.conversation_requests(sid2)[0])
    assert "blue-green" in first, f"second session's first request lacks it:\n{first[:2000]}"


def test_compaction_carries_the_resume_pack(oc_env: OpenCodeEnv, server: OpenCodeServer) -> None:
    sid = server.create_session(title="compaction e2e")
    server.prompt(sid, "we decided to migrate the build to bazel (MARKER-E2E-BAZEL)")
    server.prompt(sid, "next we port the release pipeline")
    server.wait_idle(sid)
    pack_path = oc_env.context_dir / f"{sid}.compact.md"
    wait_until(
        lambda: pack_path.exists() and pack_path.read_text().strip(),
        MEMORY_WAIT_S,
        0.2,
        "the resume pack after the turn went idle",
    )
    before = pack_path.read_text()

    assert server.summarize(sid) is True

    compaction = [
        r for r in oc_env.fake.chat_requests(sid) if r.get("reply", "").startswith("## Summary")
    ]
    assert len(compaction) == 1, "expected one compaction request"
    body = "\n".join(user_texts(compaction[0]))
    after = pack_path.read_text() if pack_path.exists() else ""
    packs = [p.strip() for p in (before, after) if p.strip()]
    assert any(p in body for p in packs), f"no resume pack in the compaction prompt:\n{body}"
    heading = packs[0].splitlines()[0]
    assert heading.startswith("#") and heading in body


def test_deleting_a_session_stores_its_summary(oc_env: OpenCodeEnv, server: OpenCodeServer) -> None:
    sid = server.create_session(title="to be deleted")
    server.prompt(sid, "we decided that the on-call rotation changes on mondays")
    server.wait_idle(sid)
    _wait_for_session_seen(oc_env, sid)

    server.delete(sid)

    def summaries() -> list[dict[str, Any]]:
        return [m for m in oc_env.memories("--type", "event") if m.get("session_id") == sid]

    found = wait_until(summaries, MEMORY_WAIT_S, 0.3, "the summary of the deleted session")
    assert all(m["type"] == "event" for m in found)
    time.sleep(1.5)  # a second ending must not add another summary
    assert len(summaries()) == 1


def _sidecar_pid(oc_env: OpenCodeEnv) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        pid = int((oc_env.llmem_home / "sidecar.pid").read_text().strip())
        os.kill(pid, 0)
        return pid
    return None


def test_plugin_autostarts_the_sidecar(oc_env: OpenCodeEnv, sidecar: SidecarProcess) -> None:
    """No sidecar running + autostart: OpenCode's plugin starts `llmem-hooks run` detached."""
    sidecar.stop()
    oc_env.set_plugin_settings(autostart=True)
    pid = 0
    try:
        oc_env.opencode("debug", "info")
        pid = wait_until(lambda: _sidecar_pid(oc_env), 20, 0.1, "an autostarted sidecar")
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert b"run" in cmdline and any(b"llmem-hooks" in part for part in cmdline), cmdline
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert f"LLMEM_HOME={oc_env.llmem_home}".encode() in environ
        oc_env.opencode("debug", "info")  # a live sidecar: left alone
        assert _sidecar_pid(oc_env) == pid
    finally:
        oc_env.set_plugin_settings(autostart=False)
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            with contextlib.suppress(Exception):
                wait_until(lambda: _sidecar_pid(oc_env) is None, 10, 0.1, "the sidecar to stop")
        sidecar.start()


def test_sidecar_kill9_loses_and_duplicates_nothing(
    oc_env: OpenCodeEnv, server: OpenCodeServer, sidecar: SidecarProcess
) -> None:
    sidecar.stop()
    names = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")
    facts = {
        f"svc-{name}-e2e": f"remember that service svc-{name}-e2e listens on port {8100 + i}"
        for i, name in enumerate(names)
    }
    for token, text in facts.items():
        sid = server.create_session(title=token)
        server.prompt(sid, text)
        server.wait_idle(sid)

    # Catching up on 8 sessions (created -> context file, idle -> extraction) takes the
    # sidecar tens of ms: kill it from the moment its pid file appears, a little later on
    # every round, so that some rounds die in the middle of that work.
    for delay in (0.0, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32):
        sidecar.start()
        time.sleep(delay)
        sidecar.kill9()
    sidecar.start()

    deadline = time.monotonic() + 30
    counts: dict[str, int] = {}
    while time.monotonic() < deadline:
        counts = _knowledge_counts(oc_env, facts)
        if all(counts.values()):
            break
        time.sleep(0.25)
    missing = sorted(token for token, n in counts.items() if n == 0)
    assert not missing, f"lost after kill -9: {missing}\nsidecar log:\n{sidecar.log()}"
    time.sleep(2)  # idle quiet time + a pass: late duplicates would show up now
    counts = _knowledge_counts(oc_env, facts)
    assert counts == dict.fromkeys(facts, 1), counts
