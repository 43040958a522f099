"""`llmem-hooks hook copilot <event>` (GitHub Copilot CLI hooks) and the Copilot install.

Most calls run `copilot_hook.main` in-process against a real SQLite store and a real git
repository; the fail-open, timing and import checks run the real `llmem-hooks` command.
Payloads are the real Copilot CLI 1.0.102 stdin fixtures in tests/fixtures/copilot_hooks/
(``*.camel.*``: camelCase-configured events; ``*.pascal.*``: PascalCase aliases with
snake_case payloads).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llmem_hooks import MemoryStore
from llmem_hooks.agents import copilot_hook
from llmem_hooks.agents.install import (
    copilot_hooks,
    copilot_hooks_path,
    install_copilot,
    installed_launcher,
    launcher_hooks,
    plugin_hooks,
    uninstall_copilot,
)
from llmem_hooks.cli import main as cli_main
from llmem_hooks.project import project_key

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "copilot_hooks"
VENV_BIN = Path(sys.executable).parent
HOOK_EXE = VENV_BIN / "llmem-hooks"
SID = "55634ac8-b1c4-44ad-a4cf-4c99a1b09a4c"  # the session of most fixtures
NO_AUTOSTART = "copilot:\n  autostart_sidecar: false\n"
FAIL_OPEN_S = 2.0


# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture
def copilot_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "copilot-home"
    (home / "session-state").mkdir(parents=True)
    monkeypatch.setenv("COPILOT_HOME", str(home))
    return home


@pytest.fixture(autouse=True)
def world(
    llmem_home: Path, copilot_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """LLMEM_HOME with autostart off (the autostart test turns it on), HOME in tmp."""
    llmem_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    (llmem_home / "config.yaml").write_text(NO_AUTOSTART)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    return llmem_home


@pytest.fixture
def memory(llmem_home: Path, repo: Path) -> str:
    """A memory of the repo's project in the default store; returns its text."""
    text = "Integration tests need the local Postgres on port 5433 (MARKER-HOOK)"
    with MemoryStore(llmem_home / "memory.db") as st:
        st.add("fact", text, project=project_key(repo))
    return text


def payload(name: str, repo: Path | None = None, **changes: Any) -> dict[str, Any]:
    """A fixture payload with ``cwd`` pointed at ``repo``."""
    data = json.loads((FIXTURES / name).read_text())
    if repo is not None:
        data["cwd"] = str(repo)
    data.update(changes)
    return data


def hook(event: str, data: dict[str, Any] | bytes) -> str:
    """`copilot_hook.main` in-process; asserts exit code 0 and returns stdout."""
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    out = io.StringIO()
    assert copilot_hook.main(["copilot", event], stdin=io.BytesIO(raw), stdout=out) == 0
    return out.getvalue()


def context_of(stdout: str) -> str:
    """The additionalContext of exactly one JSON object on one line."""
    lines = stdout.splitlines()
    assert len(lines) == 1, stdout
    obj = json.loads(lines[0])
    assert list(obj) == ["additionalContext"], obj
    return str(obj["additionalContext"])


def run_cmd(
    args: list[str], data: bytes | None, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[bytes], float]:
    t0 = time.monotonic()
    proc = subprocess.run(
        [str(HOOK_EXE), *args],
        input=data,
        capture_output=True,
        env=env or dict(os.environ),
        timeout=30,
        check=False,
    )
    return proc, time.monotonic() - t0


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# -- payload handling --------------------------------------------------------------------------
def test_event_names_and_aliases() -> None:
    assert copilot_hook.normalize_event("sessionStart") == "sessionStart"
    assert copilot_hook.normalize_event("SessionStart") == "sessionStart"
    assert copilot_hook.normalize_event("UserPromptSubmit") == "userPromptSubmitted"
    assert copilot_hook.normalize_event("Stop") == "agentStop"
    assert copilot_hook.normalize_event("PreCompact") == "preCompact"
    assert copilot_hook.normalize_event("SessionEnd") == "sessionEnd"
    assert copilot_hook.normalize_event("preToolUse") is None
    assert copilot_hook.normalize_event(None) is None


