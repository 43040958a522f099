"""`llmem-hooks mcp`: the memory tools as an MCP server on stdio.

Five tools, the same in every agent: ``memory_search``, ``memory_remember``,
``memory_forget``, ``memory_get``, ``memory_timeline``. Each one is a single call of the
query service (the sidecar's socket, else a `QueryService` kept in this process:
`ServiceCall`), behind one seam, `Call`, so the server holds no memory logic of its own:
redaction, dedupe and project scoping happen where they happen for everything else.

Results are compact text (one line per memory, with the short id `memory_get` takes),
not JSON: they are read by a model, and every token of a tool result is context.

Built on the official ``mcp`` Python SDK 1.x (``FastMCP``; 2.x renamed it), imported
only when the server starts so the other commands stay fast.

Which project: an MCP server cannot ask Copilot CLI for the session's folder (it sends no
MCP roots) and a plugin's server runs in the plugin's folder, so the directory is, in
order: ``--project-dir``, ``$LLMEM_PROJECT_DIR``, the folder of the Copilot session named
by ``$COPILOT_AGENT_SESSION_ID`` (Copilot sets it for every MCP server it starts), else the
working directory.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..markers import neutralize
from ..text.lines import clip
from ..timestamps import for_people
from .mcp_front import LONE_SURROGATE_MARK
from .tool_wording import (
    description,
    input_schema,
    tool_annotations,
    tool_wording,
    type_choices,
)

if TYPE_CHECKING:
    from mcp.server.fastmcp import FastMCP

SERVER_NAME = "llmem-hooks"  # what initialize reports (the agents' config key is "llmem")
PROJECT_ENV = "LLMEM_PROJECT_DIR"
COPILOT_SESSION_ENV = "COPILOT_AGENT_SESSION_ID"
LINE_CHARS = 200  # one line per hit in search/timeline results

# Methods scoped to the caller's project (its directory is added to their params).
SCOPED = frozenset({"search", "remember", "get", "forget", "timeline"})

Call = Callable[[str, dict[str, Any]], Mapping[str, Any]]
"""``call(method, params) -> result``: the query-service seam (tests may pass their own)."""

INSTRUCTIONS = (
    "Long-term memory of this project, shared by every coding session and agent: decisions, "
    "conventions, commands that worked, earlier failures and their fixes, the user's "
    "preferences. Search it before answering about the project's past; remember what a "
    "later session should know."
)

# The tools' wording has one source, tools.json (`tool_wording`), which the OpenCode plugin
# carries too: the same tools in both agents.
TOOLS = tuple(tool_wording())
SEARCH_DESC = description("memory_search")
REMEMBER_DESC = description("memory_remember")
FORGET_DESC = description("memory_forget")
GET_DESC = description("memory_get")
TIMELINE_DESC = description("memory_timeline")
PASSAGE_CHARS = 300  # the passage of a search hit in its structured content
# Clients that hand the model a tool's structured content as JSON after its text (Copilot
# CLI 1.0.102, tests/e2e/test_copilot_recall_e2e.py): the model would read every hit twice,
# so they get the text alone.
TEXT_ONLY_CLIENTS = frozenset({"copilot-cli"})


# -- the project -----------------------------------------------------------------------------
def copilot_session_dir(session_id: str) -> str | None:
    """The working directory of Copilot CLI session ``session_id`` (its ``session.start``
    line or workspace.yaml), or None."""
    from ..adapters.copilot import CopilotAdapter
    from ..events import session_id_problem

    if session_id_problem(session_id) is not None:
        return None
    try:
        info = CopilotAdapter().get_session(session_id)
    except Exception:  # an unreadable Copilot home is not our problem to report here
        return None
    return info.directory if info is not None else None


def project_dir(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The directory whose project the tools work in (see the module docstring)."""
    return ProjectDir(explicit, environ)()


class ProjectDir:
    """`project_dir`, asked at each tool call: the server starts with Copilot CLI, before
    the session's ``events.jsonl`` exists, so a session not found yet is looked for
    again next time (and kept once found)."""

    def __init__(self, explicit: str | None = None, environ: Mapping[str, str] | None = None):
        env = os.environ if environ is None else environ
        self.fixed: str | None = None
        if explicit:
            self.fixed = str(Path(explicit).expanduser().absolute())
        elif env.get(PROJECT_ENV):
            self.fixed = str(Path(env[PROJECT_ENV]).expanduser().absolute())
        self.session_id = env.get(COPILOT_SESSION_ENV) or None

    def __call__(self) -> str:
        if self.fixed is None and self.session_id:
            self.fixed = copilot_session_dir(self.session_id)
        return self.fixed or os.getcwd()


