"""The Copilot hook's front: the whole hook call as one round trip to the running sidecar.

Copilot waits for the ``sessionStart`` and ``userPromptSubmitted`` hooks before its first
model request, and a hook process spent ~20 ms importing ours (json and its regular
expressions, pathlib, socket and enum, the hook module) before doing ~5 ms of work. This
front imports nothing but ``_socket`` and ``wire_json`` (the interpreter's C JSON codec), sends
the raw payload to the sidecar's query socket (method ``copilot_hook``, answered by
`agents.hook_relay` with the very same `copilot_hook.handle`) and prints the answer.

Anything it is not sure of goes to the full hook in this process, with the bytes it read:
no sidecar, a socket it cannot reach by path, a listener that is not our uid (checked
with ``SO_PEERCRED`` before anything is sent; where the system cannot say, the full
client's rules apply), a payload too large for one request line or not UTF-8, an answer
it does not recognise (an older sidecar). A sidecar that does not answer in time gets
nothing printed (fail open, as the hook's own deadline).
"""

from __future__ import annotations

import os
import sys

from ..home import llmem_home_dir

TYPE_CHECKING = False  # not `typing` at run time
if TYPE_CHECKING:
    from _socket import socket
    from typing import BinaryIO, TextIO

SOCKET_NAME = "query.sock"  # service.protocol.SOCKET_NAME
SUN_PATH_MAX = 107  # service.protocol.SUN_PATH_MAX
MAX_LINE_BYTES = 64 * 1024  # service.protocol.MAX_LINE_BYTES: the server's request limit
MAX_STDIN_BYTES = 1 << 20  # copilot_hook.MAX_STDIN_BYTES
MAX_REPLY_BYTES = 4 * 1024 * 1024  # service.protocol.MAX_REPLY_BYTES
CONNECT_TIMEOUT_S = 0.2
REPLY_TIMEOUT_S = 1.3  # the relay gives up after copilot_hook.DEADLINE_S - 0.1
READ_TIMEOUT_S = 1.2  # copilot_hook.DEADLINE_S: a payload is written at once
METHOD = "copilot_hook"  # hook_relay.RELAY_METHOD


def request_line(event: str, payload: str, copilot_home: str | None) -> bytes:
    """The ``copilot_hook`` request for one hook call, as `service.protocol.encode`
    writes one."""
    from .wire_json import dumps

    params = {"event": event, "payload": payload, "copilot_home": copilot_home}
    message = {"v": 1, "id": 1, "method": METHOD, "params": params}
    return (dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def parse_reply(line: bytes) -> tuple[bool, str | None]:
    """``(recognised, output)`` of a reply line: ``(True, None)`` for nothing to print.
    Only ``{"v": 1, "id": 1, "result": {"output": <string or null>}}`` is recognised."""
    from .wire_json import loads

    try:
        reply = loads(line)
    except (ValueError, RecursionError):
        return False, None
    if not isinstance(reply, dict) or set(reply) != {"v", "id", "result"}:
        return False, None
    if any(type(reply[k]) is not int or reply[k] != 1 for k in ("v", "id")):
        return False, None
    result = reply["result"]
    if not isinstance(result, dict) or set(result) != {"output"}:
        return False, None
    output = result["output"]
    if output is not None and not isinstance(output, str):
        return False, None
    return True, output


def _connect(path: str, sock: socket) -> None:
    """Connect ``sock`` to ``path``; a path too long for AF_UNIX through its folder's
    descriptor (`service.protocol.address`'s rule)."""
    raw = os.fsencode(path)
    if len(raw) < SUN_PATH_MAX:
        sock.connect(path)
        return
    if not os.path.isdir("/proc/self/fd"):
        raise OSError("a long socket path without /proc")  # the full client's fallback
    flags = getattr(os, "O_PATH", os.O_RDONLY) | getattr(os, "O_DIRECTORY", 0) | os.O_CLOEXEC
    fd = os.open(os.path.dirname(path), flags)
    try:
        sock.connect(f"/proc/self/fd/{fd}/{os.path.basename(path)}")
    finally:
        os.close(fd)


def ask(line: bytes, path: str) -> tuple[str, bytes]:
    """One request to the socket at ``path``: ``("reply", line)``, ``("late", b"")``
    when the sidecar took too long, ``("no", b"")`` when nobody we trust listens."""
    import _socket
    import time

    peercred = getattr(_socket, "SO_PEERCRED", None)
    if peercred is None:
        return "no", b""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT_S)
        try:
            _connect(path, sock)
            cred = sock.getsockopt(_socket.SOL_SOCKET, peercred, 12)  # pid, uid, gid
        except OSError:
            return "no", b""
        if int.from_bytes(cred[4:8], sys.byteorder, signed=True) != os.getuid():
            return "no", b""  # the full client logs it and answers in-process
        deadline = time.monotonic() + REPLY_TIMEOUT_S
        try:
            sock.settimeout(REPLY_TIMEOUT_S)
            sock.sendall(line)
            buf = b""
            while b"\n" not in buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    return "late", b""
                sock.settimeout(left)
                chunk = sock.recv(65536)
                if not chunk:
                    return "no", b""  # closed without a reply: the hook runs here
                buf += chunk
                if len(buf) > MAX_REPLY_BYTES:
                    return "no", b""
        except TimeoutError:
            return "late", b""
        except OSError:
            return "no", b""
        return "reply", buf[: buf.index(b"\n") + 1]
    finally:
        sock.close()


def read_stdin(stream: BinaryIO) -> bytes | None:
    """Up to `MAX_STDIN_BYTES` + 1 bytes of the payload, or None when the writer keeps
    the pipe open past `READ_TIMEOUT_S` (the hook's own deadline: it fails open)."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # a stream in memory (tests)
        return stream.read(MAX_STDIN_BYTES + 1)
    import select
    import time

    deadline = time.monotonic() + READ_TIMEOUT_S
    chunks: list[bytes] = []
    size = 0
    while size <= MAX_STDIN_BYTES:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def relayed(
    argv: list[str], stdin: BinaryIO | None = None, stdout: TextIO | None = None
) -> bytes | None:
    """Read the payload and have the sidecar run the hook: None when that was done (its
    output printed, or nothing when it was late), else the bytes read, for the full hook
    to run on in this process."""
    data = read_stdin(stdin if stdin is not None else sys.stdin.buffer)
    if data is None:  # Copilot did not close our stdin in time: print nothing
        from .hook_log import log_line

        log_line(f"{' '.join(argv)[:80]}: stdin not closed within {READ_TIMEOUT_S} s")
        return None
    if len(argv) != 2 or argv[0] != "copilot" or not (argv[1].isascii() and argv[1].isalpha()):
        return data
    try:
        payload = data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    try:  # an undecodable byte in $COPILOT_HOME comes back as a lone surrogate
        line = request_line(argv[1], payload, os.environ.get("COPILOT_HOME") or None)
    except UnicodeEncodeError:
        return data
    if len(line) >= MAX_LINE_BYTES:
        return data
    verdict, reply = ask(line, os.path.join(llmem_home_dir(), SOCKET_NAME))
    if verdict == "late":
        return None
    if verdict != "reply":
        return data
    known, output = parse_reply(reply)
    if not known:
        return data
    if output:
        out = stdout if stdout is not None else sys.stdout
        try:
            out.write(output + "\n")
            out.flush()
        except (OSError, ValueError):
            pass
    return None
