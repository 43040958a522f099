"""The query service's wire: where its socket lives, how a request and a reply look.

Newline-delimited JSON over a Unix domain socket in LLMEM_HOME (docs/query-service.md):
one request per line ``{"v": 1, "id": ..., "method": ..., "params": {...}}``, one reply
per line ``{"v": 1, "id": ..., "result": {...}}`` or ``{"v": 1, "id": ..., "error":
{"code": ..., "message": ...}}``. Shared by the server (`service_socket`) and the client
(`service_client`); standard library only, because the Copilot hook imports it on every
prompt.

The socket path: ``<LLMEM_HOME>/query.sock``. AF_UNIX paths hold at most 107 bytes and a
deep LLMEM_HOME (test folders, long user names) is longer, so a long path is reached
through the folder's descriptor: ``/proc/self/fd/<n>/query.sock`` names the same file
(the kernel resolves it at bind and connect time), and the file still sits in
LLMEM_HOME with its 0700 folder and 0600 mode. Where ``/proc`` is missing (macOS) a long
home gets its socket in ``<tmp>/llmem-<uid>/<hash of the home>.sock`` instead, in a 0700
folder of our own (refused when someone else owns it).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import struct
from collections.abc import Iterator
from pathlib import Path

TYPE_CHECKING = False  # not `typing` at run time: the Copilot hook imports this module
if TYPE_CHECKING:
    from typing import Any

PROTOCOL_VERSION = 1
SOCKET_NAME = "query.sock"
MAX_LINE_BYTES = 64 * 1024  # a request line longer than this is refused and the link closed
MAX_REPLY_BYTES = 4 * 1024 * 1024  # a client reads at most this much of one reply
SUN_PATH_MAX = 107  # bytes, with the terminating NUL: 108 on Linux, 104 on macOS

# Error codes of a reply (``error.code``).
BAD_REQUEST = "bad_request"  # not JSON, not an object, no method
BAD_VERSION = "bad_version"  # ``v`` is not PROTOCOL_VERSION
TOO_LARGE = "too_large"  # a request line over MAX_LINE_BYTES (the link is then closed)
UNKNOWN_METHOD = "unknown_method"
BAD_PARAMS = "bad_params"  # a missing, unknown or wrongly typed parameter, or a bad value
NOT_FOUND = "not_found"  # no memory with that id
BUSY = "busy"  # too many connections at once
INTERNAL = "internal"  # a failure on our side (logged by the server)


def socket_path(home: Path | None = None) -> Path:
    """Where the socket file lives (see the module doc): ``<home>/query.sock``, or, for a
    long home on a system without ``/proc``, a short path in a private temp folder."""
    if home is None:
        from ..paths import get_llmem_home

        home = get_llmem_home()
    path = Path(home) / SOCKET_NAME
    if len(os.fsencode(path)) < SUN_PATH_MAX or os.path.isdir("/proc/self/fd"):
        return path
    import hashlib
    import tempfile

    digest = hashlib.sha256(os.fsencode(Path(home))).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"llmem-{os.getuid()}" / f"{digest}.sock"


def ensure_socket_dir(path: Path) -> None:
    """The folder of a socket outside LLMEM_HOME: created 0700, and refused when it is a
    symlink or belongs to someone else (they could swap the socket under us)."""
    folder = path.parent
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise OSError(f"{folder} is not a folder of ours; not using it for the query socket")
    if st.st_mode & 0o077:
        os.chmod(folder, 0o700)


@contextlib.contextmanager
def address(path: Path) -> Iterator[str]:
    """The string to bind or connect to for ``path``: itself when short enough, else
    ``/proc/self/fd/<n>/<name>`` through a descriptor of its folder (closed afterwards)."""
    raw = os.fsencode(path)
    if len(raw) < SUN_PATH_MAX:
        yield str(path)
        return
    flags = getattr(os, "O_PATH", os.O_RDONLY) | getattr(os, "O_DIRECTORY", 0)
    fd = os.open(path.parent, flags | getattr(os, "O_CLOEXEC", 0))
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def is_version(value: Any) -> bool:
    """Whether ``value`` is our protocol version: the integer itself (``true`` and ``1.0``
    compare equal to 1 in Python, and are not it)."""
    return type(value) is int and value == PROTOCOL_VERSION


def has_lone_surrogate(value: Any) -> bool:
    """Whether a decoded JSON value holds a lone UTF-16 surrogate (``"\\ud800"``): no
    UTF-8 text can carry it, so neither SQLite, a path nor our reply could."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    except (ValueError, TypeError, RecursionError):
        return False
    return False


def encode(message: dict[str, Any]) -> bytes:
    """One message as a line of JSON (no raw newline can occur inside: json escapes it)."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def request(method: str, params: dict[str, Any] | None = None, rid: Any = 1) -> dict[str, Any]:
    return {"v": PROTOCOL_VERSION, "id": rid, "method": method, "params": params or {}}


def error_reply(rid: Any, code: str, message: str) -> dict[str, Any]:
    return {"v": PROTOCOL_VERSION, "id": rid, "error": {"code": code, "message": message}}


_UCRED = struct.Struct("3i")  # pid, uid, gid (Linux struct ucred)


def peer_uid(conn: socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket (``SO_PEERCRED``), or None
    where the system cannot say. Both ends check it: the server its clients, the client
    the listener, before anything is sent."""
    opt = getattr(socket, "SO_PEERCRED", None)
    if opt is None:
        return None
    raw = conn.getsockopt(socket.SOL_SOCKET, opt, _UCRED.size)
    return int(_UCRED.unpack(raw)[1])