# -- rendering -------------------------------------------------------------------------------
def _line(text: Any) -> str:
    """One line of a tool result, markers defused, at most `LINE_CHARS`."""
    return clip(neutralize(str(text or "")), LINE_CHARS, "…")


def _date(value: Any) -> str:
    return str(value or "")[:10]


def _entry_line(item: Mapping[str, Any]) -> str:
    """``[id] (type, date) line``: the form of the recall block, so ids look the same."""
    text = item.get("line") or item.get("content") or item.get("summary") or ""
    meta = ", ".join(p for p in (str(item.get("type") or ""), _date(item.get("created_at"))) if p)
    head = f"[{item.get('id', '?')}]" + (f" ({meta})" if meta else "")
    if item.get("citation_state") == "stale":  # its cited code changed: shown, marked
        head += f" [stale: {_line(item.get('stale_reason') or 'the cited code changed')}]"
    marker = " <-" if item.get("focus") or item.get("anchor") else ""
    return f"- {head} {_line(text)}{marker}"


def render_search(result: Mapping[str, Any], query: str | None) -> str:
    hits = list(result.get("results") or [])
    if result.get("path"):  # search with a path: what is known about that file
        about = _line(result["path"]) + (f" matching {query!r}" if query else "")
        if not hits:
            return f"Nothing known about {about}."
        lines = [f"{len(hits)} memories about {about}, citing it then episodes that touched it:"]
        return "\n".join([*lines, *(_entry_line(h) + _cite_mark(h) for h in hits)])
    if not hits:
        return f"No memory matches {query!r}."
    lines = [f"{len(hits)} memories for {query!r} (full text: memory_get):"]
    lines += [_entry_line(h) for h in hits]
    return "\n".join(lines)


def _cite_mark(hit: Mapping[str, Any]) -> str:
    """`` (stale: why)`` for a hit whose citations no longer hold; '' otherwise."""
    if hit.get("citation_state") != "stale":
        return ""
    return " (stale: " + _line(hit.get("citations") or "the cited code changed") + ")"


def _project_label(name: Any) -> str | None:
    """A project's name as data an agent reads: one line, our markers defused (a folder
    can be called anything)."""
    return None if name is None else neutralize(" ".join(str(name).split()))[:200]


def search_structured(result: Mapping[str, Any]) -> dict[str, Any]:
    """The hits of a search as data a client can render: id, type, project, time, score
    and a short passage each, best first."""
    hits = []
    for h in result.get("results") or ():
        score = h.get("score")
        hits.append(
            {
                "id": str(h.get("id") or ""),
                "type": str(h.get("type") or ""),
                "project": _project_label(h.get("project_name") or h.get("project")),
                "created_at": h.get("created_at"),
                "score": round(float(score), 4) if isinstance(score, (int, float)) else None,
                "passage": clip(
                    neutralize(str(h.get("line") or h.get("content") or "")), PASSAGE_CHARS, "…"
                ),
            }
        )
        if h.get("citation_state") == "stale":
            hits[-1]["citation_state"] = "stale"
            hits[-1]["stale_reason"] = _line(h.get("stale_reason"))
    return {"results": hits}


def render_remember(result: Mapping[str, Any]) -> str:
    status = str(result.get("status") or "stored")
    mid = result.get("id")
    shared = {True: " Shared with the team.", False: f" Not shared: {result.get('share_note')}."}
    note = shared.get(result["shared"]) if isinstance(result.get("shared"), bool) else ""
    if status == "stored":
        return f"Stored as [{mid}].{note or ''}"
    if status == "duplicate":
        return f"Already known as [{mid}] (merged, nothing new stored).{note or ''}"
    reason = str(result.get("reason") or result.get("message") or "not accepted").rstrip(".")
    raise ToolFailure(f"Not stored: {reason}; rephrase it as one self-contained statement")


def render_forget(result: Mapping[str, Any], mid: str) -> str:
    return f"Forgot [{result.get('id') or mid}]."


def render_get(result: Mapping[str, Any]) -> str:
    items = list(result.get("memories") or result.get("results") or [])
    missing = [
        f"{m.get('id')} ({m.get('reason')})" if isinstance(m, Mapping) else str(m)
        for m in result.get("missing") or ()
    ]
    blocks: list[str] = []
    for m in items:
        prov = [
            f"{k}: {for_people(m[k]) if k == 'created_at' else m[k]}"
            for k in (
                *("type", "agent", "session_id", "created_at", "project", "source", "tags"),
                *("citation_state", "citations"),
            )
            if m.get(k) not in (None, "", [])
        ]  # the time as a person reads it: local, to the minute (the stored value: --json)
        body = neutralize(str(m.get("content") or m.get("text") or ""))
        blocks.append(f"[{m.get('id', '?')}] " + "; ".join(prov) + "\n" + body.strip())
    if not blocks:
        raise ToolFailure(
            "Not found: "
            + ("; ".join(missing) or "no such memory")
            + "; find ids with memory_search"
        )
    if missing:
        blocks.append("Not found: " + "; ".join(missing))
    return neutralize("\n\n".join(blocks))


