"""`llmem-hooks mcp` through the official MCP SDK client over stdio: a real subprocess,
a real store, no sidecar (the in-process fallback of the query service) unless a test
starts one."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support.mcp_client import EXE, mcp_env, run_calls

from llmem_hooks.agents import mcp_server
from llmem_hooks.project import project_key
from llmem_hooks.store import MemoryStore

TOOLS = {"memory_search", "memory_remember", "memory_forget", "memory_get", "memory_timeline"}
SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def _id(text: str) -> str:
    return text.split("[", 1)[1].split("]", 1)[0]


def test_the_five_tools_and_their_descriptions(repo: Path, llmem_home: Path) -> None:
    tools, _ = run_calls([], repo)
    by_name = {t.name: t for t in tools}
    assert set(by_name) == TOOLS
    search = by_name["memory_search"].description or ""
    assert "BEFORE" in search and "conventions" in search and "failure" in search
    remember = by_name["memory_remember"].description or ""
    assert "decision" in remember and "preference" in remember and "worked" in remember
    search_schema = by_name["memory_search"].inputSchema
    assert set(search_schema["properties"]) == {"query", "limit", "type", "path"}
    assert search_schema["required"] == []  # a query, or a path (issue 22)
    assert set(by_name["memory_remember"].inputSchema["required"]) == {"content"}
    assert set(by_name["memory_forget"].inputSchema["required"]) == {"id", "reason"}


def test_remember_search_get_timeline_forget(repo: Path, llmem_home: Path) -> None:
    fact = "Integration tests need the local Postgres on port 5433"
    _, out = run_calls(
        [
            ("memory_remember", {"content": fact, "type": "procedure", "tags": ["tests"]}),
            ("memory_remember", {"content": "  " + fact.upper(), "type": "procedure"}),
            ("memory_search", {"query": "postgres port for integration tests"}),
        ],
        repo,
    )
    (err1, stored), (err2, dup), (err3, found) = out
    assert not (err1 or err2 or err3)
    assert stored.startswith("Stored as [")
    mid = _id(stored)
    assert dup == f"Already known as [{mid}] (merged, nothing new stored)."
    assert f"- [{mid}] (procedure, " in found and "5433" in found
    assert len(found.splitlines()) == 2  # the header and one line: compact
    with MemoryStore(llmem_home / "memory.db") as st:
        mems = st.list_all(limit=10)
    assert len(mems) == 1 and mems[0]["project"] == project_key(repo)

    _, out = run_calls(
        [
            ("memory_get", {"ids": [mid, "ffffffff"]}),
            ("memory_timeline", {"id": mid}),
            ("memory_forget", {"id": mid, "reason": "we moved to port 5434"}),
            ("memory_search", {"query": "postgres port for integration tests"}),
            ("memory_forget", {"id": "ffffffff", "reason": "no such memory"}),
        ],
        repo,
    )
    (_, full), (_, timeline), (_, forgot), (_, after), (err, missing) = out
    assert fact in full and "type: procedure" in full and "tests" in full
    assert "Not found: ffffffff" in full
    assert f"[{mid}]" in timeline and "<-" in timeline
    assert forgot == f"Forgot [{mid}]."
    assert after.startswith("No memory matches")
    assert err and "ffffffff" in missing  # a clear error result, not a crash


def test_remember_redacts_and_scopes_to_the_project(
    repo: Path, tmp_path: Path, llmem_home: Path
) -> None:
    other = tmp_path / "elsewhere"
    other.mkdir()
    with MemoryStore(llmem_home / "memory.db") as st:
        st.add("fact", "The deploy key rotation happens monthly (OTHER-PROJECT)", project="p-x")
    _, out = run_calls(
        [
            ("memory_remember", {"content": f"Use token {SECRET} for the deploy key bot"}),
            ("memory_search", {"query": "deploy key"}),
        ],
        other,
        args=("--project-dir", str(repo)),
    )
    (_, stored), (_, found) = out
    assert stored.startswith("Stored as [")
    assert SECRET not in found and "OTHER-PROJECT" not in found
    with MemoryStore(llmem_home / "memory.db") as st:
        mine = [m for m in st.list_all(limit=10) if m["project"] == project_key(repo)]
    assert len(mine) == 1 and SECRET not in mine[0]["content"]


def test_project_from_the_copilot_session(
    repo: Path, tmp_path: Path, llmem_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plugin's server runs in the plugin folder: the project comes from the Copilot
    session named by COPILOT_AGENT_SESSION_ID (its events.jsonl)."""
    copilot_home = tmp_path / "copilot-home"
    sid = "4f2ad85e-fa2c-402f-a6ce-9aedfb155865"
    folder = copilot_home / "session-state" / sid
    monkeypatch.setenv("COPILOT_HOME", str(copilot_home))
    # Copilot starts its MCP servers before it writes the session's first line.
    early = mcp_server.ProjectDir(environ={"COPILOT_AGENT_SESSION_ID": sid})
    assert early() == os.getcwd()
    folder.mkdir(parents=True)
    start = {
        "type": "session.start",
        "id": "e1",
        "timestamp": "2026-11-26T04:00:00.000Z",
        "parentId": None,
        "data": {
            "sessionId": sid,
            "startTime": "2026-11-26T04:00:00.000Z",
            "context": {"cwd": str(repo)},
        },
    }
    (folder / "events.jsonl").write_text(json.dumps(start) + "\n")
    plugin_dir = tmp_path / "plugin"
    plugin_dir.mkdir()
    env = mcp_env(COPILOT_HOME=str(copilot_home), COPILOT_AGENT_SESSION_ID=sid)
    _, out = run_calls(
        [("memory_remember", {"content": "Copilot sessions here use the fast model"})],
        plugin_dir,
        env=env,
    )
    assert out[0][1].startswith("Stored as [")
    with MemoryStore(llmem_home / "memory.db") as st:
        (mem,) = st.list_all(limit=10)
    assert mem["project"] == project_key(repo) and mem["session_id"] == sid
    # The same rule, in-process; the early resolver finds the session now, and keeps it.
    assert early() == str(repo) and early.fixed == str(repo)
    assert mcp_server.project_dir(environ={"COPILOT_AGENT_SESSION_ID": sid}) == str(repo)
    assert mcp_server.project_dir(environ={"COPILOT_AGENT_SESSION_ID": "../x"}) == os.getcwd()
    assert mcp_server.project_dir(str(repo / "sub"), environ={}) == str(repo / "sub")


