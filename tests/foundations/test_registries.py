"""The registries (`llmem_hooks.registry`): fakes registered through the users' own API
(`register_*`, and a real installed-looking distribution's entry points), several hooks
per event, and a store that reads the registry but never writes to it."""

from __future__ import annotations

import importlib
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llmem_hooks import (
    Dreamer,
    MemoryStore,
    SessionEventManager,
    ValidationError,
    get_registered_types,
    register_dream_hook,
    register_session_hook,
)
from llmem_hooks.adapters import (
    OpenCodeAdapter,
    SessionAdapter,
    get_adapter_class,
    register_session_adapter,
    registered_adapters,
)
from llmem_hooks.adapters.base import ADAPTER_ENTRY_POINTS, adapters
from llmem_hooks.config import Config
from llmem_hooks.events import LifecycleEvent, Message, SessionInfo
from llmem_hooks.registry import (
    DREAM_HOOK_ENTRY_POINTS,
    MEMORY_TYPE_ENTRY_POINTS,
    Registry,
    check_memory_type,
    dream_hooks,
    memory_types,
    session_hooks,
    unregister_dream_hook,
    unregister_session_hook,
)
from llmem_hooks.session.hooks import default_adapters

HOOK_EXE = Path(sys.executable).parent / "llmem-hooks"
PLUGIN = "llmem_hooks_regplugin"
PLUGIN_SOURCE = '''\
"""A test plugin: a memory type, a dream hook and an agent adapter, by entry points."""
from llmem_hooks.adapters import SessionAdapter

RUNBOOK_STEP = "one step of a runbook"
DREAMT = []


def after_rem(dreamer, result, apply):
    DREAMT.append((result.phase, apply))


class NotebookAdapter(SessionAdapter):
    agent = "notebook"

    def list_sessions(self, limit=50):
        return []

    def get_session(self, session_id):
        return None

    def get_messages(self, session_id, after_id=None):
        return []

    def session_exists(self, session_id):
        return False

    def poll(self, cursor):
        return [], cursor
'''


@pytest.fixture
def plugin(tmp_path: Path) -> Path:
    """A folder holding an installed-looking distribution (a dist-info with
    entry_points.txt, as `pip install` leaves it) that declares one item of three kinds,
    and two broken entry points."""
    root = tmp_path / "site"
    root.mkdir()
    (root / f"{PLUGIN}.py").write_text(PLUGIN_SOURCE)
    info = root / f"{PLUGIN}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {PLUGIN}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[{MEMORY_TYPE_ENTRY_POINTS}]\n"
        f"runbook_step = {PLUGIN}:RUNBOOK_STEP\n"
        f"Bad-Name = {PLUGIN}:RUNBOOK_STEP\n"
        f"[{DREAM_HOOK_ENTRY_POINTS}]\n"
        f"rem = {PLUGIN}:after_rem\n"
        f"deep = {PLUGIN}:missing\n"
        f"[{ADAPTER_ENTRY_POINTS}]\n"
        f"notebook = {PLUGIN}:NotebookAdapter\n"
    )
    return root


