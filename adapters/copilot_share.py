"""Copilot's ``--share`` / ``/share`` markdown export, read back into `Message`s.

The fallback transcript for a session whose events.jsonl holds no messages.
"""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any

from llmem_hooks.events import Message

from .base import make_message, summary_line
from .copilot_jsonl import read_small
from .copilot_tools import SEARCH_TOOLS, SHELL_TOOLS, tool_command, tool_files, tool_summary

DOC_FILE_BYTES = 8 << 20  # checkpoint summaries, --share transcripts

_SHARE_SUB = re.compile(r"^<sub>(.*?)</sub>\s*$")
_SHARE_HEADING = re.compile(r"^###\s+(.*?)\s*$")
_SHARE_ICON = re.compile(r"^(?P<icon>[^\w`]*)(?P<label>.*)$")
_SHARE_SESSION = re.compile(r"Session ID:\**\s*`?([A-Za-z0-9][A-Za-z0-9._-]*)`?")
_SHARE_FILE = re.compile(r"^copilot-session-(.+)\.md$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_WIN_PATH = re.compile(r"^[A-Za-z]:[\\/]")


def _closes(line: str, fence: str) -> bool:
    """Whether ``line`` closes a code block opened with ``fence``."""
    text = line.strip()
    return len(text) >= len(fence) and set(text) == {fence[0]}


def _share_entries(lines: list[str]) -> list[tuple[str, list[str]]]:
    """(heading, body lines) of each ``<sub>time</sub>`` + ``### heading`` entry, with
    fenced blocks kept intact (a ``<sub>`` or ``---`` inside code is content)."""
    entries: list[tuple[str, list[str]]] = []
    fence: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if fence is None and _SHARE_SUB.match(line):
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            heading = _SHARE_HEADING.match(lines[j]) if j < len(lines) else None
            if heading:
                entries.append((heading.group(1), []))
                i = j + 1
                continue
        if entries:
            entries[-1][1].append(line)
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None and _closes(line, fence):
            fence = None
        i += 1
    for _, body in entries:
        while body and (not body[-1].strip() or body[-1].strip() == "---"):
            body.pop()
        while body and not body[0].strip():
            body.pop(0)
    return entries


def _share_tool(name: str, body: list[str]) -> tuple[str, Any, str | None, str | None]:
    """(title, arguments, ``$`` command, path line) of a tool entry's body."""
    title = ""
    args: Any = None
    command: str | None = None
    path: str | None = None
    fence: str | None = None
    block: list[str] = []
    in_args = False
    details = 0
    for line in body:
        stripped = line.strip()
        m = _FENCE.match(line)
        if fence is not None:
            if _closes(line, fence):
                if in_args:
                    with contextlib.suppress(ValueError, RecursionError):
                        args = json.loads("\n".join(block))
                fence, block, in_args = None, [], False
            else:
                block.append(line)
            continue
        if m:
            fence = m.group(1)
            continue
        if stripped.startswith("<details"):
            details += 1
        elif stripped.startswith("</details"):
            details = max(0, details - 1)
        elif stripped.startswith("<summary>"):
            in_args = "Arguments" in stripped
        elif not title and stripped.startswith("**") and stripped.endswith("**"):
            title = stripped.strip("*").strip()
        elif command is None and stripped.startswith("$ "):
            command = stripped[2:].strip()
        elif (
            path is None
            and not details
            and (stripped.startswith(("/", "~")) or _WIN_PATH.match(stripped))
        ):
            path = stripped
    return title, args, command, path


def read_share_transcript(path: str | Path, session_id: str | None = None) -> list[Message]:
    """Messages of a ``--share`` / ``/share`` markdown export (``copilot-session-<id>.md``).

    The fallback for a session whose events.jsonl holds no messages. Entries are
    ``<sub>elapsed</sub>`` + ``### User`` / ``### Copilot`` / ``### `tool` `` (optionally
    with an icon; ❌ marks a failed tool) separated by ``---``; info entries are skipped.
    Ids are ``share-<n>``; times are unknown (the export has only local-time text).
    """
    p = Path(path)
    raw = read_small(p, DOC_FILE_BYTES)
    if raw is None:
        return []
    text = raw.decode("utf-8", errors="replace")
    if session_id is None:
        m = _SHARE_SESSION.search(text) or _SHARE_FILE.match(p.name)
        session_id = m.group(1) if m else ""
    out: list[Message] = []
    for n, (heading, body) in enumerate(_share_entries(text.splitlines()), start=1):
        parts = _SHARE_ICON.match(heading)
        icon, label = (parts.group("icon"), parts.group("label").strip()) if parts else ("", "")
        mid = f"share-{n}"
        content = "\n".join(body).strip()
        if label.lower() == "user" and content:
            out.append(make_message(mid, session_id, "user", [f"User: {content}"], 0))
        elif label.lower() in ("copilot", "assistant") and content:
            out.append(make_message(mid, session_id, "assistant", [f"Assistant: {content}"], 0))
        elif label.lower() == "error" and content:
            line = f"Assistant: Error: {summary_line(content)}"
            out.append(make_message(mid, session_id, "assistant", [line], 0))
        elif len(label) > 2 and label.startswith("`") and label.endswith("`"):
            name = label.strip("`").strip() or "tool"
            title, args, command, where = _share_tool(name, body)
            summary = summary_line(command) if command else tool_summary(name, args)
            summary = summary or summary_line(where or title)
            line = f"Assistant: Tool: {name}" + (f": {summary}" if summary else "")
            line += " [error]" if "❌" in icon else ""
            files = tool_files(name, args)
            if where and name not in SEARCH_TOOLS and name not in SHELL_TOOLS:
                files.append(where)
            commands: list[str] = []
            if name in SHELL_TOOLS:
                commands = [c for c in (tool_command(name, args), command) if c]
            out.append(make_message(mid, session_id, "assistant", [line], 0, files, commands))
    return out
