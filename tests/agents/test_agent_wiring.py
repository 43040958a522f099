"""Issue 18, item 11 (silent failures) and the agent overhead fixes that can be tested
without the agents: the Copilot plugin launcher without PATH, the "memory unavailable"
notice, detached end-of-turn hooks, `doctor`'s wiring and store checks (an OpenCode 2.x
store or version named), the adapter's one warning line, and the MCP front door."""

from __future__ import annotations

import io
import json
import logging
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.copilot_home import launcher_env

from llmem_hooks.adapters.opencode import OpenCodeAdapter
from llmem_hooks.agents import copilot_hook
from llmem_hooks.agents.copilot_hook import _session_id_problem
from llmem_hooks.events import session_id_problem

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "bin" / "llmem-hook"
EXE = Path(sys.executable).parent / "llmem-hooks"
SID = "0b8c1d2e-3f40-4a5b-8c6d-7e8f9a0b1c2d"


@pytest.fixture
def world(tmp_path: Path) -> dict[str, str]:
    """An environment with every home under tmp_path and no llmem-hooks on PATH."""
    return launcher_env(tmp_path)


def _payload(tmp_path: Path, **extra: Any) -> bytes:
    now_ms = int(time.time() * 1000)  # Copilot's time of the call
    body = {"sessionId": SID, "cwd": str(tmp_path), "timestamp": now_ms, **extra}
    return json.dumps(body, ensure_ascii=False).encode()  # as JSON.stringify writes it


def _plugin_copy(tmp_path: Path) -> Path:
    """The launcher outside this checkout (no .venv beside it), as an installed plugin."""
    dest = tmp_path / "plugin" / "bin"
    dest.mkdir(parents=True)
    (dest / "llmem-hook").write_bytes(LAUNCHER.read_bytes())
    (dest / "llmem-hook").chmod(0o755)
    return dest / "llmem-hook"


def _launch(launcher: Path, env: dict[str, str], *args: str, stdin: bytes = b"") -> Any:
    return subprocess.run(
        ["sh", str(launcher), *args],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )


