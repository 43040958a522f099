"""Copilot's tool-call vocabulary: one-line summaries, touched files and shell commands.

Shared by the two transcript readers, `events.jsonl` (`copilot`) and the ``--share``
markdown export (`copilot_share`), so a tool call reads the same from either.
"""

from __future__ import annotations

from typing import Any

from llmem_hooks.events import FileTouch

from .base import (
    COMMAND_CHARS,
    PATCH_FILE,
    as_dict,
    file_touch,
    patch_touches,
    summary_line,
)

SHELL_TOOLS = frozenset({"bash", "shell", "powershell", "pwsh", "sh", "zsh"})
SEARCH_TOOLS = frozenset({"grep", "glob", "rg", "search", "find", "ls"})  # path = where to look
WRITE_TOOLS = frozenset({"create", "write", "write_file"})
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


def tool_touches(name: str, args: Any) -> list[FileTouch]:
    """What a tool call says about the files it touched (Copilot CLI 1.0.102's tools):
    ``view`` {path, view_range: [start, end] (1-based; end -1: to the end)}, ``edit``
    {path, old_str, new_str}, ``create`` {path, file_text} (the whole file: no text kept),
    ``apply_patch`` (a patch text). Search tools touch no file."""
    if isinstance(args, str):
        return patch_touches(args) if "*** Begin Patch" in args else []
    args = as_dict(args)
    out: list[FileTouch] = []
    for value in args.values():
        if isinstance(value, str) and "*** Begin Patch" in value:
            out.extend(patch_touches(value))
    if name in SEARCH_TOOLS:
        return out
    path = next((args[k] for k in _FILE_KEYS if isinstance(args.get(k), str)), None)
    view = args.get("view_range")
    if isinstance(view, list) and len(view) == 2:
        start, end = view
        touch = file_touch(path, "read", start, None if end == -1 else end)
    elif "new_str" in args:
        touch = file_touch(path, "edit", text=args.get("new_str"))
    elif name in WRITE_TOOLS or "file_text" in args:
        touch = file_touch(path, "write")
    else:
        touch = file_touch(path, "read")
    return [*out, touch] if touch else out


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