def test_session_of_maps_subagent_hooks_to_the_parent() -> None:
    assert copilot_hook.session_of(payload("sessionStart.camel.stdin.json")) == (SID, False)
    assert copilot_hook.session_of(payload("SessionStart.pascal.stdin.json")) == (SID, False)
    parent = "3c02f97a-4307-483b-af97-0d0a18dbe12b"
    for name in (
        "userPromptSubmitted.camel.subagent.stdin.json",
        "agentStop.camel.subagent.stdin.json",
        "subagentStart.camel.stdin.json",
        "subagentStop.camel.stdin.json",
    ):
        assert copilot_hook.session_of(payload(name)) == (parent, True), name


FIXTURE_FILES = sorted(p.name for p in FIXTURES.glob("*.stdin.json"))


@pytest.mark.parametrize("name", FIXTURE_FILES)
def test_every_fixture_payload(name: str, repo: Path, memory: str, llmem_home: Path) -> None:
    """sessionStart (camel or Pascal, new or resume) prints the memory; nothing else
    prints anything (no compaction happened)."""
    event = name.split(".")[0]
    out = hook(event, payload(name, repo))
    if copilot_hook.normalize_event(event) == "sessionStart":
        assert memory in context_of(out)
        sid = copilot_hook.session_of(payload(name))[0]
        assert (llmem_home / "context" / f"{sid}.md").read_text() == context_of(out)
    else:
        assert out == ""


def test_the_event_can_come_from_the_payload(repo: Path, memory: str) -> None:
    data = payload("SessionStart.pascal.stdin.json", repo)
    out = io.StringIO()
    assert (
        copilot_hook.main(["copilot"], stdin=io.BytesIO(json.dumps(data).encode()), stdout=out) == 0
    )
    assert memory in context_of(out.getvalue())


# -- sessionStart ------------------------------------------------------------------------------
def test_session_start_writes_the_context_file_and_is_stable(
    repo: Path, memory: str, llmem_home: Path, permissive_umask: None
) -> None:
    first = hook("sessionStart", payload("sessionStart.camel.stdin.json", repo))
    text = context_of(first)
    assert memory in text and text.startswith("# Memory from earlier sessions")
    path = llmem_home / "context" / f"{SID}.md"
    assert path.read_text() == text
    assert _mode(path) == 0o600 and _mode(path.parent) == 0o700
    # A later memory does not change a started session's context (prompt caching).
    with MemoryStore(llmem_home / "memory.db") as st:
        st.add("fact", "Something learned later (MARKER-LATER)", project=project_key(repo))
    second = hook("sessionStart", payload("sessionStart.camel.stdin.json", repo))
    assert second == first
    resumed = hook("sessionStart", payload("sessionStart.camel.resume.stdin.json", repo))
    assert "MARKER-LATER" in context_of(resumed)  # another session: built now


def test_session_start_records_the_session_like_the_sidecar(
    repo: Path, memory: str, llmem_home: Path
) -> None:
    from llmem_hooks.store import sessions as session_state

    hook("sessionStart", payload("sessionStart.camel.stdin.json", repo))
    with MemoryStore(llmem_home / "memory.db") as st:
        rec = session_state.find(st.db, SID)
    assert rec is not None
    assert (rec.agent, rec.project, rec.directory) == ("copilot", project_key(repo), str(repo))
    assert rec.title == "Capture USE_TOOL"  # initialPrompt = workspace.yaml's name
    assert rec.created_ms == 1795332381466
    pascal = payload("SessionStart.pascal.stdin.json", repo, session_id="pascal-session")
    hook("SessionStart", pascal)
    resumed = payload("sessionStart.camel.resume.stdin.json", repo)
    hook("sessionStart", resumed)
    with MemoryStore(llmem_home / "memory.db") as st:
        rec = session_state.find(st.db, "pascal-session")
        assert rec is not None and rec.title == "Capture USE_TOOL"
        assert rec.created_ms == 1795332381466  # 2026-11-22T07:26:21.466Z
        rec = session_state.find(st.db, resumed["sessionId"])
        assert rec is not None and rec.title is None  # a resume prompt is not the name


def test_session_start_prints_the_sidecars_file_without_opening_the_db(
    repo: Path, llmem_home: Path
) -> None:
    ctx = llmem_home / "context"
    ctx.mkdir(mode=0o700)
    (ctx / f"{SID}.md").write_text("# Written by the sidecar\n\n- ünïcode fact\n")
    data = payload("sessionStart.camel.stdin.json", repo)
    del data["initialPrompt"]  # an interactive start without a prompt: nothing to recall
    out = hook("sessionStart", data)
    assert context_of(out) == "# Written by the sidecar\n\n- ünïcode fact\n"
    assert not (llmem_home / "memory.db").exists()


