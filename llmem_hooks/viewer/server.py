"""`llmem-hooks ui`: the viewer served by the stdlib on 127.0.0.1 (docs/viewer.md).

Who may talk to it: a browser holding its session cookie (HttpOnly, SameSite=Strict,
Path=/), or whoever shows the long-lived token (the ``X-LLMem-Token`` header; on a GET also
``?token=``, as in the URL `ui` prints, which also sets the cookie). ``ui --open`` gives
the browser a one-time login code instead (``/login?code=``: once, within
``LOGIN_CODE_TTL_S``, then a redirect to the clean URL): a browser's command line is
readable by every local user (``/proc/PID/cmdline``), so the token never goes there. The
Host header must name this server (127.0.0.1 or localhost at its port, exactly one):
a page on another site that rebinds its DNS name to 127.0.0.1 is refused. Where Linux
tells (``/proc/net/tcp``), a connection from another local user is refused whatever it
knows (`peer_uid`). Changes are
POST-only with a JSON body, which a form on another site cannot send; nothing answers
CORS preflights. Every answer carries a strict CSP, ``nosniff``, ``no-referrer`` and
``no-store``. Request lines are not logged (a token may be in them).

The server stops by itself: on Ctrl-C or SIGTERM, and after ``idle_exit_s`` without an
accepted request (refused ones do not keep it alive). Calls into the store are
serialized (one lock): a person clicks, it is enough.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import secrets
import socket
import struct
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..errors import LLMemError, NotFoundError, ValidationError
from .data import ViewerData
from .page import content_security_policy, render_page

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
MAX_BODY_BYTES = 1024 * 1024
TOKEN_HEADER = "X-LLMem-Token"
POLL_S = 0.25
MAX_QUERY_FIELDS = 20
LOGIN_CODE_TTL_S = 60.0  # a one-time code opens one session, within this time
MAX_SESSIONS = 32  # logins kept; the oldest goes first
DREAM_CSP = "sandbox; default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'self'"
PROC_NET_TCP = "/proc/net/tcp"  # Linux's IPv4 socket table: who owns each connection


def peer_uid(client: tuple[Any, ...], server_port: int) -> int | None:
    """The uid that owns the client's end of a loopback connection to us, from Linux's
    socket table (-1: the table has no such connection); None where there is no table."""
    try:
        ip = struct.unpack("=I", socket.inet_aton(str(client[0])))[0]
        local = f"{ip:08X}:{int(client[1]):04X}"
        remote = f"{ip:08X}:{server_port:04X}"  # we listen on the same address
        with open(PROC_NET_TCP, encoding="ascii") as fh:
            next(fh)
            for line in fh:
                fields = line.split()
                if fields[1] == local and fields[2] == remote:
                    return int(fields[7])
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return -1


class ViewerServer:
    """The viewer's HTTP server on 127.0.0.1 (``port`` 0: a free one)."""

    def __init__(
        self,
        data: ViewerData,
        *,
        port: int = 0,
        token: str | None = None,
        idle_exit_s: float | None = None,
    ) -> None:
        self.data = data
        self.token = token or secrets.token_urlsafe(24)
        self.sessions: dict[str, None] = {}  # cookie values, oldest first
        self.codes: dict[str, tuple[float, str | None]] = {}  # code: (expiry, session)
        self.idle_exit_s = idle_exit_s if idle_exit_s and idle_exit_s > 0 else None
        self.lock = threading.Lock()  # the store's calls
        self.auth_lock = threading.Lock()  # sessions and codes
        self.last_request = time.monotonic()
        self.stop = threading.Event()
        handler = type("Handler", (_Handler,), {"viewer": self})
        self.httpd = ThreadingHTTPServer((HOST, port), handler)
        self.httpd.daemon_threads = True
        self.httpd.timeout = POLL_S
        self.port = int(self.httpd.server_address[1])
        self.hosts = {f"{HOST}:{self.port}", f"localhost:{self.port}"}
        self.origins = {f"http://{h}" for h in self.hosts}
        self.cookie = f"llmem_viewer_{self.port}"  # cookies ignore ports: one name per server

    @property
    def url(self) -> str:
        """The URL to print for the user (their own terminal): it holds the token."""
        return f"http://{HOST}:{self.port}/?token={self.token}"

    def login_url(self) -> str:
        """A URL to hand to a browser's command line: a one-time code, not the token."""
        now = time.monotonic()
        with self.auth_lock:
            self.codes = {c: v for c, v in self.codes.items() if v[0] > now}
            code = secrets.token_urlsafe(24)
            self.codes[code] = (now + LOGIN_CODE_TTL_S, None)
        return f"http://{HOST}:{self.port}/login?code={code}"

    def new_session(self) -> str:
        with self.auth_lock:
            return self._new_session()

    def _new_session(self) -> str:
        value = secrets.token_urlsafe(32)
        self.sessions[value] = None
        while len(self.sessions) > MAX_SESSIONS:
            del self.sessions[next(iter(self.sessions))]
        return value

    def redeem(self, code: str | None) -> str | None:
        """The new session of a valid, unused code; None otherwise. A code shown twice
        was seen by someone else too: the session it opened is closed as well."""
        with self.auth_lock:
            entry = self.codes.get(code or "")
            if entry is None or code is None:
                return None
            expiry, session = entry
            if session is not None:
                self.sessions.pop(session, None)
                log.warning("viewer: a login code was used twice; its session is closed")
                return None
            if time.monotonic() >= expiry:
                del self.codes[code]
                return None
            session = self._new_session()
            self.codes[code] = (expiry, session)
            return session

    def session_ok(self, value: str | None) -> bool:
        if not value:
            return False
        with self.auth_lock:
            known = list(self.sessions)
        return any(hmac.compare_digest(value.encode("utf-8", "replace"), k.encode()) for k in known)

    def serve(self) -> None:
        """Answer until `stop` is set or the server sat idle for ``idle_exit_s``."""
        try:
            while not self.stop.is_set():
                self.httpd.handle_request()
                idle = time.monotonic() - self.last_request
                if self.idle_exit_s is not None and idle >= self.idle_exit_s:
                    log.info("viewer: idle for %.0f s, stopping", idle)
                    break
        finally:
            self.httpd.server_close()

    def peer_ok(self, client: tuple[Any, ...]) -> bool:
        """Another local user is refused even with the token or a cookie (root may pass:
        it can read everything anyway); where the system does not tell, the token decides."""
        uid = peer_uid(client, self.port)
        return uid is None or uid in (os.getuid(), 0)

    def token_ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(
            given.encode("utf-8", "replace"), self.token.encode()
        )


