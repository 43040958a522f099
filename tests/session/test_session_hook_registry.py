"""The session-hook registry is wired: a hook registered with `register_session_hook`, or
declared by an installed package's entry point, runs for the events the sidecar and the
Copilot hook command see, after the built-in hook, and a raising one stops nothing."""

from __future__ import annotations

import importlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.copilot_home import CopilotHome
from support.waiting import wait_for

from llmem_hooks import MemoryStore, register_session_hook
from llmem_hooks.registry import (
    SESSION_HOOK_ENTRY_POINTS,
    cached_session_hook_entry_points,
    get_registered_session_hooks,
    load_session_hook_entry_points,
    unregister_session_hook,
)
from llmem_hooks.session.hooks import SessionEventManager, SessionHookCoordinator

HOOK_EXE = Path(sys.executable).parent / "llmem-hooks"
PLUGIN = "llmem_hooks_testplugin"
PLUGIN_SOURCE = '''\
"""Session hooks of a test plugin: each appends "<event> <session id>" to $HOOK_TRACE."""
import os


def _trace(event, session_id):
    with open(os.environ["HOOK_TRACE"], "a", encoding="utf-8") as f:
        f.write(f"{event} {session_id}\\n")


def on_created(session_id):
    _trace("created", session_id)


def on_idle(session_id):
    _trace("idle", session_id)
    raise RuntimeError("a broken user hook")


def on_ending(session_id):
    _trace("ending", session_id)
'''
CONFIG = """\
session:
  poll_seconds: 0.2
  idle_quiet_seconds: 0
  idle_debounce_seconds: 0
  end_after_minutes: 60
ollama:
  enabled: false
copilot:
  autostart_sidecar: false
"""


@pytest.fixture
def hooks_clean() -> Iterator[None]:
    """No registered session hook leaks into or out of a test."""
    for event in get_registered_session_hooks():
        unregister_session_hook(event)
    try:
        yield
    finally:
        for event in get_registered_session_hooks():
            unregister_session_hook(event)


@pytest.fixture
def plugin(tmp_path: Path) -> Path:
    """A folder holding an installed-looking package that declares session hooks through
    entry points (a dist-info with entry_points.txt), as `pip install` would leave it."""
    root = tmp_path / "site"
    root.mkdir()
    (root / f"{PLUGIN}.py").write_text(PLUGIN_SOURCE)
    info = root / f"{PLUGIN}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {PLUGIN}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[{SESSION_HOOK_ENTRY_POINTS}]\n"
        f"created = {PLUGIN}:on_created\n"
        f"idle = {PLUGIN}:on_idle\n"
        f"ending = {PLUGIN}:on_ending\n"
        f"no_such_event = {PLUGIN}:on_created\n"
        f"compacting = {PLUGIN}:missing\n"
    )
    return root


