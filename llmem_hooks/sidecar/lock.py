"""The sidecar's single-instance lock and pid file, light enough for the hook commands.

One sidecar per LLMEM_HOME: it holds an flock on ``sidecar.lock`` and publishes its pid in
``sidecar.pid``. Anyone may ask `running_pid` (``status``, the Copilot hook deciding whether
to start one) without importing the sidecar and the store behind it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from ..paths import ensure_private_dir, get_llmem_home, write_atomic


class AlreadyRunning(RuntimeError):
    """Another sidecar holds the lock for this LLMEM_HOME."""


def lock_path(home: Path | None = None) -> Path:
    return (home or get_llmem_home()) / "sidecar.lock"


def pid_path(home: Path | None = None) -> Path:
    return (home or get_llmem_home()) / "sidecar.pid"


def running_pid(home: Path | None = None) -> int | None:
    """The pid of the running sidecar, or None (a stale pid file does not count)."""
    try:
        pid = int(pid_path(home).read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid
    # The lock tells a live sidecar from a recycled pid (opened without creating it).
    try:
        fd = os.open(lock_path(home), os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError:
        return pid
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # BlockingIOError: the live sidecar holds it
        return pid
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


@contextlib.contextmanager
def single_instance(home: Path | None = None) -> Iterator[None]:
    """Hold the sidecar lock (raises AlreadyRunning) and publish our pid meanwhile."""
    home = ensure_private_dir(home or get_llmem_home())
    fd = os.open(lock_path(home), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = running_pid(home)
            raise AlreadyRunning(
                f"another sidecar is already running for {home}" + (f" (pid {pid})" if pid else "")
            ) from None
        pid_file = pid_path(home)
        write_atomic(pid_file, f"{os.getpid()}\n")
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                if pid_file.read_text().strip() == str(os.getpid()):
                    pid_file.unlink()
    finally:
        os.close(fd)
