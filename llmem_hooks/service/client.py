"""The query service's client: one call over the sidecar's socket, or in-process.

`call` asks the sidecar (a short connect timeout, one request, one reply). `query` is what
the Copilot hook, the MCP server and the CLI use: the sidecar when it answers, else the
same `QueryService` built in this process for the one call (``fallback=True``), so the
answer is the same either way, only slower (a cold store and caches). The OpenCode
plugin speaks the protocol itself and, with no sidecar, recalls nothing (fails open).

Trust: before anything is sent, the listener must run as our uid (``SO_PEERCRED``; where
the system cannot say, the socket file must be ours in a folder nobody else can write).
Where the socket's folder is shared, another user could listen at the path, read the
prompt and answer with a forged block: such a listener gets nothing and the call is
made in-process (`UntrustedService`, one log line).

Light on purpose: the standard library and `service_protocol` only until a fallback is
needed (the Copilot hook runs this on every prompt).
"""

from __future__ import annotations

import json
import os
import socket
import stat
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ..errors import LLMemError
from . import protocol as proto

TYPE_CHECKING = False  # not `typing` at run time: the Copilot hook imports this module
if TYPE_CHECKING:
    from typing import Any

    from ..config import Config

    # What a `Client` is given as its settings (see `Client`).
    ClientConfig = Config | Callable[[], Config] | Mapping[str, Any] | None

CONNECT_TIMEOUT_S = 0.2
DEFAULT_TIMEOUT_S = 2.0
# Error codes after which the call is made in-process instead (the sidecar could not
# take it; the same request may well work here).
FALLBACK_CODES = frozenset({proto.BUSY})
USAGE_CODES = frozenset({proto.BAD_PARAMS, proto.NOT_FOUND, proto.UNKNOWN_METHOD})


class ServiceUnavailable(LLMemError):
    """No query service answered on the socket (none runs, or it did not reply in time)."""


class UntrustedService(ServiceUnavailable):
    """Something listens on the socket that is not our own user's query service."""


