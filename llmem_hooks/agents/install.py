"""Install the agent integrations.

OpenCode: ``llmem.ts`` into OpenCode's global plugin folder and its settings into
``<LLMEM_HOME>/plugin.json``. OpenCode loads every ``*.ts``/``*.js`` file in
``$XDG_CONFIG_HOME/opencode/plugin/`` (default ``~/.config/opencode/plugin/``). The plugin
reads ``plugin.json`` for where the context files are, how long to wait for a new
session's file, how to start the sidecar, where the query service listens and how long
recall and the memory tools may take.

GitHub Copilot CLI: a user-level hooks file ``$COPILOT_HOME/hooks/llmem.json`` (always
loaded, no folder trust needed) running ``<absolute llmem-hooks> hook copilot <event>``,
and the MCP server (``llmem-hooks mcp``) as the ``llmem`` entry of the user's
``$COPILOT_HOME/mcp-config.json`` (merged into the file: other servers are kept as they
are). The repository's ``hooks.json`` + ``.github/plugin/plugin.json`` are the same hooks
and server as a plugin (``copilot --plugin-dir <repo>``); use one or the other, not both
(each would inject the context once, and the tools would be offered twice).

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

from .. import paths
from ..config import load_settings
from ..errors import ConfigError
from ..paths import (
    ensure_private_dir,
    get_context_dir,
    get_llmem_home,
    write_atomic,
    write_private_file,
)
from ..service.protocol import socket_path
from .tool_wording import plugin_text

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
    here = Path(__file__).resolve().parent.parent  # llmem_hooks/
    for candidate in (here / "plugin" / PLUGIN_FILE, here.parent / "plugin" / PLUGIN_FILE):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"the OpenCode plugin source {PLUGIN_FILE} is missing from {here}")


def plugin_bytes() -> bytes:
    """What install writes as ``llmem.ts``: the source with the tools' wording
    (``agents/tools.json``) written in, so the installed copy needs nothing next to it."""
    return plugin_text(plugin_source().read_text(encoding="utf-8")).encode("utf-8")


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
    cfg = load_settings(create=False)
    oc = cfg.opencode
    home = get_llmem_home()
    return {
        "context_dir": str(get_context_dir(cfg.context.dir)),
        "wait_ms": int(oc.plugin_wait_ms),
        "autostart": bool(oc.autostart_sidecar),
        "command": list(command) if command else sidecar_command(),
        "log": str(home / "logs" / "plugin.log"),
        "socket": str(service_socket_path()),
        "recall": bool(oc.plugin_recall),
        "recall_timeout_ms": int(oc.plugin_recall_timeout_ms),
        "tools": bool(oc.plugin_tools),
        "tool_timeout_ms": int(oc.plugin_tool_timeout_ms),
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
        (target, _write_if_changed(target, plugin_bytes(), private=False)),
        (settings_path, _write_if_changed(settings_path, body.encode(), private=True)),
    ]
    if report is not None:
        for path, status in results:
            report(f"{status} {path}")
    record_entry_point()
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
# The events we hook: those whose output Copilot uses (it waits for each). postToolUse is
# recall for the file in hand (the plugin's launcher starts Python only for file tools).
# Not agentStop, preCompact or sessionEnd: the sidecar sees them in the session's
# events.jsonl, their hooks only restarted a sidecar that was not running (sessionStart
# and userPromptSubmitted do that too), and Copilot waits for every hook it runs: two
# shell starts at the end of every `copilot -p` (docs/copilot.md). Hooks files written
# before still work: the launcher and `hook copilot` accept every event.
COPILOT_HOOK_EVENTS = ("sessionStart", "userPromptSubmitted", "postToolUse")
COPILOT_HOOK_TIMEOUT_S = 5  # the hook gives up after ~1.5 s on its own
COPILOT_MARKER = "llmem-hooks hook copilot"  # in every command we write
PLUGIN_LAUNCHER = "bin/llmem-hook"  # the repository's launcher (hooks.json, plugin.json)
ENTRY_POINT_FILE = "entry-point"  # in LLMEM_HOME: where the launcher finds llmem-hooks


def copilot_home() -> Path:
    """Copilot CLI's home: config ``copilot.home``, else ``$COPILOT_HOME``, else
    ``~/.copilot``."""
    return paths.copilot_home(load_settings(create=False).copilot.home)


def copilot_hooks_path() -> Path:
    return copilot_home() / "hooks" / COPILOT_HOOKS_FILE


# What sessionStart prints when the installed command is gone (the hook itself exits 0
# whatever happens): the launcher of the plugin says the same.
MISSING_NOTICE = shlex.quote(
    json.dumps(
        {
            "additionalContext": "[llmem-hooks] Long-term memory is unavailable in this session:"
            " the llmem-hooks command was not found. Tell the user once, in one short sentence,"
            " and suggest `llmem-hooks doctor`; then carry on normally."
        }
    )
)


def _hook_entry(bash: str, event: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "command", "bash": bash, "timeoutSec": COPILOT_HOOK_TIMEOUT_S}
    if event == "postToolUse":
        entry["matcher"] = file_tool_matcher()
    return entry


def file_tool_matcher() -> str:
    """postToolUse's ``matcher``: the file tools' names (`copilot_hook.FILE_TOOLS`).
    Copilot (1.0.102, verified) then starts the hook after those tools only: every other
    tool call (bash above all, whose output can run to many kilobytes of payload) costs
    nothing. The launcher and the hook filter by tool name too (a Copilot that ignores
    the field)."""
    from .copilot_hook import FILE_TOOLS

    return "^(" + "|".join(sorted(FILE_TOOLS)) + ")$"


def copilot_hooks(command: str = "llmem-hooks") -> dict[str, Any]:
    """The hooks file content for Copilot CLI: one command hook per event of
    `COPILOT_HOOK_EVENTS` that fails open even when ``command`` is missing (stderr
    dropped, ``|| true``)."""
    hooks: dict[str, list[dict[str, Any]]] = {}
    for event in COPILOT_HOOK_EVENTS:
        if event == "sessionStart":  # a command that is gone is said once, not swallowed
            bash = f"{command} hook copilot {event} 2>/dev/null || printf '%s\\n' {MISSING_NOTICE}"
        elif event == "postToolUse":  # every tool call: Python only for the file tools
            from .copilot_hook import FILE_TOOLS

            names = "|".join(
                f'*\'"toolName":"{t}"\'*|*\'"toolName": "{t}"\'*' for t in sorted(FILE_TOOLS)
            )
            bash = (
                f"p=$(cat); case $p in {names}) printf '%s' \"$p\" | {command} hook copilot"
                f" {event} 2>/dev/null ;; esac; true"
            )
        else:
            bash = f"{command} hook copilot {event} 2>/dev/null || true"
        hooks[event] = [_hook_entry(bash, event)]
    return {"version": 1, "hooks": hooks}


LAUNCHER_DATA = "share/llmem-hooks/llmem-hook"  # where a wheel installs `PLUGIN_LAUNCHER`


def installed_launcher() -> Path | None:
    """This installation's copy of the plugin's launcher: the one the wheel installed
    (pyproject's data-files, under the prefix pip chose: a venv, ``--user``, pipx), else
    the checkout's ``bin/llmem-hook`` when running from one (an editable install); None
    when neither exists (the hooks then call llmem-hooks directly)."""
    from importlib import metadata

    try:
        files = metadata.distribution("llmem-hooks").files or []
    except metadata.PackageNotFoundError:
        files = []
    candidates = [Path(str(f.locate())) for f in files if str(f).endswith(LAUNCHER_DATA)]
    candidates.append(Path(__file__).resolve().parents[2] / PLUGIN_LAUNCHER)
    for path in candidates:
        if path.is_file():
            return path.resolve()
    return None


def launcher_hooks(launcher: Path) -> dict[str, Any]:
    """The hooks file content for Copilot CLI through ``launcher`` (`installed_launcher`):
    what the plugin's ``hooks.json`` runs, by absolute path, so a user-level install gets
    the same fast paths (the sidecar's door, the stamped first prompt, Python only for file
    tools, detached events). The launcher finds llmem-hooks through
    ``$LLMEM_HOME/entry-point`` (`record_entry_point`); should the launcher itself be gone,
    ``sessionStart`` says so once."""
    word = shlex.quote(str(launcher))
    hooks: dict[str, list[dict[str, Any]]] = {}
    for event in COPILOT_HOOK_EVENTS:
        bash = f"sh {word} copilot {event}"
        if event == "sessionStart":
            bash += f" 2>/dev/null || printf '%s\\n' {MISSING_NOTICE}"
        hooks[event] = [_hook_entry(bash, event)]
    return {"version": 1, "hooks": hooks}


def is_launcher_command(bash: str) -> bool:
    """Whether a hook command runs a copy of our launcher (`launcher_hooks`)."""
    return bash.startswith("sh ") and "llmem-hook" in bash and " copilot " in bash


def plugin_hooks() -> dict[str, Any]:
    """The repository's ``hooks.json`` (``copilot --plugin-dir <repo>``): every event
    through `PLUGIN_LAUNCHER`, which finds llmem-hooks without PATH, says once when it
    cannot, and detaches the events whose output Copilot does not use. Copilot runs plugin
    hooks in the plugin's folder with ``$PLUGIN_ROOT`` set."""
    launcher = f'"${{PLUGIN_ROOT:-.}}/{PLUGIN_LAUNCHER}"'
    return {
        "version": 1,
        "hooks": {
            event: [_hook_entry(f"sh {launcher} copilot {event}", event)]
            for event in COPILOT_HOOK_EVENTS
        },
    }


def plugin_mcp_server() -> dict[str, Any]:
    """The ``llmem`` MCP server of ``.github/plugin/plugin.json``: the launcher too
    (Copilot expands ``${PLUGIN_ROOT}`` in a plugin server's command and arguments)."""
    return {
        "type": "stdio",
        "command": "sh",
        "args": [f"${{PLUGIN_ROOT}}/{PLUGIN_LAUNCHER}", "mcp"],
        "tools": ["*"],
    }


def hook_command() -> str:
    """This installation's ``llmem-hooks`` as a shell word (absolute path), else
    ``python -m llmem_hooks.cli``."""
    return " ".join(shlex.quote(part) for part in sidecar_command()[:-1])


def entry_point_path() -> Path:
    return get_llmem_home() / ENTRY_POINT_FILE


def record_entry_point() -> Path | None:
    """Write this installation's absolute ``llmem-hooks`` to ``<LLMEM_HOME>/entry-point``
    (0600), where the plugin's launcher looks first; None when there is no such script
    (a ``python -m`` installation: the launcher then searches its known places)."""
    command = sidecar_command()
    if len(command) != 2:
        return None
    target = entry_point_path()
    _write_if_changed(target, (command[0] + "\n").encode(), private=True)
    return target


def install_copilot(command: str | None = None, report: Report | None = None) -> list[Path]:
    """Write ``$COPILOT_HOME/hooks/llmem.json`` (0644; the hooks folder is Copilot's). Returns
    the path; ``report`` gets ``"installed ..."``, ``"updated ..."`` or
    ``"already installed ..."``."""
    target = copilot_hooks_path()
    launcher = installed_launcher() if command is None else None
    hooks = launcher_hooks(launcher) if launcher else copilot_hooks(command or hook_command())
    body = json.dumps(hooks, indent=2) + "\n"
    status = _write_if_changed(target, body.encode(), private=False)
    if report is not None:
        report(f"{status} {target}")
    record_entry_point()
    return [target, *install_copilot_mcp(report=report)]


def is_our_copilot_hooks(path: Path) -> bool:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        hooks = data["hooks"].values()
        return any(
            COPILOT_MARKER in h.get("bash", "") or is_launcher_command(h.get("bash", ""))
            for group in hooks
            for h in group
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def uninstall_copilot(report: Report | None = None) -> list[Path]:
    """Remove ``$COPILOT_HOME/hooks/llmem.json`` if it is ours, and our MCP server entry;
    returns what was removed (changed, for mcp-config.json)."""
    target = copilot_hooks_path()
    removed: list[Path] = []
    if is_our_copilot_hooks(target):
        target.unlink()
        removed.append(target)
        if report is not None:
            report(f"{STATUS_REMOVED} {target}")
    elif target.exists() and report is not None:
        report(f"left {target} alone: it is not the llmem-hooks hooks file")
    removed += uninstall_copilot_mcp(report=report)
    if report is not None and not removed:
        report("nothing to remove: the Copilot CLI hooks are not installed")
    return removed


# -- the MCP server, for Copilot CLI ------------------------------------------------------------
COPILOT_MCP_FILE = "mcp-config.json"
MCP_SERVER_NAME = "llmem"


def copilot_mcp_path() -> Path:
    return copilot_home() / COPILOT_MCP_FILE


def mcp_server_entry(command: Sequence[str] | None = None) -> dict[str, Any]:
    """Our server in Copilot CLI's user config form (what ``copilot mcp add`` writes):
    this installation's launcher (`installed_launcher`), which answers the handshake
    Copilot waits for before every first turn without starting Python, else ``command``
    or this installation's ``llmem-hooks`` (absolute); argument ``mcp``."""
    launcher = installed_launcher() if not command else None
    if launcher is not None:
        base = ["/bin/sh", str(launcher)]
    else:
        base = list(command) if command else sidecar_command()[:-1]
    return {"type": "local", "command": base[0], "args": [*base[1:], "mcp"], "tools": ["*"]}


def is_launcher_path(arg: Any) -> bool:
    """Whether a command's argument names a copy of our launcher (the plugin's
    `PLUGIN_LAUNCHER` or the wheel's `LAUNCHER_DATA`)."""
    return isinstance(arg, str) and arg.endswith((PLUGIN_LAUNCHER, LAUNCHER_DATA))


def is_our_mcp_entry(entry: Any) -> bool:
    """An entry that runs ``llmem-hooks mcp`` (or ``python -m llmem_hooks.cli mcp``)."""
    if not isinstance(entry, dict):
        return False
    command, args = entry.get("command"), entry.get("args")
    if not isinstance(command, str) or not isinstance(args, list) or args[-1:] != ["mcp"]:
        return False
    if any(is_launcher_path(a) for a in args):
        return True  # through a launcher: the plugin manifest's, or installed with the wheel
    return Path(command).name == "llmem-hooks" or "llmem_hooks.cli" in args


def _read_mcp_config(path: Path) -> dict[str, Any] | None:
    """The user's MCP config (None if missing). Anything we could not write back without
    losing something (not JSON, not an object) stops the install with one clear line."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        data = json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc}); fix it, then run again") from None
    servers = data.get("mcpServers", {}) if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ConfigError(f"{path}: expected an object with an mcpServers object; left alone")
    return data


class _McpWriterLock:
    """Copilot CLI's own lock on its MCP config (``.mcp-writer.lock``, taken with flock by
    ``copilot mcp add``): we hold it too while we read, merge and write the file."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / ".mcp-writer.lock"
        self.fd: int | None = None

    def __enter__(self) -> _McpWriterLock:
        import fcntl

        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        self.fd = os.open(self.path, flags, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing releases the flock


def install_copilot_mcp(
    command: Sequence[str] | None = None, report: Report | None = None
) -> list[Path]:
    """Add (or update) the ``llmem`` server in ``$COPILOT_HOME/mcp-config.json`` (0600),
    keeping every other server and key. A ``llmem`` entry that is not ours is left alone."""
    target = copilot_mcp_path()
    ensure_private_dir(target.parent)
    with _McpWriterLock(target.parent):
        data = _read_mcp_config(target)
        config: dict[str, Any] = data if data is not None else {}
        servers = config.setdefault("mcpServers", {})
        current = servers.get(MCP_SERVER_NAME)
        if current is not None and not is_our_mcp_entry(current):
            if report is not None:
                report(f"left {target} alone: its {MCP_SERVER_NAME!r} server is not ours")
            return []
        servers[MCP_SERVER_NAME] = mcp_server_entry(command)
        body = json.dumps(config, indent=2) + "\n"
        if data is None:
            status = STATUS_INSTALLED
        elif current == servers[MCP_SERVER_NAME]:
            status = STATUS_UNCHANGED
        else:
            status = STATUS_UPDATED
        if status != STATUS_UNCHANGED:
            write_private_file(target, body)
        elif not target.is_symlink():
            os.chmod(target, 0o600)
    if report is not None:
        report(f"{status} {target} (MCP server {MCP_SERVER_NAME!r})")
    return [target]


def uninstall_copilot_mcp(report: Report | None = None) -> list[Path]:
    """Remove our ``llmem`` entry from ``$COPILOT_HOME/mcp-config.json``; every other
    server stays (the file stays too, even when it ends up with no server)."""
    target = copilot_mcp_path()
    if not target.exists():
        return []
    with _McpWriterLock(target.parent):
        try:
            data = _read_mcp_config(target)
        except ConfigError as exc:
            if report is not None:
                report(f"left {target} alone: {exc}")
            return []
        servers = (data or {}).get("mcpServers", {})
        if not is_our_mcp_entry(servers.get(MCP_SERVER_NAME)):
            return []
        del servers[MCP_SERVER_NAME]
        write_private_file(target, json.dumps(data, indent=2) + "\n")
    if report is not None:
        report(f"{STATUS_REMOVED} the MCP server {MCP_SERVER_NAME!r} from {target}")
    return [target]
