"""The MCP server's front door: answer ``initialize`` and ``tools/list`` at once.

An agent starts its MCP servers with the session and waits for them before the first
turn (Copilot CLI waits for ``initialize`` and ``tools/list``). Importing the ``mcp`` SDK
(pydantic, anyio, starlette, ...) takes 1.5-2 s on a loaded machine: that wait is what a
user felt on every ``copilot -p``. So `serve` reads the stdio JSON-RPC lines itself and
answers ``initialize``, ``tools/list`` and ``ping`` from a cache of the SDK server's own
answers (`CACHE_NAME`, next to config.yaml, keyed by our version, the server module,
tools.json and the package folders: `cache_stamp`), a request for a method the SDK does
not have either (Copilot CLI's
opening ``server/discover``) with "method not found", and takes in notifications. The
first message it cannot answer (a tool call, a method only the SDK has) starts
the SDK server in a thread, replays the client's ``initialize`` (under a private id whose
answer is dropped) and ``notifications/initialized`` to it, and from then on passes
every line through. Without a cache (first run, an upgrade) the SDK server handles
everything from the first line (but a method it does not have) and its answers fill the
cache for the next start.

Imports only `os`, `sys`, `home` and `wire_json` (the interpreter's C JSON codec, not the
``json`` package) until a message needs the SDK server.

The plugin's launcher (``bin/llmem-hook mcp``) goes one step further: it answers the
handshake itself, in the shell, from a copy of the same answers this front keeps in
``<LLMEM_HOME>/mcp-front/`` (`sync_shell_answers`), and starts this front only at the first
line it cannot answer, handing it the client's ``initialize`` (already answered:
`ANSWERED_ENV`), ``notifications/initialized`` and that line. Copilot waits for the
handshake before every first turn; a shell answers it in ~2 ms of CPU, an interpreter's
start costs ~15 ms.
"""

from __future__ import annotations

import _thread
import os
import stat
import sys

from . import wire_json as json  # json.loads / json.dumps without the package's imports

# Not `typing`, `pathlib`, `threading` or `re` on the way to the cached answers: the
# agent's first turn waits for them, and each import costs milliseconds at every start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import IO, Any

    from mcp.server.fastmcp import FastMCP

CACHE_NAME = ".mcp-front-cache.json"
MAX_CACHE_BYTES = 4 * 1024 * 1024  # the SDK's answers are ~20 kB; a bigger file is not ours
# The tools' wording (`tool_wording.TOOLS_FILE`, the same file).
TOOLS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tools.json")
# The module declaring the tools (`mcp_server`): its answers are what the cache holds.
SERVER_MODULE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mcp_server.py")
# The replayed initialize's id: one no client would pick, so no client answer is dropped.
REPLAY_ID = f"llmem-front-initialize-{os.urandom(8).hex()}"
METHOD_NOT_FOUND = -32601  # JSON-RPC's code for a method the server does not have
FRONT_METHODS = frozenset({"initialize", "tools/list", "ping"})
FINISH_WAIT_S = 5.0  # at the end of input, how long the requests in flight may still take
LONE_SURROGATE_MARK = "\ufdd0"  # a noncharacter standing in for a lone UTF-16 surrogate
# The launcher's copy of the answers (read by `bin/llmem-hook`; the format is the two's
# contract): <LLMEM_HOME>/mcp-front/handshake holds, one per line, SHELL_MAGIC, the
# llmem-hooks it is for, the protocol versions, the latest, the SDK's request methods
# (space-separated), what follows ``"protocolVersion":"<v>"`` in initialize's result, the
# name of the file holding tools/list's result, the cache stamp, then the files that must
# not be newer than it (a shell can test that with ``-nt``; it cannot read a stamp).
SHELL_DIR = "mcp-front"
SHELL_FILE = "handshake"
SHELL_MAGIC = "llmem-hooks mcp front 1"
# Set (to "1") by the launcher when the first line it hands over is an initialize it has
# already answered: this front takes it in without answering it again.
ANSWERED_ENV = "LLMEM_MCP_FRONT_ANSWERED"
SHELL_TOOLS_KEEP_S = 60.0  # a replaced tools file stays this long (a launcher may read it)


def cache_path() -> str:
    """``<LLMEM_HOME>/.mcp-front-cache.json``, next to config.yaml."""
    from ..home import llmem_home_dir

    return os.path.join(llmem_home_dir(), CACHE_NAME)


