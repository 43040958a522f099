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
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path

GIT_TIMEOUT_S = 2.0


def git_output(cwd: Path, *args: str) -> str | None:
    """A read-only git command's stripped output in ``cwd`` (None: failed, slow, no git)."""
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
    roots = git_output(cwd, "rev-list", "--max-parents=0", "--all")
    if roots:
        return sorted(roots.split())[0]
    common = git_output(cwd, "rev-parse", "--path-format=absolute", "--git-common-dir")
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


# -- names people know ------------------------------------------------------------------
# The key stays the identity; a person or an agent reads a name: the ``owner/repo`` of the
# repository's remote (origin first), else the repository folder's name (docs/cli.md,
# "Project names"). Only ``[A-Za-z0-9._-]`` segments make a remote name, so nothing of a
# URL's credentials, query or odd characters can reach a screen or a prompt.
MAX_NAME_CHARS = 100
_SEGMENT = re.compile(r"[A-Za-z0-9._-]{1,100}")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_SCP = re.compile(
    r"^(?:[^@/\s]+@)?([^:/\s]+):(?!//)(.+)$"
)  # [user@]host:path (no slash before ':')


def name_from_remote(url: str) -> str | None:
    """``owner/repo`` of a remote URL (https, ssh ``git@host:owner/repo.git`` and
    ``ssh://``), ``.git`` stripped; None for a local path or anything unusual. The last two
    path segments name it (a GitLab subgroup's ``group/sub/repo`` reads ``sub/repo``); what
    precedes the host (``user:token@``) is never looked at."""
    url = url.strip()
    if not url or len(url) > 2048:
        return None
    if _SCHEME.match(url):
        scheme, _, rest = url.partition("://")
        if scheme.lower() == "file":
            return None
        host_part, slash, path = rest.partition("/")
        if not slash or not host_part.rpartition("@")[2]:
            return None
    else:
        m = _SCP.match(url)
        if not m:
            return None
        path = m.group(2)
    path = path.split("?", 1)[0].split("#", 1)[0].strip("/")
    if path.endswith(".git"):
        path = path[: -len(".git")].rstrip("/")
    parts = [p for p in path.split("/") if p]
    if len(parts) < 2:
        return None
    owner, repo = parts[-2], parts[-1]
    if not all(_SEGMENT.fullmatch(p) and p not in (".", "..") for p in (owner, repo)):
        return None
    return f"{owner}/{repo}"


def clean_name(text: str) -> str | None:
    """A name as it may be shown: one line of printable characters, at most
    `MAX_NAME_CHARS`; None when nothing printable is left."""
    flat = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    return flat[:MAX_NAME_CHARS] or None


def _remote_name(cwd: Path) -> str | None:
    listed = git_output(cwd, "config", "--get-regexp", r"^remote\..*\.url$")
    if not listed:
        return None
    urls: dict[str, str] = {}
    for line in listed.splitlines():
        key, _, url = line.partition(" ")
        remote = key[len("remote.") : -len(".url")]
        urls.setdefault(remote, url)
    for remote in sorted(urls, key=lambda r: (r != "origin", r)):
        name = name_from_remote(urls[remote])
        if name:
            return name
    return None


@functools.lru_cache(maxsize=256)
def _name_for(resolved: str) -> str | None:
    cwd = Path(resolved)
    name = _remote_name(cwd)
    if name:
        return name
    common = git_output(cwd, "rev-parse", "--path-format=absolute", "--git-common-dir")
    if common:  # the main worktree's folder, so every worktree of a repository agrees
        path = Path(common)
        folder = path.parent if path.name == ".git" else path
        return clean_name(folder.name.removesuffix(".git"))
    return clean_name(cwd.name)


def project_name(directory: str | os.PathLike[str]) -> str | None:
    """The readable name of a working directory's project (see above); None for a
    directory that does not exist (or has no printable name, like ``/``)."""
    path = Path(directory).expanduser()
    try:
        resolved = str(path.resolve())
    except OSError:
        return None
    if not Path(resolved).is_dir():
        return None
    return _name_for(resolved)


SHORT_KEY_CHARS = 12  # an unnamed root-commit key is shown this long (a unique prefix)
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def project_label(key: str | None, names: Mapping[str, str] | None = None) -> str | None:
    """What to show for a project key: its recorded name (`store.projects`), else a
    root-commit key cut to `SHORT_KEY_CHARS` (``--project`` takes the prefix back), else
    the key as it is (a folder path); None for no project (global)."""
    if key is None:
        return None
    name = (names or {}).get(key)
    if name:
        return name
    return key[:SHORT_KEY_CHARS] if _SHA.fullmatch(key) else key
