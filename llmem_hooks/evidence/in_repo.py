"""A file path as a tool saw it, made repository-relative (the key of file recall).

Agents name files absolute or relative to their working directory; memory keys them by
the path inside the repository of the session's directory (`evidence.cite`'s form), so
the same file reads the same from any subfolder and any clone. The repository's top is
found by looking for ``.git`` upwards (no ``git`` process: this runs on every read or
edit tool call), cached per folder. A path outside that repository (``../``, another
absolute folder, a symlink leading out) has no key.
"""

from __future__ import annotations

import functools
import os

from ..errors import ValidationError
from .cite import MAX_PATH, check_path

MAX_TOOL_PATH = 4096  # the longest path a tool's argument may carry that we look at


@functools.lru_cache(maxsize=512)
def work_tree(directory: str) -> str | None:
    """The top folder (real path) of the git work tree holding ``directory`` (None:
    not in one). A ``.git`` folder or file (worktrees, submodules) marks the top."""
    try:
        here = os.path.realpath(directory)
    except (OSError, ValueError):
        return None
    while True:
        if os.path.exists(os.path.join(here, ".git")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def check_tool_path(path: object) -> str:
    """``path`` if a tool's file argument we may look at, else ValidationError (one line)."""
    if not isinstance(path, str) or not path.strip():
        raise ValidationError("path must be a non-empty string")
    if len(path) > MAX_TOOL_PATH:
        raise ValidationError(f"path is longer than {MAX_TOOL_PATH} characters")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in path):
        raise ValidationError("path must not hold control characters")
    return path


def relative(directory: str | None, path: str) -> str | None:
    """``path`` (absolute, or relative to ``directory``) as a path inside the repository
    of ``directory`` (for an absolute path without a directory: its own folder's), or
    None when there is none or the file is outside it."""
    path = check_tool_path(path)
    if directory is not None and not os.path.isabs(directory):
        return None
    if not os.path.isabs(path):
        if directory is None:
            return None
        path = os.path.join(directory, path)
    root = work_tree(directory if directory is not None else os.path.dirname(path))
    if root is None:
        return None
    try:
        target = os.path.realpath(path)
    except (OSError, ValueError):
        return None
    rel = os.path.relpath(target, root)
    if rel == "." or rel.startswith(".." + os.sep) or rel == ".." or os.path.isabs(rel):
        return None
    rel = rel.replace(os.sep, "/")
    if len(rel) > MAX_PATH:
        return None
    try:
        return check_path(rel)
    except ValidationError:
        return None


def touched_paths(directory: str | None, files: list[str] | tuple[str, ...]) -> list[str]:
    """The repository-relative paths of ``files`` a session in ``directory`` touched
    (those outside its repository, or unusable, left out; nothing without a directory)."""
    if not directory:
        return []
    out: list[str] = []
    for f in files:
        try:
            rel = relative(directory, f)
        except ValidationError:
            continue
        if rel is not None:
            out.append(rel)
    return list(dict.fromkeys(out))
