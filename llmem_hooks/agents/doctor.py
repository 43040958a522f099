"""``llmem-hooks doctor``: which extractor the hooks will use, and why.

Extraction silently falling back to the heuristics is the designed behaviour when the
model cannot be used, so a person needs one place that says why: is Ollama enabled, is
its base URL allowed (loopback unless ``ollama.allow_remote``), does it answer, is the
model pulled, is today's budget left. No Ollama at all is a valid setup (the heuristics
run): only a configuration that cannot work is an error (exit code 2).

URLs are printed without credentials (`url_validate.strip_credentials`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from ..config import Config, OllamaSettings
from ..errors import ConfigError, LLMemError
from ..model.budget import BudgetLimits, ModelBudget
from ..paths import get_config_path, get_llmem_home
from ..store import MemoryStore
from ..url_validate import is_loopback_host, strip_credentials, validate_base_url

Status = Literal["ok", "warn", "error", "skip"]
EXIT_OK = 0
EXIT_BAD_CONFIG = 2
PROBE_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Check:
    """One line of the diagnosis. ``warn``: works, but degraded (e.g. no Ollama: the
    heuristics run); ``error``: the configuration cannot work as written; ``skip``: not
    applicable (e.g. Ollama disabled)."""

    name: str
    status: Status
    detail: str

    @property
    def ok(self) -> bool:
        return self.status in ("ok", "skip")

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def exit_code(checks: list[Check]) -> int:
    """0 unless a check found a configuration that cannot work (2)."""
    return EXIT_BAD_CONFIG if any(c.status == "error" for c in checks) else EXIT_OK


def _budget_check(
    config: Config, store: MemoryStore | None, clock: Callable[[], float]
) -> tuple[Check, str | None]:
    """Today's model usage against the day caps; the reason the model is skipped, if so."""
    if store is None:
        return Check("budget", "skip", "no database opened"), None
    limits = BudgetLimits.from_config(config)
    report = ModelBudget(store, limits, clock=clock).report()
    today = report["today"]
    detail = (
        f"today ({report['day']} UTC): {today['calls']} calls, {today['tokens']} of "
        f"{limits.day_tokens} tokens, {today['seconds']:.1f} of {limits.day_seconds:g} s; "
        f"per session: {limits.session_tokens} tokens, {limits.session_seconds:g} s"
    )
    if report["day_tokens_left"] <= 0 or report["day_seconds_left"] <= 0:
        why = "today's model budget is spent (heuristics until the next UTC day)"
        return Check("budget", "warn", f"{detail}; {why}"), why
    return Check("budget", "ok", detail), None


def _ollama_checks(
    section: OllamaSettings, timeout: float
) -> tuple[list[Check], str | None, Status]:
    """(checks, why the model cannot be used or None, status of that reason)."""
    from ..model.ollama import OllamaClient, OllamaError

    url = section.base_url
    shown = strip_credentials(url)
    allow_remote = section.allow_remote
    model = section.model
    checks: list[Check] = []
    try:
        validate_base_url(url, allow_remote)
    except ConfigError as exc:
        checks.append(Check("base_url", "error", str(exc)))
        return checks, f"ollama.base_url {shown} is refused", "error"
    from urllib.parse import urlsplit

    local = is_loopback_host(urlsplit(url).hostname or "")
    where = "on this machine" if local else "remote, allowed by ollama.allow_remote"
    checks.append(Check("base_url", "ok", f"{shown} ({where})"))
    try:
        with OllamaClient(url, allow_remote=allow_remote, timeout=timeout) as client:
            version = client.version(timeout)
            checks.append(Check("ollama", "ok", f"Ollama {version} answers at {shown}"))
            names = client.models(timeout)
    except OllamaError as exc:
        checks.append(Check("ollama", "warn", f"not reachable: {exc}"))
        return checks, f"Ollama does not answer at {shown}", "warn"
    want = model if ":" in model else f"{model}:latest"
    if want in names or model in names:
        checks.append(Check("model", "ok", f"{model} is installed"))
        return checks, None, "ok"
    checks.append(Check("model", "warn", f"{model} is not installed (run: ollama pull {model})"))
    return checks, f"model {model} is not installed", "warn"