def test_session_start_with_nothing_to_say_prints_nothing(repo: Path, llmem_home: Path) -> None:
    assert hook("sessionStart", payload("sessionStart.camel.stdin.json", repo)) == ""
    assert (llmem_home / "context" / f"{SID}.md").read_text() == ""
    assert hook("sessionStart", payload("sessionStart.camel.stdin.json", repo)) == ""


def test_session_start_of_a_subagent_uses_the_parent_session(
    repo: Path, memory: str, llmem_home: Path
) -> None:
    data = payload("userPromptSubmitted.camel.subagent.stdin.json", repo)
    out = hook("sessionStart", data)
    assert memory in context_of(out)
    assert (llmem_home / "context" / f"{data['parentAgentId']}.md").exists()
    assert not (llmem_home / "context" / f"{data['sessionId']}.md").exists()


def test_session_start_honours_context_dir(
    repo: Path, memory: str, llmem_home: Path, tmp_path: Path
) -> None:
    (llmem_home / "config.yaml").write_text(f"{NO_AUTOSTART}context:\n  dir: {tmp_path / 'ctx'}\n")
    out = hook("SessionStart", payload("SessionStart.pascal.stdin.json", repo))
    assert (tmp_path / "ctx" / f"{SID}.md").read_text() == context_of(out)


# -- userPromptSubmitted: the resume pack after a compaction -----------------------------------
def _compacted(copilot_home: Path, n: int, sid: str = SID) -> None:
    folder = copilot_home / "session-state" / sid / "checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "index.md").write_text("| # | Title | File |\n")
    (folder / f"{n:03d}-session-{sid[:8]}.md").write_text(f"summary {n}\n")


def _pack(llmem_home: Path, text: str, sid: str = SID) -> Path:
    path = llmem_home / "context" / f"{sid}.compact.md"
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_resume_pack_is_injected_once_per_compaction(
    repo: Path, copilot_home: Path, llmem_home: Path
) -> None:
    camel = payload("userPromptSubmitted.camel.stdin.json", repo)
    pascal = payload("UserPromptSubmit.pascal.stdin.json", repo)
    pack = _pack(llmem_home, "# Resume pack\n\n## Goal\n\nport the build (MARKER-PACK-1)\n")
    (copilot_home / "session-state" / SID).mkdir()
    assert hook("userPromptSubmitted", camel) == ""  # a pack but no compaction yet

    _compacted(copilot_home, 1)
    assert context_of(hook("userPromptSubmitted", camel)) == pack.read_text()
    marker = llmem_home / "context" / f"{SID}.compact.injected"
    assert _mode(marker) == 0o600
    assert json.loads(marker.read_text())["checkpoints"] == 1
    assert hook("userPromptSubmitted", camel) == ""
    assert hook("UserPromptSubmit", pascal) == ""
    _pack(llmem_home, "# Resume pack\n\nrefreshed after an idle turn (MARKER-PACK-1b)\n")
    assert hook("userPromptSubmitted", camel) == ""  # a refresh is not a compaction

    _compacted(copilot_home, 2)
    _pack(llmem_home, "# Resume pack\n\nafter the second compaction (MARKER-PACK-2)\n")
    assert "MARKER-PACK-2" in context_of(hook("UserPromptSubmit", pascal))
    assert hook("userPromptSubmitted", camel) == ""


def test_resume_pack_waits_for_the_pack(repo: Path, copilot_home: Path, llmem_home: Path) -> None:
    camel = payload("userPromptSubmitted.camel.stdin.json", repo)
    _compacted(copilot_home, 1)
    assert hook("userPromptSubmitted", camel) == ""  # the sidecar has not written it yet
    _pack(llmem_home, "# Resume pack (MARKER-LATE)\n")
    assert "MARKER-LATE" in context_of(hook("userPromptSubmitted", camel))


