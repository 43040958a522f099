"""The query service on a Unix socket: the sidecar's server for `QueryService`.

Protocol: `service_protocol` (NDJSON, versioned, docs/query-service.md). Safety rules:

- the socket file is 0600 in LLMEM_HOME (0700), and each peer's uid is checked with
  ``SO_PEERCRED`` where the system has it: another user's process is refused even if
  the file's mode were loosened;
- a request line is at most `MAX_LINE_BYTES` (then an error reply and the link closes);
  a line must arrive within `LINE_TIMEOUT_S` of its first byte and a link idle for
  `IDLE_TIMEOUT_S` is closed, so a slow or silent client holds one thread for seconds
  at most and never the others: every link has its own thread, at most
  `MAX_CONNECTIONS` at once (the next one gets a ``busy`` reply);
- malformed JSON, a wrong version, an unknown method or bad params get an error reply,
  never a crash; anything unexpected is logged and answered ``internal``.

The service has its own store connection (WAL: the sidecar's writers do not block its
reads; its one write, what recall gave a session, waits at most a second).

Relays: methods the caller of `serve` adds (the sidecar's command line adds the Copilot
hook's, `agents.hook_relay.relay`), so that a process an agent waits for can have the
warm sidecar do its whole work in one round trip. They take the service and the params
and are answered like the service's own methods.

Companions: other doors to the same warm service that the caller of `serve` adds (the
sidecar's command line adds the Copilot launcher's FIFO door, `agents.hook_door`): each
is started with the service and the LLMEM_HOME folder once the socket listens, and
stopped before it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import stat
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..config import Config
from ..paths import ensure_private_dir, get_llmem_home
from . import protocol as proto
from .operations import QueryService
from .params import ServiceError
from .protocol import MAX_LINE_BYTES, peer_uid

log = logging.getLogger("llmem_hooks.service.operations")

# A method answered beside the service's own: (the service, the params) -> the result.
Relay = Callable[[QueryService, Mapping[str, Any]], dict[str, Any]]
# Another door to the service: (the service, LLMEM_HOME) -> something with ``stop()``, or
# None when it could not open (it logs why).
Companion = Callable[[QueryService, Path], Any]

IDLE_TIMEOUT_S = 10.0  # a link with no request for this long is closed
LINE_TIMEOUT_S = 2.0  # a started request line must be complete within this
SEND_TIMEOUT_S = 2.0  # a client that does not read its reply is dropped
MAX_CONNECTIONS = 16
ACCEPT_POLL_S = 0.2  # how often the accept loop looks at the stop flag


class ServiceServer:
    """Serves ``service`` on ``path`` (default `service_protocol.socket_path`) from
    threads of its own; `stop` ends them all and removes the socket file."""

    def __init__(
        self,
        service: QueryService,
        path: Path | None = None,
        *,
        allowed_uid: int | None = None,
        max_connections: int = MAX_CONNECTIONS,
        idle_timeout: float = IDLE_TIMEOUT_S,
        line_timeout: float = LINE_TIMEOUT_S,
        owns_service: bool = False,
        relays: Mapping[str, Relay] | None = None,
    ) -> None:
        self.service = service
        self.relays = dict(relays or {})
        self.path = path or proto.socket_path()
        self.allowed_uid = os.getuid() if allowed_uid is None else allowed_uid
        self.max_connections = max_connections
        self.idle_timeout = idle_timeout
        self.line_timeout = line_timeout
        self._owns_service = owns_service
        self._stop = threading.Event()
        self._sock: socket.socket | None = None
        self._inode: int | None = None
        self._accept_thread: threading.Thread | None = None
        self._links: dict[socket.socket, threading.Thread] = {}
        self._links_lock = threading.Lock()
        self.companions: list[Any] = []

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> ServiceServer:
        """Bind (0600), listen and start accepting. Raises OSError when the socket cannot
        be made, or when another server already answers on it."""
        if self.path.name == proto.SOCKET_NAME:
            ensure_private_dir(self.path.parent)
        else:  # the short path of a long LLMEM_HOME without /proc
            proto.ensure_socket_dir(self.path)
        self._clear_stale()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with proto.address(self.path) as addr:
                sock.bind(addr)
            os.chmod(self.path, 0o600)
            self._inode = os.stat(self.path).st_ino
            sock.listen(64)
            sock.settimeout(ACCEPT_POLL_S)
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        self._accept_thread = threading.Thread(
            target=self._accept_loop, name="llmem-query-accept", daemon=True
        )
        self._accept_thread.start()
        return self

    def _clear_stale(self) -> None:
        """A socket file left by a crash is removed; a live server on it, or a file that
        is no socket, is an error (nothing of someone else's is deleted)."""
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return
        if not stat.S_ISSOCK(st.st_mode):
            raise OSError(f"{self.path} exists and is not a socket; not replacing it")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.settimeout(0.5)
        try:
            with proto.address(self.path) as addr:
                probe.connect(addr)
        except OSError:
            os.unlink(self.path)  # nobody listens: a leftover
            return
        finally:
            probe.close()
        raise OSError(f"a query service already answers on {self.path}")

    def stop(self, timeout: float = 3.0) -> None:
        """Stop accepting, close every link, wait for the threads, remove the socket."""
        self._stop.set()
        for companion in self.companions:
            with contextlib.suppress(Exception):
                companion.stop()
        self.companions.clear()
        if self._accept_thread is not None:
            self._accept_thread.join(timeout)
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        with self._links_lock:
            links = list(self._links.items())
        for conn, _ in links:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for _, thread in links:
            thread.join(timeout)
        with contextlib.suppress(OSError):
            if self._inode is not None and os.stat(self.path).st_ino == self._inode:
                os.unlink(self.path)
        if self._owns_service:
            self.service.close()

    def __enter__(self) -> ServiceServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- serving ------------------------------------------------------------------------
    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            sock = self._sock
            if sock is None:
                return
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                continue
            try:
                self._admit(conn)
            except Exception as exc:  # never let one link end the loop
                log.warning("query service: dropping a connection: %s", exc)
                conn.close()

    def _admit(self, conn: socket.socket) -> None:
        uid = peer_uid(conn)
        if uid is not None and uid != self.allowed_uid:
            log.warning("query service: refused a connection from uid %d", uid)
            conn.close()
            return
        with self._links_lock:
            full = len(self._links) >= self.max_connections
            if not full:
                thread = threading.Thread(
                    target=self._serve, args=(conn,), name="llmem-query-link", daemon=True
                )
                self._links[conn] = thread
        if full:
            conn.settimeout(0.2)
            with contextlib.suppress(OSError):
                conn.sendall(proto.encode(proto.error_reply(None, proto.BUSY, "too many links")))
            conn.close()
            return
        thread.start()

    def _serve(self, conn: socket.socket) -> None:
        """One link: requests in, replies out, until the client closes, idles out,
        or breaks a rule."""
        buf = bytearray()
        line_deadline: float | None = None
        try:
            while not self._stop.is_set():
                nl = buf.find(b"\n", 0, MAX_LINE_BYTES + 1)
                if nl >= 0:
                    line = bytes(buf[:nl])
                    del buf[: nl + 1]
                    line_deadline = time.monotonic() + self.line_timeout if buf else None
                    conn.settimeout(SEND_TIMEOUT_S)
                    conn.sendall(proto.encode(self.answer(line)))
                    continue
                if len(buf) > MAX_LINE_BYTES:
                    conn.settimeout(SEND_TIMEOUT_S)
                    conn.sendall(
                        proto.encode(
                            proto.error_reply(
                                None,
                                proto.TOO_LARGE,
                                f"a request line is at most {MAX_LINE_BYTES} bytes",
                            )
                        )
                    )
                    return
                if line_deadline is None:
                    wait = self.idle_timeout
                else:
                    wait = line_deadline - time.monotonic()
                    if wait <= 0:
                        return  # a line too slow in coming: drop the link
                conn.settimeout(wait)
                chunk = conn.recv(65536)
                if not chunk:
                    return
                if not buf:
                    line_deadline = time.monotonic() + self.line_timeout
                buf += chunk
        except OSError:  # timeouts, resets, a stop
            return
        finally:
            with self._links_lock:
                self._links.pop(conn, None)
            conn.close()

    def answer(self, line: bytes) -> dict[str, Any]:
        """The reply to one request line (never raises)."""
        try:
            req = json.loads(line)
        except (ValueError, RecursionError):
            return proto.error_reply(None, proto.BAD_REQUEST, "the request is not valid JSON")
        if not isinstance(req, dict):
            return proto.error_reply(None, proto.BAD_REQUEST, "the request must be an object")
        rid = req.get("id")
        if isinstance(rid, dict | list) or proto.has_lone_surrogate(rid):
            rid = None
        if proto.has_lone_surrogate(req):
            return proto.error_reply(
                rid, proto.BAD_REQUEST, "the request holds a lone UTF-16 surrogate"
            )
        if not proto.is_version(req.get("v")):
            return proto.error_reply(
                rid,
                proto.BAD_VERSION,
                f"unsupported protocol version {str(req.get('v'))[:20]!r}; "
                f"this server speaks {proto.PROTOCOL_VERSION}",
            )
        method = req.get("method")
        if not isinstance(method, str):
            return proto.error_reply(rid, proto.BAD_REQUEST, "the request needs a method")
        try:
            relay = self.relays.get(method)
            if relay is not None:
                params = req.get("params")
                if not isinstance(params, Mapping):
                    raise ServiceError(proto.BAD_PARAMS, "params must be an object")
                result = relay(self.service, params)
            else:
                result = self.service.call(method, req.get("params"))
        except ServiceError as exc:
            return proto.error_reply(rid, exc.code, str(exc))
        except Exception as exc:
            log.exception("query service: %s failed", method)
            return proto.error_reply(rid, proto.INTERNAL, f"{type(exc).__name__} in {method}")
        return {"v": proto.PROTOCOL_VERSION, "id": rid, "result": result}


def serve(
    config: Config,
    home: Path | None = None,
    relays: Mapping[str, Relay] | None = None,
    companions: Sequence[Companion] = (),
) -> ServiceServer | None:
    """The sidecar's query service, started: a warm `QueryService` with its own store on
    the socket of ``home`` (plus ``relays``, see `Relay`, and ``companions``, see
    `Companion`). None (logged) when it cannot start: the sidecar runs on and clients
    fall back to in-process queries."""
    try:
        service = QueryService.open(config, served_by="sidecar")
    except Exception as exc:
        log.error("query service not started: %s", exc)
        return None
    server = ServiceServer(service, proto.socket_path(home), owns_service=True, relays=relays)
    try:
        server.start()
    except Exception as exc:
        log.error("query service not started: %s", exc)
        service.close()
        return None
    log.info("query service listening on %s", server.path)
    for opener in companions:
        try:
            companion = opener(service, home or get_llmem_home())
        except Exception as exc:
            log.error("query service: a companion did not start: %s", exc)
            continue
        if companion is not None:
            server.companions.append(companion)
    try:  # count the memories now, off any agent's path (`status` then stays cheap)
        service.status()
    except Exception as exc:
        log.debug("query service: no first count: %s", exc)
    return server