def _vector_checks(config: Config, store: MemoryStore | None) -> list[Check]:
    """EMBEDDINGS: the embedder and sqlite-vec checks go here (owned by the embeddings
    work: which embedder is active, its model and dimensions, whether sqlite-vec loads).

    ``vectors``: whether sqlite-vec loads (else why: search is FTS-only), how many
    vectors are indexed and which KNN path they take, and a recorded dimension that
    differs from memory.vec_dimensions (warn: rebuilt on the next open with the setting)."""
    checks = [_embedder_check(config)]
    if store is None:
        return [*checks, Check("vectors", "skip", "no database opened")]
    from ..store.db import driver_name
    from ..store.vectors import vector_status

    available, reason, _ = vector_status(store)
    reason = f"{driver_name()}: {reason}"
    if not available:
        return [*checks, Check("vectors", "warn", reason)]
    want = config.memory.vec_dimensions
    have = store.vectors.dimensions
    if have is not None and have != want:
        return [
            *checks,
            Check(
                "vectors",
                "warn",
                f"{reason}; memory.vec_dimensions is {want}: the index is rebuilt for"
                f" {want}-dimensional vectors when the store is next opened with it",
            ),
        ]
    return [*checks, Check("vectors", "ok", reason)]


def _embedder_check(config: Config) -> Check:
    """``embedder``: whether memories get vectors (semantic search, near-duplicate
    merging) or search stays keyword-only, and why."""
    from ..model.embed import embedder_from_config

    if not config.ollama.enabled:
        return Check("embedder", "ok", "none: ollama.enabled is false; search is keyword-only")
    engine = embedder_from_config(config)
    if engine is None:
        return Check("embedder", "warn", "none: ollama.base_url is refused (see base_url)")
    try:
        ok, why = engine.check_available()
    finally:
        engine.close()
    if ok:
        return Check("embedder", "ok", why)
    return Check("embedder", "warn", f"none: {why}; search is keyword-only")


def diagnose(
    config: Config | Mapping[str, Any],
    store: MemoryStore | None = None,
    *,
    timeout: float = PROBE_TIMEOUT_S,
    clock: Callable[[], float] = time.time,
    agents: bool = True,
) -> list[Check]:
    """Every check: the extractor (what the hooks will extract with and why), vectors,
    the query service, then each agent's wiring and store (`agent_checks`). ``config``:
    a dict too (tests and callers of the public API pass `load_config`'s), typed here."""
    config = Config.coerce(config)
    path = get_config_path()
    checks = [
        Check("config", "ok", str(path) if path.exists() else "defaults (no config.yaml yet)")
    ]
    section = config.ollama
    why: str | None
    severity: Status = "ok"
    if not section.enabled:
        checks.append(Check("ollama", "skip", "ollama.enabled is false"))
        why, severity = "ollama.enabled is false", "ok"
    else:
        found, why, severity = _ollama_checks(section, timeout)
        checks.extend(found)
    budget, over = _budget_check(config, store, clock)
    checks.append(budget)
    if why is None and over is not None:
        why, severity = over, "warn"
    if why is None:
        model = section.model
        shown = strip_credentials(section.base_url)
        checks.append(Check("extractor", "ok", f"ollama ({model} at {shown}) + heuristics"))
    else:
        status: Status = "ok" if severity == "ok" else "warn"
        checks.append(Check("extractor", status, f"heuristic: {why}"))
    checks.extend(_vector_checks(config, store))
    checks.append(_service_check())
    checks.append(_team_check(config, store, timeout))
    if agents:
        checks.extend(agent_checks(config, opencode_version()))
    return checks