def test_subagent_prompts_do_not_take_the_resume_pack(
    repo: Path, copilot_home: Path, llmem_home: Path
) -> None:
    sub = payload("userPromptSubmitted.camel.subagent.stdin.json", repo)
    parent = sub["parentAgentId"]
    _compacted(copilot_home, 1, parent)
    _pack(llmem_home, "# Resume pack (MARKER-PARENT)\n", parent)
    assert hook("userPromptSubmitted", sub) == ""
    main_prompt = payload("userPromptSubmitted.camel.stdin.json", repo, sessionId=parent)
    assert "MARKER-PARENT" in context_of(hook("userPromptSubmitted", main_prompt))


def test_compaction_events_print_nothing(repo: Path, copilot_home: Path, llmem_home: Path) -> None:
    _compacted(copilot_home, 1)
    _pack(llmem_home, "# Resume pack\n")
    for name in ("preCompact.camel.stdin.json", "PreCompact.pascal.stdin.json"):
        assert hook(name.split(".")[0], payload(name, repo)) == ""
    assert not (llmem_home / "context" / f"{SID}.compact.injected").exists()


# -- fail open ---------------------------------------------------------------------------------
def _fixture_bytes(name: str, repo: Path) -> bytes:
    return json.dumps(payload(name, repo)).encode()


def _assert_failed_open(proc: subprocess.CompletedProcess[bytes], elapsed: float) -> None:
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b""
    assert elapsed < FAIL_OPEN_S, f"took {elapsed:.2f} s"


@pytest.mark.parametrize(
    "data",
    [
        b"{not json",
        b"",
        b"[1, 2, 3]",
        b'{"cwd": "/tmp"}',
        b'{"sessionId": "../../etc/passwd", "cwd": "/tmp"}',
        b"\xff\xfe\x00garbage",
        b'{"sessionId": "' + b"x" * (2 << 20) + b'"}',
    ],
    ids=["malformed", "empty", "array", "no-session", "traversal", "binary", "huge"],
)
def test_bad_stdin_fails_open(data: bytes, llmem_home: Path) -> None:
    proc, elapsed = run_cmd(["hook", "copilot", "sessionStart"], data)
    _assert_failed_open(proc, elapsed)
    log = llmem_home / "logs" / "copilot-hook.log"
    assert "sessionStart failed" in log.read_text()
    assert _mode(log) == 0o600 and _mode(log.parent) == 0o700


def test_unknown_agent_or_event_fails_open(repo: Path) -> None:
    data = _fixture_bytes("sessionStart.camel.stdin.json", repo)
    for args in (["hook", "claude", "sessionStart"], ["hook", "copilot", "nope"], ["hook"]):
        proc, elapsed = run_cmd(args, data)
        _assert_failed_open(proc, elapsed)


@pytest.mark.parametrize("kind", ["garbage-file", "directory"])
def test_unreadable_db_fails_open(kind: str, repo: Path, llmem_home: Path) -> None:
    db = llmem_home / "memory.db"
    if kind == "directory":
        db.mkdir()
    else:
        db.write_bytes(b"this is not a database" * 100)
    proc, elapsed = run_cmd(
        ["hook", "copilot", "sessionStart"], _fixture_bytes("sessionStart.camel.stdin.json", repo)
    )
    assert proc.returncode == 0 and elapsed < FAIL_OPEN_S
    # Said once, through the model (Copilot shows a hook's stderr nowhere in -p runs).
    assert "memory is unavailable" in context_of(proc.stdout.decode())
    assert "sessionStart failed" in (llmem_home / "logs" / "copilot-hook.log").read_text()


@contextlib.contextmanager
def _locked_db(path: Path, journal: str) -> Iterator[None]:
    con = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        con.execute(f"PRAGMA journal_mode = {journal}")
        con.execute("BEGIN EXCLUSIVE")
        yield
    finally:
        con.execute("ROLLBACK")
        con.close()


@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_locked_db_fails_open_within_the_deadline(
    journal: str, repo: Path, memory: str, llmem_home: Path
) -> None:
    """Another process holds BEGIN EXCLUSIVE: in WAL mode the write waits out the shortened
    busy timeout; in rollback mode even opening blocks inside SQLite, and the watchdog
    ends the process."""
    data = _fixture_bytes("sessionStart.camel.stdin.json", repo)
    with _locked_db(llmem_home / "memory.db", journal):
        proc, elapsed = run_cmd(["hook", "copilot", "sessionStart"], data)
    _assert_failed_open(proc, elapsed)
    assert not (llmem_home / "context" / f"{SID}.md").exists()
    # Once the lock is gone, the next call works.
    proc, _ = run_cmd(["hook", "copilot", "sessionStart"], data)
    assert memory in context_of(proc.stdout.decode())


