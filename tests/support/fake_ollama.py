"""Deterministic Ollama-compatible fake server (stdlib only), for tests of an httpx client.

Endpoints (subset of the Ollama REST API):
  GET  /                 -> "Ollama is running"
  GET  /api/version      -> {"version": ...}
  GET  /api/tags         -> {"models": [...]}
  POST /api/embeddings   -> {"embedding": [...]}             (legacy: {"model", "prompt"})
  POST /api/embed        -> {"model", "embeddings": [[...]], ...}
                            ({"model", "input": str | [str], "dimensions"?})
  POST /api/generate     -> {"model", "response", "done": true, ...}
                            format="json" or a JSON-schema object -> "response" is a JSON string.
                            "stream" defaults to TRUE like real Ollama: NDJSON chunks
                            unless "stream": false.

Embeddings are deterministic hashed bag-of-words vectors (L2-normalised), so texts sharing words get
cosine > 0 and identical texts get identical vectors: good enough to test ranking code.

Test hooks (request headers): X-Fake-Status: 503  -> answer that status with {"error": ...}
                              X-Fake-Delay-Ms: 250 -> sleep before answering (timeouts/retries)
Unknown model -> 404 {"error": "model \"x\" not found, try pulling it first"} like Ollama.

llmem-hooks additions (the client cannot send test headers, so the server is steered instead):
  srv.control.status / .delay_ms     -> every request answers that status / sleeps first
  srv.control.generate_queue         -> raw "response" strings /api/generate returns first
  srv.control.responder(body) -> str -> computes the /api/generate "response" (else the default)
  srv.control.redirect_to            -> every request answers 302 to that URL
  srv.control.requests               -> (path, body) of every request, for assertions
Copied from the reference material (sqlite-and-watching/fake_ollama.py) and extended.

Use in pytest:
    from support.fake_ollama import start_server
    srv, base_url = start_server()      # 127.0.0.1, ephemeral port, daemon thread
    ...; srv.shutdown(); srv.server_close()
CLI: python tests/support/fake_ollama.py [--port 11434]   (binds 127.0.0.1 only)
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VERSION = "0.0.0-fake"
EMBED_MODELS = {
    "nomic-embed-text:latest": 768,
    "all-minilm:latest": 384,
    "mxbai-embed-large:latest": 1024,
}
GEN_MODELS = {"llama3.2:latest", "qwen2.5-coder:latest"}
_WORD = re.compile(r"[A-Za-z0-9_]+")


def _canon(model: str) -> str:
    return model if ":" in model else model + ":latest"


def embed_text(text: str, dim: int) -> list[float]:
    """Hashed bag-of-words (+ character trigrams at low weight), L2-normalised.
    Deterministic across runs."""
    v = [0.0] * dim
    toks = [w.lower() for w in _WORD.findall(text)]
    feats = [(t, 1.0) for t in toks] + [
        (t[i : i + 3], 0.25) for t in toks for i in range(max(0, len(t) - 2))
    ]
    if not feats:
        feats = [("<empty>", 1.0)]
    for f, w in feats:
        h = hashlib.blake2b(f.encode(), digest_size=8).digest()
        idx = int.from_bytes(h[:4], "little") % dim
        v[idx] += w if h[4] & 1 else -w
    n = math.sqrt(sum(x * x for x in v)) or 1.0
    return [round(x / n, 6) for x in v]


def _schema_instance(schema: dict, prompt: str):
    """Minimal deterministic instance of a (simple) JSON schema."""
    t = schema.get("type")
    if "enum" in schema:
        return schema["enum"][0]
    if t == "object" or "properties" in schema:
        props = schema.get("properties", {})
        keys = schema.get("required", list(props))
        return {k: _schema_instance(props.get(k, {}), prompt) for k in keys}
    if t == "array":
        return [_schema_instance(schema.get("items", {}), prompt)]
    if t == "integer":
        return len(prompt) % 100
    if t == "number":
        return round((len(prompt) % 100) / 100, 2)
    if t == "boolean":
        return len(prompt) % 2 == 0
    return prompt[:40]


def generate_text(model: str, prompt: str, fmt) -> str:
    digest = hashlib.sha256(f"{model}\0{prompt}".encode()).hexdigest()[:12]
    if isinstance(fmt, dict):
        return json.dumps(_schema_instance(fmt, prompt))
    if fmt == "json":
        words = [w.lower() for w in _WORD.findall(prompt)]
        kw = sorted(set(w for w in words if len(w) > 3), key=lambda w: (-words.count(w), w))[:5]
        return json.dumps({"summary": prompt[:80], "keywords": kw, "id": digest})
    return f"fake answer {digest}: {prompt[:60]}"


@dataclass
class Control:
    """Server-wide behaviour switches for tests (see the module docstring)."""

    status: int | None = None
    delay_ms: int = 0
    generate_queue: list[str] = field(default_factory=list)
    responder: Callable[[dict], str] | None = None
    redirect_to: str | None = None
    requests: list[tuple[str, dict]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def paths(self) -> list[str]:
        with self.lock:
            return [p for p, _ in self.requests]

    def bodies(self, path: str) -> list[dict]:
        with self.lock:
            return [b for p, b in self.requests if p == path]


class Handler(BaseHTTPRequestHandler):
    server_version = "FakeOllama/" + VERSION
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # real Ollama answers at once; no 40 ms delayed-ACK wait

    def log_message(self, *a):  # quiet
        pass

    # -- request plumbing
    def _send(self, status: int, obj=None, text: str | None = None, ctype="application/json"):
        body = (text if text is not None else json.dumps(obj)).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _hooks(self) -> bool:
        ctl: Control | None = getattr(self.server, "control", None)
        if ctl is not None:
            if ctl.delay_ms:
                time.sleep(ctl.delay_ms / 1000)
            if ctl.redirect_to:
                self.send_response(302)
                self.send_header("Location", ctl.redirect_to)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return True
            if ctl.status and ctl.status != 200:
                self._send(ctl.status, {"error": f"forced status {ctl.status}"})
                return True
        d = self.headers.get("X-Fake-Delay-Ms")
        if d:
            time.sleep(int(d) / 1000)
        s = self.headers.get("X-Fake-Status")
        if s and s != "200":
            self._send(int(s), {"error": f"forced status {s}"})
            return True
        return False

    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send(400, {"error": "invalid JSON body"})
            return None

    def _model(self, body, allowed) -> str | None:
        m = body.get("model")
        if not m:
            self._send(400, {"error": "model is required"})
            return None
        if _canon(m) not in allowed:
            self._send(404, {"error": f'model "{m}" not found, try pulling it first'})
            return None
        return _canon(m)

    # -- routes
    def do_GET(self):
        if self._hooks():
            return
        if self.path == "/":
            return self._send(200, text="Ollama is running", ctype="text/plain; charset=utf-8")
        if self.path == "/api/version":
            return self._send(200, {"version": VERSION})
        if self.path == "/api/tags":
            models = []
            for name in sorted(list(EMBED_MODELS) + sorted(GEN_MODELS)):
                models.append(
                    {
                        "name": name,
                        "model": name,
                        "modified_at": "2025-01-01T00:00:00Z",
                        "size": 1000 + len(name),
                        "digest": hashlib.sha256(name.encode()).hexdigest(),
                        "details": {
                            "format": "gguf",
                            "family": name.split(":")[0].split("-")[0],
                            "parameter_size": "1B",
                            "quantization_level": "Q4_0",
                        },
                    }
                )
            return self._send(200, {"models": models})
        self._send(404, {"error": "not found"})

    def do_POST(self):
        body = self._body()
        if body is None:
            return
        ctl: Control | None = getattr(self.server, "control", None)
        if ctl is not None:
            with ctl.lock:
                ctl.requests.append((self.path, body))
        if self._hooks():
            return
        if self.path == "/api/embeddings":
            m = self._model(body, EMBED_MODELS)
            if m:
                self._send(
                    200, {"embedding": embed_text(str(body.get("prompt", "")), EMBED_MODELS[m])}
                )
        elif self.path == "/api/embed":
            m = self._model(body, EMBED_MODELS)
            if not m:
                return
            inp = body.get("input", "")
            texts = [inp] if isinstance(inp, str) else list(inp)
            dim = int(body.get("dimensions") or EMBED_MODELS[m])
            self._send(
                200,
                {
                    "model": m,
                    "embeddings": [embed_text(t, dim) for t in texts],
                    "total_duration": 1000 * len(texts),
                    "load_duration": 0,
                    "prompt_eval_count": sum(len(_WORD.findall(t)) for t in texts),
                },
            )
        elif self.path == "/api/generate":
            m = self._model(body, GEN_MODELS)
            if not m:
                return
            resp = None
            if ctl is not None:
                with ctl.lock:
                    resp = ctl.generate_queue.pop(0) if ctl.generate_queue else None
                if resp is None and ctl.responder is not None:
                    resp = ctl.responder(body)
            if resp is None:
                resp = generate_text(m, str(body.get("prompt", "")), body.get("format"))
            now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
            final = {
                "model": m,
                "created_at": now,
                "response": resp,
                "done": True,
                "done_reason": "stop",
                "context": [1, 2, 3],
                "total_duration": 1000,
                "load_duration": 0,
                "prompt_eval_count": max(1, len(_WORD.findall(str(body.get("prompt", ""))))),
                "eval_count": len(resp),
            }
            if body.get("stream", True) is False:
                return self._send(200, final)
            # streaming (Ollama's default): NDJSON, chunked transfer encoding
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            half = len(resp) // 2
            chunks = [
                {"model": m, "created_at": now, "response": resp[:half], "done": False},
                {**final, "response": resp[half:]},
            ]
            for c in chunks:
                data = (json.dumps(c) + "\n").encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
        else:
            self._send(404, {"error": "not found"})


class QuietServer(ThreadingHTTPServer):
    """A client that gave up (a timeout test) leaves a broken pipe: not worth a traceback
    on stderr, where it would land in whichever test runs next.

    ``server_close`` also ends the connections still open: a keep-alive connection of a
    client the test never closed would otherwise keep its handler thread waiting (and the
    leak check in tests/conftest.py would rightly report it)."""

    daemon_threads = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._live: set[socket.socket] = set()
        self._live_lock = threading.Lock()

    def process_request(self, request, client_address):
        with self._live_lock:
            self._live.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        with self._live_lock:
            self._live.discard(request)
        super().shutdown_request(request)

    def server_close(self):
        super().server_close()
        with self._live_lock:
            live = list(self._live)
        for sock in live:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request, client_address):
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def start_server(port: int = 0):
    """Start on 127.0.0.1 (ephemeral port by default) in a daemon thread.
    Returns (server, base_url)."""
    srv = QuietServer(("127.0.0.1", port), Handler)
    srv.control = Control()  # type: ignore[attr-defined]
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=11434)
    a = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    print(f"fake ollama on http://127.0.0.1:{srv.server_address[1]}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        srv.serve_forever()