def _team_check(config: Config, store: MemoryStore | None, timeout: float) -> Check:
    """The team hub (docs/team.md): joined or not, reachable or not, what waits to go."""
    from ..store import team as team_store
    from ..team import connection

    try:
        address = connection.load(None, config.team.hub)
    except LLMemError as exc:
        return Check("team", "warn", str(exc))
    if address is None:
        return Check("team", "skip", "not in a team (llmem-hooks team join DSN; docs/team.md)")
    waiting = team_store.outbox_size(store.db) if store is not None else 0
    enrolled = team_store.projects(store.db) if store is not None else []
    errors = [p.last_error for p in enrolled if p.last_error]
    try:
        hub = connection.connect(address, timeout=max(1.0, timeout))
    except Exception as exc:  # the hub or the extra missing: say which, never a password
        why = str(exc) if isinstance(exc, LLMemError) else type(exc).__name__
        return Check(
            "team", "warn", f"hub {address.display()} not reachable: {why}; {waiting} changes wait"
        )
    with hub:
        readable = len(hub.projects())
    detail = (
        f"hub {address.display()} answers (role {address.role}): {len(enrolled)} projects"
        f" synced of {readable} readable, {waiting} changes to push"
    )
    if errors:
        return Check("team", "warn", f"{detail}; last error: {errors[-1]}")
    return Check("team", "ok", detail)


def _service_check() -> Check:
    """Whether the sidecar's query service answers (per-prompt recall and the agent tools
    go through it; without it the OpenCode plugin recalls nothing and the Copilot hook and
    the MCP server answer in-process, slower)."""
    from ..service.client import answers
    from ..service.protocol import socket_path

    status = answers()
    if status is None:
        return Check(
            "query_service",
            "warn",
            f"no sidecar answers on {socket_path(get_llmem_home())}: OpenCode gets no per-prompt"
            " recall until `llmem-hooks run` (its plugin starts it); Copilot and MCP answer"
            " in-process",
        )
    import stat

    from .hook_door import IN_FIFO, door_dir

    version = status.get("version", "?")
    try:
        door = stat.S_ISFIFO(os.lstat(door_dir(get_llmem_home()) / IN_FIFO).st_mode)
    except OSError:
        door = False
    if not door:  # a sidecar started before an upgrade, or one whose door failed (its log)
        return Check(
            "query_service",
            "ok",
            f"the sidecar answers (v{version}); its door for the Copilot plugin's launcher is"
            " not open, so each of those hooks starts Python (restart the sidecar)",
        )
    return Check("query_service", "ok", f"the sidecar answers (v{version}) and its door is open")


def render(checks: list[Check], markdown: bool = False) -> str:
    """Plain text (one aligned line per check) or a markdown list."""
    if markdown:
        return "\n".join(f"- **{c.name}**: {c.status} — {c.detail}" for c in checks) + "\n"
    width = max((len(c.name) for c in checks), default=0)
    return "\n".join(f"{c.status:<5} {c.name:<{width}}  {c.detail}" for c in checks) + "\n"


# -- the agents' wiring -----------------------------------------------------------------------
VERSION_TIMEOUT_S = 5.0
OPENCODE_SUPPORTED_MAJOR = 1


def _resolvable(command: str) -> str | None:
    """The executable ``command`` names (absolute and executable, or found on PATH)."""
    import os
    import shutil
    from pathlib import Path

    path = Path(command).expanduser()
    if path.is_absolute():
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    return shutil.which(command)


def _script(path: str) -> str | None:
    """``path`` when it is an absolute file (a script run with ``sh``: no exec bit needed)."""
    from pathlib import Path

    return path if Path(path).is_absolute() and Path(path).is_file() else None


def _missing_mcp_part(server: Any) -> str | None:
    """What our MCP server entry runs that is gone: its command, or the launcher script
    it hands to ``sh`` (`install.mcp_server_entry`); None when both are there."""
    from .install import is_launcher_path

    command, args = str(server["command"]), server.get("args") or []
    if _resolvable(command) is None:
        return command
    for arg in args[:-1]:
        if is_launcher_path(arg) and _script(arg) is None:
            return arg
    return None


def _first_word(bash: str) -> str | None:
    """The program a hook's shell line runs (after an ``exec 3<&0;`` prefix, or the
    ``p=$(cat); case ...`` filter of postToolUse: the program the payload is piped to;
    for ``sh <script>``, the script: our launcher)."""
    import shlex

    if bash.startswith("p=$(cat);") and "| " in bash:
        bash = bash.split("| ", 1)[1]

    try:
        words = shlex.split(bash.split(";", 1)[1] if bash.startswith("exec 3<&0;") else bash)
    except ValueError:
        return None
    if words[:1] == ["sh"] and len(words) > 1:
        return words[1]
    return words[0] if words else None


