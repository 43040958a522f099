"""Shared fixtures: every test gets its own LLMEM_HOME and a real SQLite file."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmem_hooks import MemoryStore


@pytest.fixture(autouse=True)
def llmem_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep every test away from the real ~/.config/llmem."""
    home = tmp_path / "llmem-home"
    monkeypatch.setenv("LLMEM_HOME", str(home))
    monkeypatch.delenv("LLMEM_DB", raising=False)
    # Never read the developer's real agent stores.
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "copilot-home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.delenv("OPENCODE_DB", raising=False)
    return home


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    with MemoryStore(tmp_path / "memory.db") as st:
        yield st


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
    """A real HTTP fake of Ollama on 127.0.0.1 (tests/support/fake_ollama.py); stopped after the
    test. Yields (server, base_url); steer it through ``server.control``."""
    from support.fake_ollama import start_server

    srv, url = start_server()
    try:
        yield srv, url
    finally:
        srv.shutdown()
        srv.server_close()
