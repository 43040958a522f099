"""The MCP server's registration: the repository's plugin manifest declares it, and
`install --copilot` merges it into ``$COPILOT_HOME/mcp-config.json`` (Copilot CLI's user
MCP config) without touching any other server; `uninstall` removes only ours."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from llmem_hooks.agents.install import (
    MCP_SERVER_NAME,
    copilot_mcp_path,
    install_copilot_mcp,
    installed_launcher,
    is_our_mcp_entry,
    mcp_server_entry,
    uninstall_copilot_mcp,
)
from llmem_hooks.cli import main as cli_main
from llmem_hooks.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
OTHER = {"type": "local", "command": "/usr/bin/npx", "args": ["-y", "ctx7"], "tools": ["*"]}


@pytest.fixture
def copilot_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "copilot-home"
    monkeypatch.setenv("COPILOT_HOME", str(home))
    return home


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_plugin_manifest_declares_the_server() -> None:
    manifest = json.loads((ROOT / ".github" / "plugin" / "plugin.json").read_text())
    server = manifest["mcpServers"][MCP_SERVER_NAME]
    assert server["type"] == "stdio"
    # Through the launcher (Copilot expands ${PLUGIN_ROOT}): no PATH needed.
    assert [server["command"], *server["args"]] == ["sh", "${PLUGIN_ROOT}/bin/llmem-hook", "mcp"]
    assert is_our_mcp_entry(server)
    # Inline in the manifest, not a root .mcp.json: Copilot would also load that file as a
    # workspace config for anyone working in this repository (two copies of the tools).
    assert not (ROOT / ".mcp.json").exists()


def test_install_creates_a_private_file(
    copilot_home: Path, llmem_home: Path, permissive_umask: None
) -> None:
    lines: list[str] = []
    target = copilot_home / "mcp-config.json"
    assert copilot_mcp_path() == target
    assert install_copilot_mcp(report=lines.append) == [target]
    data = json.loads(target.read_text())
    entry = data["mcpServers"]["llmem"]
    assert entry == mcp_server_entry() and entry["args"][-1] == "mcp"
    assert Path(entry["command"]).is_absolute()  # works without PATH
    # Through this installation's launcher (it answers the handshake without Python).
    assert entry["command"] == "/bin/sh" and entry["args"] == [str(installed_launcher()), "mcp"]
    assert is_our_mcp_entry(entry)
    assert _mode(target) == 0o600
    assert lines == [f"installed {target} (MCP server 'llmem')"]


def test_install_merges_and_is_idempotent(copilot_home: Path, llmem_home: Path) -> None:
    target = copilot_home / "mcp-config.json"
    copilot_home.mkdir(parents=True)
    theirs = {"mcpServers": {"context7": OTHER}, "someSetting": {"keep": True}}
    target.write_text(json.dumps(theirs))
    target.chmod(0o644)
    lines: list[str] = []
    install_copilot_mcp(report=lines.append)
    first = target.read_bytes()
    install_copilot_mcp(report=lines.append)
    assert target.read_bytes() == first
    data = json.loads(first)
    assert data["mcpServers"]["context7"] == OTHER and data["someSetting"] == {"keep": True}
    assert set(data["mcpServers"]) == {"context7", "llmem"}
    assert lines == [
        f"updated {target} (MCP server 'llmem')",
        f"already installed {target} (MCP server 'llmem')",
    ]
    assert _mode(target) == 0o600  # made private even when nothing changed
    # A moved installation: our entry is rewritten, the other server is untouched.
    install_copilot_mcp(command=["/opt/new/bin/llmem-hooks"], report=lines.append)
    data = json.loads(target.read_text())
    assert data["mcpServers"]["llmem"]["command"] == "/opt/new/bin/llmem-hooks"
    assert data["mcpServers"]["context7"] == OTHER
    assert lines[-1] == f"updated {target} (MCP server 'llmem')"


def test_a_foreign_llmem_server_is_left_alone(copilot_home: Path, llmem_home: Path) -> None:
    target = copilot_home / "mcp-config.json"
    copilot_home.mkdir(parents=True)
    target.write_text(json.dumps({"mcpServers": {"llmem": OTHER}}))
    before = target.read_bytes()
    lines: list[str] = []
    assert install_copilot_mcp(report=lines.append) == []
    assert uninstall_copilot_mcp(report=lines.append) == []
    assert target.read_bytes() == before
    assert lines == [f"left {target} alone: its 'llmem' server is not ours"]


@pytest.mark.parametrize("body", ["{not json", '["a list"]', '{"mcpServers": []}'])
def test_an_unreadable_config_is_never_overwritten(
    copilot_home: Path, llmem_home: Path, body: str
) -> None:
    target = copilot_home / "mcp-config.json"
    copilot_home.mkdir(parents=True)
    target.write_text(body)
    with pytest.raises(ConfigError, match=r"mcp-config\.json"):
        install_copilot_mcp()
    assert target.read_text() == body
    lines: list[str] = []
    assert uninstall_copilot_mcp(report=lines.append) == []
    assert target.read_text() == body and lines[0].startswith(f"left {target} alone")


def test_cli_install_reports_a_broken_config_in_one_line(
    copilot_home: Path, llmem_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copilot_home.mkdir(parents=True)
    (copilot_home / "mcp-config.json").write_text("{oops")
    assert cli_main(["install", "--copilot"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "mcp-config.json" in err[0]


def test_uninstall_removes_only_ours(copilot_home: Path, llmem_home: Path) -> None:
    target = copilot_home / "mcp-config.json"
    copilot_home.mkdir(parents=True)
    target.write_text(json.dumps({"mcpServers": {"context7": OTHER}}))
    install_copilot_mcp()
    lines: list[str] = []
    assert uninstall_copilot_mcp(report=lines.append) == [target]
    assert json.loads(target.read_text()) == {"mcpServers": {"context7": OTHER}}
    assert lines == [f"removed the MCP server 'llmem' from {target}"]
    assert uninstall_copilot_mcp(report=lines.append) == []  # nothing left to remove
    assert _mode(target) == 0o600


def test_is_our_mcp_entry() -> None:
    assert is_our_mcp_entry({"command": "/x/bin/llmem-hooks", "args": ["mcp"]})
    python = {"command": "/usr/bin/python3", "args": ["-m", "llmem_hooks.cli", "mcp"]}
    assert is_our_mcp_entry(python)
    assert not is_our_mcp_entry({"command": "/x/bin/llmem-hooks", "args": ["run"]})
    assert not is_our_mcp_entry({"command": "/usr/bin/npx", "args": ["mcp"]})
    assert not is_our_mcp_entry({"url": "https://example.invalid/mcp"})
    assert not is_our_mcp_entry(None)
