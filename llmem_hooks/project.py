"""Project identity: one key per repository, whichever agent works in it.

OpenCode's project id is the SHA of the repository's root commit (the lowest when there
are several), so that is our key too: every worktree and every clone of a repository
shares it, and a memory learned in OpenCode is found from Copilot CLI in the same repo.
A repository without commits falls back to its main worktree's top-level folder; a
folder outside git to its resolved path.
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

GIT_TIMEOUT_S = 2.0


def _git(cwd: Path, *args: str) -> str | None:
    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


@functools.lru_cache(maxsize=256)
def _key_for(resolved: str) -> str:
    cwd = Path(resolved)
    roots = _git(cwd, "rev-list", "--max-parents=0", "--all")
    if roots:
        return sorted(roots.split())[0]
    common = _git(cwd, "rev-parse", "--path-format=absolute", "--git-common-dir")
    if common:  # no commits yet: the main worktree's folder (the parent of .git)
        path = Path(common)
        return str(path.parent if path.name == ".git" else path)
    return resolved


def project_key(directory: str | os.PathLike[str]) -> str:
    """The project key for a working directory (see the module docstring)."""
    path = Path(directory).expanduser()
    try:
        resolved = str(path.resolve())
    except OSError:
        resolved = str(path.absolute())
    if not Path(resolved).is_dir():
        return resolved
    return _key_for(resolved)


def session_project(native_project_id: str | None, directory: str | None) -> str | None:
    """The key for a session: the agent's own id when it is the root-commit SHA (OpenCode),
    else derived from the directory; None when neither is known (global only)."""
    if native_project_id and native_project_id != "global":
        return native_project_id
    if directory:
        return project_key(directory)
    return None
