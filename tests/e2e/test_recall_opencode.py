"""End-to-end: per-prompt recall and the memory_* tools inside a real OpenCode (issue 12).

A store with one old plain fact and 400 recent distractors; the real sidecar
(``llmem-hooks run``) serves the query service; ``opencode serve`` runs the plugin against
the fake provider on 127.0.0.1. Proves:

(a) a prompt asking about the fact carries it in its model request (a synthetic part of the
    user's message, marked ``<llmem-recall>``), while the start-of-session context does not;
    the part is stored as synthetic in opencode.db and never becomes part of an episode;
(prefix) two consecutive model requests of a session share their prefix byte for byte, and
    the session's system block does not change between turns;
(b) a ``memory_search`` tool call returns the fact in the tool result; ``memory_get`` with a
    short id from the recall block returns its full text;
(c) ``memory_remember`` from a tool call is stored, and the next session finds it.
"""

from __future__ import annotations

import json
import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import text_of
from oc_harness import OpenCodeEnv, OpenCodeServer, SidecarProcess, system_texts, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.opencode]

FACT = "The nightly backup job of the ledger service runs through quokka-sync on host bravo."
QUESTION = "Which tool runs the nightly backup job of the ledger service?"
WORDS = ["billing", "search", "gateway", "auth", "reports", "mailer", "scheduler", "ledger-ui"]


def _seed(world: OpenCodeEnv, tmp_path: Path) -> None:
    """One old fact of this project, then 400 recent distractors (the start-of-session
    context, ranked by recency within its budget, never reaches the fact)."""
    project = world.project_key
    mems: list[dict[str, Any]] = [
        {"type": "fact", "content": FACT, "created_at": "2025-03-04T10:00:00Z", "project": project}
    ]
    for i in range(400):
        w = WORDS[i % len(WORDS)]
        mems.append(
            {
                "type": ("decision", "fact", "procedure")[i % 3],
                "content": f"The {w} service keeps its settings in {w}-{i}.yaml; "
                f"team {i % 9} reviews changes to it on {('Monday', 'Thursday')[i % 2]}s.",
                "created_at": f"2026-11-{1 + i % 25:02d}T{i % 24:02d}:{i % 60:02d}:00Z",
                "project": project if i % 2 else None,
            }
        )
    seed = tmp_path / "seed.json"
    seed.write_text(json.dumps(mems))
    world.llmem("import", str(seed))


@pytest.fixture(scope="module")
def world(oc_env: OpenCodeEnv, tmp_path_factory: pytest.TempPathFactory) -> OpenCodeEnv:
    _seed(oc_env, tmp_path_factory.mktemp("seed"))
    return oc_env