@pytest.fixture
def installed(plugin: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The plugin on sys.path ("installed"); what it registered is removed afterwards."""
    monkeypatch.syspath_prepend(str(plugin))
    importlib.invalidate_caches()
    try:
        yield plugin
    finally:
        module = sys.modules.pop(PLUGIN, None)
        memory_types.unregister("runbook_step")
        if module is not None:
            dream_hooks.unregister("rem", module.after_rem)
        adapters.unregister("notebook")


def cli_env(tmp_path: Path, *pythonpath: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["LLMEM_HOME"] = str(tmp_path / "home")
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in pythonpath)
    env["OLLAMA_HOST"] = "http://127.0.0.1:9"
    env.pop("LLMEM_DB", None)
    return env


def store_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(HOOK_EXE), "store", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


# -- memory types ----------------------------------------------------------------------------
def test_an_installed_memory_type_works_in_the_real_cli(tmp_path: Path, plugin: Path) -> None:
    """The plugin's type is accepted by `llmem-hooks store` once the distribution is on
    the path (read on the first unknown type), refused without it."""
    env = cli_env(tmp_path, plugin)
    r = store_cli(env, "-t", "runbook_step", "restart the worker with systemctl")
    assert r.returncode == 0, r.stderr
    other = cli_env(tmp_path)  # not installed
    other["LLMEM_DB"] = str(tmp_path / "other.db")
    r = store_cli(other, "-t", "runbook_step", "restart the worker with systemctl")
    assert r.returncode == 2
    assert "unknown memory type 'runbook_step'" in r.stderr


def test_memory_type_entry_points_load_through_the_registry(
    installed: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="llmem_hooks.registry"):
        assert memory_types.load_entry_points(reload=True) == ["runbook_step"]
    assert "Bad-Name" in caplog.text  # an invalid name is logged and skipped
    assert check_memory_type("runbook_step") == "runbook_step"
    assert memory_types.get("runbook_step") == ("one step of a runbook",)
    assert "runbook_step" in get_registered_types()


def test_opening_a_store_registers_no_type(tmp_path: Path) -> None:
    """A database another process wrote with its own type: this process's store accepts
    that type for that database only, and the process-wide registry stays as it was."""
    db = tmp_path / "theirs.db"
    writer = (
        "import sys; from llmem_hooks import MemoryStore, register_memory_type\n"
        "register_memory_type('deploy_note')\n"
        "with MemoryStore(sys.argv[1]) as st: st.add('deploy_note', 'deploy with helm upgrade')\n"
    )
    subprocess.run([sys.executable, "-c", writer, str(db)], check=True, timeout=60)
    before = get_registered_types()
    assert "deploy_note" not in before
    with MemoryStore(db) as st:
        assert get_registered_types() == before
        assert [m["content"] for m in st.list_all(type="deploy_note")] == [
            "deploy with helm upgrade"
        ]
        mid = st.add("deploy_note", "roll back with helm rollback")
        assert st.get(mid)["type"] == "deploy_note"
        fact = st.add("fact", "the cluster runs in eu-west-1")
        assert st.update(fact, type="deploy_note")
        assert st.get(fact)["type"] == "deploy_note"
    assert get_registered_types() == before
    with MemoryStore(tmp_path / "mine.db") as st, pytest.raises(ValidationError):
        st.add("deploy_note", "a type this database never held")


# -- hooks: several per event ------------------------------------------------------------------
@pytest.fixture
def clean_hooks() -> Iterator[None]:
    for event in session_hooks.all():
        unregister_session_hook(event)
    yield
    for event in session_hooks.all():
        unregister_session_hook(event)


def test_several_session_hooks_run_in_order_and_fail_open(
    clean_hooks: None, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[str] = []

    def first(sid: str) -> str:
        seen.append(f"first {sid}")
        return "first"

    def broken(sid: str) -> str:
        seen.append(f"broken {sid}")
        raise RuntimeError("a plugin bug")

    def last(sid: str) -> str:
        seen.append(f"last {sid}")
        return "last"

    for fn in (first, broken, last, first):  # the second `first` changes nothing
        register_session_hook("created", fn)
    with caplog.at_level(logging.ERROR, logger="llmem_hooks.session.hooks"):
        assert SessionEventManager().emit("created", "ses_1") == "last"
    assert seen == ["first ses_1", "broken ses_1", "last ses_1"]
    assert "a plugin bug" in caplog.text
    unregister_session_hook("created", broken)
    seen.clear()
    SessionEventManager().emit("created", "ses_2")
    assert seen == ["first ses_2", "last ses_2"]
    with pytest.raises(ValueError, match="invalid session event"):
        register_session_hook("exploded", first)


def test_several_dream_hooks_per_phase_and_one_from_an_entry_point(
    installed: Path, store: MemoryStore
) -> None:
    seen: list[str] = []

    def one(dreamer: Any, result: Any, apply: bool) -> None:
        seen.append(f"one {result.phase}")

    def two(dreamer: Any, result: Any, apply: bool) -> None:
        seen.append(f"two {result.phase}")

    assert dream_hooks.load_entry_points(reload=True) == ["rem"]  # "deep" names nothing
    register_dream_hook("rem", one)
    register_dream_hook("rem", two)
    try:
        run = Dreamer(store).run(["rem"], apply=False)
    finally:
        unregister_dream_hook("rem", one)
        unregister_dream_hook("rem", two)
    assert seen == ["one rem", "two rem"]
    assert not run.results[0].errors
    assert sys.modules[PLUGIN].DREAMT == [("rem", False)]


# -- adapters ------------------------------------------------------------------------------
class NullAdapter(SessionAdapter):
    """A fake agent store with no sessions."""

    agent = "nullagent"

    def list_sessions(self, limit: int = 50) -> list[SessionInfo]:
        return []

    def get_session(self, session_id: str) -> SessionInfo | None:
        return None

    def get_messages(self, session_id: str, after_id: str | None = None) -> list[Message]:
        return []

    def session_exists(self, session_id: str) -> bool:
        return False

    def poll(self, cursor: str | None) -> tuple[list[LifecycleEvent], str | None]:
        return [], cursor


class BrokenAdapter(NullAdapter):
    @classmethod
    def from_config(cls, config: Any) -> SessionAdapter:
        raise RuntimeError("a plugin adapter bug")


def test_an_adapter_registered_through_the_api_is_built_by_the_sidecar(
    caplog: pytest.LogCaptureFixture,
) -> None:
    register_session_adapter("nullagent", NullAdapter)
    register_session_adapter("brokenagent", BrokenAdapter)
    try:
        register_session_adapter("nullagent", NullAdapter)  # the same class again: fine
        with pytest.raises(ValueError, match="already registered"):
            register_session_adapter("opencode", NullAdapter)
        with pytest.raises(TypeError):
            register_session_adapter("notanadapter", dict)
        assert get_adapter_class("opencode") is OpenCodeAdapter
        with caplog.at_level(logging.WARNING, logger="llmem_hooks.session.hooks"):
            built = default_adapters(Config.coerce({"opencode": {"enabled": False}}))
        assert isinstance(built["nullagent"], NullAdapter)
        assert "brokenagent" not in built and "opencode" not in built
        assert "a plugin adapter bug" in caplog.text  # logged; the others were built
    finally:
        adapters.unregister("nullagent")
        adapters.unregister("brokenagent")
    assert "nullagent" not in registered_adapters()


def test_an_installed_adapter_is_registered_from_its_entry_point(installed: Path) -> None:
    assert adapters.load_entry_points(reload=True) == ["notebook"]
    cls = registered_adapters()["notebook"]
    assert cls.__module__ == PLUGIN and issubclass(cls, SessionAdapter)
    assert adapters.load_entry_points(reload=True) == ["notebook"]  # a reload: no clash


def test_the_entry_point_cache_names_its_group(tmp_path: Path, installed: Path) -> None:
    """One cache file cannot hand one kind's entry points to another."""
    cache = tmp_path / "ep.json"
    found = adapters.cached_entry_points(cache)
    assert ("notebook", f"{PLUGIN}:NotebookAdapter") in found
    assert json.loads(cache.read_text())["stamp"][0] == ADAPTER_ENTRY_POINTS
    assert ("notebook", f"{PLUGIN}:NotebookAdapter") not in session_hooks.cached_entry_points(cache)
    assert oct(cache.stat().st_mode & 0o777) == "0o600"


def test_a_second_thread_waits_for_entry_points_that_are_loading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two threads look up an installed type while its (slow) plugin is imported: both
    find it; the second never sees a half-filled registry."""
    root = tmp_path / "slow-site"
    root.mkdir()
    (root / "llmem_hooks_slowplugin.py").write_text(
        "import time\ntime.sleep(0.3)\nSLOW = 'a type whose plugin imports slowly'\n"
    )
    info = root / "llmem_hooks_slowplugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: llmem_hooks_slowplugin\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text(
        f"[{MEMORY_TYPE_ENTRY_POINTS}]\nslow_type = llmem_hooks_slowplugin:SLOW\n"
    )
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    fresh: Registry[Any] = Registry(
        "memory type", MEMORY_TYPE_ENTRY_POINTS, check=lambda kind, item: item, several=False
    )
    found: list[tuple[Any, ...]] = []
    threads = [threading.Thread(target=lambda: found.append(fresh.get("slow_type"))) for _ in "ab"]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.modules.pop("llmem_hooks_slowplugin", None)
    assert found == [("a type whose plugin imports slowly",)] * 2