# -- the launcher ------------------------------------------------------------------------------
def test_launcher_finds_the_recorded_entry_point_without_path(
    world: dict[str, str], tmp_path: Path
) -> None:
    launcher = _plugin_copy(tmp_path)
    llmem = Path(world["LLMEM_HOME"])
    subprocess.run(
        [str(EXE), "store", "MARKER-LAUNCHER-FACT the build uses make", "--type", "fact"],
        cwd=tmp_path,
        env=world,
        check=True,
        capture_output=True,
        timeout=60,
    )
    (llmem / "entry-point").write_text(f"{EXE}\n")
    proc = _launch(launcher, world, "copilot", "sessionStart", stdin=_payload(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "MARKER-LAUNCHER-FACT" in json.loads(proc.stdout)["additionalContext"]


def test_launcher_says_once_when_llmem_hooks_is_missing(
    world: dict[str, str], tmp_path: Path
) -> None:
    launcher = _plugin_copy(tmp_path)
    (Path(world["LLMEM_HOME"]) / "logs").mkdir(mode=0o700)
    proc = _launch(launcher, world, "copilot", "sessionStart", stdin=_payload(tmp_path))
    assert proc.returncode == 0
    notice = json.loads(proc.stdout)["additionalContext"]
    assert "memory is unavailable" in notice and "llmem-hooks doctor" in notice
    assert b"memory unavailable" in proc.stderr
    log = (Path(world["LLMEM_HOME"]) / "logs" / "copilot-hook.log").read_text()
    assert "launcher copilot sessionStart" in log
    # Every other event stays silent: the notice is given once per session.
    for event in ("userPromptSubmitted", "agentStop", "sessionEnd"):
        proc = _launch(launcher, world, "copilot", event, stdin=_payload(tmp_path))
        assert (proc.returncode, proc.stdout) == (0, b""), event
    assert _launch(launcher, world, "mcp").returncode == 1  # Copilot reports a dead server


def test_launcher_detaches_end_of_turn_hooks(world: dict[str, str], tmp_path: Path) -> None:
    """agentStop returns before the hook process has even read its payload; the payload
    still reaches it (through fd 3: a background job's stdin would be /dev/null)."""
    launcher = _plugin_copy(tmp_path)
    seen = tmp_path / "seen.txt"
    slow = tmp_path / "llmem-hooks"
    slow.write_text(
        f'#!/bin/sh\nsleep 2\n{{ echo "$*"; cat; }} > "{seen}.tmp"\nmv "{seen}.tmp" "{seen}"\n'
    )
    slow.chmod(0o755)
    env = {**world, "LLMEM_HOOKS_BIN": str(slow)}
    t0 = time.monotonic()
    proc = _launch(launcher, env, "copilot", "agentStop", stdin=b'{"sessionId": "x"}')
    returned = time.monotonic() - t0
    assert (proc.returncode, proc.stdout) == (0, b"")
    assert not seen.exists() and returned < 2  # it did not wait for the 2 s hook
    deadline = time.monotonic() + 30
    while not seen.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert seen.read_text() == 'hook copilot agentStop\n{"sessionId": "x"}'


def test_repo_plugin_files_use_the_launcher() -> None:
    from llmem_hooks.agents.install import is_our_mcp_entry, plugin_hooks, plugin_mcp_server

    assert json.loads((ROOT / "hooks.json").read_text()) == plugin_hooks()
    manifest = json.loads((ROOT / ".github" / "plugin" / "plugin.json").read_text())
    assert manifest["mcpServers"]["llmem"] == plugin_mcp_server()
    assert is_our_mcp_entry(manifest["mcpServers"]["llmem"])
    assert os.access(LAUNCHER, os.X_OK)


def test_install_records_the_entry_point(world: dict[str, str], tmp_path: Path) -> None:
    code = "from llmem_hooks.agents.install import install_copilot; install_copilot()"
    subprocess.run([sys.executable, "-c", code], env=world, check=True, timeout=60)
    entry = Path(world["LLMEM_HOME"]) / "entry-point"
    assert entry.read_text().strip() == str(EXE)
    assert entry.stat().st_mode & 0o777 == 0o600


def test_session_start_says_when_the_store_is_broken(world: dict[str, str], tmp_path: Path) -> None:
    (Path(world["LLMEM_HOME"]) / "memory.db").write_bytes(b"this is not a database" * 100)
    proc = subprocess.run(
        [str(EXE), "hook", "copilot", "sessionStart"],
        input=_payload(tmp_path),
        capture_output=True,
        env=world,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0
    assert "memory is unavailable" in json.loads(proc.stdout)["additionalContext"]
    # Bad input from Copilot is only logged: nothing for the model.
    proc = subprocess.run(
        [str(EXE), "hook", "copilot", "sessionStart"],
        input=b"{not json",
        capture_output=True,
        env=world,
        timeout=60,
        check=False,
    )
    assert (proc.returncode, proc.stdout) == (0, b"")


@pytest.mark.parametrize(
    "sid",
    ["ok-1", "a\nb", "a\x85b", "a\u2028b", " lead", "../x", "", "x" * 300, "a/b", "tab\tx", "é"],
)
def test_hook_session_id_rule_matches_events(sid: str) -> None:
    assert (_session_id_problem(sid) is None) == (session_id_problem(sid) is None)


# -- doctor ------------------------------------------------------------------------------------
def _doctor(env: dict[str, str]) -> dict[str, dict[str, Any]]:
    proc = subprocess.run(
        [str(EXE), "doctor", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.stdout.strip(), proc.stderr
    data = json.loads(proc.stdout)
    checks = data["checks"] if isinstance(data, dict) else data
    return {c["name"]: c for c in checks}


OPENCODE_SCHEMA = ROOT / "tests" / "fixtures" / "opencode_schema.sql"  # 1.18.33's own


def _opencode_db(path: Path, v2: bool) -> None:
    """An opencode.db with OpenCode 1.18's schema (which already has an empty
    ``session_message``); ``v2``: as OpenCode 2 leaves it, a ``session_v2`` table and a
    message in ``session_message`` newer than every 1.x message."""
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    con.executescript(OPENCODE_SCHEMA.read_text())
    if v2:
        con.execute("CREATE TABLE session_v2 (id TEXT PRIMARY KEY, data TEXT NOT NULL)")
        con.execute("PRAGMA foreign_keys = OFF")
        con.execute(
            "INSERT INTO session_message VALUES ('msg_2', 'ses_2', 'user', 1, ?, ?, '{}')",
            (1795700000000, 1795700000000),
        )
    con.commit()
    con.close()


def test_doctor_names_the_wiring(world: dict[str, str], tmp_path: Path) -> None:
    code = (
        "from llmem_hooks.agents.install import install_copilot, install_opencode; "
        "install_copilot(); install_opencode()"
    )
    subprocess.run([sys.executable, "-c", code], env=world, check=True, timeout=60)
    checks = _doctor(world)
    for name in ("opencode_plugin", "copilot_hooks", "copilot_mcp"):
        assert checks[name]["status"] == "ok", checks[name]
    assert str(EXE) in checks["copilot_hooks"]["detail"]  # the launcher's entry point
    # The hooks run the launcher, which finds llmem-hooks through the entry point: one
    # that names a llmem-hooks that is gone is said.
    entry = Path(world["LLMEM_HOME"]) / "entry-point"
    entry.write_text("/gone/llmem-hooks\n")
    checks = _doctor(world)
    assert checks["copilot_hooks"]["status"] == "warn"
    assert "/gone/llmem-hooks" in checks["copilot_hooks"]["detail"]
    entry.write_text(f"{EXE}\n")
    # The hooks, their launcher and the MCP server name what is gone: doctor says so.
    hooks = Path(world["COPILOT_HOME"]) / "hooks" / "llmem.json"
    launcher = str(ROOT / "bin" / "llmem-hook")
    assert launcher in hooks.read_text()  # the plugin's launcher (editable: the checkout's)
    hooks.write_text(hooks.read_text().replace(launcher, "/gone/llmem-hooks"))
    mcp = Path(world["COPILOT_HOME"]) / "mcp-config.json"
    assert launcher in mcp.read_text()  # the MCP server through the launcher too
    mcp.write_text(mcp.read_text().replace(launcher, "/gone/llmem-hooks/bin/llmem-hook"))
    settings = Path(world["LLMEM_HOME"]) / "plugin.json"
    settings.write_text(settings.read_text().replace(str(EXE), "/gone/llmem-hooks"))
    checks = _doctor(world)
    for name in ("opencode_plugin", "copilot_hooks", "copilot_mcp"):
        assert checks[name]["status"] == "warn" and "/gone/llmem-hooks" in checks[name]["detail"]


def test_doctor_names_an_opencode_2_store_and_version(
    world: dict[str, str], tmp_path: Path
) -> None:
    db = Path(world["XDG_DATA_HOME"]) / "opencode" / "opencode.db"
    _opencode_db(db, v2=False)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "opencode"  # the agent's own binary stands in: only --version is asked
    fake.write_text("#!/bin/sh\necho 1.18.33\n")
    fake.chmod(0o755)
    env = {**world, "PATH": f"{bin_dir}:{world['PATH']}"}
    checks = _doctor(env)
    assert checks["opencode_store"]["status"] == "ok"
    assert checks["opencode_version"]["status"] == "ok"
    db.unlink()
    _opencode_db(db, v2=True)
    fake.write_text("#!/bin/sh\necho 2.0.14\n")
    checks = _doctor(env)
    store, version = checks["opencode_store"], checks["opencode_version"]
    assert store["status"] == "warn" and "not supported" in store["detail"]
    assert "session_v2" in store["detail"] and "session_message" in store["detail"]
    assert version["status"] == "warn" and "2.0.14 is not supported" in version["detail"]


def test_adapter_warns_once_about_a_2x_store(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "opencode.db"
    _opencode_db(db, v2=True)
    adapter = OpenCodeAdapter(db)
    with caplog.at_level(logging.WARNING, logger="llmem_hooks.adapters.opencode"):
        for _ in range(3):
            assert adapter.poll(None) == ([], None)
    lines = [r.getMessage() for r in caplog.records if "not supported" in r.getMessage()]
    assert len(lines) == 1 and "OpenCode 2.x" in lines[0], lines
    assert adapter.unsupported() is not None
    v1 = tmp_path / "v1.db"
    _opencode_db(v1, v2=False)
    assert OpenCodeAdapter(v1).unsupported() is None


# -- the MCP front door ------------------------------------------------------------------------
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


def _mcp_session(env: dict[str, str], messages: list[Any]) -> list[dict[str, Any]]:
    """Send each message and, for a request, wait for its answer (stdin stays open, as a
    client keeps it: the SDK drops what is in flight at end of input)."""
    proc = subprocess.Popen(
        [str(EXE), "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )
    assert proc.stdin is not None and proc.stdout is not None
    out: list[dict[str, Any]] = []
    try:
        for message in messages:
            line = message if isinstance(message, str) else json.dumps(message)
            proc.stdin.write(line.encode() + b"\n")
            proc.stdin.flush()
            if isinstance(message, str) or "id" in message:
                out.append(json.loads(proc.stdout.readline()))
        proc.stdin.close()
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return out


def test_mcp_front_answers_like_the_sdk(world: dict[str, str], tmp_path: Path) -> None:
    hello = [
        INIT,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "ping"},
    ]
    cache = Path(world["LLMEM_HOME"]) / ".mcp-front-cache.json"
    cold = _mcp_session(world, hello)  # the SDK answers, and fills the cache
    assert cache.exists() and cache.stat().st_mode & 0o777 == 0o600
    warm = _mcp_session(world, hello)  # the front answers from it
    assert warm == cold
    assert any(t["name"] == "memory_search" for t in warm[1]["result"]["tools"])
    # An unknown protocol version gets the SDK's latest, as the SDK would answer.
    odd = _mcp_session(world, [{**INIT, "params": {**INIT["params"], "protocolVersion": "1999"}}])
    assert odd[0]["result"]["protocolVersion"] == json.loads(cache.read_text())["latest"]
    # A tool call after the front's answers: the SDK server takes over with the replayed
    # initialize, whose own answer never reaches the client.
    calls = _mcp_session(
        world,
        [
            *hello[:3],
            {
                "jsonrpc": "2.0",
                "id": 4,
                "method": "tools/call",
                "params": {"name": "memory_search", "arguments": {"query": "deploy"}},
            },
            {"jsonrpc": "2.0", "id": 5, "method": "tools/list"},
        ],
    )
    assert [m.get("id") for m in calls] == [1, 2, 4, 5], calls
    assert "No memory matches" in calls[2]["result"]["content"][0]["text"]
    assert calls[3] == warm[1] | {"id": 5}


def test_mcp_front_answers_from_its_cache_with_the_standard_library_alone(
    world: dict[str, str],
) -> None:
    """The agent's first turn waits for ``initialize`` and ``tools/list``: answered from
    the cache, ``llmem-hooks mcp`` loads neither the server module (argument parser,
    service client, rendering) nor ``typing``, ``threading``, ``socket`` or ``pathlib``'s
    users; the SDK server, and all of that, only for the first tool call."""
    hello = [INIT, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]
    _mcp_session(world, hello)  # fills the cache
    probe = (
        "import io, json, sys\n"
        "from llmem_hooks.cli import main\n"
        f"lines = {json.dumps([json.dumps(m) for m in hello])!r}\n"
        "data = ('\\n'.join(json.loads(lines)) + '\\n').encode()\n"
        "sys.stdin = io.TextIOWrapper(io.BytesIO(data))\n"
        "out = io.BytesIO(); sys.stdout = io.TextIOWrapper(out)\n"
        "code = main(['mcp']); sys.stdout.flush()\n"
        "answers = [json.loads(x) for x in out.getvalue().splitlines()]\n"
        "heavy = ('typing', 'threading', 'socket', 'argparse', 'logging', 'llmem_hooks.paths',\n"
        "         'llmem_hooks.agents.mcp_server', 'llmem_hooks.service.client')\n"
        "sys.__stdout__.write(json.dumps([code, [a.get('id') for a in answers],\n"
        "                                 [m for m in heavy if m in sys.modules]]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], env=world, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [0, [1, 2], []]


def test_mcp_front_stale_or_broken_cache_falls_back(world: dict[str, str]) -> None:
    cache = Path(world["LLMEM_HOME"]) / ".mcp-front-cache.json"
    cache.write_text('{"stamp": ["old"], "initialize": {}, "tools": {}}')
    out = _mcp_session(world, [INIT, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}])
    assert out[0]["result"]["serverInfo"]["name"] == "llmem-hooks" and out[1]["result"]["tools"]
    out = _mcp_session(world, [INIT, {"jsonrpc": "2.0", "id": 2, "method": "nope"}])
    assert out[1]["error"]["code"] == -32601  # the refilled cache: the front says no itself
    cache.write_text("not json")
    out = _mcp_session(world, [INIT, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}])
    assert out[1]["result"]["tools"]
    cache.write_text("[" * 100_000)  # nesting no parser takes
    out = _mcp_session(world, [INIT, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}])
    assert out[1]["result"]["tools"]


def test_mcp_front_survives_a_line_nested_past_any_parser(world: dict[str, str]) -> None:
    """A line of 200,000 brackets (valid JSON's start, nesting no parser takes) is the
    SDK's to refuse; the server lives on and answers what follows."""
    data = "[" * 200_000 + "\n" + json.dumps(INIT) + "\n"
    done = subprocess.run(
        [str(EXE), "mcp"], input=data.encode(), env=world, capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert any(a.get("id") == 1 and "result" in a for a in answers), answers


def test_a_first_start_answers_copilots_opening_without_a_page_of_errors(
    world: dict[str, str],
) -> None:
    """No cache yet (a first start, an upgrade): Copilot CLI's opening ``server/discover``
    gets "method not found", not the SDK's "invalid request" after ~240 lines of
    validation errors on stderr; the rest is the SDK's, and fills the cache."""
    discover = {"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": {}}}
    lines = [discover, INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    lines.append({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
    data = "".join(json.dumps(m, separators=(",", ":")) + "\n" for m in lines)
    done = subprocess.run(
        [str(EXE), "mcp"], input=data, env=world, capture_output=True, text=True, timeout=120
    )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert answers[0]["error"]["code"] == -32601, answers[0]
    assert [a["id"] for a in answers] == [0, 1, 2] and answers[2]["result"]["tools"]
    assert done.stderr == "" and done.returncode == 0
    assert (Path(world["LLMEM_HOME"]) / ".mcp-front-cache.json").is_file()


def test_mcp_front_never_waits_on_a_fifo_or_a_link_for_its_cache(
    world: dict[str, str], tmp_path: Path
) -> None:
    """A FIFO where the cache should be would block a plain open() for ever, and the agent
    waits for the server before its first turn: not a regular file, not a cache; the SDK
    answers and its answers replace it. A link is not followed."""
    cache = Path(world["LLMEM_HOME"]) / ".mcp-front-cache.json"
    hello = [INIT, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]
    os.mkfifo(cache)
    out = _mcp_session(world, hello)
    assert out[1]["result"]["tools"] and cache.is_file()
    real = tmp_path / "elsewhere.json"
    real.write_text(cache.read_text())
    cache.unlink()
    cache.symlink_to(real)
    out = _mcp_session(world, hello)
    assert out[1]["result"]["tools"] and not cache.is_symlink()


def test_launcher_answers_the_prompt_session_start_recalled_for(
    world: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sessionStart with an initialPrompt recalls for it and stamps the session's recall
    lock; the userPromptSubmitted that follows for that prompt is answered by the launcher
    without Python (nothing new to recall), once; the next prompt goes to the hook."""
    launcher = _plugin_copy(tmp_path)
    (Path(world["LLMEM_HOME"]) / "entry-point").write_text(f"{EXE}\n")
    subprocess.run(
        [str(EXE), "store", "MARKER-STAMP-FACT deploys go through make ship", "--type", "fact"],
        cwd=tmp_path,
        env=world,
        check=True,
        capture_output=True,
        timeout=60,
    )
    first = 'how do deploys go, "make ship"? ü'
    # The hook itself, in this process with a long deadline (a loaded machine must not
    # turn this into a timeout): no sidecar, so it builds the context and recalls here.
    for key in ("LLMEM_HOME", "COPILOT_HOME", "HOME"):
        monkeypatch.setenv(key, world[key])
    out = io.StringIO()
    stdin = io.BytesIO(_payload(tmp_path, initialPrompt=first))
    assert copilot_hook.main(["copilot", "sessionStart"], stdin, out, deadline_s=60) == 0
    assert "MARKER-STAMP-FACT" in json.loads(out.getvalue())["additionalContext"]
    lock = Path(world["LLMEM_HOME"]) / "context" / f"{SID}.recall.lock"
    assert lock.read_text().splitlines()[1] == json.dumps(first, ensure_ascii=False)
    # A hook that would run must not: the launcher answers alone (no Python, no output).
    env = {**world, "LLMEM_HOOKS_BIN": str(tmp_path / "must-not-run")}
    (tmp_path / "must-not-run").write_text("#!/bin/sh\necho RAN\n")
    (tmp_path / "must-not-run").chmod(0o755)
    proc = _launch(
        launcher, env, "copilot", "userPromptSubmitted", stdin=_payload(tmp_path, prompt=first)
    )
    assert (proc.returncode, proc.stdout) == (0, b"")
    assert lock.read_text() == ""  # used once
    proc = _launch(
        launcher, env, "copilot", "userPromptSubmitted", stdin=_payload(tmp_path, prompt="next")
    )
    assert proc.stdout == b"RAN\n"
    # A stamp for another prompt, or an old one, is not honoured.
    lock.write_text(f"{int(time.time())}\n{json.dumps('another prompt')}\n")
    proc = _launch(
        launcher, env, "copilot", "userPromptSubmitted", stdin=_payload(tmp_path, prompt="x")
    )
    assert proc.stdout == b"RAN\n"
    lock.write_text(f"{int(time.time()) - 60}\n{json.dumps('x')}\n")
    proc = _launch(
        launcher, env, "copilot", "userPromptSubmitted", stdin=_payload(tmp_path, prompt="x")
    )
    assert proc.stdout == b"RAN\n"
    # The call's time is the payload's own (no `date` process); without one, the clock's.
    lock.write_text(f"{int(time.time())}\n{json.dumps('x')}\n")
    late = _payload(tmp_path, prompt="x", timestamp=int(time.time() * 1000) + 60_000)
    assert _launch(launcher, env, "copilot", "userPromptSubmitted", stdin=late).stdout == b"RAN\n"
    untimed = json.dumps({"sessionId": SID, "prompt": "x"}).encode()
    for payload in (untimed, _payload(tmp_path, prompt="x")):
        lock.write_text(f"{int(time.time())}\n{json.dumps('x')}\n")
        proc = _launch(launcher, env, "copilot", "userPromptSubmitted", stdin=payload)
        assert (proc.returncode, proc.stdout, lock.read_text()) == (0, b"", "")


def test_no_stamp_when_the_prompt_hook_has_a_resume_pack_to_give(
    world: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resumed run after /compact: its prompt hook must run (it injects the resume
    pack), so sessionStart leaves no stamp that would let the launcher skip it."""
    checkpoints = Path(world["COPILOT_HOME"]) / "session-state" / SID / "checkpoints"
    checkpoints.mkdir(parents=True)
    (checkpoints / "001-summary.md").write_text("# checkpoint\n")
    for key in ("LLMEM_HOME", "COPILOT_HOME", "HOME"):
        monkeypatch.setenv(key, world[key])
    stdin = io.BytesIO(_payload(tmp_path, source="resume", initialPrompt="next"))
    assert copilot_hook.main(["copilot", "sessionStart"], stdin, io.StringIO(), deadline_s=60) == 0
    lock = Path(world["LLMEM_HOME"]) / "context" / f"{SID}.recall.lock"
    assert lock.exists() and lock.read_text() == ""


def test_mcp_front_answers_a_method_nobody_has_without_the_sdk(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Copilot CLI 1.0.102 opens with ``server/discover`` (a draft method, before
    ``initialize``): "method not found" from the front at once, never the SDK server's
    start-up (~0.7 s before the agent's first turn); the methods the SDK has still go
    to it."""
    from llmem_hooks.agents import mcp_front, mcp_server

    monkeypatch.setenv("LLMEM_HOME", world["LLMEM_HOME"])
    # A real SDK server's answers fill the cache.
    cold = _mcp_session(world, [INIT, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}])
    assert cold[0]["result"]["serverInfo"]["name"] == "llmem-hooks"
    assert "tools/call" in json.loads(Path(mcp_front.cache_path()).read_text())["requests"]
    built: list[bool] = []

    def build() -> Any:
        built.append(True)
        raise RuntimeError("the SDK server was asked")

    discover = {"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": {}}}
    hello = [
        discover,
        INIT,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "t", "method": "tools/list"},
        {"jsonrpc": "2.0", "method": "notifications/whatever"},
    ]
    src = io.BytesIO(b"".join(json.dumps(m).encode() + b"\n" for m in hello))
    out = io.BytesIO()
    assert mcp_front.serve(build, mcp_server.__file__, src, out) == 0
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert answers[0] == {
        "jsonrpc": "2.0",
        "id": 0,
        "error": {"code": -32601, "message": "Method not found: server/discover"},
    }
    assert [a["id"] for a in answers] == [0, 1, "t"] and not built
    # A method the SDK server has (prompts/list) is still its to answer.
    src = io.BytesIO(
        b"".join(
            json.dumps(m).encode() + b"\n"
            for m in (INIT, {"jsonrpc": "2.0", "id": 5, "method": "prompts/list"})
        )
    )
    assert mcp_front.serve(build, mcp_server.__file__, src, io.BytesIO()) == 1 and built


def test_mcp_front_ends_when_the_sdk_server_cannot_start(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Answers from the cache, then a tool call needs the SDK server, which fails to
    build: one error line and exit 1, never a front blocked on a pipe nobody reads."""
    from llmem_hooks.agents import mcp_front, mcp_server

    monkeypatch.setenv("LLMEM_HOME", world["LLMEM_HOME"])
    hello = [INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    # A cache as a real SDK server's answers leave it (`test_mcp_front_answers_like_the_sdk`).
    mcp_front.save_cache(
        mcp_front.cache_stamp(mcp_server.__file__),
        {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "llmem"}},
        {"tools": []},
    )

    def broken() -> Any:
        raise RuntimeError("no SDK here")

    call = {"name": "memory_search", "arguments": {"query": "x" * 5000}}
    lines = [*hello] + [
        {"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call", "params": call} for i in range(100)
    ]
    src = io.BytesIO(b"".join(json.dumps(m).encode() + b"\n" for m in lines))
    out = io.BytesIO()
    assert mcp_front.serve(broken, mcp_server.__file__, src, out) == 1
    assert len(out.getvalue().splitlines()) == 1  # the cached initialize answer only
    assert "no SDK here" in capsys.readouterr().err
