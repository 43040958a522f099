"""A fake OpenAI-compatible chat-completions provider for driving OpenCode and GitHub
Copilot CLI (BYOK mode) offline.

Adapted from the OpenCode 1.18.33 reference notes. It binds 127.0.0.1 on a free port,
serves from a daemon thread, keeps every request in memory (and appends it to a JSONL
file when asked) and stops with :meth:`FakeOpenAI.stop`.

Replies (first match wins):

* a title-generator system prompt      -> "Fake session title"
* the last message is a tool result    -> "FAKE-TOOL-DONE #n"
* the last user text asks for a summary of the conversation (compaction)
                                       -> "## Summary\\nFAKE-COMPACTION-SUMMARY #n ..."
* SUBAGENT-TASK with the task tool     -> a ``task`` tool call (sub-agent)
* USE-BASH with the bash tool          -> a ``bash`` tool call
* ``USE-TOOL <name> {json args}`` and a tool named ``<name>`` (or ending in ``_<name>`` /
  ``-<name>`` / ``/<name>``, as MCP tools are prefixed) -> a call of that tool with the args
* otherwise                            -> "FAKE-REPLY #n: ..."

``usage.prompt_tokens`` is 42, or 31000 when the last user text holds OVERFLOW-TOKENS.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# x-session-affinity: OpenCode's session id; x-initiator / x-interaction-type: Copilot CLI's
# "user" | "agent" and "conversation-user" | "conversation-compaction".
LOGGED_HEADERS = (
    "user-agent",
    "content-type",
    "x-session-affinity",
    "x-initiator",
    "x-interaction-type",
)
TITLE_REPLY = "Fake session title"
SUMMARY_PREFIX = "## Summary\n"


USE_TOOL = re.compile(r"USE-TOOL ([A-Za-z0-9_./-]+)(?: (\{.*?\}))?(?=\s|$)", re.S)


def _tool_named(tools: set[Any], want: str) -> str | None:
    """The offered tool called ``want``, or one whose name ends with it after a separator."""
    if want in tools:
        return want
    for name in sorted(t for t in tools if isinstance(t, str)):
        if any(name.endswith(sep + want) for sep in ("_", "-", "/", ".")):
            return name
    return None


def text_of(content: Any) -> str:
    """The text of a chat message's ``content`` (a string or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


RECALL_BLOCK = re.compile(r"<llmem-recall\b.*?</llmem-recall>", re.S | re.I)


def is_title_request(req: dict[str, Any]) -> bool:
    """A recorded request whose system prompt is OpenCode's title generator's."""
    msgs = (req.get("body") or {}).get("messages") or []
    sys_text = "\n".join(text_of(m.get("content")) for m in msgs if m.get("role") == "system")
    return "title generator" in sys_text.lower() or "generate a title" in sys_text.lower()


def choose_reply(body: dict[str, Any], n: int) -> tuple[str, Any, Any]:
    """``("text", reply, None)`` or ``("tool", name, arguments)`` for a request body."""
    msgs = body.get("messages") or []
    sys_text = "\n".join(text_of(m.get("content")) for m in msgs if m.get("role") == "system")
    users = [m for m in msgs if m.get("role") == "user"]
    last_user = text_of(users[-1].get("content")) if users else ""
    low_sys, low = sys_text.lower(), last_user.lower()
    if "title generator" in low_sys or "generate a title" in low_sys:
        return ("text", TITLE_REPLY, None)
    if msgs and msgs[-1].get("role") == "tool":
        return ("text", f"FAKE-TOOL-DONE #{n}: the tool call finished.", None)
    if "summar" in low and ("conversation" in low or "compact" in low):
        return (
            "text",
            f"{SUMMARY_PREFIX}FAKE-COMPACTION-SUMMARY #{n}: the user talked about the project; "
            "the assistant replied with fake text.",
            None,
        )
    tools = {t.get("function", {}).get("name") for t in body.get("tools") or []}
    # Act on the user's own words only: a recalled block (an earlier session's episode can
    # quote "USE-TOOL ...") is context, as it is for a real model.
    last_user = RECALL_BLOCK.sub("", last_user)
    if "SUBAGENT-TASK" in last_user and "task" in tools:
        args = {
            "description": "List repo files",
            "prompt": "SUBAGENT-PROMPT: list the files in the repository",
            "subagent_type": "general",
        }
        return ("tool", "task", args)
    m = USE_TOOL.search(last_user)
    if m and (name := _tool_named(tools, m.group(1))):
        try:
            args = json.loads(m.group(2)) if m.group(2) else {}
        except ValueError:
            args = {}
        return ("tool", name, args)
    if "USE-BASH" in last_user and "bash" in tools:
        return ("tool", "bash", {"command": "echo hello-from-fake-tool", "description": "Echo"})
    return ("text", f"FAKE-REPLY #{n}: hello from the fake provider.", None)