def test_stdin_never_closed_fails_open(repo: Path) -> None:
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [str(HOOK_EXE), "hook", "copilot", "sessionStart"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdin is not None
        proc.stdin.write(b'{"sessionId": "x",')
        proc.stdin.flush()
        code = proc.wait(timeout=10)
        elapsed = time.monotonic() - t0
        assert proc.stdout is not None
        assert (code, proc.stdout.read()) == (0, b"")
        assert elapsed < FAIL_OPEN_S
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def test_real_command_prints_one_json_object(repo: Path, memory: str) -> None:
    data = _fixture_bytes("SessionStart.pascal.stdin.json", repo)
    proc, elapsed = run_cmd(["hook", "copilot", "SessionStart"], data)
    assert proc.returncode == 0 and proc.stderr == b""
    assert memory in context_of(proc.stdout.decode())
    assert elapsed < FAIL_OPEN_S
    again, _ = run_cmd(["hook", "copilot", "SessionStart"], data)
    assert again.stdout == proc.stdout


def test_the_hook_never_imports_typer(repo: Path, memory: str) -> None:
    """Through the real entry point (`llmem_hooks.cli.main`): never typer or the CLI; with
    the context file present (the common case) not even YAML or the store."""
    probe = (
        "import io, json, sys\n"
        "from llmem_hooks.cli import main\n"
        "sys.stdin = io.TextIOWrapper(io.BytesIO(sys.argv[1].encode()))\n"
        "out = io.StringIO(); sys.stdout, real = out, sys.stdout\n"
        "code = main(['hook', 'copilot', 'sessionStart'])\n"
        "sys.stdout = real\n"
        "heavy = ['typer', 'click', 'llmem_hooks.cli.app', 'llmem_hooks.search.retriever',\n"
        "         'llmem_hooks.extraction', 'httpx', 'yaml', 'llmem_hooks.store', 'sqlite3']\n"
        "print(json.dumps({'code': code, 'out': out.getvalue(),\n"
        "                  'loaded': [m for m in heavy if m in sys.modules]}))\n"
    )
    start = payload("sessionStart.camel.stdin.json", repo, sessionId="fresh")
    del start["initialPrompt"]  # with one, recall runs (below)
    data = json.dumps(start)
    loaded = []
    for _ in range(2):  # built by the coordinator, then read from the file
        proc = subprocess.run(
            [sys.executable, "-c", probe, data], capture_output=True, text=True, timeout=30
        )
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout)
        assert result["code"] == 0 and memory in context_of(result["out"])
        loaded.append(result["loaded"])
    assert not {"typer", "click", "llmem_hooks.cli.app", "httpx"} & set(loaded[0]), loaded
    assert not {"llmem_hooks.search.retriever", "llmem_hooks.extraction"} & set(loaded[0]), loaded
    assert loaded[1] == [], loaded
    # With a prompt and no sidecar, recall runs in-process (the store and the retriever),
    # still without the CLI.
    start["initialPrompt"] = "which port do the integration tests need?"
    proc = subprocess.run(
        [sys.executable, "-c", probe, json.dumps(start)], capture_output=True, text=True, timeout=30
    )
    result = json.loads(proc.stdout)
    assert memory in context_of(result["out"]) and "<llmem-recall>" not in result["out"]
    assert "llmem_hooks.search.retriever" in result["loaded"]
    assert not {"typer", "llmem_hooks.cli.app"} & set(result["loaded"]), result


def test_settings_are_cached_until_config_yaml_changes(
    repo: Path, memory: str, llmem_home: Path, tmp_path: Path, permissive_umask: None
) -> None:
    hook("sessionStart", payload("sessionStart.camel.stdin.json", repo))
    cache = llmem_home / copilot_hook.SETTINGS_CACHE
    assert _mode(cache) == 0o600
    assert json.loads(cache.read_text())["autostart"] is False
    settings = copilot_hook.load_settings()
    assert settings.context_dir == llmem_home / "context" and not settings.autostart
    (llmem_home / "config.yaml").write_text(
        f"context:\n  dir: {tmp_path / 'ctx2'}\ncopilot:\n  autostart_sidecar: false\n"
    )
    assert copilot_hook.load_settings().context_dir == tmp_path / "ctx2"
    (llmem_home / "config.yaml").unlink()
    defaults = copilot_hook.load_settings()
    assert defaults.autostart and defaults.context_dir == llmem_home / "context"
    cache.write_text("{broken")
    assert copilot_hook.load_settings().autostart