def _version_major(text: str) -> int | None:
    import re

    m = re.search(r"(\d+)\.(\d+)\.(\d+)", text)
    return int(m.group(1)) if m else None


def opencode_version(timeout: float = VERSION_TIMEOUT_S) -> str | None:
    """``opencode --version`` of the OpenCode on PATH, or None (not installed, no answer)."""
    import shutil
    import subprocess

    exe = shutil.which("opencode")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--version"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else None


def opencode_checks(config: Config, version: str | None) -> list[Check]:
    """``opencode_plugin``: our plugin is where OpenCode loads it (and is this version's),
    plugin.json names a sidecar command that exists; ``opencode_store``: opencode.db is a
    store we read (an OpenCode 2.x store is named, not watched in silence);
    ``opencode_version``: an OpenCode >= 2 on PATH skips our 1.x plugin."""
    from ..adapters.opencode import OpenCodeAdapter
    from .install import (
        PLUGIN_FILE,
        is_our_plugin,
        opencode_plugin_dir,
        plugin_bytes,
        plugin_settings_path,
    )

    checks: list[Check] = []
    target = opencode_plugin_dir() / PLUGIN_FILE
    if not target.exists():
        checks.append(
            Check(
                "opencode_plugin",
                "warn" if version else "skip",
                f"not installed in {target.parent} (run `llmem-hooks install --opencode`)",
            )
        )
    elif not is_our_plugin(target):
        checks.append(Check("opencode_plugin", "warn", f"{target} is not the llmem-hooks plugin"))
    else:
        problems = []
        try:
            if target.read_bytes() != plugin_bytes():
                problems.append(
                    "older than this llmem-hooks (run `llmem-hooks install --opencode`)"
                )
        except (OSError, ValueError, LLMemError) as exc:
            problems.append(f"unreadable: {exc}")
        settings = plugin_settings_path()
        try:
            command = json.loads(settings.read_text(encoding="utf-8")).get("command") or []
        except (OSError, ValueError, AttributeError):
            command = None
            problems.append(f"{settings} is missing or not JSON")
        if command and _resolvable(str(command[0])) is None:
            problems.append(f"its sidecar command {command[0]!r} does not exist")
        status: Status = "warn" if problems else "ok"
        checks.append(
            Check("opencode_plugin", status, f"{target}: " + ("; ".join(problems) or "installed"))
        )
    try:
        adapter = OpenCodeAdapter.from_config(config)
    except LLMemError as exc:
        checks.append(Check("opencode_store", "error", str(exc)))
        adapter = None
    if adapter is not None:
        if not adapter.available():
            checks.append(
                Check("opencode_store", "skip", f"no {adapter.db_path} (OpenCode has not run)")
            )
        else:
            why = adapter.unsupported()
            if why is not None:
                checks.append(
                    Check("opencode_store", "warn", f"{adapter.db_path} is not supported: {why}")
                )
            else:
                checks.append(Check("opencode_store", "ok", f"{adapter.db_path} (OpenCode 1.x)"))
    if version is not None:
        major = _version_major(version)
        if major is not None and major > OPENCODE_SUPPORTED_MAJOR:
            checks.append(
                Check(
                    "opencode_version",
                    "warn",
                    f"OpenCode {version} is not supported: it does not load the 1.x plugin"
                    " (no context, no recall, no memory tools) and keeps new sessions in 2.x"
                    " tables that llmem-hooks does not read",
                )
            )
        else:
            checks.append(Check("opencode_version", "ok", f"OpenCode {version}"))
    return checks


