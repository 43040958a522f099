"""`llmem-hooks ui`: the viewer served by the stdlib on 127.0.0.1 (docs/viewer.md).

Who may talk to it: the URL carries a random token, compared in constant time on every
request (the page and the dream report take it as ``?token=``, the JSON API as the
``X-LLMem-Token`` header). The Host header must name this server (127.0.0.1 or localhost
at its port): a page on another site that rebinds its DNS name to 127.0.0.1 is refused.
Changes are POST-only with the token in a header and a JSON body, which a form on another
site cannot send; nothing answers CORS preflights. Every answer carries a strict CSP,
``nosniff``, ``no-referrer`` and ``no-store``. Request lines are not logged (the token
is in them).

The server stops by itself: on Ctrl-C or SIGTERM, and after ``idle_exit_s`` without a
request. Calls into the store are serialized (one lock): a person clicks, it is enough.
"""

from __future__ import annotations

import hmac
import json
import logging
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .errors import LLMemError, NotFoundError, ValidationError
from .viewer_data import ViewerData
from .viewer_page import content_security_policy, render_page

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
MAX_BODY_BYTES = 1024 * 1024
TOKEN_HEADER = "X-LLMem-Token"
POLL_S = 0.25
DREAM_CSP = "sandbox; default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'self'"


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
        self.idle_exit_s = idle_exit_s if idle_exit_s and idle_exit_s > 0 else None
        self.lock = threading.Lock()
        self.last_request = time.monotonic()
        self.stop = threading.Event()
        handler = type("Handler", (_Handler,), {"viewer": self})
        self.httpd = ThreadingHTTPServer((HOST, port), handler)
        self.httpd.daemon_threads = True
        self.httpd.timeout = POLL_S
        self.port = int(self.httpd.server_address[1])
        self.hosts = {f"{HOST}:{self.port}", f"localhost:{self.port}"}

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/?token={self.token}"

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

    # -- answers --------------------------------------------------------------------------
    def _send(
        self,
        status: int,
        body: bytes,
        content_type: str,
        csp: str = "default-src 'none'; frame-ancestors 'none'",
        frame_options: str = "DENY",
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", csp)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", frame_options)
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
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

    # -- checks ---------------------------------------------------------------------------
    def _allowed(self, header_token_only: bool) -> dict[str, list[str]] | None:
        """The query's parameters when Host and token are right; else answers and None."""
        self.viewer.last_request = time.monotonic()
        if self.headers.get("Host", "") not in self.viewer.hosts:
            self._error(421, "this server answers only to 127.0.0.1 and localhost")
            return None
        query = parse_qs(urlsplit(self.path).query, max_num_fields=20)
        given = self.headers.get(TOKEN_HEADER)
        if given is None and not header_token_only:
            given = next(iter(query.get("token") or ()), None)
        if not self.viewer.token_ok(given):
            self._error(403, "wrong or missing token (use the URL llmem-hooks ui printed)")
            return None
        return query

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
        query = self._allowed(header_token_only=False)
        if query is None:
            return
        path = urlsplit(self.path).path
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
            )
        elif path == "/api/overview":
            self._call(data.overview)
        elif path == "/api/memory":
            self._call(data.memory, one("id") or "")
        elif path == "/api/search":
            self._call(data.search, one("q") or "", project=one("project"), type=one("type"))
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

    def do_POST(self) -> None:
        if self._allowed(header_token_only=True) is None:
            return
        path = urlsplit(self.path).path
        actions = {"/api/edit", "/api/forget", "/api/restore"}
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
        else:
            self._call(data.restore, body.get("id"))

    def _refuse_method(self) -> None:
        self._allowed_quietly()
        self.send_response(405)
        self.send_header("Allow", "GET, POST")
        self.send_header("Content-Length", "0")
        self.send_header("Connection", "close")
        self.close_connection = True
        self.end_headers()

    def _allowed_quietly(self) -> None:
        self.viewer.last_request = time.monotonic()

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = _refuse_method
