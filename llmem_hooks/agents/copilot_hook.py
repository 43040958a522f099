"""`llmem-hooks hook copilot <event>`: the GitHub Copilot CLI hook command.

Copilot CLI runs it for every configured hook event with a JSON payload on stdin
(camelCase keys for camelCase-configured events such as ``sessionStart``; snake_case keys
for the PascalCase aliases such as ``SessionStart``). It prints at most one JSON object:

* ``sessionStart``: ``{"additionalContext": <the session's context file>}``. The file
  ``<context_dir>/<session_id>.md`` is the one the sidecar writes; if the sidecar has not
  written it yet, the hook builds it through the same `SessionHookCoordinator.on_created`
  (dispatched by `SessionEventManager`, so a registered ``created`` hook runs too), so
  both always agree. Copilot places it first in the conversation.
  With an ``initialPrompt`` (a new session's first prompt; in ``-p`` runs the prompt of
  each resumed run too), the per-prompt recall for that prompt is appended: the start
  context is ranked for what the session is about to ask.
* ``userPromptSubmitted``: ``{"additionalContext": ...}`` with the per-prompt recall
  block (the query service's ``recall``: the memories relevant to this prompt that this
  session was not given yet, as ``<llmem-recall>`` lines; Copilot appends it to the
  prompt as a ``<system_reminder>``), and once after each compaction the resume pack
  (Copilot's ``checkpoints/NNN-*.md`` count went up since the last injection, remembered
  in ``<session_id>.compact.injected``). Copilot keeps only the last hook's value, so
  both go in one output.
* every other event: nothing. The session store (``events.jsonl``) is the source of
  truth and the sidecar tails it; the hook only starts a sidecar when none runs (config
  ``copilot.autostart_sidecar``, default true).

Both events recall under one per-session lock (``<session_id>.recall.lock``): Copilot
starts them together for the same first prompt, and the lock makes the second one see
what the first gave (the service never repeats a memory within a session).

Fail open: on any error, bad input or a slow database the hook prints nothing and exits
0 (errors go to ``<LLMEM_HOME>/logs/copilot-hook.log``), always within `DEADLINE_S`.
Imports are lazy: this runs on every session start and prompt. With a sidecar running,
the command's front (`agents.hook_front`) has the sidecar run `handle` instead
(`agents.hook_relay`), and this module is not imported by the hook process at all.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from .hook_log import log_line, route_library_logs

TYPE_CHECKING = False  # not `typing` at run time: ~7 ms of every hook call
if TYPE_CHECKING:
    from typing import Any, BinaryIO, TextIO

    from ..config import Config
    from ..events import SessionInfo

AGENT = "copilot"
MAX_STDIN_BYTES = 1 << 20  # payloads are < 2 KB; anything near this is not ours to parse
MAX_CONTEXT_CHARS = 200_000
DEADLINE_S = 1.2  # the whole process (with interpreter start-up) must finish within 2 s
DB_MARGIN_S = 0.25  # SQLite gives up this long before the deadline
RECALL_MARGIN_S = 0.15  # recall is skipped when less than this is left before the deadline
MAX_PROMPT_CHARS = 20_000  # the service reads no more of a prompt than this
PENDING_MARK = "pending"  # a recall lock's first line while sessionStart recalls
SIDECAR_FILE_WAIT_S = 0.25  # how long sessionStart waits for a running sidecar's file
SETTINGS_CACHE = ".copilot-hook-settings.json"  # next to config.yaml
ENTRY_POINTS_CACHE = ".copilot-hook-entry-points.json"  # the session hooks plugins declare

# PascalCase (VS Code / Claude compatible) names -> Copilot's camelCase names.
EVENT_ALIASES = {
    "SessionStart": "sessionStart",
    "UserPromptSubmit": "userPromptSubmitted",
    "Stop": "agentStop",
    "PreCompact": "preCompact",
    "SessionEnd": "sessionEnd",
    "SubagentStart": "subagentStart",
    "SubagentStop": "subagentStop",
    "ErrorOccurred": "errorOccurred",
    "PostToolUse": "postToolUse",
}
EVENTS = (
    "sessionStart",
    "userPromptSubmitted",
    "agentStop",
    "preCompact",
    "sessionEnd",
    "subagentStart",
    "subagentStop",
    "errorOccurred",
    "postToolUse",
)
# Events on which a missing sidecar is started. userPromptSubmitted too: the plugin hooks
# no end-of-turn event any more, so a sidecar that died mid-session is restarted at the
# next prompt (the first prompt's hook rarely gets here: sessionStart's stamp answers it).
AUTOSTART_EVENTS = frozenset(
    {
        "sessionStart",
        "userPromptSubmitted",
        "agentStop",
        "preCompact",
        "sessionEnd",
        "subagentStop",
        "errorOccurred",
    }
)


class HookError(Exception):
    """Input the hook cannot use (logged, never shown to Copilot)."""


# -- payload ---------------------------------------------------------------------------------
def _field(payload: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        value = payload.get(name)
        if value not in (None, ""):
            return value
    return None


def normalize_event(name: str | None) -> str | None:
    """A camelCase event name for ``name`` (PascalCase aliases mapped), or None."""
    if not name:
        return None
    name = EVENT_ALIASES.get(name, name)
    return name if name in EVENTS else None


def session_of(payload: Mapping[str, Any]) -> tuple[str, bool]:
    """``(session id, is_subagent)``: hooks fired for a sub-agent's turn carry the
    sub-agent's id as ``sessionId`` and the real session in ``parentAgentId``."""
    sid = _field(payload, "sessionId", "session_id")
    agent_id = _field(payload, "agentId", "agent_id")
    parent = _field(payload, "parentAgentId", "parent_agent_id")
    if not isinstance(sid, str):
        raise HookError("payload without a session id")
    if isinstance(parent, str) and (agent_id is not None or sid == parent):
        sid, subagent = parent, True
    else:
        subagent = agent_id is not None
    problem = _session_id_problem(sid)  # it becomes a file name: no '..', no control chars
    if problem is not None:
        raise HookError(f"unusable session id {sid[:80]!r}: {problem}")
    return sid, subagent


