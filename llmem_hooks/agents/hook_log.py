"""The Copilot hook's log: ``<LLMEM_HOME>/logs/copilot-hook.log`` (0600, one rotation).

Copilot shows a hook's stderr nowhere in ``-p`` runs, so whatever the hook (or the
sidecar running it for the front, `agents.hook_relay`) has to say goes here. The
standard library only: every hook process imports it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

LOG_NAME = "copilot-hook.log"
LOG_MAX_BYTES = 1_000_000


def _log_path() -> Path:
    from ..paths import get_llmem_home

    return get_llmem_home() / "logs" / LOG_NAME


def log_line(message: str) -> None:
    """Append one line to the hook log (0600 in a 0700 folder); never raises."""
    try:
        path = _log_path()
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            if path.stat().st_size > LOG_MAX_BYTES:
                os.replace(path, path.with_name(LOG_NAME + ".1"))
        except FileNotFoundError:
            pass
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(path, flags, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, f"{stamp} pid={os.getpid()} {message}\n".encode(errors="replace"))
        finally:
            os.close(fd)
    except Exception:  # logging must never break the hook
        pass


def route_library_logs() -> None:
    """Send the coordinator's warnings to the hook log instead of stderr."""
    import logging

    root = logging.getLogger("llmem_hooks")
    if any(getattr(h, "_llmem_copilot_hook", False) for h in root.handlers):
        return

    class _Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            log_line(f"{record.levelname} {record.name}: {self.format(record)}")

    handler = _Handler(logging.WARNING)
    handler._llmem_copilot_hook = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.propagate = False