def render_timeline(result: Mapping[str, Any], mid: str) -> str:
    entries = list(result.get("items") or result.get("entries") or [])
    if not entries:
        return f"No timeline around [{mid}]."
    head = f"Session {result['session_id']}" if result.get("session_id") else "Timeline"
    return "\n".join([f"{head} around [{mid}] (<- marks it):", *map(_entry_line, entries)])


# -- the server ------------------------------------------------------------------------------
class ServiceCall:
    """The default seam: a kept `service.client.Client` (the sidecar's socket at every
    call, else a `QueryService` of this process, opened on first need and kept for the
    server's life), plus the project directory, and for Copilot CLI the session id and
    agent, where the service takes them."""

    def __init__(self, directory: Callable[[], str]) -> None:
        from ..service.client import Client

        self.directory = directory
        self.session_id = os.environ.get(COPILOT_SESSION_ENV) or None
        self.client = Client(keep=True)

    def __call__(self, method: str, params: dict[str, Any]) -> Mapping[str, Any]:
        params = dict(params)
        if method in SCOPED:
            params.setdefault("directory", self.directory())
        if method == "remember" and self.session_id:
            params.setdefault("session_id", self.session_id)
            params.setdefault("agent", "copilot")
        return self.client(method, params)

    def close(self) -> None:
        self.client.close()


def _reach(params: dict[str, Any], any_project: bool) -> dict[str, Any]:
    if any_project:
        params["any_project"] = True
    return params


def _checked(call: Call) -> Call:
    """``call``, refusing arguments that held a lone UTF-16 surrogate (`mcp_front.guard_line`
    marked them): the tool answers with an error result, as for any bad argument."""

    def checked(method: str, params: dict[str, Any]) -> Mapping[str, Any]:
        if LONE_SURROGATE_MARK in json.dumps(params, ensure_ascii=False):
            raise ValueError("an argument holds a lone UTF-16 surrogate (a cut character)")
        return call(method, params)

    return checked


class ToolFailure(Exception):
    """A tool call that failed in a way the agent can act on: its one line is the tool's
    error result (``isError``)."""


ERROR_CHARS = 400


def _error(text: str) -> str:
    return clip(neutralize(" ".join(text.split())), ERROR_CHARS, "…")


def one_line_error(tool: str, exc: BaseException) -> str:
    """``exc`` as one line that says what went wrong and what to do: never a traceback or
    a multi-line validation dump."""
    import jsonschema

    if isinstance(exc, jsonschema.ValidationError):
        where = ".".join(str(p) for p in exc.absolute_path)
        what = f"{where}: {exc.message}" if where else exc.message
        return _error(f"{tool}: invalid arguments: {what}; fix it and call again (see the schema)")
    if isinstance(exc, ToolFailure):
        return _error(str(exc))
    text = " ".join(str(exc).split()) or type(exc).__name__
    code = getattr(exc, "code", "")
    if code == "not_found" or type(exc).__name__ == "NotFoundError":
        return _error(f"Not found: {text}; find ids with memory_search")
    return _error(f"{tool} failed: {text}")


