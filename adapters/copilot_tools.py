"""Copilot's tool-call vocabulary: one-line summaries, touched files and shell commands.

Shared by the two transcript readers, `events.jsonl` (`copilot`) and the ``--share``
markdown export (`copilot_share`), so a tool call reads the same from either.
"""

from __future__ import annotations

from typing import Any

from .base import COMMAND_CHARS, PATCH_FILE, as_dict, summary_line

SHELL_TOOLS = frozenset({"bash", "shell", "powershell", "pwsh", "sh", "zsh"})
SEARCH_TOOLS = frozenset({"grep", "glob", "rg", "search", "find", "ls"})  # path = where to look
_FILE_KEYS = ("path", "file_path", "filePath", "filename", "file")
_SUMMARY_KEYS = (
    "command",
    "pattern",
    "path",
    "file_path",
    "filePath",
    "url",
    "query",
    "description",
    "skill",
    "prompt",
)


def _patch_files(text: str) -> list[str]:
    return [f.strip() for f in PATCH_FILE.findall(text) if f.strip()]


def tool_summary(name: str, args: Any) -> str:
    """A one-line description of a tool call's arguments (command, path, pattern, ...)."""
    if isinstance(args, str):
        files = _patch_files(args)
        return summary_line(", ".join(files) if files else args)
    args = as_dict(args)
    for key in _SUMMARY_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return summary_line(value)
    for value in args.values():  # e.g. apply_patch {"input": "*** Begin Patch ..."}
        if isinstance(value, str) and "*** Begin Patch" in value:
            return summary_line(", ".join(_patch_files(value)))
    return ""


def tool_files(name: str, args: Any) -> list[str]:
    """Files a tool call reads or writes: path-like arguments and patch headers."""
    if isinstance(args, str):
        return _patch_files(args)
    args = as_dict(args)
    out: list[str] = []
    if name not in SEARCH_TOOLS:
        for key in _FILE_KEYS:
            value = args.get(key)
            if isinstance(value, str) and value.strip():
                out.append(value.strip())
        paths = args.get("paths")
        if isinstance(paths, list):
            out.extend(p.strip() for p in paths if isinstance(p, str) and p.strip())
    for value in args.values():
        if isinstance(value, str) and "*** Begin Patch" in value:
            out.extend(_patch_files(value))
    return out


def tool_command(name: str, args: Any) -> str | None:
    """The command line of a shell tool call."""
    command = as_dict(args).get("command") if name in SHELL_TOOLS else None
    if isinstance(command, str) and command.strip():
        return command.strip()[:COMMAND_CHARS]
    return None


def _tool_line(name: str, args: Any, failed: bool) -> str:
    summary = tool_summary(name, args)
    line = f"Assistant: Tool: {name}" + (f": {summary}" if summary else "")
    return line + (" [error]" if failed else "")