def test_sidecar_running_agrees_with_the_sidecar_module(llmem_home: Path) -> None:
    from llmem_hooks.sidecar.lock import lock_path, pid_path, running_pid, single_instance

    assert (pid_path(), lock_path()) == (llmem_home / "sidecar.pid", llmem_home / "sidecar.lock")
    assert copilot_hook.sidecar_running() is False and running_pid() is None
    with single_instance():
        assert copilot_hook.sidecar_running() is True and running_pid() == os.getpid()
    (llmem_home / "sidecar.pid").write_text(f"{os.getpid()}\n")  # live pid, lock free
    assert copilot_hook.sidecar_running() is False and running_pid() is None


def test_the_cli_still_works_after_the_split(llmem_home: Path, capsys: Any) -> None:
    import llmem_hooks.cli as cli

    assert cli_main(["store", "hello from the split cli"]) == 0
    assert cli_main(["list", "--json"]) == 0
    assert "hello from the split cli" in capsys.readouterr().out
    assert callable(cli.app.app) and len(cli.app._agent_guide()) > 100


# -- the sidecar autostart ---------------------------------------------------------------------
def _pid_of_sidecar(llmem_home: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        pid = int((llmem_home / "sidecar.pid").read_text().strip())
        os.kill(pid, 0)
        return pid
    return None


def test_autostart_starts_one_detached_sidecar(repo: Path, llmem_home: Path) -> None:
    (llmem_home / "config.yaml").write_text("session:\n  poll_seconds: 1\n")  # default: on
    data = _fixture_bytes("agentStop.camel.stdin.json", repo)
    pid = None
    try:
        proc, elapsed = run_cmd(["hook", "copilot", "agentStop"], data)
        _assert_failed_open(proc, elapsed)  # prints nothing, returns at once
        deadline = time.monotonic() + 20
        while pid is None and time.monotonic() < deadline:
            pid = _pid_of_sidecar(llmem_home)
            time.sleep(0.05)
        assert pid is not None, "no sidecar started"
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert f"LLMEM_HOME={llmem_home}".encode() in environ
        assert os.getsid(pid) == pid  # its own session: not killed with Copilot's group
        proc, _ = run_cmd(["hook", "copilot", "sessionEnd"], data)
        time.sleep(0.3)
        assert _pid_of_sidecar(llmem_home) == pid  # a running sidecar is left alone
        assert "started the sidecar" in (llmem_home / "logs" / "copilot-hook.log").read_text()
    finally:
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while _pid_of_sidecar(llmem_home) and time.monotonic() < deadline:
                time.sleep(0.05)


# -- hooks.json, the plugin manifest, install / uninstall --------------------------------------
def test_repo_hooks_json_and_plugin_manifest() -> None:
    hooks = json.loads((ROOT / "hooks.json").read_text())
    assert hooks == plugin_hooks()  # through bin/llmem-hook: no PATH needed
    # Only the events whose output Copilot uses: it waits for every hook it runs, and the
    # sidecar sees the others in events.jsonl.
    assert set(hooks["hooks"]) == {"sessionStart", "userPromptSubmitted", "postToolUse"}
    # postToolUse only after the file tools (Copilot applies the matcher to the tool name).
    matcher = re.compile(hooks["hooks"]["postToolUse"][0]["matcher"])
    assert {
        t for t in (*copilot_hook.FILE_TOOLS, "bash", "xview", "view2", "grep") if matcher.search(t)
    } == set(copilot_hook.FILE_TOOLS)
    assert all("matcher" not in h[0] for e, h in hooks["hooks"].items() if e != "postToolUse")
    manifest = json.loads((ROOT / ".github" / "plugin" / "plugin.json").read_text())
    assert manifest["name"] == "llmem-hooks" and manifest["version"]
    # Copilot resolves the manifest's "hooks" against the plugin root (--plugin-dir).
    assert (ROOT / manifest["hooks"]).resolve() == (ROOT / "hooks.json").resolve()


def test_hook_command_fails_open_without_llmem_hooks(repo: Path, tmp_path: Path) -> None:
    cmd = copilot_hooks("llmem-hooks")["hooks"]["sessionStart"][0]["bash"]
    env = {"PATH": str(tmp_path / "empty-bin"), "HOME": str(tmp_path)}
    proc = subprocess.run(
        ["/bin/bash", "-c", cmd],
        input=_fixture_bytes("sessionStart.camel.stdin.json", repo),
        capture_output=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert (proc.returncode, proc.stderr) == (0, b"")
    # Not silent: one notice for the model to pass on (issue 18, item 11).
    assert "memory is unavailable" in context_of(proc.stdout.decode())


def test_install_copilot_is_idempotent(
    copilot_home: Path, repo: Path, memory: str, permissive_umask: None
) -> None:
    lines: list[str] = []
    target = copilot_home / "hooks" / "llmem.json"
    mcp = copilot_home / "mcp-config.json"
    assert copilot_hooks_path() == target
    assert install_copilot(report=lines.append) == [target, mcp]
    assert install_copilot(report=lines.append) == [target, mcp]
    assert lines == [
        f"installed {target}",
        f"installed {mcp} (MCP server 'llmem')",
        f"already installed {target}",
        f"already installed {mcp} (MCP server 'llmem')",
    ]
    assert _mode(target) == 0o644 and _mode(mcp) == 0o600
    installed = json.loads(target.read_text())
    launcher = installed_launcher()  # this checkout's bin/llmem-hook (an editable install)
    assert launcher == ROOT / "bin" / "llmem-hook"
    assert installed == launcher_hooks(launcher)  # the plugin's fast paths, user-wide
    command = installed["hooks"]["sessionStart"][0]["bash"]
    assert command.startswith(f"sh {launcher} "), command  # absolute: works without PATH
    entry = Path(os.environ["LLMEM_HOME"]) / "entry-point"
    assert entry.read_text().strip() == str(HOOK_EXE)  # where the launcher finds us
    # The installed command, as Copilot runs it, without llmem-hooks on PATH.
    proc = subprocess.run(
        ["/bin/bash", "-c", command],
        input=_fixture_bytes("sessionStart.camel.stdin.json", repo),
        capture_output=True,
        env={**os.environ, "PATH": "/usr/bin:/bin"},  # git, but no llmem-hooks
        timeout=30,
        check=False,
    )
    assert memory in context_of(proc.stdout.decode())

    target.write_text('{"version": 1, "hooks": {}}')
    lines.clear()
    install_copilot(report=lines.append)
    assert lines == [f"updated {target}", f"already installed {mcp} (MCP server 'llmem')"]


def test_uninstall_copilot_removes_only_our_file(copilot_home: Path) -> None:
    target = install_copilot()[0]
    other = target.parent / "mine.json"
    other.write_text('{"version": 1, "hooks": {"sessionStart": []}}')
    mcp = copilot_home / "mcp-config.json"
    lines: list[str] = []
    assert uninstall_copilot(report=lines.append) == [target, mcp]
    assert lines == [f"removed {target}", f"removed the MCP server 'llmem' from {mcp}"]
    assert other.exists() and not target.exists()
    lines.clear()
    assert uninstall_copilot(report=lines.append) == []
    assert lines == ["nothing to remove: the Copilot CLI hooks are not installed"]
    target.write_text('{"version": 1, "hooks": {}}')
    lines.clear()
    assert uninstall_copilot(report=lines.append) == []
    assert target.exists() and lines[0].startswith("left ")


def test_cli_install_and_uninstall_copilot(
    copilot_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    target = copilot_home / "hooks" / "llmem.json"
    mcp = copilot_home / "mcp-config.json"
    assert cli_main(["install", "--copilot"]) == 0
    assert cli_main(["install", "--copilot"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"installed {target}",
        f"installed {mcp} (MCP server 'llmem')",
        f"already installed {target}",
        f"already installed {mcp} (MCP server 'llmem')",
    ]
    assert cli_main(["uninstall", "--copilot"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"removed {target}",
        f"removed the MCP server 'llmem' from {mcp}",
    ]
    # No flag: every agent found; here only Copilot (its home exists, no OpenCode anywhere).
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    assert cli_main(["install"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"installed {target}"
    assert cli_main(["uninstall"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert f"removed {target}" in out and not target.exists()