def _pre_parsed(arguments: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` with a list sent as a JSON string (some clients do) read as a list."""
    out = dict(arguments)
    for name, prop in (schema.get("properties") or {}).items():
        value = out.get(name)
        if prop.get("type") == "array" and isinstance(value, str) and value.startswith("["):
            try:
                parsed = json.loads(value)
            except ValueError:
                continue
            if isinstance(parsed, list):
                out[name] = parsed
    return out


def _client_name(server: FastMCP) -> str:
    """The ``clientInfo.name`` the client gave in ``initialize`` ("" if unknown)."""
    try:
        params = server.get_context().session.client_params
        return str(params.clientInfo.name) if params is not None else ""
    except Exception:  # no request in progress, or a client that sent no info
        return ""


def build_server(call: Call) -> FastMCP:
    """A `FastMCP` server whose five tools each make one ``call``; their schemas,
    descriptions and annotations come from tools.json (`tool_wording`), the types from the
    registry, and every call is checked against its schema before it runs."""
    import jsonschema
    from mcp.server.fastmcp import FastMCP
    from mcp.server.fastmcp.exceptions import ToolError
    from mcp.types import CallToolResult, ContentBlock, TextContent, ToolAnnotations

    from .. import __version__

    call = _checked(call)
    types = type_choices()

    class Server(FastMCP):  # type: ignore[type-arg]
        async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
            tool = self._tool_manager.get_tool(name)
            if tool is None:
                raise ToolFailure(f"unknown tool {name!r}; the tools are {', '.join(TOOLS)}")
            arguments = _pre_parsed(arguments or {}, tool.parameters)
            if LONE_SURROGATE_MARK in json.dumps(arguments, ensure_ascii=False):
                raise ToolFailure(
                    f"{name}: an argument holds a lone UTF-16 surrogate (a cut character); "
                    "send it again as valid text"
                )
            try:
                jsonschema.validate(arguments, tool.parameters)
                return await super().call_tool(name, arguments)
            except jsonschema.ValidationError as exc:
                raise ToolFailure(one_line_error(name, exc)) from None
            except ToolError as exc:
                raise ToolFailure(one_line_error(name, exc.__cause__ or exc)) from None

    server = Server(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")
    server._mcp_server.version = __version__  # initialize reports ours, not the SDK's

    def memory_search(
        query: str | None = None, limit: int = 10, type: str | None = None, path: str | None = None
    ) -> Any:
        params: dict[str, Any] = {"limit": int(limit)}
        for key, value in (("query", query), ("type", type), ("path", path)):
            if value:
                params[key] = value
        if path is None and not query:
            raise ToolFailure("memory_search needs a query, or a path to ask about a file")
        result = call("search", params)
        text: list[ContentBlock] = [TextContent(type="text", text=render_search(result, query))]
        if _client_name(server) in TEXT_ONLY_CLIENTS:
            return CallToolResult(content=text)
        return CallToolResult(content=text, structuredContent=search_structured(result))

    def memory_remember(
        content: str,
        type: str | None = None,
        tags: list[str] | None = None,
        share: bool = False,
        citations: list[str] | None = None,
    ) -> str:
        params: dict[str, Any] = {"content": content}
        if type:
            params["type"] = type
        if tags:
            params["tags"] = list(tags)
        if share:
            params["share"] = True
        if citations:
            params["citations"] = list(citations)
        return render_remember(call("remember", params))

    def memory_forget(id: str, reason: str, any_project: bool = False) -> str:
        params = _reach({"id": id, "reason": reason}, any_project)
        return render_forget(call("forget", params), id)

    def memory_get(ids: list[str], any_project: bool = False) -> str:
        return render_get(call("get", _reach({"ids": list(ids)}, any_project)))

    def memory_timeline(id: str, any_project: bool = False) -> str:
        return render_timeline(call("timeline", _reach({"id": id}, any_project)), id)

    for fn in (memory_search, memory_remember, memory_forget, memory_get, memory_timeline):
        name = fn.__name__
        server.add_tool(
            fn,
            name=name,
            description=description(name),
            annotations=ToolAnnotations.model_validate(tool_annotations(name)),
            structured_output=False,
        )
        server._tool_manager._tools[name].parameters = input_schema(name, types)
    return server


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2, like every other command
        print(f"error: {message} (see llmem-hooks mcp --help)", file=sys.stderr)
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="llmem-hooks mcp",
        description="Serve the memory tools (memory_search, memory_remember, memory_forget, "
        "memory_get, memory_timeline) over MCP on stdio. See docs/mcp.md.",
    )
    p.add_argument(
        "--project-dir",
        help="the project folder (default: $LLMEM_PROJECT_DIR, the Copilot CLI session's "
        "folder, else the working directory)",
    )
    return p


def default_server() -> tuple[FastMCP, ServiceCall]:
    """The server as ``llmem-hooks mcp`` without arguments serves it, and its seam (to
    close at the end): built by `mcp_front.serve_default` at the first message only the
    SDK server can answer."""
    seam = ServiceCall(ProjectDir())
    return build_server(seam), seam


def main(argv: Sequence[str]) -> int:
    """Run the server until the client closes stdin. Usage errors exit 2."""
    try:
        args = _parser().parse_args(list(argv))
    except SystemExit as exc:  # --help (0) or a usage error (2)
        return int(exc.code or 0)
    if args.project_dir and not Path(args.project_dir).expanduser().is_dir():
        print(f"error: --project-dir {args.project_dir!r} is not a folder", file=sys.stderr)
        return 2
    seam = ServiceCall(ProjectDir(args.project_dir))
    from .mcp_front import serve  # answers initialize and tools/list before the SDK loads

    try:
        return serve(lambda: build_server(seam), __file__)
    finally:
        seam.close()
