"""Where llmem-hooks keeps its files, and the checks that keep those paths safe.

Everything lives under one home directory (``~/.config/llmem`` or ``$LLMEM_HOME``):
``config.yaml``, ``memory.db`` and ``context/``. Folders are created 0700 and files 0600
because memories are private to the user.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from .errors import ValidationError

DIR_MODE = 0o700
FILE_MODE = 0o600


def get_llmem_home() -> Path:
    """The llmem home directory: ``$LLMEM_HOME`` or ``~/.config/llmem``."""
    env = os.environ.get("LLMEM_HOME")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".config" / "llmem"


def get_config_path() -> Path:
    return get_llmem_home() / "config.yaml"


def get_db_path() -> Path:
    return get_llmem_home() / "memory.db"


def get_context_dir(configured: str | None = None) -> Path:
    """The context-file folder: config ``context.dir`` when set, else
    ``<LLMEM_HOME>/context``. One rule for the sidecar, the hooks, the plugin settings
    and the CLI, so they always meet in the same folder."""
    return Path(configured).expanduser() if configured else get_llmem_home() / "context"


def copilot_home(configured: str | None = None) -> Path:
    """Copilot CLI's home: config ``copilot.home``, else ``$COPILOT_HOME``, else
    ``~/.copilot`` (one rule for the adapter, the hook command and the installer)."""
    if configured:
        return Path(configured).expanduser()
    env = os.environ.get("COPILOT_HOME")
    return Path(env).expanduser() if env else Path.home() / ".copilot"


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) if missing and make it 0700."""
    path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    with contextlib.suppress(OSError):  # a directory we do not own: leave it alone
        os.chmod(path, DIR_MODE)
    return path


def write_private_file(path: Path, data: str | bytes) -> None:
    """Write ``data`` atomically (temp file + rename) with mode 0600.

    Readers never see a half-written file, and the file is never world-readable,
    not even for a moment.
    """
    ensure_private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    fd = os.open(tmp, flags, FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def validate_session_id(session_id: str) -> str:
    """Return ``session_id`` if it is safe to use in a file name, else raise.

    Session ids end up in context file paths, so ``/``, ``\\`` and ``..`` are rejected
    to prevent path traversal.
    """
    if not isinstance(session_id, str) or not session_id.strip():
        raise ValidationError("session id must be a non-empty string")
    if "/" in session_id or "\\" in session_id or ".." in session_id or "\x00" in session_id:
        raise ValidationError(
            f"invalid session id {session_id!r}: must not contain '/', '\\' or '..'"
        )
    if len(session_id) > 256:
        raise ValidationError("session id is longer than 256 characters")
    return session_id
