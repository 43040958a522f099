"""Where llmem-hooks keeps its files, and the checks that keep those paths safe.

Everything lives under one home directory (``~/.config/llmem`` or ``$LLMEM_HOME``):
``config.yaml``, ``memory.db`` and ``context/``. Folders we create are 0700 and files
0600 because memories are private to the user. A folder we did not create (the one a
user names for ``export``, ``--db`` or in config.yaml) is never chmodded, and we never
chmod or write through a symlink: ``os.chmod`` and ``open`` follow links, so a planted
link would let us change a file that is not ours.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from .errors import ValidationError
from .home import llmem_home_dir

DIR_MODE = 0o700
FILE_MODE = 0o600

# Folders of the operating system (the one list: config paths and the OpenCode adapter
# both use `is_system_path`): a configured path under one of these is refused
# before anything touches the file system (a typo or a hostile config.yaml must not
# create, chmod or open files there, least of all as root).
SYSTEM_DIRS: tuple[str, ...] = (
    "/etc",
    "/usr",
    "/var",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/boot",
    "/sys",
    "/proc",
    "/dev",
    "/run",
    "/srv",
    "/snap",
    "/System",
    "/Library",
    "/Applications",
    "/private/etc",
    "/private/var",
    "/cores",
)
# Per-user temp and runtime folders inside those (macOS temp dirs live in /var/folders).
SYSTEM_DIR_EXCEPTIONS: tuple[str, ...] = (
    "/var/folders",
    "/private/var/folders",
    "/var/tmp",
    "/private/var/tmp",
    "/run/user",
)

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def get_llmem_home() -> Path:
    """The llmem home directory: ``$LLMEM_HOME`` or ``~/.config/llmem``, always absolute
    (the rule is `home.llmem_home_dir`'s)."""
    return Path(llmem_home_dir())


def get_config_path() -> Path:
    return get_llmem_home() / "config.yaml"


def get_db_path() -> Path:
    return get_llmem_home() / "memory.db"


# The Copilot hook's per-session files in the context folder, beside the context file and
# the resume pack (session/context.py): the resume pack's injection marker and the recall lock.
# Session retention removes them with the session (`context.remove_session_files`).
COMPACT_MARKER_SUFFIX = ".compact.injected"
RECALL_LOCK_SUFFIX = ".recall.lock"


def get_context_dir(configured: str | None = None) -> Path:
    """The context-file folder: config ``context.dir`` when set, else
    ``<LLMEM_HOME>/context``. One rule for the sidecar, the hooks, the plugin settings
    and the CLI, so they always meet in the same folder. A relative ``context.dir`` is
    relative to LLMEM_HOME."""
    return resolve_user_path(configured) if configured else get_llmem_home() / "context"


def copilot_home(configured: str | None = None) -> Path:
    """Copilot CLI's home: config ``copilot.home``, else ``$COPILOT_HOME``, else
    ``~/.copilot`` (one rule for the adapter, the hook command and the installer)."""
    if configured:
        return Path(configured).expanduser()
    env = os.environ.get("COPILOT_HOME")
    return Path(env).expanduser() if env else Path.home() / ".copilot"


# -- user-given paths ------------------------------------------------------------------------
def resolve_user_path(value: str | os.PathLike[str]) -> Path:
    """``value`` with ``~`` expanded; a relative path is relative to LLMEM_HOME (not to
    wherever a command happens to run), so every process finds the same file."""
    path = Path(value).expanduser()
    if not path.is_absolute():
        path = get_llmem_home() / path
    return Path(os.path.abspath(path))


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix.rstrip("/") + "/")


def is_system_path(path: Path | str) -> bool:
    """True if ``path`` (as written, and with symlinks resolved) is the root folder, a
    file directly in it, or lies under one of `SYSTEM_DIRS` (temp folders excepted).
    Only reads the file system (``realpath``)."""
    spelled = os.path.abspath(os.fspath(path))
    for form in {spelled, os.path.realpath(spelled)}:
        if form == "/" or (os.path.dirname(form) == "/" and not os.path.isdir(form)):
            return True
        if any(_under(form, d) for d in SYSTEM_DIR_EXCEPTIONS):
            continue
        if any(_under(form, d) for d in SYSTEM_DIRS):
            return True
    return False