def _file_stamp(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


def cache_stamp(server_module: str) -> list[Any]:
    """What the cached answers depend on, found with ``os.stat`` alone: our version, the
    module declaring the tools, their wording (tools.json), and every package folder of
    ``sys.path`` (installing, upgrading or removing a package, the SDK or one declaring
    memory types for the schemas' ``type`` enum, changes its folder)."""
    from .. import __version__

    stamp: list[Any] = [__version__, _file_stamp(server_module), _file_stamp(TOOLS_FILE)]
    for entry in sys.path:
        if isinstance(entry, str) and entry.endswith(("site-packages", "dist-packages")):
            try:
                stamp.append([entry, os.stat(entry).st_mtime_ns])
            except OSError:
                continue
    return stamp


def load_cache(stamp: list[Any]) -> dict[str, Any] | None:
    try:
        # Not through a link, never blocked on a FIFO: a regular file of ours or nothing.
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        with os.fdopen(os.open(cache_path(), flags), "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return None
            data = json.loads(fh.read(MAX_CACHE_BYTES))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("stamp") != stamp:
        return None
    if not all(isinstance(data.get(k), dict) for k in ("initialize", "tools")):
        return None
    if not isinstance(data.get("versions"), list) or not isinstance(data.get("latest"), str):
        return None
    requests = data.get("requests")
    if not isinstance(requests, list) or not all(isinstance(m, str) for m in requests):
        return None
    return data


def save_cache(stamp: list[Any], initialize: Any, tools: Any) -> None:
    """Record the SDK server's answers (never raises: the cache is only a speed-up)."""
    try:
        from pathlib import Path

        from mcp.shared.version import SUPPORTED_PROTOCOL_VERSIONS
        from mcp.types import LATEST_PROTOCOL_VERSION

        from ..paths import write_private_file

        body = {
            "stamp": stamp,
            "initialize": initialize,
            "tools": tools,
            "versions": list(SUPPORTED_PROTOCOL_VERSIONS),
            "latest": LATEST_PROTOCOL_VERSION,
            "requests": sdk_request_methods(),
        }
        write_private_file(Path(cache_path()), json.dumps(body) + "\n")
    except Exception:
        pass


_SDK_METHODS: list[list[str]] = []  # `sdk_request_methods`, once a process


def sdk_request_methods() -> list[str]:
    """Every request method the SDK server understands (its ``ClientRequest`` union)."""
    if not _SDK_METHODS:
        import typing

        from mcp.types import ClientRequest

        union = ClientRequest.model_fields["root"].annotation
        _SDK_METHODS.append(
            sorted(
                str(name)
                for kind in typing.get_args(union)
                for name in typing.get_args(kind.model_fields["method"].annotation)
            )
        )
    return _SDK_METHODS[0]


def _shell_word(text: str) -> bool:
    """A version or method name the launcher may print as is (and match with ``case``)."""
    return bool(text) and text.isascii() and all(c.isalnum() or c in "/._-" for c in text)


def _shell_tools_name(name: str) -> bool:
    """A tools file name the launcher accepts (``tools.<hex>.json``, no path)."""
    middle = name[len("tools.") : -len(".json")]
    return name.startswith("tools.") and name.endswith(".json") and middle.isalnum()


def _shell_deps(stamp: list[Any], exe: str) -> list[str]:
    here = os.path.abspath(__file__)
    dirs = [e[0] for e in stamp[3:] if isinstance(e, list) and e and isinstance(e[0], str)]
    return [here, SERVER_MODULE, TOOLS_FILE, exe, *dirs]


def _shell_current(path: str, stamp_line: str, exe: str, deps: list[str]) -> bool:
    """Whether the launcher's copy is this cache's, for ``exe``, and no file it depends on
    is newer than it (the launcher's own test, so neither side keeps a copy the other
    refuses)."""
    try:
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        with os.fdopen(os.open(path, flags), "rb") as fh:
            st = os.fstat(fh.fileno())
            lines = fh.read(MAX_CACHE_BYTES).decode("utf-8").split("\n")
        if not stat.S_ISREG(st.st_mode) or len(lines) < 9 or lines[0] != SHELL_MAGIC:
            return False
        if lines[1] != exe or lines[7] != stamp_line or [x for x in lines[8:] if x] != deps:
            return False
        if not _shell_tools_name(lines[6]):
            return False
        tools = os.lstat(os.path.join(os.path.dirname(path), lines[6]))
        if not stat.S_ISREG(tools.st_mode):
            return False
        return all(os.stat(dep).st_mtime_ns <= st.st_mtime_ns for dep in deps)
    except (OSError, ValueError):
        return False


def sync_shell_answers(stamp: list[Any], cache: dict[str, Any], exe: str | None) -> None:
    """Keep the launcher's copy of ``cache`` (see `SHELL_FILE`) in step, for ``exe`` (the
    ``llmem-hooks`` the launcher runs); never raises: it is only a speed-up, and without
    it the launcher starts this front for everything."""
    if exe is None:
        return
    try:
        folder = os.path.join(os.path.dirname(cache_path()), SHELL_DIR)
        path = os.path.join(folder, SHELL_FILE)
        stamp_line = json.dumps(stamp, separators=(",", ":"))
        deps = _shell_deps(stamp, exe)
        if _shell_current(path, stamp_line, exe, deps):
            return
        words = [*cache["versions"], cache["latest"], *cache["requests"]]
        if not all(isinstance(w, str) and _shell_word(w) for w in words):
            return
        if any("\n" in p or "\r" in p for p in (exe, *deps)):
            return
        init = {k: v for k, v in cache["initialize"].items() if k != "protocolVersion"}
        rest = json.dumps(init, separators=(",", ":"))
        tail = "}" if rest == "{}" else "," + rest[1:]
        tools = json.dumps(cache["tools"], separators=(",", ":"))
        if "\n" in tail or "\n" in tools:
            return
        import hashlib
        import time
        from pathlib import Path

        from ..paths import write_private_file

        name = f"tools.{hashlib.sha256(tools.encode()).hexdigest()[:16]}.json"
        write_private_file(Path(folder, name), tools)
        head = [SHELL_MAGIC, exe, " ".join(cache["versions"]), cache["latest"]]
        head += [" ".join(cache["requests"]), tail, name, stamp_line, *deps]
        write_private_file(Path(path), "\n".join(head) + "\n")
        # Older tools files go once no launcher can still be reading one (two
        # installations sharing a home take turns writing the copy).
        old = time.time() - SHELL_TOOLS_KEEP_S
        for other in os.listdir(folder):
            stale = os.path.join(folder, other)
            if other.startswith("tools.") and other != name and os.lstat(stale).st_mtime < old:
                os.unlink(stale)
    except Exception:
        pass


def entry_point() -> str | None:
    """The ``llmem-hooks`` script this process runs as (what the launcher starts), if any."""
    exe = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if os.path.basename(exe) != "llmem-hooks" or not os.access(exe, os.X_OK):
        return None
    return exe


class _Backend:
    """The SDK server in a thread, reading from one pipe and writing to another; a reader
    thread forwards its lines to ``emit`` (except the answer to the replayed initialize)."""

    def __init__(self, build: Callable[[], FastMCP], emit: Callable[[dict[str, Any]], None]):
        import threading

        self.emit = emit
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        self.to_server: IO[str] = os.fdopen(in_w, "w", encoding="utf-8")
        self._in = os.fdopen(in_r, "r", encoding="utf-8")
        self._out_w = os.fdopen(out_w, "w", encoding="utf-8")
        self._out_r = os.fdopen(out_r, "r", encoding="utf-8")
        self.failed: BaseException | None = None
        self._server = threading.Thread(target=self._serve, args=(build,), daemon=True)
        self._reader = threading.Thread(target=self._forward, daemon=True)
        self._server.start()
        self._reader.start()

    def _serve(self, build: Callable[[], FastMCP]) -> None:
        import contextlib

        try:
            import anyio
            from mcp.server.stdio import stdio_server

            server = build()

            async def run() -> None:
                files = anyio.wrap_file(self._in), anyio.wrap_file(self._out_w)
                async with stdio_server(*files) as (read, write):
                    low = server._mcp_server
                    await low.run(read, write, low.create_initialization_options())

            anyio.run(run)
        except BaseException as exc:  # reported by `serve` at the end
            self.failed = exc
        finally:
            self._out_w.close()
            with contextlib.suppress(OSError):
                self._in.close()  # the front's next write fails instead of filling the pipe

    def _forward(self) -> None:
        for line in self._out_r:
            try:
                message = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(message, dict) and message.get("id") == REPLAY_ID:
                continue
            self.emit(message)

    def send(self, message: dict[str, Any] | str) -> None:
        text = message if isinstance(message, str) else json.dumps(message)
        self.to_server.write(text.rstrip("\n") + "\n")
        self.to_server.flush()

    def finish(self, pending: dict[Any, Any]) -> None:
        """End of input: the server answers what it has (the requests still ``pending``,
        for `FINISH_WAIT_S` at most), then stops. Closing its input at once would end
        the SDK's session with the last requests unanswered (a client that writes its
        requests and closes its end got no ``tools/list``)."""
        import contextlib
        import time

        until = time.monotonic() + FINISH_WAIT_S
        while pending and self._server.is_alive() and time.monotonic() < until:
            time.sleep(0.005)
        with contextlib.suppress(OSError):
            self.to_server.close()
        self._server.join()
        self._reader.join()


def serve(
    build: Callable[[], FastMCP],
    server_module: str,
    stdin: IO[bytes] | None = None,
    stdout: IO[bytes] | None = None,
    exe: str | None = None,
) -> int:
    """Serve MCP on stdio until the client closes stdin (see the module docstring);
    ``exe``: the ``llmem-hooks`` the launcher runs, whose copy of the answers to keep."""
    src = stdin if stdin is not None else sys.stdin.buffer
    dst = stdout if stdout is not None else sys.stdout.buffer
    lock = _thread.allocate_lock()  # the front and the SDK server's reader both write
    stamp = cache_stamp(server_module)
    cache = load_cache(stamp)
    answered = os.environ.pop(ANSWERED_ENV, "") == "1"
    if cache is not None:
        sync_shell_answers(stamp, cache, exe)
    seen: dict[str, Any] = {"init": None, "initialized": False, "ids": {}}
    learned: dict[str, Any] = {}

    def emit(message: dict[str, Any]) -> None:
        method = seen["ids"].pop(message.get("id"), None) if "id" in message else None
        if cache is None and method in ("initialize", "tools/list") and "result" in message:
            learned[method] = message["result"]
            if len(learned) == 2:
                save_cache(stamp, learned["initialize"], learned["tools/list"])
                saved = load_cache(stamp)
                if saved is not None:
                    sync_shell_answers(stamp, saved, exe)
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        with lock:
            dst.write(data)
            dst.flush()

    backend: _Backend | None = None
    if cache is None:
        import contextlib

        # The SDK's method list before its server's thread imports the SDK too (one
        # import of a module from two threads at once can end in a deadlock error).
        with contextlib.suppress(Exception):
            sdk_request_methods()
        backend = _Backend(build, emit)
    for raw in src:
        if not raw.strip():
            continue
        try:
            message = json.loads(raw)
        except (ValueError, RecursionError):  # absurd nesting too
            message = None
        if answered:
            answered = False
            if isinstance(message, dict) and message.get("method") == "initialize":
                # The launcher answered it: taken in, and the SDK server (if one runs
                # already) sees it under the private id whose answer is dropped.
                seen["init"] = message
                if backend is not None:
                    backend.send({**message, "id": REPLAY_ID})
                continue
        if backend is None and isinstance(message, dict):
            if _answer(message, cache, seen, emit):  # type: ignore[arg-type]
                continue
            backend = _Backend(build, emit)
            replay: list[dict[str, Any]] = []
            if seen["init"] is not None:
                replay.append({**seen["init"], "id": REPLAY_ID})
                if seen["initialized"]:
                    replay.append({"jsonrpc": "2.0", "method": "notifications/initialized"})
        elif backend is None:
            backend, replay = _Backend(build, emit), []
        else:
            replay = []
            if cache is None and isinstance(message, dict) and _not_the_sdks(message, emit):
                continue
        if isinstance(message, dict) and "id" in message and "method" in message:
            seen["ids"][message["id"]] = message["method"]
        try:
            for earlier in replay:
                backend.send(earlier)
            backend.send(guard_line(raw.decode("utf-8", errors="replace")))
        except (OSError, ValueError):
            break  # the server thread died: nothing more can be answered
    if backend is not None:
        backend.finish(seen["ids"])
        if backend.failed is not None and not isinstance(backend.failed, SystemExit):
            print(f"error: the MCP server failed: {backend.failed!r}", file=sys.stderr)
            return 1
    return 0


def _not_the_sdks(message: dict[str, Any], emit: Callable[[dict[str, Any]], None]) -> bool:
    """Without a cache, a request for a method the SDK server does not have either gets
    "method not found" here (True): the SDK would answer "invalid request" after printing
    a page of validation errors on stderr (Copilot CLI opens with ``server/discover``)."""
    method, mid = message.get("method"), message.get("id")
    if not isinstance(method, str) or method.startswith("notifications/"):
        return False
    if not isinstance(mid, (str, int)) or isinstance(mid, bool) or mid == REPLAY_ID:
        return False
    try:
        if method in sdk_request_methods():
            return False
    except Exception:  # the SDK cannot say: it answers for itself
        return False
    error = {"code": METHOD_NOT_FOUND, "message": f"Method not found: {method[:100]}"}
    emit({"jsonrpc": "2.0", "id": mid, "error": error})
    return True


def serve_default() -> int:
    """``llmem-hooks mcp`` without arguments, as both agents start it: `serve`, importing
    `mcp_server` (its argument parser, the service client, the rendering) only when a
    message needs the SDK server; `mcp_server.main` serves the other forms."""
    seams: list[Any] = []

    def build() -> FastMCP:
        from .mcp_server import default_server

        server, seam = default_server()
        seams.append(seam)
        return server

    try:
        return serve(build, SERVER_MODULE, exe=entry_point())
    finally:
        for seam in seams:
            seam.close()


def guard_line(line: str) -> str:
    """``line`` with every lone UTF-16 surrogate in its JSON (``"\\ud800"``: valid JSON,
    but no UTF-8 text can carry it) replaced by `LONE_SURROGATE_MARK`. The SDK would
    refuse the whole line and answer nothing at all; this way the call reaches the tool,
    which answers with an error result."""
    import re

    if not re.search(r"\\u[dD][89a-fA-F]", line):
        return line  # a surrogate in JSON is always written as an escape
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return line  # the SDK answers malformed JSON itself
    return json.dumps(_unsurrogate(message), ensure_ascii=False) + "\n"


def _unsurrogate(value: Any) -> Any:
    if isinstance(value, str):
        import re

        return re.sub("[\ud800-\udfff]", LONE_SURROGATE_MARK, value)
    if isinstance(value, list):
        return [_unsurrogate(v) for v in value]
    if isinstance(value, dict):
        return {_unsurrogate(k): _unsurrogate(v) for k, v in value.items()}
    return value


def _answer(
    message: dict[str, Any],
    cache: dict[str, Any],
    seen: dict[str, Any],
    emit: Callable[[dict[str, Any]], None],
) -> bool:
    """Answer ``message`` from the cache if it is one of `FRONT_METHODS`; take in a
    notification (no SDK server runs for it to concern); answer with JSON-RPC's
    "method not found" if it is a request the SDK server does not know either (Copilot
    CLI 1.0.102 opens with ``server/discover``, a draft method: asking the SDK server would
    cost its whole start-up before ``initialize``); False if the SDK server must see it."""
    method = message.get("method")
    params = message.get("params")
    mid = message.get("id")
    if (
        isinstance(method, str)
        and method not in cache["requests"]
        and not method.startswith("notifications/")
        and isinstance(mid, (str, int))
        and not isinstance(mid, bool)
        and mid != REPLAY_ID
    ):
        error = {"code": METHOD_NOT_FOUND, "message": f"Method not found: {method[:100]}"}
        emit({"jsonrpc": "2.0", "id": mid, "error": error})
        return True
    if isinstance(method, str) and method.startswith("notifications/") and "id" not in message:
        # No SDK server yet: nothing in flight to cancel, no state a notice could change.
        seen["initialized"] = seen["initialized"] or method == "notifications/initialized"
        return True
    if method not in FRONT_METHODS or (params is not None and not isinstance(params, dict)):
        return False
    if not isinstance(mid, (str, int)) or isinstance(mid, bool) or mid == REPLAY_ID:
        return False
    if method == "initialize":
        if seen["init"] is not None or not isinstance(params, dict):
            return False
        wanted = params.get("protocolVersion")
        result = dict(cache["initialize"])
        versions = cache["versions"]
        result["protocolVersion"] = wanted if wanted in versions else cache["latest"]
        seen["init"] = message
    elif method == "tools/list":
        if seen["init"] is None or (params and params.get("cursor")):
            return False
        result = cache["tools"]
    else:  # ping
        result = {}
    emit({"jsonrpc": "2.0", "id": mid, "result": result})
    return True