def _session_id_problem(sid: str) -> str | None:
    """`events.session_id_problem`'s rule without importing `events` (~90 ms of imports
    on every hook call): `paths.validate_session_id`, no control characters, no outer
    white space (tests/agents/test_agent_wiring.py checks that both agree)."""
    from ..errors import ValidationError
    from ..paths import validate_session_id

    try:
        validate_session_id(sid)
    except ValidationError as exc:
        return str(exc)
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 or c in "\u2028\u2029" for c in sid):
        return "contains control characters"
    if sid != sid.strip():
        return "has leading or trailing white space"
    return None


def read_payload(stream: BinaryIO) -> dict[str, Any]:
    """The stdin JSON object, read up to `MAX_STDIN_BYTES`."""
    data = stream.read(MAX_STDIN_BYTES + 1)
    if len(data) > MAX_STDIN_BYTES:
        raise HookError(f"payload larger than {MAX_STDIN_BYTES} bytes")
    if not data.strip():
        raise HookError("empty payload")
    try:
        payload = json.loads(data)
    except (ValueError, RecursionError) as exc:  # RecursionError: absurdly deep nesting
        raise HookError(f"payload is not JSON we can read: {type(exc).__name__}") from None
    if not isinstance(payload, dict):
        raise HookError("payload is not a JSON object")
    return payload


# -- settings --------------------------------------------------------------------------------
class Settings:
    """What the hook needs from config.yaml (read without creating it).

    ``raw`` is `load_config`'s validated dict as cached in `SETTINGS_CACHE`: the hook's
    edge, read here once for the few values every call needs (importing config.py, with
    dataclasses and typing, would cost ~20 ms of each prompt). Whatever opens the store
    or the coordinator takes the typed `Config` (`typed`), converted on first use."""

    def __init__(self, raw: Mapping[str, Any], autostart: bool) -> None:
        from ..paths import get_context_dir

        self.raw = raw
        # A key missing from a cache is a KeyError: `load_settings` then parses config.yaml.
        self.context_dir = get_context_dir(raw["context"]["dir"])
        self.autostart = autostart
        self.recall = bool(raw["recall"]["enabled"])
        self._home: str | None = raw["copilot"]["home"]
        self._typed: Config | None = None

    @property
    def copilot_home(self) -> Path:
        from ..paths import copilot_home

        relayed = getattr(relay_state, "copilot_home", None)  # the hook process's $COPILOT_HOME
        if self._home is None and relayed is not None:
            return copilot_home(relayed)
        return copilot_home(self._home)

    def typed(self) -> Config:
        """The settings as the rest of the package takes them (converted once)."""
        if self._typed is None:
            from ..config import Config

            self._typed = Config.from_mapping(self.raw)
        return self._typed


