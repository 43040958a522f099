"""`install_opencode` / `uninstall_opencode`: files, modes, idempotence, only our file."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from llmem_hooks.agents import install
from llmem_hooks.agents.install import (
    install_opencode,
    opencode_plugin_dir,
    plugin_bytes,
    plugin_source,
    sidecar_command,
    uninstall_opencode,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HOME and XDG_CONFIG_HOME inside tmp_path (LLMEM_HOME comes from tests/conftest.py)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    return tmp_path / "xdg-config"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_plugin_dir_follows_xdg_config_home(xdg: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert opencode_plugin_dir() == xdg / "opencode" / "plugin"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert opencode_plugin_dir() == Path.home() / ".config" / "opencode" / "plugin"
    monkeypatch.setenv("XDG_CONFIG_HOME", "")
    assert opencode_plugin_dir() == Path.home() / ".config" / "opencode" / "plugin"


def test_plugin_source_is_the_repo_plugin() -> None:
    src = plugin_source()
    assert src.read_bytes() == (ROOT / "plugin" / "llmem.ts").read_bytes()
    assert install.PLUGIN_MARKER in src.read_text().splitlines()[0]


def test_install_writes_plugin_and_settings(
    xdg: Path, llmem_home: Path, permissive_umask: None
) -> None:
    lines: list[str] = []
    paths = install_opencode(report=lines.append)
    target = xdg / "opencode" / "plugin" / "llmem.ts"
    settings_path = llmem_home / "plugin.json"
    assert paths == [target, settings_path]
    assert target.read_bytes() == plugin_bytes()
    settings = json.loads(settings_path.read_text())
    assert settings == {
        "context_dir": str(llmem_home / "context"),
        "wait_ms": 300,
        "autostart": True,
        "command": sidecar_command(),
        "log": str(llmem_home / "logs" / "plugin.log"),
        "socket": str(llmem_home / "query.sock"),
        "recall": True,
        "recall_timeout_ms": 250,
        "tools": True,
        "tool_timeout_ms": 3000,
    }
    assert Path(settings["command"][0]).is_absolute()
    assert settings["command"][-1] == "run"
    assert _mode(settings_path) == 0o600
    assert _mode(llmem_home) == 0o700
    assert lines == [f"installed {target}", f"installed {settings_path}"]
    assert not (llmem_home / "config.yaml").exists()  # installing writes no config


def test_install_is_idempotent(xdg: Path, llmem_home: Path) -> None:
    first = install_opencode()
    before = {p: p.read_bytes() for p in first}
    lines: list[str] = []
    second = install_opencode(report=lines.append)
    assert second == first
    assert {p: p.read_bytes() for p in second} == before
    assert lines == [f"already installed {p}" for p in first]
    assert sorted(p.name for p in opencode_plugin_dir().iterdir()) == ["llmem.ts"]


def test_install_updates_a_changed_file(xdg: Path, llmem_home: Path) -> None:
    target, settings_path = install_opencode()
    target.write_text("// llmem-hooks plugin for OpenCode (old version)\n")
    lines: list[str] = []
    install_opencode(command=["/opt/llmem/bin/llmem-hooks", "run"], report=lines.append)
    assert lines == [f"updated {target}", f"updated {settings_path}"]
    assert target.read_bytes() == plugin_bytes()
    assert json.loads(settings_path.read_text())["command"] == ["/opt/llmem/bin/llmem-hooks", "run"]


def test_install_honours_config(xdg: Path, llmem_home: Path, tmp_path: Path) -> None:
    llmem_home.mkdir(parents=True)
    (llmem_home / "config.yaml").write_text(
        f"context:\n  dir: {tmp_path / 'ctx'}\nopencode:\n"
        "  autostart_sidecar: false\n  plugin_wait_ms: 50\n  plugin_recall: false\n"
        "  plugin_recall_timeout_ms: 120\n  plugin_tools: false\n  plugin_tool_timeout_ms: 900\n"
    )
    _, settings_path = install_opencode()
    settings = json.loads(settings_path.read_text())
    assert settings["context_dir"] == str(tmp_path / "ctx")
    assert settings["autostart"] is False
    assert settings["wait_ms"] == 50
    assert (settings["recall"], settings["recall_timeout_ms"]) == (False, 120)
    assert (settings["tools"], settings["tool_timeout_ms"]) == (False, 900)


def test_sidecar_command_falls_back_to_module(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["pytest"])
    monkeypatch.setattr(sys, "executable", "/nonexistent/bin/python3")
    monkeypatch.setattr(install.shutil, "which", lambda name: None)
    assert sidecar_command() == ["/nonexistent/bin/python3", "-m", "llmem_hooks.cli", "run"]


def test_sidecar_command_prefers_the_running_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "bin" / "llmem-hooks"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setattr(sys, "argv", [str(script), "install"])
    assert sidecar_command() == [str(script), "run"]


def test_uninstall_removes_only_our_files(xdg: Path, llmem_home: Path) -> None:
    target, settings_path = install_opencode()
    other = target.parent / "other.ts"
    other.write_text("export const Other = async () => ({})\n")
    (llmem_home / "memory.db").write_bytes(b"")
    lines: list[str] = []
    assert uninstall_opencode(report=lines.append) == [target, settings_path]
    assert not target.exists() and not settings_path.exists()
    assert other.exists() and (llmem_home / "memory.db").exists()
    assert lines == [f"removed {target}", f"removed {settings_path}"]
    lines.clear()
    assert uninstall_opencode(report=lines.append) == []
    assert lines == ["nothing to remove: the OpenCode plugin is not installed"]


def test_uninstall_leaves_a_foreign_llmem_ts(xdg: Path, llmem_home: Path) -> None:
    target = opencode_plugin_dir() / "llmem.ts"
    target.parent.mkdir(parents=True)
    target.write_text("// someone else's plugin\n")
    lines: list[str] = []
    assert uninstall_opencode(report=lines.append) == []
    assert target.exists()
    assert lines[0] == f"left {target} alone: it is not the llmem-hooks plugin"