def check_user_path(value: str | os.PathLike[str], kind: str, what: str) -> Path:
    """Validate a path a user gave (``kind`` "file" or "dir"), before anything is created,
    opened or chmodded: resolved as in `resolve_user_path`, refused under a system
    folder, refused if it exists and is not a regular file / a directory (a symlink is
    judged by its target, which is also checked for system folders)."""
    path = resolve_user_path(value)
    if is_system_path(path):
        raise ValidationError(f"{what}: {path} is in a system folder; choose a path of your own")
    try:
        st = path.stat()
    except FileNotFoundError:
        return path
    except OSError as exc:
        raise ValidationError(f"{what}: cannot use {path}: {exc.strerror or exc}") from None
    if kind == "file" and not stat.S_ISREG(st.st_mode):
        raise ValidationError(f"{what}: {path} exists and is not a regular file")
    if kind == "dir" and not stat.S_ISDIR(st.st_mode):
        raise ValidationError(f"{what}: {path} exists and is not a directory")
    return path


# -- creating private folders and files -------------------------------------------------------
def _is_ours(path: Path) -> bool:
    """LLMEM_HOME and what lies inside it are ours to make private; never $HOME itself, a
    system folder or a shared folder (sticky or world-writable, like /tmp), whatever
    LLMEM_HOME says."""
    home = get_llmem_home()
    p = Path(os.path.abspath(path))
    if p == Path.home() or is_system_path(p):
        return False
    try:
        mode = os.lstat(p).st_mode
    except OSError:
        return False
    if mode & (stat.S_ISVTX | stat.S_IWOTH):
        return False
    return p == home or home in p.parents


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) 0700. An existing folder is made 0700 only
    if it is LLMEM_HOME or inside it; a folder we did not create (an export target, a
    configured db folder) is left as it is, and a symlink is never chmodded."""
    path = Path(path)
    missing: list[Path] = []
    p = Path(os.path.abspath(path))
    while not os.path.lexists(p) and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            d.mkdir(mode=DIR_MODE)
            with contextlib.suppress(OSError):
                os.chmod(d, DIR_MODE, follow_symlinks=False)  # the umask may have masked it
    if not path.is_dir():
        raise NotADirectoryError(f"{path} is not a directory")
    if not missing and _is_ours(path) and not path.is_symlink():
        with contextlib.suppress(OSError):  # a directory we do not own: leave it alone
            os.chmod(path, DIR_MODE)
    return path


def open_private_temp(directory: Path, name: str, mode: int = FILE_MODE) -> tuple[int, Path]:
    """A new temp file next to ``name`` in ``directory`` for an atomic write: a random
    name, created with ``O_CREAT|O_EXCL|O_NOFOLLOW`` (never an existing file or a planted
    symlink), mode ``mode`` (0600 unless told) whatever the umask. Returns (fd, path);
    the caller writes, fsyncs, renames over the target, or unlinks on failure."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    for _ in range(16):
        tmp = Path(directory) / f".{name}.{os.urandom(8).hex()}.tmp"
        try:
            fd = os.open(tmp, flags, mode)
        except FileExistsError:
            continue
        try:
            os.fchmod(fd, mode)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        return fd, tmp
    raise FileExistsError(f"cannot create a temp file in {directory}")


def write_atomic(path: Path, data: str | bytes, mode: int = FILE_MODE) -> None:
    """Write ``data`` to ``path`` via `open_private_temp` and a rename: readers never see a
    half-written file, the file never has a wider mode than ``mode``, and the rename
    replaces a symlink at ``path`` instead of writing through it."""
    fd, tmp = open_private_temp(path.parent, path.name, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_private_file(path: Path, data: str | bytes) -> None:
    """Write ``data`` atomically with mode 0600 (creating the folder 0700 if missing)."""
    ensure_private_dir(path.parent)
    write_atomic(path, data, FILE_MODE)


def read_regular_file(path: Path, limit: int | None = None) -> str | None:
    """The text of ``path`` (at most ``limit`` characters), or None if it does not exist.

    Opened with ``O_NOFOLLOW`` and checked to be a regular file: a symlink planted in
    our context folder must not make us print someone else's file."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        if os.path.islink(path):
            raise ValidationError(f"{path} is a symlink; not following it") from None
        raise exc
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise ValidationError(f"{path} is not a regular file")
        raw = fh.read(None if limit is None else limit * 4)
    text = raw.decode("utf-8", errors="replace")
    return text if limit is None else text[:limit]


def read_bounded_text(path: Path, limit: int) -> str:
    """The UTF-8 text of a file a user hands us (config.yaml, an import file), at most
    ``limit`` bytes. Each way it cannot be read is a ValueError whose message is one line
    naming the file, so callers turn it into their own one-line error, never a traceback."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(limit + 1)
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(raw) > limit:
        raise ValueError(f"{path} is larger than {limit:,} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not UTF-8 text (bad byte at offset {exc.start})") from None


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