def _config_path() -> Path:
    from ..paths import get_config_path

    return get_config_path()


def load_settings() -> Settings:
    """config.yaml as the sidecar reads it, plus ``copilot.autostart_sidecar``.

    Parsing YAML means importing PyYAML (~40 ms of regex compiling per process), so the
    validated result is kept in `SETTINGS_CACHE` next to config.yaml and used while
    config.yaml (and the defaults in config.py) are unchanged."""
    from ..paths import get_config_path

    path = get_config_path()
    stamp = _settings_stamp(path)
    cache = path.with_name(SETTINGS_CACHE)
    try:
        cached = json.loads(cache.read_text(encoding="utf-8"))
        if cached["stamp"] == stamp:
            return Settings(cached["config"], bool(cached["autostart"]))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    config, autostart = _parse_config(path)
    try:
        from ..paths import write_private_file

        body = {"stamp": stamp, "config": config, "autostart": autostart}
        write_private_file(cache, json.dumps(body) + "\n")
    except OSError as exc:
        log_line(f"cannot write {cache}: {exc!r}")
    return Settings(config, autostart)


def _settings_stamp(config_path: Path) -> list[Any]:
    """What the cached settings depend on: config.yaml's identity and config.py's."""
    from .. import __version__

    config_py = Path(__file__).resolve().parent.parent / "config.py"
    stamp: list[Any] = [__version__, config_py.stat().st_mtime_ns]
    try:
        st = config_path.stat()
        stamp += [st.st_mtime_ns, st.st_size, st.st_ino]
    except FileNotFoundError:
        stamp.append(None)
    return stamp


def _parse_config(path: Path) -> tuple[dict[str, Any], bool]:
    """Validated config (the sidecar's loader, without creating config.yaml) and the
    autostart flag."""
    from ..config import load_settings as load_typed

    config = load_typed(path, create=False)
    return config.to_dict(), config.copilot.autostart_sidecar


# -- the events ------------------------------------------------------------------------------
def _read_text(path: Path) -> str | None:
    """The context file, or None if missing. A symlink or a non-regular file is never
    printed (it could expose any file the user can read to the agent's prompt); the
    error ends up in the hook log and the hook fails open."""
    from ..paths import read_regular_file

    return read_regular_file(path, MAX_CONTEXT_CHARS)


def session_info(sid: str, payload: Mapping[str, Any]) -> SessionInfo:
    """The `SessionInfo` the adapter would report: cwd, and for a new session the first
    prompt as title (Copilot's workspace.yaml ``name``) and the start time."""
    from ..events import SessionInfo  # lazy: only when the hook builds the context

    cwd = _field(payload, "cwd")
    title = None
    if _field(payload, "source") != "resume":
        prompt = _field(payload, "initialPrompt", "initial_prompt")
        if isinstance(prompt, str):  # the first prompt is the title: no credential in it
            from ..redact import redact_secrets

            title = redact_secrets(prompt)
    return SessionInfo(
        id=sid,
        agent=AGENT,
        directory=cwd if isinstance(cwd, str) else None,
        title=title,
        created_ms=_epoch_ms(_field(payload, "timestamp")),
    )


def _epoch_ms(value: Any) -> int:
    """Epoch ms (camelCase payloads) or an ISO-8601 string (snake_case payloads); 0 for
    anything else, including times SQLite or datetime cannot hold (10**30, 1e999)."""
    from ..events import lenient_ms

    return lenient_ms(value)


def session_start(sid: str, payload: Mapping[str, Any], settings: Settings, deadline: float) -> str:
    """The session's context, then the recall block for its ``initialPrompt``; under the
    session's recall lock, so the concurrent ``userPromptSubmitted`` hook for the same
    prompt sees both (and repeats neither)."""
    prompt = _field(payload, "initialPrompt", "initial_prompt")
    block = ""
    lock = RecallLock(settings, sid, deadline)
    with lock as locked:
        if locked and isinstance(prompt, str):
            lock.mark_pending()  # the launcher's userPromptSubmitted waits for the stamp
        first = prompt if locked and isinstance(prompt, str) else None
        answered = sidecar_start(sid, first, payload, settings, deadline)
        if answered is not None:
            text, block = answered
            if first is not None and not pack_pending(sid, payload, settings):
                lock.stamp(first)
            return join_blocks(text, block)
        text = start_context(sid, payload, settings, deadline)
        if locked and isinstance(prompt, str):
            try:
                asked = deadline - time.monotonic() - RECALL_MARGIN_S > 0  # else skipped
                block = recall_block(sid, prompt, payload, settings, deadline)
                if asked and not pack_pending(sid, payload, settings):
                    lock.stamp(prompt)
            except Exception as exc:  # the context still goes out
                log_line(f"recall session={sid} failed: {type(exc).__name__}: {exc}")
    return join_blocks(text, block)


