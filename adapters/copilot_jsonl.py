"""Safe tailing of Copilot's ``events.jsonl`` files, and the cursor that remembers it.

The files belong to Copilot and are untrusted input: they are opened read-only, never
through a symlink or onto a FIFO or device, read in bounded chunks, and a line too long
or not a JSON object is skipped without being held in memory. The cursor holds, per
session, how far its file was read and enough to notice a rewrite (inode, checksum).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import stat
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from llmem_hooks.events import BadRecord, load_json_object, session_id_problem

from .base import as_dict

log = logging.getLogger("llmem_hooks.adapters.copilot")

READ_CHUNK = 256 * 1024
MAX_LINE_BYTES = 1 << 20  # poll: longer lines are skipped (model.* lines carry whole requests)
MESSAGE_LINE_BYTES = 8 << 20  # transcripts: a long answer or file write is still worth reading
TAIL_BYTES = 32  # bytes before the cursor offset whose checksum detects in-place rewrites
CURSOR_VERSION = 1

# Per-session cursor flags.
F_CREATED = 1  # ``created`` was reported (never again, even after a rewrite)
F_OPEN = 2  # a start/resume with no shutdown after it: a process may still run it
F_CRASHED = 4  # ``ended crashed`` was reported for the current run
F_REPLAY = 8  # re-reading a rewritten file: lines not newer than ``mark`` were reported

_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def valid_session_id(session_id: Any) -> bool:
    """A plausible session folder name (Copilot uses UUIDs); never a path, never ``..``
    or a control character (the rule of `llmem_hooks.events.session_id_problem`)."""
    return isinstance(session_id, str) and _valid_name(session_id)


@functools.lru_cache(maxsize=4096)
def _valid_name(name: str) -> bool:
    """Cached: every pass of the sidecar checks every folder name of session-state."""
    return _SESSION_ID.fullmatch(name) is not None and session_id_problem(name) is None


# -- reading files safely ------------------------------------------------------------------


def open_regular(path: Path) -> BinaryIO | None:
    """``path`` opened read-only if it is a regular file (not a symlink, FIFO or device,
    which could point elsewhere or block); None otherwise."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        return os.fdopen(fd, "rb", buffering=0)
    except OSError:
        os.close(fd)
        return None


def read_small(path: Path, cap: int) -> bytes | None:
    """A regular file's bytes, None if missing, irregular or larger than ``cap``."""
    f = open_regular(path)
    if f is None:
        return None
    with f:
        data = b""
        try:
            while len(data) <= cap:
                chunk = f.read(min(READ_CHUNK, cap + 1 - len(data)))
                if not chunk:
                    break
                data += chunk
        except OSError:
            return None
    return None if len(data) > cap else data


def read_lines(f: BinaryIO, offset: int, max_line: int) -> Iterator[tuple[int, bytes | None]]:
    """``(end offset, line)`` for each complete line from ``offset`` (``line`` without its
    newline; None when longer than ``max_line``, which is skipped without being held in
    memory). A last line without its newline is not yielded: it is still being written."""
    f.seek(offset)
    buf = b""
    pos = offset  # file offset of buf[0]
    skipping = False
    while True:
        chunk = f.read(READ_CHUNK)
        if not chunk:
            return
        buf += chunk
        start = 0
        while (nl := buf.find(b"\n", start)) >= 0:
            too_long = skipping or nl - start > max_line
            yield pos + nl + 1, None if too_long else buf[start:nl]
            skipping = False
            start = nl + 1
        buf = buf[start:]
        pos += start
        if len(buf) > max_line:
            skipping = True
            pos += len(buf)
            buf = b""


def decode_line(raw: bytes) -> dict[str, Any] | str:
    """The line's event object, or why it is not one (bounded size and depth, no
    NaN/Infinity: see `load_json_object`)."""
    try:
        obj = load_json_object(raw, MESSAGE_LINE_BYTES)
    except BadRecord as exc:
        return str(exc)
    if not isinstance(obj.get("type"), str) or not obj["type"]:
        return "no event type"
    return obj


def crc_before(f: BinaryIO, offset: int) -> int:
    """Checksum of the bytes just before ``offset``: unchanged unless the file was
    rewritten in place (a growing file never changes what lies before the offset)."""
    if offset <= 0:
        return 0
    start = max(0, offset - TAIL_BYTES)
    try:
        f.seek(start)
        return zlib.crc32(f.read(offset - start))
    except OSError:
        return -1


# -- cursor --------------------------------------------------------------------------------


@dataclass
class Tail:
    """Where reading one session's events.jsonl stands (one cursor entry)."""

    offset: int = 0  # bytes consumed: always the end of a complete line
    ino: int = 0  # the file's inode at that offset (a new inode = a rewritten file)
    flags: int = 0
    mark: int = 0  # newest line time (ms) consumed: replayed lines up to it stay quiet
    crc: int = 0  # checksum of the TAIL_BYTES before offset

    def dump(self) -> list[int]:
        return [self.offset, self.ino, self.flags, self.mark, self.crc]

    @classmethod
    def load(cls, value: Any) -> Tail | None:
        if (
            not isinstance(value, list)
            or len(value) != 5
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
            or not all(-1 <= v < 1 << 63 for v in value)
        ):
            return None
        return cls(*value)


def parse_cursor(cursor: str | None) -> dict[str, Tail]:
    """``{"v": 1, "s": {"<session id>": [offset, inode, flags, mark_ms, crc], ...}}``;
    an unreadable cursor (logged) reads every session again from the start."""
    if not cursor:
        return {}
    try:
        obj = json.loads(cursor)
    except (ValueError, RecursionError):
        obj = None
    if not isinstance(obj, dict) or obj.get("v") != CURSOR_VERSION:
        log.warning("copilot: unreadable cursor; reading every session from the start")
        return {}
    out: dict[str, Tail] = {}
    for sid, value in as_dict(obj.get("s")).items():
        tail = Tail.load(value)
        if valid_session_id(sid) and tail is not None:
            out[sid] = tail
    return out


def dump_cursor(tails: Mapping[str, Tail]) -> str:
    entries = {sid: tails[sid].dump() for sid in sorted(tails)}
    return json.dumps({"v": CURSOR_VERSION, "s": entries}, separators=(",", ":"))
