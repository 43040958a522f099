"""Waiting for what a real process does in its own time (a sidecar writing a file, a
memory appearing): poll a condition, fail with what was awaited."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


def wait_for(cond: Callable[[], Any], timeout: float = 15.0, what: str = "") -> Any:
    """``cond()``'s first truthy value, polled every 50 ms; AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"not in {timeout} s: {what}")


@contextlib.contextmanager
def sidecar_process(
    env: dict[str, str], ready: Callable[[], Any], timeout: float = 30.0
) -> Iterator[subprocess.Popen[bytes]]:
    """A real ``llmem-hooks run`` (this venv's) in ``env``, yielded once ``ready()``;
    stopped with SIGTERM (then killed) at the end, whatever the test did to it."""
    exe = Path(sys.executable).with_name("llmem-hooks")
    proc = subprocess.Popen(
        [str(exe), "run"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + timeout
        while not ready():
            assert proc.poll() is None and time.monotonic() < deadline, "no sidecar"
            time.sleep(0.1)
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
