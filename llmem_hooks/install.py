"""Install the agent integrations.

OpenCode: ``llmem.ts`` into OpenCode's global plugin folder and its settings into
``<LLMEM_HOME>/plugin.json``. OpenCode loads every ``*.ts``/``*.js`` file in
``$XDG_CONFIG_HOME/opencode/plugin/`` (default ``~/.config/opencode/plugin/``). The plugin
reads ``plugin.json`` for where the context files are, how long to wait for a new
session's file, how to start the sidecar, where the query service listens and how long
recall and the memory tools may take.

GitHub Copilot CLI: a user-level hooks file ``$COPILOT_HOME/hooks/llmem.json`` (always
loaded, no folder trust needed) running ``<absolute llmem-hooks> hook copilot <event>``.
The repository's ``hooks.json`` + ``.github/plugin/plugin.json`` are the same hooks as a
plugin (``copilot --plugin-dir <repo>``); use one or the other, not both (each would
inject the context once).

Every step is idempotent; uninstalling removes only the files it wrote.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from . import paths
from .config import load_config
from .paths import (
    ensure_private_dir,
    get_context_dir,
    get_llmem_home,
    write_atomic,
    write_private_file,
)
from .service_protocol import socket_path

PLUGIN_FILE = "llmem.ts"
PLUGIN_MARKER = "llmem-hooks plugin for OpenCode"  # first line of plugin/llmem.ts
STATUS_INSTALLED = "installed"
STATUS_UPDATED = "updated"
STATUS_UNCHANGED = "already installed"
STATUS_REMOVED = "removed"

Report = Callable[[str], None]


def opencode_plugin_dir() -> Path:
    """OpenCode's global plugin folder: ``$XDG_CONFIG_HOME/opencode/plugin/``."""
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".config"
    return base / "opencode" / "plugin"


def plugin_source() -> Path:
    """The shipped plugin source: inside the package, else the repository's ``plugin/``."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "plugin" / PLUGIN_FILE, here.parent / "plugin" / PLUGIN_FILE):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"the OpenCode plugin source {PLUGIN_FILE} is missing from {here}")


def plugin_settings_path() -> Path:
    return get_llmem_home() / "plugin.json"


def sidecar_command() -> list[str]:
    """How the plugin starts the sidecar: the absolute path of this installation's
    ``llmem-hooks`` script, else ``python -m llmem_hooks.cli``; plus ``run``."""
    candidates: list[Path] = []
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name == "llmem-hooks":
        candidates.append(argv0)
    candidates.append(Path(sys.executable).parent / "llmem-hooks")  # same venv as us
    found = shutil.which("llmem-hooks")
    if found:
        candidates.append(Path(found))
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return [str(path.absolute()), "run"]
    return [str(Path(sys.executable).absolute()), "-m", "llmem_hooks.cli", "run"]


def service_socket_path() -> Path:
    """Where the sidecar's query service listens (`service_protocol.socket_path`, one rule
    for every client): the plugin's recall and memory tools connect there."""
    return socket_path(get_llmem_home())


def plugin_settings(command: Sequence[str] | None = None) -> dict[str, Any]:
    """The content of plugin.json (honours ``context.dir`` and the ``opencode`` section of
    config.yaml when it exists)."""
    cfg = load_config(create=False)
    home = get_llmem_home()
    return {
        "context_dir": str(get_context_dir(cfg["context"]["dir"])),
        "wait_ms": int(cfg["opencode"]["plugin_wait_ms"]),
        "autostart": bool(cfg["opencode"]["autostart_sidecar"]),
        "command": list(command) if command else sidecar_command(),
        "log": str(home / "logs" / "plugin.log"),
        "socket": str(service_socket_path()),
        "recall": bool(cfg["opencode"]["plugin_recall"]),
        "recall_timeout_ms": int(cfg["opencode"]["plugin_recall_timeout_ms"]),
        "tools": bool(cfg["opencode"]["plugin_tools"]),
        "tool_timeout_ms": int(cfg["opencode"]["plugin_tool_timeout_ms"]),
    }


def _write_if_changed(path: Path, data: bytes, private: bool) -> str:
    try:
        old: bytes | None = path.read_bytes()
    except FileNotFoundError:
        old = None
    if old == data:
        if private and not path.is_symlink():  # never chmod through a link
            os.chmod(path, 0o600)
        return STATUS_UNCHANGED
    if private:
        write_private_file(path, data)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data, 0o644)  # the plugin source: readable like any code
    return STATUS_INSTALLED if old is None else STATUS_UPDATED