def copilot_checks(config: Config) -> list[Check]:
    """``copilot_hooks``: the user-level hooks file is ours and the command it runs exists
    (a ``--plugin-dir`` run cannot be seen from here: its launcher finds llmem-hooks through
    ``$LLMEM_HOME/entry-point``, also checked); ``copilot_mcp``: our MCP server entry and
    its command; ``copilot_store``: the session-state folder the sidecar tails."""
    from ..paths import copilot_home
    from .install import (
        MCP_SERVER_NAME,
        copilot_hooks_path,
        copilot_mcp_path,
        entry_point_path,
        is_launcher_command,
        is_our_copilot_hooks,
        is_our_mcp_entry,
    )

    home = copilot_home(config.copilot.home)
    if not home.exists():
        return [Check("copilot", "skip", f"no {home} (Copilot CLI is not set up)")]
    checks: list[Check] = []
    hooks = copilot_hooks_path()
    entry = entry_point_path()
    try:
        recorded: str | None = entry.read_text(encoding="utf-8").strip()
    except OSError:
        recorded = None
    launcher = (
        f"the plugin launcher finds {recorded} ($LLMEM_HOME/entry-point)"
        if recorded and _resolvable(recorded)
        else "a --plugin-dir plugin finds llmem-hooks only on PATH or in its known places"
        " (run `llmem-hooks install --copilot` to record this one)"
    )
    if not hooks.exists():
        checks.append(Check("copilot_hooks", "warn", f"no {hooks}; {launcher}"))
    elif not is_our_copilot_hooks(hooks):
        checks.append(Check("copilot_hooks", "warn", f"{hooks} is not the llmem-hooks hooks file"))
    else:
        try:
            data = json.loads(hooks.read_text(encoding="utf-8"))
            lines: list[str] = [h.get("bash", "") for g in data["hooks"].values() for h in g]
            commands: set[str | None] = {_first_word(b) for b in lines}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            lines, commands = [], {None}
        scripts = {_first_word(b) for b in lines if is_launcher_command(b)} - {None}
        if scripts and not (recorded and _resolvable(recorded)):
            commands.add(recorded or "the llmem-hooks of $LLMEM_HOME/entry-point")
        broken = sorted(
            str(c)
            for c in commands
            if c is None or (_script(c) if c in scripts else _resolvable(c)) is None
        )
        if broken:
            checks.append(
                Check(
                    "copilot_hooks",
                    "warn",
                    f"{hooks} runs {', '.join(broken)}, which does not exist: no context, no"
                    " recall (run `llmem-hooks install --copilot` again)",
                )
            )
        else:
            checks.append(Check("copilot_hooks", "ok", f"{hooks}; {launcher}"))
    mcp = copilot_mcp_path()
    try:
        servers = json.loads(mcp.read_text(encoding="utf-8")).get("mcpServers", {})
        server = servers.get(MCP_SERVER_NAME) if isinstance(servers, dict) else None
    except (OSError, ValueError, AttributeError):
        server = None
    if not is_our_mcp_entry(server):
        checks.append(
            Check("copilot_mcp", "warn", f"no {MCP_SERVER_NAME!r} server of ours in {mcp}")
        )
    elif (gone := _missing_mcp_part(server)) is not None:
        checks.append(Check("copilot_mcp", "warn", f"{mcp}: {gone!r} does not exist"))
    else:
        checks.append(Check("copilot_mcp", "ok", f"{mcp} ({MCP_SERVER_NAME!r})"))
    state = home / "session-state"
    if state.is_dir():
        checks.append(Check("copilot_store", "ok", str(state)))
    else:
        checks.append(Check("copilot_store", "skip", f"no {state} (Copilot CLI has not run)"))
    return checks


def agent_checks(config: Config, version: str | None = None) -> list[Check]:
    """Each agent's wiring and store (`opencode_checks`, `copilot_checks`); fails open per
    agent (a check that breaks is one ``warn`` line, never the whole diagnosis)."""
    out: list[Check] = []
    for name, run in (
        ("opencode", lambda: opencode_checks(config, version)),
        ("copilot", lambda: copilot_checks(config)),
    ):
        try:
            out.extend(run())
        except Exception as exc:  # a diagnosis must not die of what it diagnoses
            out.append(Check(name, "warn", f"could not check: {type(exc).__name__}: {exc}"))
    return out