def context_file(settings: Settings, sid: str) -> Path:
    """``<context_dir>/<session>.md`` (`session.context.context_path`'s rule, without
    importing the coordinator's module on the hook's path)."""
    from ..paths import validate_session_id

    return settings.context_dir / f"{validate_session_id(sid)}.md"


def sidecar_start(
    sid: str, prompt: str | None, payload: Mapping[str, Any], settings: Settings, deadline: float
) -> tuple[str, str] | None:
    """A new session's context and its first prompt's recall block from the sidecar's
    ``start`` method, in one round trip (`QueryService.start`): the agent waits neither
    for the sidecar to notice the session and write its context file nor for a second
    call. None, and `start_context` goes on, when the session has a context file already
    (a resumed session: the file is what it was given) or no sidecar answers."""
    from ..service.client import ServiceCallError, ServiceUnavailable, call

    if context_file(settings, sid).exists():
        return None
    params: dict[str, Any] = {"session_id": sid}
    cwd = _field(payload, "cwd")
    if isinstance(cwd, str):
        params["directory"] = cwd
    if prompt is not None and recall_enabled(settings) and prompt.strip():
        params["prompt"] = prompt[:MAX_PROMPT_CHARS]
    left = deadline - time.monotonic() - 2 * RECALL_MARGIN_S
    if left <= 0:
        return None
    try:
        result = _local_call("start", params)
        if result is None:
            result = call("start", params, timeout=min(left, 0.6), report=log_line)
    except (ServiceUnavailable, ServiceCallError) as exc:
        log_line(f"start session={sid}: the sidecar did not answer ({exc}); built here")
        return None
    context, block = result.get("context"), result.get("block")
    if not isinstance(context, str) or not isinstance(block, str):
        return None
    from ..markers import seal_recall

    sealed = seal_recall(block)
    if block.strip() and not sealed:
        log_line(f"start session={sid}: the service's block is not shaped as ours; dropped")
    return context[:MAX_CONTEXT_CHARS], sealed


def start_context(sid: str, payload: Mapping[str, Any], settings: Settings, deadline: float) -> str:
    """The session's context: the sidecar's file, else built now by the coordinator."""
    path = context_file(settings, sid)
    text = _read_text(path)
    if text is None and sidecar_running():
        text = _wait_for_file(path, deadline)
    if text is not None:
        return text
    if _local_service() is None:  # not in the sidecar: its logs are its own
        route_library_logs()
    from ..registry import load_session_hook_entry_points
    from ..session.hooks import SessionEventManager, SessionHookCoordinator
    from ..store import MemoryStore

    # Only here: the fast path above imports nothing. Cached next to config.yaml.
    load_session_hook_entry_points(cache=_config_path().with_name(ENTRY_POINTS_CACHE))

    store = MemoryStore.from_config(settings.typed())
    try:
        # A writer holding the lock must not keep us past the deadline.
        wait_ms = max(0, int((deadline - time.monotonic() - DB_MARGIN_S) * 1000))
        store.set_busy_timeout(wait_ms)
        coord = SessionHookCoordinator(
            store, adapters={}, config=settings.typed(), extractor=_NO_EXTRACTOR
        )
        # Through the manager, so a registered ``created`` hook runs (failing open).
        result, _ = SessionEventManager(coord).emit("created", sid, session_info(sid, payload))
        if result == "error":
            raise HookError(f"on_created failed for session {sid}")
    finally:
        store.close()
    return _read_text(path) or ""


def _wait_for_file(path: Path, deadline: float) -> str | None:
    """The sidecar's context file once it appears (it sees Copilot's new session folder
    within tens of ms), polled for at most `SIDECAR_FILE_WAIT_S`: cheaper than importing
    the store and the coordinator to build it here (~0.5 s on a loaded machine)."""
    until = min(time.monotonic() + SIDECAR_FILE_WAIT_S, deadline - 2 * RECALL_MARGIN_S - 0.3)
    while time.monotonic() < until:
        time.sleep(0.01)
        text = _read_text(path)
        if text is not None:
            return text
    return None