def test_bad_arguments_exit_2_with_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [str(EXE), "mcp", "--bogus"], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        "error: unrecognized arguments: --bogus (see llmem-hooks mcp --help)"
    ]
    proc = subprocess.run(
        [str(EXE), "mcp", "--project-dir", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and proc.stderr.startswith("error: --project-dir")


def test_the_tools_read_the_same_in_both_agents() -> None:
    """The OpenCode plugin's custom tools and this server's carry the same names and the
    same descriptions (when to search, when to remember), word for word: both come from
    agents/tools.json, written into the installed plugin (see tests/agents/test_tool_wording.py)."""
    import json
    import re

    from llmem_hooks.agents import install, mcp_server
    from llmem_hooks.agents.tool_wording import tool_wording

    installed = install.plugin_bytes().decode()
    line = re.search(r"^const INSTALLED_TOOLS: unknown = (\{.*\}) // llmem-hooks", installed, re.M)
    assert line is not None
    plugin = {name: spec["description"] for name, spec in json.loads(line.group(1)).items()}
    ours = {
        "memory_search": mcp_server.SEARCH_DESC,
        "memory_remember": mcp_server.REMEMBER_DESC,
        "memory_forget": mcp_server.FORGET_DESC,
        "memory_get": mcp_server.GET_DESC,
        "memory_timeline": mcp_server.TIMELINE_DESC,
    }
    assert plugin == ours == {n: s["description"] for n, s in tool_wording().items()}