def traced(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


# -- the manager -----------------------------------------------------------------------------
@pytest.fixture
def coord(store: MemoryStore, tmp_path: Path) -> SessionHookCoordinator:
    cfg = {"context": {"budget_tokens": 500}, "session": {"idle_debounce_seconds": 30}}
    return SessionHookCoordinator(store, {}, cfg, context_dir=tmp_path / "ctx")


def test_the_registered_hook_runs_after_the_built_in_one(
    coord: SessionHookCoordinator, hooks_clean: None
) -> None:
    seen: list[tuple[str, bool]] = []
    ctx = coord.context_dir
    register_session_hook("created", lambda sid: seen.append((sid, (ctx / f"{sid}.md").exists())))
    manager = SessionEventManager(coord)
    assert manager.emit("created", "ses_a")[0] == "success"
    assert seen == [("ses_a", True)]  # the context file was there when it ran
    # Nothing new (the file exists): the registered hook does not run twice.
    assert manager.emit("created", "ses_a")[0] == "already_processed"
    assert seen == [("ses_a", True)]


def test_a_raising_registered_hook_is_logged_not_raised(
    coord: SessionHookCoordinator, hooks_clean: None, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(sid: str) -> None:
        raise RuntimeError(f"boom for {sid}")

    register_session_hook("created", broken)
    with caplog.at_level(logging.ERROR, logger="llmem_hooks.session.hooks"):
        assert SessionEventManager(coord).emit("created", "ses_b")[0] == "success"
    assert "registered created hook" in caplog.text and "boom for ses_b" in caplog.text
    assert (coord.context_dir / "ses_b.md").exists()


def test_without_a_coordinator_the_registered_hook_alone_runs(hooks_clean: None) -> None:
    register_session_hook("compacting", lambda sid: f"done {sid}")
    assert SessionEventManager().emit("compacting", "ses_c") == "done ses_c"
    assert SessionEventManager().emit("idle", "ses_c") is None
    with pytest.raises(ValueError):
        SessionEventManager().emit("exploded", "ses_c")


def test_entry_points_register_hooks_and_skip_broken_ones(
    plugin: Path,
    hooks_clean: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.syspath_prepend(str(plugin))
    importlib.invalidate_caches()
    with caplog.at_level(logging.WARNING, logger="llmem_hooks.registry"):
        loaded = load_session_hook_entry_points(reload=True)
    assert sorted(loaded) == ["created", "ending", "idle"]
    assert "no_such_event" in caplog.text and "compacting" in caplog.text
    assert load_session_hook_entry_points() == []  # once per process
    sys.modules.pop(PLUGIN, None)


# -- end to end: the real commands -------------------------------------------------------------
def env_for(tmp_path: Path, plugin: Path, copilot: Path) -> dict[str, str]:
    home = tmp_path / "llmem"
    home.mkdir(mode=0o700, exist_ok=True)
    (home / "config.yaml").write_text(CONFIG)
    env = dict(os.environ)
    env.update(
        LLMEM_HOME=str(home),
        COPILOT_HOME=str(copilot),
        OPENCODE_DB=str(tmp_path / "oc" / "opencode.db"),
        XDG_DATA_HOME=str(tmp_path / "xdg"),
        HOOK_TRACE=str(tmp_path / "trace.txt"),
        PYTHONPATH=os.pathsep.join(p for p in (str(plugin), env.get("PYTHONPATH")) if p),
    )
    env.pop("LLMEM_DB", None)
    env.pop("LLMEM_FAULT", None)
    return env


def test_the_sidecar_runs_registered_hooks(tmp_path: Path, plugin: Path) -> None:
    """`llmem-hooks run` over a Copilot session-state dir: the plugin's created hook runs
    when a session appears, its raising idle hook stops nothing, its ending hook runs
    when the session shuts down."""
    copilot = CopilotHome(tmp_path / "copilot")
    copilot.ms = int(time.time() * 1000)
    env = env_for(tmp_path, plugin, copilot.root)
    trace = tmp_path / "trace.txt"
    log_path = tmp_path / "llmem" / "logs" / "sidecar.log"
    err = open(tmp_path / "run.err", "wb")  # noqa: SIM115 - the child owns it
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmem_hooks.cli", "run"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=err,
    )
    err.close()

    def logged() -> str:
        return log_path.read_text(errors="replace") if log_path.exists() else ""

    try:
        s = copilot.session(name="Registry wiring")
        wait_for(lambda: f"created {s.id}" in traced(trace), what=f"created hook\n{logged()}")
        s.exchange("remember that the registry fires user hooks", "Noted.")
        wait_for(lambda: f"idle {s.id}" in traced(trace), what=f"idle hook\n{logged()}")
        s.shutdown()
        wait_for(lambda: f"ending {s.id}" in traced(trace), what=f"ending hook\n{logged()}")
        assert proc.poll() is None, "the sidecar stopped"
        assert "a broken user hook" in logged()  # logged, and the sidecar went on
        assert "registered session hooks from entry points" in logged()
        assert traced(trace).count(f"created {s.id}") == 1
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, logged()


def test_the_copilot_hook_command_runs_registered_hooks(tmp_path: Path, plugin: Path) -> None:
    """`llmem-hooks hook copilot sessionStart` builds the context through the manager,
    so the plugin's created hook runs in the hook process; the output is unchanged."""
    copilot = tmp_path / "copilot"
    (copilot / "session-state").mkdir(parents=True)
    env = env_for(tmp_path, plugin, copilot)
    sid = "6b1f3c1e-0000-4000-8000-00000000a11e"
    payload = {"sessionId": sid, "cwd": str(tmp_path), "source": "new", "timestamp": 0}
    proc = subprocess.run(
        [str(HOOK_EXE), "hook", "copilot", "sessionStart"],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert traced(tmp_path / "trace.txt") == [f"created {sid}"]
    out = proc.stdout.decode().strip()
    assert not out or list(json.loads(out)) == ["additionalContext"]
    assert (tmp_path / "llmem" / "context" / f"{sid}.md").exists()
    # The entry points are cached next to config.yaml; the next session's hook uses them.
    assert (tmp_path / "llmem" / ".copilot-hook-entry-points.json").exists()
    other = sid.replace("a11e", "b22f")
    proc = subprocess.run(
        [str(HOOK_EXE), "hook", "copilot", "sessionStart"],
        input=json.dumps({**payload, "sessionId": other}).encode(),
        capture_output=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert traced(tmp_path / "trace.txt") == [f"created {sid}", f"created {other}"]


def test_the_entry_point_cache_follows_installs(
    tmp_path: Path, plugin: Path, hooks_clean: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "ep.json"
    assert ("created", f"{PLUGIN}:on_created") not in cached_session_hook_entry_points(cache)
    monkeypatch.syspath_prepend(str(plugin))  # "installing" it: a new path entry
    importlib.invalidate_caches()
    found = cached_session_hook_entry_points(cache)
    assert ("created", f"{PLUGIN}:on_created") in found
    assert cached_session_hook_entry_points(cache) == found  # from the cache
    assert sorted(load_session_hook_entry_points(reload=True, cache=cache)) == [
        "created",
        "ending",
        "idle",
    ]
    sys.modules.pop(PLUGIN, None)


# -- the declared adapter interface ------------------------------------------------------------
def test_cursor_keys_are_unchanged_by_the_declared_interface(tmp_path: Path) -> None:
    """The sidecar saves each adapter's cursor under `cursor_key`: the same key as before
    the interface was declared (``<agent>:<db path or home>``), so an upgrade does not
    read every agent's history again."""
    from llmem_hooks.adapters import CopilotAdapter, OpenCodeAdapter

    oc = OpenCodeAdapter(tmp_path / "oc" / "opencode.db")
    cp = CopilotAdapter(tmp_path / "copilot")
    assert oc.cursor_key("opencode") == f"opencode:{tmp_path / 'oc' / 'opencode.db'}"
    assert cp.cursor_key("copilot") == f"copilot:{tmp_path / 'copilot'}"
    assert cp.cursor_key() == cp.cursor_key("copilot")
    assert not oc.available() and not cp.available()  # neither agent ran yet