def checkpoint_count(session_dir: Path) -> int | None:
    """How many compactions Copilot recorded for a session (``checkpoints/NNN-*.md``);
    None when the session folder is unknown."""
    folder = session_dir / "checkpoints"
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return 0 if session_dir.is_dir() else None
    return sum(1 for n in names if n[:3].isdigit() and n.endswith(".md"))


def _read_marker(path: Path) -> dict[str, int]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {k: int(v) for k, v in data.items() if k in ("checkpoints", "pack_mtime_ns")}
    except (OSError, ValueError, TypeError, AttributeError, OverflowError):
        return {}


def prompt_submitted(sid: str, settings: Settings, session_dir: Path) -> str:
    """The resume pack, the first time a prompt follows a new compaction; else ''."""
    from ..paths import COMPACT_MARKER_SUFFIX, validate_session_id, write_private_file

    validate_session_id(sid)
    count = checkpoint_count(session_dir)
    if not count:
        return ""
    marker_path = settings.context_dir / f"{sid}{COMPACT_MARKER_SUFFIX}"
    marker = _read_marker(marker_path)
    if count <= marker.get("checkpoints", 0):
        return ""
    pack_path = settings.context_dir / f"{sid}.compact.md"
    try:
        mtime_ns = pack_path.stat().st_mtime_ns
    except FileNotFoundError:
        return ""  # no pack (yet): try again at the next prompt
    text = _read_text(pack_path) or ""
    if not text.strip():
        return ""
    body = json.dumps({"checkpoints": count, "pack_mtime_ns": mtime_ns}) + "\n"
    write_private_file(marker_path, body)
    return text


def pack_pending(sid: str, payload: Mapping[str, Any], settings: Settings) -> bool:
    """Whether the next userPromptSubmitted has a resume pack to inject (a compaction
    since the last one): that hook must then run, whatever was recalled already."""
    from ..paths import COMPACT_MARKER_SUFFIX

    count = checkpoint_count(session_dir_for(sid, payload, settings))
    if not count:
        return False
    marker = _read_marker(settings.context_dir / f"{sid}{COMPACT_MARKER_SUFFIX}")
    return count > marker.get("checkpoints", 0)


def session_dir_for(sid: str, payload: Mapping[str, Any], settings: Settings) -> Path:
    transcript = _field(payload, "transcriptPath", "transcript_path")
    if isinstance(transcript, str) and Path(transcript).parent.name == sid:
        return Path(transcript).parent
    return settings.copilot_home / "session-state" / sid


# -- per-prompt recall -----------------------------------------------------------------------
def recall_enabled(settings: Settings) -> bool:
    return settings.recall


def recall_block(
    sid: str, prompt: str, payload: Mapping[str, Any], settings: Settings, deadline: float
) -> str:
    """The query service's recall block for ``prompt`` ('' for nothing): the sidecar's
    socket, else an in-process `QueryService` (`service_client.query`)."""
    if not recall_enabled(settings) or not prompt.strip():
        return ""
    left = deadline - time.monotonic() - RECALL_MARGIN_S
    if left <= 0:
        log_line(f"recall session={sid}: skipped, no time left")
        return ""
    from ..service.client import query

    params: dict[str, Any] = {"session_id": sid, "prompt": prompt[:MAX_PROMPT_CHARS]}
    cwd = _field(payload, "cwd")
    if isinstance(cwd, str):
        params["directory"] = cwd
    # Half the time for the sidecar, the rest for the in-process fallback if it is stuck.
    result = _local_call("recall", params)  # in the sidecar: its own service
    if result is None:
        result = query(
            "recall",
            params,
            fallback=True,
            timeout=min(left / 2, 0.5),
            config=settings.typed,  # only called when the in-process fallback runs
            report=log_line,  # a listener that is not ours: one line in the hook log
        )
    block = result.get("block") if isinstance(result, Mapping) else None
    if not isinstance(block, str):
        return ""
    from ..markers import seal_recall

    sealed = seal_recall(block)  # only our shape goes out, nothing in it imitating a marker
    if block.strip() and not sealed:
        log_line(f"recall session={sid}: the service's block is not shaped as ours; dropped")
    return sealed


def join_blocks(*parts: str) -> str:
    """The non-empty parts, a blank line apart (a single part exactly as it is)."""
    kept = [p for p in parts if p and p.strip()]
    if len(kept) <= 1:
        return kept[0] if kept else ""
    return "\n\n".join(p.strip("\n") for p in kept) + "\n"