class _Handler(BaseHTTPRequestHandler):
    viewer: ViewerServer
    server_version = "llmem-viewer"
    sys_version = ""

    def version_string(self) -> str:
        return self.server_version

    protocol_version = "HTTP/1.1"
    timeout = 30  # an idle keep-alive connection is closed, its thread ends

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: a request line holds the token."""

    def setup(self) -> None:
        super().setup()
        self.peer_ok = self.viewer.peer_ok(self.client_address)  # once per connection

    # -- answers --------------------------------------------------------------------------
    def _send(
        self,
        status: int,
        body: bytes,
        content_type: str,
        csp: str = "default-src 'none'; frame-ancestors 'none'",
        frame_options: str = "DENY",
        extra: Sequence[tuple[str, str]] = (),
    ) -> None:
        self._answered = True
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", csp)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", frame_options)
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        for name, value in extra:
            self.send_header(name, value)
        if status >= 400:  # a refused request's body may be unread: never reuse the line
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, data: Any) -> None:
        body = json.dumps(data, ensure_ascii=False).encode("utf-8")
        self._send(status, body, "application/json; charset=utf-8")

    def _error(self, status: int, message: str) -> None:
        self._json(status, {"error": message})

    def _guarded(self, fn: Any) -> None:
        """Every request gets an answer, whatever went wrong inside."""
        self._answered = False
        try:
            fn()
        except Exception as exc:
            log.warning("viewer: %s: %s", type(exc).__name__, exc)
            if self._answered:
                self.close_connection = True
            else:
                self._error(500, f"internal error ({type(exc).__name__})")

    def _set_cookie(self, session: str) -> tuple[str, str]:
        return ("Set-Cookie", f"{self.viewer.cookie}={session}; HttpOnly; SameSite=Strict; Path=/")

    # -- checks ---------------------------------------------------------------------------
    def _host_ok(self) -> bool:
        """Our own user (`peer_uid`), and exactly one Host header that names us."""
        if not self.peer_ok:
            self._error(403, "this viewer answers only to the user who started it")
            return False
        hosts = self.headers.get_all("Host") or []
        if len(hosts) != 1:
            self._error(400, "send exactly one Host header")
            return False
        if hosts[0] not in self.viewer.hosts:
            self._error(421, "this server answers only to 127.0.0.1 and localhost")
            return False
        return True

    def _query(self) -> dict[str, list[str]] | None:
        try:
            return parse_qs(urlsplit(self.path).query, max_num_fields=MAX_QUERY_FIELDS)
        except ValueError:
            self._error(400, f"too many query fields (at most {MAX_QUERY_FIELDS})")
            return None

    def _cookie(self) -> str | None:
        for header in self.headers.get_all("Cookie") or []:
            for part in header.split(";"):
                name, _, value = part.strip().partition("=")
                if name == self.viewer.cookie:
                    return value
        return None

    def _same_origin(self) -> bool:
        """A cookie is sent by the browser wherever the request comes from on 127.0.0.1
        (cookies ignore ports): it counts only from our own pages or the address bar."""
        origin = self.headers.get("Origin")
        if origin is not None and origin not in self.viewer.origins:
            return False
        return self.headers.get("Sec-Fetch-Site", "same-origin") in ("same-origin", "none")

    def _allowed(self, *, post: bool) -> tuple[dict[str, list[str]], str | None] | None:
        """The query's parameters, and a new session when the query's token opened one,
        when the request may pass; else answers and None. Only an accepted request
        counts as activity for the idle exit."""
        if not self._host_ok():
            return None
        query = self._query()
        if query is None:
            return None
        viewer = self.viewer
        given = self.headers.get(TOKEN_HEADER)
        ok = viewer.token_ok(given)
        opened = None
        if given is None:
            if viewer.session_ok(self._cookie()):
                ok = self._same_origin()
            elif not post and viewer.token_ok(next(iter(query.get("token") or ()), None)):
                ok, opened = True, viewer.new_session()
        if not ok:
            self._error(403, "wrong or missing token (open the URL llmem-hooks ui printed)")
            return None
        viewer.last_request = time.monotonic()
        return query, opened

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> None:
        try:
            with self.viewer.lock:
                out = fn(*args, **kwargs)
        except NotFoundError as exc:
            self._error(404, str(exc))
        except (ValidationError, LLMemError) as exc:
            self._error(400, str(exc))
        except Exception as exc:  # a damaged database: one line, the server stays up
            log.warning("viewer: %s", exc)
            self._error(500, f"{type(exc).__name__}: {exc}")
        else:
            self._json(200, out)

    # -- methods --------------------------------------------------------------------------
    def do_GET(self) -> None:
        self._guarded(self._get)

    def do_POST(self) -> None:
        self._guarded(self._post)

    def _login(self) -> None:
        """``/login?code=``: a one-time code becomes the session cookie, then the clean URL."""
        if not self._host_ok():
            return
        query = self._query()
        if query is None:
            return
        session = self.viewer.redeem(next(iter(query.get("code") or ()), None))
        if session is None:
            self._error(
                403, "this login link was used or has expired (open the URL llmem-hooks ui printed)"
            )
            return
        self.viewer.last_request = time.monotonic()
        self._send(303, b"", "text/plain", extra=[("Location", "/"), self._set_cookie(session)])

    def _get(self) -> None:
        path = urlsplit(self.path).path
        if path == "/login":
            self._login()
            return
        allowed = self._allowed(post=False)
        if allowed is None:
            return
        query, opened = allowed
        data = self.viewer.data

        def one(name: str) -> str | None:
            return next(iter(query.get(name) or ()), None)

        if path == "/":
            nonce = secrets.token_urlsafe(16)
            try:
                with self.viewer.lock:
                    page = render_page(data.overview(), live=True, nonce=nonce)
            except Exception as exc:
                log.warning("viewer: %s", exc)
                self._error(500, f"{type(exc).__name__}: {exc}")
                return
            self._send(
                200,
                page.encode("utf-8"),
                "text/html; charset=utf-8",
                content_security_policy(nonce, live=True),
                extra=[self._set_cookie(opened)] if opened else (),
            )
        elif path == "/api/overview":
            self._call(data.overview)
        elif path == "/api/memory":
            self._call(data.memory, one("id") or "")
        elif path == "/api/search":
            self._call(
                data.search,
                one("q") or "",
                project=one("project"),
                type=one("type"),
                kind=one("kind"),
            )
        elif path == "/dream-report":
            with self.viewer.lock:
                report = data.dream_report()
            if report is None:
                self._error(404, "no dream report yet")
                return
            self._send(
                200, report.encode("utf-8"), "text/html; charset=utf-8", DREAM_CSP, "SAMEORIGIN"
            )
        else:
            self._error(404, "not found")

    def _post(self) -> None:
        if self._allowed(post=True) is None:
            return
        path = urlsplit(self.path).path
        actions = {"/api/edit", "/api/forget", "/api/restore", "/api/confirm", "/api/fix-citation"}
        if path not in actions:
            self._error(404, "not found")
            return
        if not self.headers.get("Content-Type", "").startswith("application/json"):
            self._error(415, "send JSON (Content-Type: application/json)")
            return
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._error(411, "Content-Length needed")
            return
        if not 0 < length <= MAX_BODY_BYTES:
            self._error(413, f"the body must be 1 to {MAX_BODY_BYTES} bytes")
            return
        try:
            body = json.loads(self.rfile.read(length).decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            self._error(400, "the body is not JSON")
            return
        except RecursionError:
            self._error(400, "the body is nested too deeply")
            return
        if not isinstance(body, dict):
            self._error(400, "the body must be a JSON object")
            return
        data = self.viewer.data
        if path == "/api/edit":
            self._call(
                data.edit,
                body.get("id"),
                content=body.get("content"),
                type=body.get("type"),
                tags=body.get("tags"),
            )
        elif path == "/api/forget":
            self._call(data.forget, body.get("id"), body.get("reason"))
        elif path == "/api/confirm":  # a stale memory still holds (docs/viewer.md)
            self._call(data.confirm_citations, body.get("id"))
        elif path == "/api/fix-citation":
            self._call(data.fix_citation, body.get("id"), body.get("spec"), body.get("replace"))
        else:
            self._call(data.restore, body.get("id"))

    def _refuse_method(self) -> None:
        """405; a refused request does not keep the server alive."""
        self.send_response(405)
        self.send_header("Allow", "GET, POST")
        self.send_header("Content-Length", "0")
        self.send_header("Connection", "close")
        self.close_connection = True
        self.end_headers()

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = _refuse_method