class FakeOpenAI:
    """The server; ``requests`` holds every POST as ``{"t", "n", "path", "headers", "body",
    "reply"}`` (``reply`` = the text or ``"tool:<name>"``)."""

    def __init__(self, log_path: Path | None = None) -> None:
        self.log_path = log_path
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeOpenAI:
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- queries used by the tests -------------------------------------------------------------
    def chat_requests(self, session_id: str | None = None) -> list[dict[str, Any]]:
        """Chat-completions requests in arrival order (of one session when given)."""
        with self._lock:
            reqs = [r for r in self.requests if r["path"].rstrip("/").endswith("/chat/completions")]
        if session_id is not None:
            reqs = [r for r in reqs if r["headers"].get("x-session-affinity") == session_id]
        return reqs

    def conversation_requests(self, session_id: str | None = None) -> list[dict[str, Any]]:
        """`chat_requests` without OpenCode's title requests (the small model), which
        carry no memory since the plugin injects only into the main conversation."""
        return [r for r in self.chat_requests(session_id) if not is_title_request(r)]

    def session_ids(self) -> list[str]:
        """Session ids in the order of their first request."""
        seen: list[str] = []
        for r in self.chat_requests():
            sid = r["headers"].get("x-session-affinity")
            if sid and sid not in seen:
                seen.append(sid)
        return seen

    def _record(self, entry: dict[str, Any]) -> int:
        with self._lock:
            entry["n"] = len(self.requests) + 1
            self.requests.append(entry)
            if self.log_path is not None:
                with self.log_path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(entry) + "\n")
            return entry["n"]

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _send_json(self, code: int, obj: Any) -> None:
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    model = {"id": "fake-model", "object": "model", "owned_by": "fake"}
                    return self._send_json(200, {"object": "list", "data": [model]})
                return self._send_json(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                headers = {
                    k.lower(): v for k, v in self.headers.items() if k.lower() in LOGGED_HEADERS
                }
                entry: dict[str, Any] = {
                    "t": time.time(),
                    "path": self.path,
                    "headers": headers,
                    "body": body,
                }
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    fake._record(entry)
                    return self._send_json(404, {"error": {"message": "unsupported path"}})
                with fake._lock:
                    n = len(fake.requests) + 1
                kind, value, args = choose_reply(body, n)
                entry["reply"] = value if kind == "text" else f"tool:{value}"
                fake._record(entry)
                self._reply(body, n, kind, value, args)

            def _reply(
                self, body: dict[str, Any], n: int, kind: str, value: str, args: Any
            ) -> None:
                model = body.get("model", "fake-model")
                cid, created = f"chatcmpl-fake-{n}", int(time.time())
                users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
                prompt_tokens = 42
                if (
                    kind == "text"
                    and users
                    and "OVERFLOW-TOKENS" in json.dumps(users[-1].get("content"))
                    and not value.startswith(SUMMARY_PREFIX)
                    and value != TITLE_REPLY
                ):
                    prompt_tokens = 31000
                out_words = len(value.split()) if kind == "text" else 8
                usage = {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": out_words,
                    "total_tokens": prompt_tokens + out_words,
                }
                if kind == "tool":
                    call = {
                        "id": f"call_fake_{n}",
                        "type": "function",
                        "function": {"name": value, "arguments": json.dumps(args)},
                    }
                    message: dict[str, Any] = {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [call],
                    }
                    finish = "tool_calls"
                else:
                    message = {"role": "assistant", "content": value}
                    finish = "stop"
                if not body.get("stream"):
                    choice = {"index": 0, "message": message, "finish_reason": finish}
                    return self._send_json(
                        200,
                        {
                            "id": cid,
                            "object": "chat.completion",
                            "created": created,
                            "model": model,
                            "choices": [choice],
                            "usage": usage,
                        },
                    )
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                base = {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                }

                def emit(delta: dict[str, Any], finish_reason: str | None = None) -> None:
                    chunk = {
                        **base,
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
                    }
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()

                emit({"role": "assistant", "content": ""})
                if kind == "tool":
                    call = message["tool_calls"][0]
                    emit(
                        {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": call["id"],
                                    "type": "function",
                                    "function": {"name": value, "arguments": ""},
                                }
                            ]
                        }
                    )
                    emit(
                        {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "function": {"arguments": call["function"]["arguments"]},
                                }
                            ]
                        }
                    )
                else:
                    words = value.split(" ")
                    for i, word in enumerate(words):
                        emit({"content": word + (" " if i < len(words) - 1 else "")})
                emit({}, finish)
                tail = {**base, "choices": [], "usage": usage}
                self.wfile.write(f"data: {json.dumps(tail)}\n\ndata: [DONE]\n\n".encode())
                self.wfile.flush()
                self.close_connection = True

        return Handler