class RecallLock:
    """An exclusive flock on ``<context_dir>/<session>.recall.lock`` (0600), waited for
    until shortly before the deadline; ``with`` gives whether it was taken (if not, the
    caller does not recall: better nothing than a repeat)."""

    def __init__(self, settings: Settings, sid: str, deadline: float) -> None:
        from ..paths import RECALL_LOCK_SUFFIX, validate_session_id

        self.path = settings.context_dir / f"{validate_session_id(sid)}{RECALL_LOCK_SUFFIX}"
        self.deadline = deadline - RECALL_MARGIN_S
        self.fd: int | None = None
        self.pending = False

    def __enter__(self) -> bool:
        import fcntl

        from ..paths import ensure_private_dir

        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        if self.path.parent.is_symlink():  # never create files through a link (session/context.py)
            log_line(f"{self.path.parent} is a symlink: no recall lock, no recall")
            return False
        try:
            ensure_private_dir(self.path.parent)
            self.fd = os.open(self.path, flags, 0o600)
        except OSError as exc:
            log_line(f"{self.path}: cannot lock ({exc!r}), no recall")
            return False
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                # The launcher marks it before Python starts: ours to clear from now on.
                self.pending = os.pread(self.fd, len(PENDING_MARK), 0) == PENDING_MARK.encode()
                return True
            except BlockingIOError:
                if time.monotonic() >= self.deadline:
                    log_line(f"{self.path.name}: still locked at the deadline, no recall")
                    return False
                time.sleep(0.01)

    def mark_pending(self) -> None:
        """Write ``PENDING_MARK <time>`` into the held lock file: sessionStart is recalling
        for its initialPrompt. Copilot starts the userPromptSubmitted hook for that same
        prompt while sessionStart still runs; the launcher then waits (briefly, see
        bin/llmem-hook) for the stamp instead of starting Python for a repeat recall. The
        mark is replaced by `stamp` or cleared on exit; a launcher ignores one older than
        a few seconds (a killed hook)."""
        if self.fd is None:
            return
        self._write(f"{PENDING_MARK} {int(time.time())}\n".encode())
        self.pending = True

    def _write(self, body: bytes) -> None:
        """Replace the file's text so that a reader never sees it empty in between (the
        launcher would take that for "no stamp"): write over it, then cut the rest."""
        if self.fd is None:
            return
        os.pwrite(self.fd, body, 0)
        os.ftruncate(self.fd, len(body))

    def stamp(self, prompt: str | None = None) -> None:
        """Write the time and the prompt (JSON-encoded, as it appears in Copilot's
        payload) into the held lock file: this prompt was just recalled for. The plugin's
        launcher (bin/llmem-hook) then answers the userPromptSubmitted hook for that same
        prompt without starting Python; the stamp is used once and counts for 5 s at
        most. ``None`` clears it (the prompt hook took the lock itself)."""
        if self.fd is None:
            return
        self.pending = False
        if prompt is None:
            os.ftruncate(self.fd, 0)
            return
        body = f"{int(time.time())}\n{json.dumps(prompt, ensure_ascii=False)}\n"
        self._write(body.encode("utf-8", errors="replace"))

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            if self.pending:  # no stamp came: the launcher must not wait on a stale mark
                with contextlib.suppress(OSError):
                    os.ftruncate(self.fd, 0)
                self.pending = False
            os.close(self.fd)  # releases the lock
            self.fd = None


def prompt_context(
    sid: str, payload: Mapping[str, Any], settings: Settings, deadline: float
) -> str:
    """userPromptSubmitted: the resume pack after a compaction, then the recall block."""
    pack = prompt_submitted(sid, settings, session_dir_for(sid, payload, settings))
    prompt = _field(payload, "prompt")
    block = ""
    if isinstance(prompt, str):
        lock = RecallLock(settings, sid, deadline)
        with lock as locked:
            if locked:
                lock.stamp(None)  # this prompt is handled here: no stamp may skip a later one
            try:
                block = recall_block(sid, prompt, payload, settings, deadline) if locked else ""
            except Exception as exc:  # the resume pack still goes out
                log_line(f"recall session={sid} failed: {type(exc).__name__}: {exc}")
    return join_blocks(pack, block)


