"""End-to-end proof of issue 12 on the Copilot CLI side: per-prompt recall in the hook and
the memory tools through the plugin's MCP server, with the real Copilot CLI 1.0.102
(offline, BYOK against the fake provider) and a running sidecar (the query service).

The store holds 400 recent distractor memories of the project and one old plain fact.
The start-of-session context (ranked by type, confidence and recency within its budget)
never reaches the fact; then:

(a) a prompt asking about the fact carries it in its model request (the recall block);
(b) a ``memory_search`` tool call through the plugin's MCP server (``llmem-memory_search``)
    returns it in the tool result;
(c) ``memory_remember`` from a tool call is stored (in the session's project, though the
    plugin's server runs in the plugin folder) and found by the next session;
and `install --copilot` writes a user MCP config that `copilot mcp list` reads.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from copilot_harness import CopilotEnv, last_user_text, messages, session_context
from oc_harness import SidecarProcess

from llmem_hooks.agents.install import installed_launcher
from llmem_hooks.store import MemoryStore

pytestmark = [pytest.mark.e2e, pytest.mark.copilot]

FACT = "The staging database is called pg-orchid-7 (MARKER-OLD-FACT)"
EXE = Path(sys.executable).with_name("llmem-hooks")
REMEMBERED = "Release trains leave every Tuesday at 10:00 UTC (MARKER-CP-REMEMBERED)"
COMPONENTS = [
    "router",
    "parser",
    "scheduler",
    "cache",
    "uploader",
    "billing",
    "search",
    "auth",
    "mailer",
    "ui",
]
LIBRARIES = [
    "zod",
    "pydantic",
    "tokio",
    "celery",
    "redis",
    "vite",
    "jest",
    "ruff",
    "mypy",
    "esbuild",
]
TASKS = [
    "validation",
    "retries",
    "logging",
    "caching",
    "bundling",
    "linting",
    "typing",
    "tracing",
    "paging",
]


@pytest.fixture(scope="module")
def world(cp_env: CopilotEnv, cp_sidecar: SidecarProcess) -> Iterator[CopilotEnv]:
    """The module's world with the seeded store and a running sidecar."""
    rng = random.Random(12)
    now = datetime.now(UTC)
    with MemoryStore(cp_env.llmem_home / "memory.db") as store:
        store.add(
            "fact",
            FACT,
            project=cp_env.project_key,
            created_at=(now - timedelta(days=240)).isoformat().replace("+00:00", "Z"),
            dedupe=False,
        )
        for i in range(400):
            text = (
                f"Decision {i}: the {rng.choice(COMPONENTS)} module uses "
                f"{rng.choice(LIBRARIES)} for {rng.choice(TASKS)} (batch {i % 17})"
            )
            at = now - timedelta(minutes=400 - i)
            store.add(
                rng.choice(["decision", "fact", "procedure"]),
                text,
                project=cp_env.project_key,
                confidence=0.9,
                created_at=at.isoformat().replace("+00:00", "Z"),
                dedupe=False,
            )
    yield cp_env


def _tool_results(requests: list[dict[str, Any]]) -> list[str]:
    return [text for r in requests for role, text in messages(r) if role == "tool"]


def _tool_calls(requests: list[dict[str, Any]]) -> list[str]:
    return [r["reply"] for r in requests if str(r.get("reply", "")).startswith("tool:")]


def test_a_prompt_about_the_old_fact_carries_it(world: CopilotEnv) -> None:
    run = world.prompt("What is the staging database called?")
    first = run.first
    # The start context alone does not reach it: 400 newer memories fill its budget.
    start = (world.context_dir / f"{run.session_id}.md").read_text()
    assert start.count("- Decision ") >= 20 and "MARKER-OLD-FACT" not in start
    body = json.dumps(first["body"])
    assert body.count("MARKER-OLD-FACT") == 1, body[-3000:]  # once, not once per hook
    where = last_user_text(first) + session_context(first)
    assert "<llmem-recall>" in where and "pg-orchid-7" in where
    # A follow-up prompt of the same session does not get it again.
    again = world.prompt("And what is the staging database called again?", resume=run.session_id)
    last = last_user_text(again.first)
    assert "MARKER-OLD-FACT" not in last