class ServiceCallError(LLMemError):
    """The query service answered with an error (``code``: a `service_protocol` code)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def peer_problem(sock: socket.socket, path: Path) -> str | None:
    """Why the listener at the other end of ``sock`` is not to be trusted, or None: its
    uid (``SO_PEERCRED``) is not ours; where the system cannot tell, `owner_problem`."""
    uid = proto.peer_uid(sock)
    if uid is None:
        return owner_problem(path)
    return None if uid == os.getuid() else f"the listener runs as uid {uid}, not ours"


def owner_problem(path: Path) -> str | None:
    """Why the socket file at ``path`` may not be our service's, or None: it must be a
    socket we own, in a folder we own that nobody else can write (so nobody could have
    put theirs there in its place)."""
    uid = os.getuid()
    try:
        st = os.lstat(path)
        folder = os.lstat(path.parent)
    except OSError as exc:
        return f"cannot check {path}: {exc.strerror}"
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != uid:
        return f"{path} is not a socket of ours (owner uid {st.st_uid})"
    if not stat.S_ISDIR(folder.st_mode) or folder.st_uid != uid or folder.st_mode & 0o022:
        return f"{path.parent} is not a folder only we can write"
    return None


def _report(message: str) -> None:
    import logging

    logging.getLogger(__name__).warning("%s", message)


def call(
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    home: Path | None = None,
    report: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """``method`` on the sidecar's query service; its result. Raises `ServiceUnavailable`
    when nothing answers within ``timeout`` (connect within `CONNECT_TIMEOUT_S`),
    `UntrustedService` (after one ``report`` line, default: the log) when the listener is
    not ours, nothing sent, and `ServiceCallError` for an error reply."""
    path = proto.socket_path(home)
    deadline = time.monotonic() + timeout
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(min(CONNECT_TIMEOUT_S, timeout))
        try:
            with proto.address(path) as addr:
                sock.connect(addr)
        except OSError as exc:
            raise ServiceUnavailable(f"no query service at {path}: {exc}") from None
        try:
            problem = peer_problem(sock, path)
        except OSError as exc:
            problem = f"cannot check the listener: {exc}"
        if problem is not None:
            message = f"query socket {path} not used, nothing sent: {problem}"
            (report or _report)(message)
            raise UntrustedService(message)
        try:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            sock.sendall(proto.encode(proto.request(method, dict(params or {}))))
            line = _read_line(sock, deadline)
        except OSError as exc:
            raise ServiceUnavailable(f"the query service did not answer: {exc}") from None
    finally:
        sock.close()
    try:
        reply = json.loads(line)
    except ValueError:
        raise ServiceUnavailable("the query service sent a malformed reply") from None
    if not isinstance(reply, dict):
        raise ServiceUnavailable("the query service sent a malformed reply")
    error = reply.get("error")
    if isinstance(error, dict):
        raise ServiceCallError(str(error.get("code")), str(error.get("message")))
    result = reply.get("result")
    if not isinstance(result, dict):
        raise ServiceUnavailable("the query service sent a reply without a result")
    return result


def _read_line(sock: socket.socket, deadline: float) -> bytes:
    buf = bytearray()
    while True:
        nl = buf.find(b"\n")
        if nl >= 0:
            return bytes(buf[:nl])
        if len(buf) > proto.MAX_REPLY_BYTES:
            raise OSError("reply too large")
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out")
        sock.settimeout(left)
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionResetError("the query service closed the link")
        buf += chunk


class Client:
    """The query service for a caller: the sidecar's socket at every call (a sidecar
    started later takes over at once), else a `QueryService` of this process. ``keep``:
    that service is opened on first need and kept until `close` (a long-lived caller such
    as the MCP server: re-opening the store per call costs ~40 ms); else it is opened for
    the one call. ``config``: the settings for it: a `Config`, a function returning one
    (called only when the in-process service is opened: the Copilot hook's settings
    stay untyped while the socket answers), a config dict (the public API's callers),
    or None for config.yaml's. Errors of the request itself raise `ServiceCallError`
    either way."""

    def __init__(
        self,
        *,
        keep: bool = False,
        fallback: bool = True,
        timeout: float = DEFAULT_TIMEOUT_S,
        home: Path | None = None,
        config: ClientConfig = None,
        report: Callable[[str], None] | None = None,
    ) -> None:
        self.keep, self.fallback, self.timeout = keep, fallback, timeout
        self.home, self.config, self.report = home, config, report
        self._local: Any = None  # the kept QueryService

    def __call__(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        try:
            return call(method, params, timeout=self.timeout, home=self.home, report=self.report)
        except ServiceUnavailable:
            if not self.fallback:
                raise
        except ServiceCallError as exc:
            if not self.fallback or exc.code not in FALLBACK_CODES:
                raise
        return self.in_process(method, params)

    def in_process(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``method`` on this process's `QueryService` (the kept one, or one for the call)."""
        from ..config import Config, load_settings
        from .operations import QueryService
        from .params import ServiceError

        service = self._local
        if service is None:
            config = self.config() if callable(self.config) else self.config
            settings = load_settings() if config is None else Config.coerce(config)
            service = QueryService.open(settings, served_by="in-process")
            if self.keep:
                self._local = service
        try:
            result: dict[str, Any] = service.call(method, params)
        except ServiceError as exc:
            raise ServiceCallError(exc.code, str(exc)) from None
        finally:
            if not self.keep:
                service.close()
        return result

    def close(self) -> None:
        if self._local is not None:
            self._local.close()
            self._local = None


def query(
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    fallback: bool = True,
    timeout: float = DEFAULT_TIMEOUT_S,
    home: Path | None = None,
    config: ClientConfig = None,
    report: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """One call through a `Client`: the sidecar, else (``fallback``) in-process."""
    client = Client(fallback=fallback, timeout=timeout, home=home, config=config, report=report)
    return client(method, params)


def call_in_process(
    method: str, params: Mapping[str, Any] | None = None, *, config: ClientConfig = None
) -> dict[str, Any]:
    """``method`` on a `QueryService` opened for this one call (then closed)."""
    return Client(config=config).in_process(method, params)


def answers(home: Path | None = None, timeout: float = 0.5) -> dict[str, Any] | None:
    """The sidecar's ``status`` when its query service answers, else None."""
    try:
        return call("status", timeout=timeout, home=home)
    except (ServiceUnavailable, ServiceCallError):
        return None