# -- recall for the file in hand -------------------------------------------------------------
# Copilot's tools that read or write a file (bin/llmem-hook starts no Python for others).
FILE_TOOLS = frozenset(
    {"view", "create", "edit", "str_replace", "str_replace_editor", "insert", "apply_patch"}
)
FILE_KEYS = ("path", "file_path", "filePath", "filename", "file")  # as adapters/copilot_tools
MAX_FILES_PER_CALL = 5
FILE_RECALL_TIMEOUT_S = 0.3  # per file; the sidecar only (no in-process store per tool call)


def tool_paths(args: Any) -> list[str]:
    """The files of a tool call's ``toolArgs`` (`adapters.copilot_tools.tool_files`'s rule
    without importing the adapters: ~100 ms of every call)."""
    if isinstance(args, str):  # some models send the arguments as JSON text
        try:
            args = json.loads(args) if args.lstrip().startswith("{") else args
        except ValueError:
            return []
    out: list[str] = []
    if isinstance(args, Mapping):
        out += [v.strip() for k in FILE_KEYS if isinstance(v := args.get(k), str) and v.strip()]
        paths = args.get("paths")
        if isinstance(paths, list):
            out += [p.strip() for p in paths if isinstance(p, str) and p.strip()]
        args = " ".join(v for v in args.values() if isinstance(v, str) and "*** Begin Patch" in v)
    if isinstance(args, str) and "*** " in args:
        import re

        pattern = r"^\*\*\* (?:Add|Update|Delete) File: (.+)$"
        out += [f.strip() for f in re.findall(pattern, args, re.M) if f.strip()]
    return list(dict.fromkeys(out))[:MAX_FILES_PER_CALL]


def file_context(sid: str, payload: Mapping[str, Any], settings: Settings, deadline: float) -> str:
    """postToolUse: what memory knows about the files a read or edit tool call touched
    (the query service's ``file_recall``: once per file per session), '' for any other
    tool. Only the sidecar is asked, briefly; no answer is no context (fail open)."""
    if not (settings.raw.get("citations") or {}).get("file_recall", True):
        return ""
    name = _field(payload, "toolName", "tool_name")
    cwd = _field(payload, "cwd")
    if name not in FILE_TOOLS or not isinstance(cwd, str):
        return ""
    from ..markers import seal_recall
    from ..service.client import ServiceCallError, ServiceUnavailable, query

    blocks = []
    for path in tool_paths(_field(payload, "toolArgs", "tool_input")):
        left = deadline - time.monotonic() - RECALL_MARGIN_S
        if left <= 0:
            break
        params = {"session_id": sid, "path": path, "directory": cwd, "agent": AGENT}
        try:
            reply = _local_call("file_recall", params)
            if reply is None:
                timeout = min(left, FILE_RECALL_TIMEOUT_S)
                reply = query("file_recall", params, fallback=False, timeout=timeout)
        except (ServiceUnavailable, ServiceCallError) as exc:
            log_line(f"file recall session={sid}: {type(exc).__name__}: {str(exc)[:200]}")
            if isinstance(exc, ServiceUnavailable):
                break
            continue
        block = reply.get("block") if isinstance(reply, Mapping) else None
        blocks.append(seal_recall(block) if isinstance(block, str) else "")
    return join_blocks(*blocks)


class _NoExtractor:
    """on_created never extracts; this spares importing the extraction engine."""

    def extract(self, *args: Any, **kwargs: Any) -> list[Any]:  # pragma: no cover
        return []


_NO_EXTRACTOR = _NoExtractor()


# -- the sidecar -----------------------------------------------------------------------------
def sidecar_running() -> bool:
    """Whether a live sidecar holds the lock (`sidecar_lock.running_pid`)."""
    from ..sidecar.lock import running_pid

    return running_pid() is not None