def install_opencode(
    command: Sequence[str] | None = None, report: Report | None = None
) -> list[Path]:
    """Copy the plugin into OpenCode's plugin folder and write plugin.json (0600 in a 0700
    folder). Returns both paths; ``report`` gets one line per file, e.g.
    ``"installed <plugin dir>/llmem.ts"`` or ``"already installed <plugin dir>/llmem.ts"``."""
    target = opencode_plugin_dir() / PLUGIN_FILE
    settings_path = plugin_settings_path()
    ensure_private_dir(settings_path.parent)
    body = json.dumps(plugin_settings(command), indent=2) + "\n"
    results = [
        (target, _write_if_changed(target, plugin_source().read_bytes(), private=False)),
        (settings_path, _write_if_changed(settings_path, body.encode(), private=True)),
    ]
    if report is not None:
        for path, status in results:
            report(f"{status} {path}")
    return [path for path, _ in results]


def is_our_plugin(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            return PLUGIN_MARKER in fh.readline()
    except OSError:
        return False


def uninstall_opencode(report: Report | None = None) -> list[Path]:
    """Remove the plugin file (only if it is ours) and plugin.json; returns what was removed.
    Memories, config and context files stay."""
    removed: list[Path] = []
    target = opencode_plugin_dir() / PLUGIN_FILE
    if is_our_plugin(target):
        target.unlink()
        removed.append(target)
    elif target.exists() and report is not None:
        report(f"left {target} alone: it is not the llmem-hooks plugin")
    settings_path = plugin_settings_path()
    if settings_path.exists():
        settings_path.unlink()
        removed.append(settings_path)
    if report is not None:
        for path in removed:
            report(f"{STATUS_REMOVED} {path}")
        if not removed:
            report("nothing to remove: the OpenCode plugin is not installed")
    return removed


# -- GitHub Copilot CLI -------------------------------------------------------------------------
COPILOT_HOOKS_FILE = "llmem.json"
COPILOT_HOOK_EVENTS = (
    "sessionStart",
    "userPromptSubmitted",
    "agentStop",
    "preCompact",
    "sessionEnd",
)
COPILOT_HOOK_TIMEOUT_S = 5  # the hook gives up after ~1.5 s on its own
COPILOT_MARKER = "llmem-hooks hook copilot"  # in every command we write


def copilot_home() -> Path:
    """Copilot CLI's home: config ``copilot.home``, else ``$COPILOT_HOME``, else
    ``~/.copilot``."""
    return paths.copilot_home(load_config(create=False)["copilot"]["home"])


def copilot_hooks_path() -> Path:
    return copilot_home() / "hooks" / COPILOT_HOOKS_FILE


def copilot_hooks(command: str = "llmem-hooks") -> dict[str, Any]:
    """The hooks file content for Copilot CLI: one command hook per lifecycle event that
    fails open even when ``command`` is missing (stderr dropped, ``|| true``)."""
    return {
        "version": 1,
        "hooks": {
            event: [
                {
                    "type": "command",
                    "bash": f"{command} hook copilot {event} 2>/dev/null || true",
                    "timeoutSec": COPILOT_HOOK_TIMEOUT_S,
                }
            ]
            for event in COPILOT_HOOK_EVENTS
        },
    }


def hook_command() -> str:
    """This installation's ``llmem-hooks`` as a shell word (absolute path), else
    ``python -m llmem_hooks.cli``."""
    return " ".join(shlex.quote(part) for part in sidecar_command()[:-1])


def install_copilot(command: str | None = None, report: Report | None = None) -> list[Path]:
    """Write ``$COPILOT_HOME/hooks/llmem.json`` (0644; the hooks folder is Copilot's). Returns
    the path; ``report`` gets ``"installed ..."``, ``"updated ..."`` or
    ``"already installed ..."``."""
    target = copilot_hooks_path()
    body = json.dumps(copilot_hooks(command or hook_command()), indent=2) + "\n"
    status = _write_if_changed(target, body.encode(), private=False)
    if report is not None:
        report(f"{status} {target}")
    return [target]


def is_our_copilot_hooks(path: Path) -> bool:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        hooks = data["hooks"].values()
        return any(COPILOT_MARKER in h.get("bash", "") for group in hooks for h in group)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def uninstall_copilot(report: Report | None = None) -> list[Path]:
    """Remove ``$COPILOT_HOME/hooks/llmem.json`` if it is ours; returns what was removed."""
    target = copilot_hooks_path()
    removed: list[Path] = []
    if is_our_copilot_hooks(target):
        target.unlink()
        removed.append(target)
    elif target.exists() and report is not None:
        report(f"left {target} alone: it is not the llmem-hooks hooks file")
    if report is not None:
        for path in removed:
            report(f"{STATUS_REMOVED} {path}")
        if not removed:
            report("nothing to remove: the Copilot CLI hooks are not installed")
    return removed
