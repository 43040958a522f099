"""The hook door: the Copilot hook's whole call without an interpreter start.

Copilot waits for the ``sessionStart`` and ``userPromptSubmitted`` hooks before its first
model request. Even the hook's front (`agents.hook_front`) costs a Python start (~12 ms of
CPU alone, 20-30 ms inside a run on two cores, where every millisecond we spend is one
Copilot waits). The door lets the plugin's shell launcher (``bin/llmem-hook``) hand the
call to the running sidecar with the shell's built-ins, ``mkfifo`` and ``cat``:

1. the launcher makes the FIFO ``door/r.<its pid>`` (0600), writes ``door/q.<its pid>``
   (first line ``$COPILOT_HOME`` or empty, then the payload as read from stdin), and
   writes the line ``<its pid> <event>`` to the FIFO ``door/in``;
2. the door (a thread of the sidecar) reads that line and holds the reply FIFO open
   (read-write, which never waits: the launcher's ``cat`` opens it at once), reads and
   removes the request file, runs `hook_relay.relay` (the same `copilot_hook.handle` as
   every other route, with the relay's deadline), writes what the hook prints (one JSON
   line, or nothing), waits until ``cat`` has read it, removes the FIFO and closes it:
   ``cat`` ends.

Rules: ``door/`` is 0700 in LLMEM_HOME and made by the sidecar; request files must be
regular files of our uid (opened without following links), reply FIFOs FIFOs of our uid.
Whatever goes wrong, the reply FIFO is removed and closed, and the launcher prints
nothing (fail open): a sidecar killed mid-call closes it too, a ``cat`` that comes late
finds no FIFO, and an answer nobody reads is given up after `REPLY_OPEN_S`. The launcher
uses the door only while ``sidecar.pid`` names a live process and ``door/in`` is a FIFO
in a folder of ours; otherwise it starts the hook (front, then the full hook) as before.
The sidecar removes ``door/in`` when it stops and clears the folder when it starts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import stat
import threading
import time
from pathlib import Path
from typing import Any

from ..paths import ensure_private_dir
from .hook_log import log_line
from .hook_relay import RELAY_DEADLINE_S, relay

log = logging.getLogger("llmem_hooks.agents.hook_door")

DOOR_DIR = "door"  # in LLMEM_HOME
IN_FIFO = "in"
MAX_REQUEST_BYTES = (1 << 20) + 4096  # copilot_hook.MAX_STDIN_BYTES and a $COPILOT_HOME line
MAX_LINE = 64  # "<pid> <event>": anything longer is not a launcher's
MAX_IN_FLIGHT = 16  # calls answered at once; more get nothing (their launchers print nothing)
REPLY_OPEN_S = 0.5  # how long an answer waits for the launcher's cat to read it
STALE_S = 30.0  # request files and FIFOs older than this are a dead launcher's


def door_dir(home: Path) -> Path:
    return home / DOOR_DIR


class HookDoor:
    """The door of ``home``, answered with ``service`` (the query service's): `start`
    makes ``door/in`` and a thread reading it; `stop` removes it and ends the thread."""

    def __init__(self, service: Any, home: Path) -> None:
        self.service = service
        self.folder = door_dir(home)
        self._stop = threading.Event()
        self._fd: int | None = None
        self._thread: threading.Thread | None = None
        self._slots = threading.BoundedSemaphore(MAX_IN_FLIGHT)
        self._inode: int | None = None

    def start(self) -> HookDoor:
        """Make the folder (0700) and ``in`` (0600), clearing what a previous sidecar
        left; raises OSError when that cannot be done."""
        ensure_private_dir(self.folder)
        st = os.lstat(self.folder)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            raise OSError(f"{self.folder} is not a folder of ours")
        self._clear(max_age=None)
        path = self.folder / IN_FIFO
        os.mkfifo(path, 0o600)
        # O_RDWR: the door is a writer of its own FIFO too, so it never reads an end of
        # file between launchers and a launcher's write never waits for a reader.
        self._fd = os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        self._inode = os.fstat(self._fd).st_ino
        self._thread = threading.Thread(target=self._read_loop, name="llmem-hook-door", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 2.0) -> None:
        """Remove ``in`` (launchers go back to starting the hook) and end the thread."""
        self._stop.set()
        self._unlink_in()
        if self._fd is not None:  # wake the reading thread (a blank line means nothing)
            with contextlib.suppress(OSError):
                os.write(self._fd, b"\n")
        if self._thread is not None:
            self._thread.join(timeout)
        if self._fd is not None:
            with contextlib.suppress(OSError):  # launchers that wrote in time get an end
                for line in os.read(self._fd, 65536).split(b"\n"):
                    call = _launcher_call(line)
                    if call is not None:
                        self._refuse(call[0])
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def _clear(self, max_age: float | None) -> None:
        """Remove our names (``in``, ``q.N``, ``r.N``) from the folder: all of them, or
        the request files and FIFOs older than ``max_age`` seconds."""
        now = time.time()
        with contextlib.suppress(OSError), os.scandir(self.folder) as entries:
            for entry in entries:
                name = entry.name
                ours = name == IN_FIFO and max_age is None
                ours = ours or (name[:2] in ("q.", "r.") and name[2:].isdigit())
                if not ours:
                    continue
                with contextlib.suppress(OSError):
                    st = entry.stat(follow_symlinks=False)
                    if max_age is None or now - st.st_mtime > max_age:
                        os.unlink(entry.path)

    # -- the reading thread -------------------------------------------------------------
    def _read_loop(self) -> None:
        try:
            self._read_lines()
        except Exception as exc:  # a door nobody reads would cost each launcher its timeout
            log.warning("hook door: closed after %s: %s", type(exc).__name__, exc)
        finally:
            if not self._stop.is_set():
                self._unlink_in()

    def _unlink_in(self) -> None:
        with contextlib.suppress(OSError):
            path = self.folder / IN_FIFO
            if self._inode is not None and os.lstat(path).st_ino == self._inode:
                os.unlink(path)

    def _read_lines(self) -> None:
        fd = self._fd
        assert fd is not None
        buf = b""
        last_sweep = time.monotonic()
        while not self._stop.is_set():
            try:
                # at rest it wakes for the sweep only (`stop` writes a blank line)
                ready = select.select([fd], [], [], STALE_S)[0]
                chunk = os.read(fd, 4096) if ready else b""
            except BlockingIOError:
                continue
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                self._dispatch(line)
            if len(buf) > MAX_LINE:
                buf = b""  # not a launcher's line: drop it
            if time.monotonic() - last_sweep > STALE_S:
                last_sweep = time.monotonic()
                self._clear(max_age=STALE_S)

    def _dispatch(self, line: bytes) -> None:
        call = _launcher_call(line)
        if call is None:
            return
        pid, event = call
        if not self._slots.acquire(blocking=False):
            log_line(f"door: {event[:40]} not answered: {MAX_IN_FLIGHT} calls in flight")
            self._refuse(pid)
            return
        thread = threading.Thread(
            target=self._answer, args=(pid, event), name="llmem-hook-door-call", daemon=True
        )
        try:
            thread.start()
        except RuntimeError:
            self._slots.release()
            self._refuse(pid)

    def _refuse(self, pid: str) -> None:
        """An empty answer, at once: the request file and the reply FIFO removed, and an
        end of file for a ``cat`` that had opened it."""
        path = self.folder / f"q.{pid}"
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.lstat(path).st_mode):
                os.unlink(path)
        hold = self._hold_reply(pid)
        if hold is not None:
            self._deliver(pid, None, hold, 0.0)

    def _answer(self, pid: str, event: str) -> None:
        output: str | None = None
        hold = self._hold_reply(pid)
        try:
            request = self._take_request(pid)
            if request is not None and event.isascii() and event.isalpha() and len(event) < 40:
                home, payload = request
                params = {"event": event, "payload": payload, "copilot_home": home or None}
                output = relay(self.service, params)["output"]
        except Exception as exc:  # fail open: the launcher prints nothing
            log_line(f"door: {event[:40]} failed: {type(exc).__name__}: {exc}")
        finally:
            try:
                if hold is not None:  # else no FIFO of a launcher's to answer through
                    self._deliver(pid, output, hold, time.monotonic() + REPLY_OPEN_S)
            finally:
                self._slots.release()

    def _hold_reply(self, pid: str) -> int | None:
        """The launcher's FIFO ``r.<pid>`` held open (read-write: that never waits) while
        the hook runs, so the launcher's ``cat`` opens it at once and, should the sidecar
        die meanwhile (kill -9), reads an end of file instead of waiting for Copilot's
        timeout. None when it is not a FIFO of ours."""
        path = self.folder / f"r.{pid}"
        try:
            st = os.lstat(path)
            if not stat.S_ISFIFO(st.st_mode) or st.st_uid != os.getuid():
                return None
            return os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None

    def _deliver(self, pid: str, output: str | None, hold: int, deadline: float) -> None:
        """``output`` through the held FIFO, then its end. What a FIFO holds is lost once
        nobody has it open, so ``hold`` is closed only when the launcher's ``cat`` has
        read it all (or the launcher is gone, or ``deadline`` passed). The FIFO is removed
        before that end of file (the launcher exits on it and leaves nothing behind); a
        ``cat`` that had not opened it yet then finds no FIFO and prints nothing."""
        try:
            data = memoryview((output + "\n").encode("utf-8", "replace") if output else b"")
            if data:
                while data and time.monotonic() < deadline and _alive(pid):
                    if select.select([], [hold], [], 0.05)[1]:
                        with contextlib.suppress(BlockingIOError):
                            data = data[os.write(hold, data) :]
                while not data and time.monotonic() < deadline and _alive(pid):
                    if _unread(hold) == 0:
                        break  # all of it read by the launcher's cat
                    time.sleep(0.0002)  # its end of file is what the agent waits for
        except OSError as exc:
            log_line(f"door: a reply not delivered: {exc}")
        finally:
            with contextlib.suppress(OSError):
                os.unlink(self.folder / f"r.{pid}")
            os.close(hold)

    def _take_request(self, pid: str) -> tuple[str, str] | None:
        """``($COPILOT_HOME or "", payload)`` from ``q.<pid>``, removed once read; None
        for a file that is not a launcher's."""
        path = self.folder / f"q.{pid}"
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
                return None
            if st.st_size > MAX_REQUEST_BYTES:
                log_line(f"door: a request of {st.st_size} bytes refused")
                return None
            data = os.read(fd, MAX_REQUEST_BYTES + 1)
        finally:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(path)
        head, sep, body = data.partition(b"\n")
        if not sep:
            return None
        try:
            payload = body.decode("utf-8")
        except UnicodeDecodeError:
            log_line("door: a payload that is not UTF-8")
            return None
        return os.fsdecode(head), payload


def _launcher_call(line: bytes) -> tuple[str, str] | None:
    """``(pid, event)`` of a launcher's line ``<pid> <event>``; None for any other line."""
    parts = line.split(b" ")
    if len(parts) != 2 or not parts[0].isdigit() or len(parts[0]) > 10:
        return None
    return parts[0].decode(), parts[1].decode("ascii", "replace")


def _alive(pid: str) -> bool:
    """Whether the launcher ``pid`` still runs (a launcher Copilot gave up on is gone)."""
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (OSError, ValueError):
        return True  # not ours to signal (a reused pid): let the deadline decide
    return True


def _unread(fd: int) -> int:
    """Bytes in the FIFO of ``fd`` that nobody has read yet (FIONREAD)."""
    import array
    import fcntl
    import termios

    buf = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, buf, True)
    return buf[0]


def start(service: Any, home: Path) -> HookDoor | None:
    """The door of ``home``, started; None (logged) when it cannot be made: launchers
    then start the hook as before."""
    try:
        return HookDoor(service, home).start()
    except OSError as exc:
        log.warning("hook door not opened: %s", exc)
        return None


__all__ = ["DOOR_DIR", "IN_FIFO", "RELAY_DEADLINE_S", "HookDoor", "door_dir", "start"]