def test_b_memory_search_through_the_plugin_mcp_server(world: CopilotEnv) -> None:
    # The launcher answers Copilot's handshake itself from the copy the Python front left
    # at the first start, and hands the tool call over to Python.
    handshake = world.llmem_home / "mcp-front" / "handshake"
    if not handshake.is_file():
        world.prompt("hello")
    assert handshake.is_file()
    run = world.prompt('USE-TOOL memory_search {"query": "staging database"}')
    offered = {t["function"]["name"] for t in run.first["body"]["tools"]}
    assert {f"llmem-memory_{n}" for n in ("search", "remember", "forget", "get", "timeline")} <= (
        offered
    ), sorted(offered)
    assert _tool_calls(run.requests) == ["tool:llmem-memory_search"]
    results = _tool_results(run.requests)
    assert len(results) == 1 and "pg-orchid-7" in results[0], results
    assert "(fact, " in results[0] and "Decision" not in results[0]
    assert '{"result"' not in results[0]  # plain text, not text plus a JSON copy


def test_c_memory_remember_is_stored_and_found_by_the_next_session(world: CopilotEnv) -> None:
    args = json.dumps({"content": REMEMBERED, "type": "decision", "tags": ["release"]})
    run = world.prompt(f"USE-TOOL memory_remember {args}")
    assert _tool_calls(run.requests) == ["tool:llmem-memory_remember"]
    results = _tool_results(run.requests)
    assert len(results) == 1 and results[0].startswith("Stored as ["), results
    # (The sidecar also keeps the session's summary and episode, which quote the prompt.)
    stored = [m for m in world.memories("--type", "decision") if "MARKER-CP-REM" in m["content"]]
    assert len(stored) == 1, stored
    mem = stored[0]
    assert mem["content"] == REMEMBERED and mem["tags"] == ["release"]
    # The plugin's server runs in the plugin folder; the project is the session's.
    assert mem["project"] == world.project_key
    assert mem.get("session_id") == run.session_id
    # The next session asks, and its request carries it.
    nxt = world.prompt("When do the release trains leave?")
    assert "MARKER-CP-REMEMBERED" in json.dumps(nxt.first["body"])
    assert "MARKER-CP-REMEMBERED" in last_user_text(nxt.first) + session_context(nxt.first)


def test_install_copilot_registers_the_server_copilot_reads(
    world: CopilotEnv, tmp_path: Path
) -> None:
    """`install --copilot` next to a server Copilot itself added: `copilot mcp list` shows
    both, ours with this installation's absolute command; uninstall leaves theirs."""
    env = {**world.env, "COPILOT_HOME": str(tmp_path / "copilot-home")}

    def copilot(*args: str) -> str:
        proc = subprocess.run(
            [str(world.copilot_bin), *args], env=env, capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    def llmem(*args: str) -> None:
        proc = subprocess.run(
            [str(EXE), *args], env=env, capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr

    copilot("mcp", "add", "other", "--", "/bin/echo", "hi")
    llmem("install", "--copilot")
    servers = json.loads(copilot("mcp", "list", "--json"))["mcpServers"]
    assert set(servers) == {"other", "llmem"}
    ours = servers["llmem"]
    # Through this installation's launcher (the checkout's, for an editable install).
    assert [ours["command"], *ours["args"]] == ["/bin/sh", str(installed_launcher()), "mcp"]
    assert ours["source"] == "user" and ours["enabled"] is True
    llmem("uninstall", "--copilot")
    assert set(json.loads(copilot("mcp", "list", "--json"))["mcpServers"]) == {"other"}