def _status(sock: Path) -> dict[str, Any] | None:
    """The service's ``status`` over its socket, or None while nothing answers."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(2)
            s.connect(str(sock))
            s.sendall(b'{"v": 1, "id": 1, "method": "status", "params": {}}\n')
            reply = s.makefile("rb").readline()
    except OSError:
        return None
    result = json.loads(reply).get("result")
    return result if isinstance(result, dict) else None


@pytest.fixture(scope="module")
def service(world: OpenCodeEnv, oc_sidecar: SidecarProcess) -> SidecarProcess:
    """The sidecar, once its query service answers on the socket the plugin was given."""
    sock = Path(json.loads(world.plugin_settings_path.read_text())["socket"])
    status = wait_until(lambda: _status(sock), 20, 0.1, f"the query service\n{oc_sidecar.log()}")
    assert status["memories"] == 401
    return oc_sidecar


@pytest.fixture(scope="module")
def server(world: OpenCodeEnv, service: SidecarProcess) -> Iterator[OpenCodeServer]:
    srv = world.serve()
    try:
        yield srv
    finally:
        srv.stop()


def _new_session(world: OpenCodeEnv, srv: OpenCodeServer, title: str) -> str:
    """A session whose start-of-session context file exists before its first prompt (the
    race between the sidecar and the first request is not what these tests are about)."""
    sid = srv.create_session(title=title)
    wait_until((world.context_dir / f"{sid}.md").exists, 20, 0.05, "the context file")
    return sid


def _messages(req: dict[str, Any]) -> list[dict[str, Any]]:
    return list(req["body"].get("messages", []))


def _last_user(req: dict[str, Any]) -> str:
    users = [m for m in _messages(req) if m.get("role") == "user"]
    return text_of(users[-1].get("content")) if users else ""


def _tool_results(req: dict[str, Any]) -> list[str]:
    return [text_of(m.get("content")) for m in _messages(req) if m.get("role") == "tool"]


def _parts(world: OpenCodeEnv, sid: str) -> list[dict[str, Any]]:
    con = sqlite3.connect(f"file:{world.opencode_db}?mode=ro", uri=True, timeout=5)
    try:
        rows = con.execute(
            "SELECT data FROM part WHERE session_id = ? ORDER BY id", (sid,)
        ).fetchall()
    finally:
        con.close()
    return [json.loads(r[0]) for r in rows]


def test_a_prompt_about_the_old_fact_carries_it(
    world: OpenCodeEnv, server: OpenCodeServer, service: SidecarProcess
) -> None:
    sid = _new_session(world, server, "recall")
    server.prompt(sid, QUESTION)
    (req,) = world.fake.chat_requests(sid)
    last = _last_user(req)
    assert last.startswith(QUESTION)
    assert "<llmem-recall>" in last and "quokka-sync" in last, last
    assert all("quokka-sync" not in s for s in system_texts(req))  # the start context misses it

    stored = [p for p in _parts(world, sid) if "<llmem-recall>" in str(p.get("text"))]
    assert len(stored) == 1
    assert stored[0]["synthetic"] is True and stored[0]["metadata"] == {"llmem": "recall"}

    def episodes() -> list[dict[str, Any]]:
        return [m for m in world.memories("--type", "conversation") if m["session_id"] == sid]

    eps = wait_until(episodes, 30, 0.5, f"the episode of the turn\n{service.log()}")
    for ep in eps:
        assert "llmem-recall" not in ep["content"] and "quokka-sync" not in ep["content"]


def test_consecutive_requests_share_their_prefix_byte_for_byte(
    world: OpenCodeEnv, server: OpenCodeServer
) -> None:
    sid = _new_session(world, server, "prefix")
    server.prompt(sid, QUESTION)
    server.wait_idle(sid)
    # the sidecar rewrites the session's context file when it goes idle; the plugin keeps
    # sending the block the session started with
    ctx = world.context_dir / f"{sid}.md"
    ctx.write_text(ctx.read_text() + "\n- MARKER-REWRITTEN-AFTER-TURN-1\n")
    server.prompt(sid, "And which host does the ledger backup job run on?")
    first, second = world.fake.chat_requests(sid)
    a, b = _messages(first), _messages(second)
    assert len(b) > len(a)
    for i, msg in enumerate(a):
        assert json.dumps(b[i]) == json.dumps(msg), f"message {i} differs"
    assert system_texts(first) == system_texts(second)
    assert "MARKER-REWRITTEN" not in json.dumps(second["body"])


def test_memory_search_and_get_tools(world: OpenCodeEnv, server: OpenCodeServer) -> None:
    sid = _new_session(world, server, "search tool")
    server.prompt(sid, 'USE-TOOL memory_search {"query": "nightly backup ledger service"}')
    reqs = world.fake.chat_requests(sid)
    assert reqs[0]["reply"] == "tool:memory_search"
    (result,) = _tool_results(reqs[-1])
    assert "quokka-sync" in result, result
    line = next(ln for ln in result.splitlines() if "quokka-sync" in ln)
    short = line.split("]")[0].lstrip("[")
    assert 4 <= len(short) <= 12

    server.prompt(sid, f'USE-TOOL memory_get {{"ids": ["{short}"]}}')
    got = _tool_results(world.fake.chat_requests(sid)[-1])[-1]
    assert FACT in got and short in got, got


def test_memory_remember_is_found_by_the_next_session(
    world: OpenCodeEnv, server: OpenCodeServer
) -> None:
    note = "The ledger service deploys with the pelican-ship script from the ops folder."
    sid = _new_session(world, server, "remember tool")
    args = json.dumps({"content": note, "type": "decision", "tags": ["deploy"]})
    server.prompt(sid, f"USE-TOOL memory_remember {args}")
    (result,) = _tool_results(world.fake.chat_requests(sid)[-1])
    assert "status: stored" in result, result
    stored = [m for m in world.memories() if m["content"] == note]
    assert len(stored) == 1
    assert stored[0]["type"] == "decision" and stored[0]["session_id"] == sid
    assert stored[0]["project"] == world.project_key

    later = _new_session(world, server, "next session")
    server.prompt(later, "How does the ledger service deploy?")
    # the newest decision: in the session's start context (so recall, which skips what the
    # session was given there, does not repeat it) or else in the recall block
    first = world.fake.chat_requests(later)[0]
    assert any("pelican-ship" in t for t in [*system_texts(first), _last_user(first)])
    server.prompt(later, 'USE-TOOL memory_search {"query": "pelican-ship deploy"}')
    (found,) = _tool_results(world.fake.chat_requests(later)[-1])
    assert "pelican-ship" in found, found


def test_tools_work_without_the_plugin_package(world: OpenCodeEnv, service: SidecarProcess) -> None:
    """Loaded from a folder where ``@opencode-ai/plugin`` cannot be imported (listed in
    opencode.json by path), the plugin declares its tools in plain JSON Schema, and
    OpenCode 1.18.33 offers and runs them all the same."""
    config_dir = Path(world.env["XDG_CONFIG_HOME"]) / "opencode"
    installed = config_dir / "plugin" / "llmem.ts"
    config_file = config_dir / "opencode.json"
    original = config_file.read_text()
    bare = world.root / "bare-plugin" / "llmem.ts"
    bare.parent.mkdir(exist_ok=True)
    bare.write_bytes(installed.read_bytes())
    installed.unlink()
    config_file.write_text(json.dumps({**json.loads(original), "plugin": [bare.as_uri()]}))
    srv = world.serve()
    try:
        sid = _new_session(world, srv, "bare plugin")
        srv.prompt(sid, 'USE-TOOL memory_search {"query": "nightly backup ledger service"}')
        reqs = world.fake.chat_requests(sid)
        offered = {t["function"]["name"]: t["function"] for t in reqs[0]["body"]["tools"]}
        params = offered["memory_search"]["parameters"]
        assert "$schema" not in params  # not zod's JSON Schema: ours, as written
        assert params["properties"]["limit"]["type"] == ["integer", "null"]
        assert reqs[0]["reply"] == "tool:memory_search"
        (result,) = _tool_results(reqs[-1])
        assert "quokka-sync" in result, result
    finally:
        srv.stop()
        config_file.write_text(original)
        world.install_plugin()