def start_sidecar() -> int | None:
    """Start ``llmem-hooks run`` detached (own session, no inherited pipes: Copilot waits
    for the hook's stdout to close). Returns its pid."""
    import subprocess

    from ..paths import ensure_private_dir, get_llmem_home
    from .install import sidecar_command

    home = ensure_private_dir(get_llmem_home())  # absolute, see get_llmem_home
    env = {**os.environ, "LLMEM_HOME": str(home)}
    proc = subprocess.Popen(
        sidecar_command(),
        cwd=home,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    return proc.pid


def maybe_start_sidecar(settings: Settings) -> None:
    if settings.autostart and not sidecar_running():
        pid = start_sidecar()
        log_line(f"started the sidecar (pid {pid})")


# -- entry point -----------------------------------------------------------------------------
UNAVAILABLE = (
    "[llmem-hooks] Long-term memory is unavailable in this session ({why}). Tell the user"
    " once, in one short sentence, and suggest `llmem-hooks doctor`; then carry on normally."
)


def unavailable_notice(event: str | None, exc: BaseException) -> str | None:
    """What sessionStart shows when memory failed for a reason the user must fix (an
    unreadable store, a broken config): once per session, through the model, since
    Copilot shows a hook's stderr nowhere in ``-p`` runs. Bad input from Copilot
    (`HookError`), a locked store and a timeout are only logged."""
    if normalize_event(event) != "sessionStart" or isinstance(exc, HookError):
        return None
    if any(word in str(exc).lower() for word in ("locked", "busy")):
        return None  # a writer holds the store for a moment: the next session gets memory
    why = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
    return json.dumps({"additionalContext": UNAVAILABLE.format(why=why)})


def handle(agent: str, event_arg: str | None, stream: BinaryIO, deadline: float) -> str | None:
    """The JSON text to print for one hook call (None: print nothing)."""
    if agent != AGENT:
        raise HookError(f"unsupported agent {agent!r} (only 'copilot')")
    payload = read_payload(stream)
    event = normalize_event(event_arg) or normalize_event(
        _field(payload, "hook_event_name", "hookEventName")
    )
    if event is None:
        raise HookError(f"unknown event {event_arg!r}")
    sid, subagent = session_of(payload)
    settings = load_settings()
    text = ""
    if event == "sessionStart":
        text = session_start(sid, payload, settings, deadline)
    elif event == "userPromptSubmitted" and not subagent:
        text = prompt_context(sid, payload, settings, deadline)
    elif event == "postToolUse" and not subagent:
        text = file_context(sid, payload, settings, deadline)
    if event in AUTOSTART_EVENTS:
        try:
            maybe_start_sidecar(settings)
        except Exception as exc:
            log_line(f"{event} session={sid}: cannot start the sidecar: {exc!r}")
    if not text.strip():
        return None
    return json.dumps({"additionalContext": text})


# -- run by the sidecar for the hook's front (agents/hook_front.py) --------------------------
relay_state = threading.local()  # set while `hook_relay.relay` runs on a server thread


def _local_service() -> Any:
    """The sidecar's `QueryService` while `relay` runs on this thread, else None."""
    return getattr(relay_state, "service", None)


def _local_call(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """``method`` asked of the sidecar's own service when `relay` runs (no round trip
    to our own socket); None in a hook process (the caller asks over the socket)."""
    service = _local_service()
    if service is None:
        return None
    from ..service.client import ServiceCallError
    from ..service.params import ServiceError

    try:
        result: dict[str, Any] = service.call(method, params)
    except ServiceError as exc:
        raise ServiceCallError(exc.code, str(exc)) from None
    return result


def main(
    argv: Sequence[str],
    stdin: BinaryIO | None = None,
    stdout: TextIO | None = None,
    *,
    deadline_s: float = DEADLINE_S,
    exit_on_timeout: bool = False,
) -> int:
    """Run one hook call; always returns 0 (fail open). ``argv`` is ``[agent, event]``.

    The work runs in a daemon thread: if it is still busy after ``deadline_s`` (a C-level
    wait such as a SQLite lock cannot be interrupted), nothing is printed; with
    ``exit_on_timeout`` (the command line) the process then ends at once."""
    started = time.monotonic()
    deadline = started + deadline_s
    args = list(argv)
    agent = args[0] if args else ""
    event = args[1] if len(args) > 1 else None
    stream = stdin if stdin is not None else sys.stdin.buffer
    result: dict[str, Any] = {}

    def work() -> None:
        try:
            result["out"] = handle(agent, event, stream, deadline)
        except BaseException as exc:  # fail open on everything
            result["error"] = exc

    worker = threading.Thread(target=work, name="copilot-hook", daemon=True)
    worker.start()
    worker.join(max(0.0, deadline - time.monotonic()))
    if worker.is_alive():
        log_line(f"{event} timed out after {deadline_s:.1f} s: printed nothing")
        if exit_on_timeout:
            os._exit(0)
        return 0
    out = result.get("out")
    if "error" in result:
        exc = result["error"]
        log_line(f"{event} failed: {type(exc).__name__}: {exc}")
        out = unavailable_notice(event, exc)
    if out:
        try:
            target = stdout if stdout is not None else sys.stdout
            target.write(out + "\n")
            target.flush()
        except (OSError, ValueError) as exc:
            log_line(f"{event}: cannot write the output: {exc!r}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:], exit_on_timeout=True))
