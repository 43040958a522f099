"""Shared fixtures: every test gets its own LLMEM_HOME, HOME and XDG folders and a real
SQLite file, and fails if it leaves a thread running or a MemoryStore open.

The two leak checks (watchdog and sqlite-utils style) look only at what a test starts
itself: session- and module-scoped fixtures are set up before them, so a resource shared
on purpose by a module (a server, a store) is exempt by construction, not by a list.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from llmem_hooks import MemoryStore

# Threads that are finishing (a server's handler after shutdown, a worker after its last
# job) get this long to end before they count as leaked.
THREAD_GRACE_S = 3.0
XDG_DIRS = {
    "XDG_CONFIG_HOME": ".config",
    "XDG_DATA_HOME": ".local/share",
    "XDG_CACHE_HOME": ".cache",
    "XDG_STATE_HOME": ".local/state",
}


@pytest.fixture(autouse=True)
def user_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HOME and every XDG base folder under tmp: nothing a test runs (the product, OpenCode,
    a library) creates folders in the developer's real ~/.config, ~/.local or ~/.cache."""
    home = tmp_path / "user-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for key, rel in XDG_DIRS.items():
        monkeypatch.setenv(key, str(home / rel))
    return home


@pytest.fixture(autouse=True)
def llmem_home(user_dirs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep every test away from the real ~/.config/llmem."""
    home = tmp_path / "llmem-home"
    monkeypatch.setenv("LLMEM_HOME", str(home))
    monkeypatch.delenv("LLMEM_DB", raising=False)
    # Never read the developer's real agent stores.
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "copilot-home"))
    monkeypatch.delenv("OPENCODE_DB", raising=False)
    return home


@pytest.fixture(autouse=True)
def no_unclosed_stores(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """FAIL a test that leaves a MemoryStore open. ``__init__`` and ``close`` are wrapped
    (instrumentation: both still run) to track the stores this test opened; any still open
    at teardown is closed, so the next test starts clean, and reported."""
    opened: dict[int, MemoryStore] = {}
    real_init: Callable[..., None] = MemoryStore.__init__
    real_close: Callable[[MemoryStore], None] = MemoryStore.close

    def tracked_init(self: MemoryStore, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        opened[id(self)] = self  # only once it opened: a failed __init__ holds nothing

    def tracked_close(self: MemoryStore) -> None:
        real_close(self)
        opened.pop(id(self), None)

    monkeypatch.setattr(MemoryStore, "__init__", tracked_init)
    monkeypatch.setattr(MemoryStore, "close", tracked_close)
    yield
    left = list(opened.values())
    for st in left:
        real_close(st)
    if left:
        paths = ", ".join(str(st.db_path) for st in left)
        pytest.fail(f"test left {len(left)} MemoryStore(s) open: {paths}", pytrace=False)


@pytest.fixture(autouse=True)
def no_leaked_threads(no_unclosed_stores: None) -> Iterator[None]:
    """FAIL a test that leaves a thread running that was not running before it (after
    ``THREAD_GRACE_S`` for threads that are finishing). Runs inside ``no_unclosed_stores``
    so a thread that closes a store on its way out is waited for first."""
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + THREAD_GRACE_S
    leaked: list[threading.Thread] = []
    for thread in threading.enumerate():
        if thread in before or thread is threading.current_thread():
            continue
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            leaked.append(thread)
    if leaked:
        names = ", ".join(f"{t.name} (daemon={t.daemon})" for t in leaked)
        pytest.fail(f"test leaked {len(leaked)} running thread(s): {names}", pytrace=False)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    with MemoryStore(tmp_path / "memory.db") as st:
        yield st


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one commit (its project key is the root commit)."""
    path = tmp_path / "repo"
    path.mkdir()
    (path / "README.md").write_text("demo\n")
    git = ["git", "-c", "user.email=dev@example.com", "-c", "user.name=dev"]
    for args in (["init", "-q"], ["add", "README.md"], ["commit", "-q", "-m", "init"]):
        subprocess.run([*git, *args], cwd=path, check=True, capture_output=True, timeout=30)
    return path


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    """umask 0, so the file modes checked come from llmem-hooks, not from the umask."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def fake_ollama() -> Iterator[tuple[object, str]]:
    """A real HTTP fake of Ollama on 127.0.0.1 (tests/support/fake_ollama.py); stopped after
    the test. Yields (server, base_url); steer it through ``server.control``."""
    from support.fake_ollama import start_server

    srv, url = start_server()
    try:
        yield srv, url
    finally:
        srv.shutdown()
        srv.server_close()


# -- a real PostgreSQL for the team hub (tests/support/pg.py) -------------------------------
@pytest.fixture(scope="session")
def pg() -> Iterator[Any]:
    """One PostgreSQL 16 (+ pgvector) for the session, on a Unix socket, passwords on;
    started by the first test that asks (tests/team, the agents' team e2e test)."""
    pytest.importorskip("psycopg", reason="the team extra (psycopg) is not installed")
    pytest.importorskip("pgserver", reason="pgserver (PostgreSQL as a wheel) is not installed")
    from support.pg import server_folder, start_cluster

    with server_folder() as folder:
        cluster = start_cluster(folder)
        try:
            yield cluster
        finally:
            cluster.stop()


@pytest.fixture
def hub_db(pg: Any) -> Iterator[Any]:
    """A fresh database on the session's server for one test."""
    from support.pg import fresh_database

    yield from fresh_database(pg)
