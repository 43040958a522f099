"""The model back-off, the one place it lives: `Backoff` inside a process (the sidecar's
embeddings and extraction), `SharedBackoff` between processes.

`Backoff`: after a failure the model is skipped for ``seconds`` (60 s), so a dead Ollama
costs one timeout per minute instead of one per memory or idle event.

`SharedBackoff`, ``$LLMEM_HOME/model-backoff.json``. Why: every `llmem-hooks store` /
`search` is a new process, so an in-memory back-off cannot help them. When a model server
hangs (accepts connections, never answers) each command used to wait the full timeout.
Now the first command that sees the failure records it here, and every command within
the next 60 s skips the model at once and says why.

The file maps a base URL (credentials stripped, never stored) to the last failure::

    {"http://localhost:11434": {"kind": "timeout", "detail": "...", "at": 1.7e9,
                                "until": 1.7e9, "timeout": 2.0}}

It is small, 0600, replaced atomically (random temp name opened O_EXCL|O_NOFOLLOW, then
rename), and read defensively: a missing, oversized or corrupt file means "no back-off".
Two processes writing at once may lose one entry; the cost is one more timed-out call.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..paths import get_llmem_home, write_atomic
from ..url_validate import strip_credentials

BACKOFF_SECONDS = 60.0
FILE_NAME = "model-backoff.json"
MAX_FILE_BYTES = 65_536
MAX_ENTRIES = 32
KINDS = ("timeout", "down")


class Backoff:
    """The in-process back-off of one model server; thread-safe. ``clock`` (monotonic by
    default) is for tests that skip ahead."""

    def __init__(
        self, seconds: float = BACKOFF_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.seconds = seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._until = 0.0
        self._reason = ""
        self._down = False

    def blocked(self) -> tuple[float, str] | None:
        """(seconds left, why) while the back-off runs, else None."""
        with self._lock:
            left = self._until - self._clock()
            return (left, self._reason) if left > 0 else None

    def remaining(self) -> float:
        """Seconds before the server is tried again (0 when not backing off)."""
        with self._lock:
            return max(0.0, self._until - self._clock())

    def failed(self, reason: str) -> bool:
        """The server failed: skip it for the next ``seconds``. Returns whether it was
        answering until now (the first failure of an outage: the one worth a log line)."""
        with self._lock:
            self._until = self._clock() + self.seconds
            self._reason = reason
            first, self._down = not self._down, True
            return first

    def succeeded(self) -> bool:
        """The server answered: try it again at once. Returns whether it was down."""
        with self._lock:
            self._until = 0.0
            was, self._down = self._down, False
            return was


@dataclass(frozen=True)
class ModelFailure:
    """The last failure of one model server, and until when it is skipped."""

    url: str
    kind: str  # "timeout" (accepted, no answer) or "down" (not reachable)
    detail: str
    at: float
    until: float
    timeout: float

    def cause(self) -> str:
        """What went wrong, in words a person can act on."""
        if self.kind == "timeout":
            return f"Ollama at {self.url} did not answer within {self.timeout:g} s"
        return f"Ollama at {self.url} is not reachable ({self.detail})"

    def remaining(self, now: float) -> float:
        return max(0.0, self.until - now)


class SharedBackoff:
    """Read and write the back-off file. ``path`` and ``clock`` are for tests."""

    def __init__(
        self,
        path: Path | None = None,
        seconds: float = BACKOFF_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = path or get_llmem_home() / FILE_NAME
        self.seconds = seconds
        self.clock = clock

    # -- reading ---------------------------------------------------------------------------
    def _load(self) -> dict[str, dict[str, Any]]:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return {}
        try:
            with os.fdopen(fd, "rb") as fh:
                raw = fh.read(MAX_FILE_BYTES + 1)
            if len(raw) > MAX_FILE_BYTES:
                return {}
            data = json.loads(raw.decode("utf-8"))
        except (OSError, ValueError, RecursionError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, dict)}

    @staticmethod
    def _entry(url: str, raw: dict[str, Any]) -> ModelFailure | None:
        try:
            failure = ModelFailure(
                url=url,
                kind=str(raw["kind"]),
                detail=str(raw.get("detail", ""))[:200],
                at=float(raw["at"]),
                until=float(raw["until"]),
                timeout=float(raw.get("timeout", 0.0)),
            )
        except (KeyError, TypeError, ValueError):
            return None
        if failure.kind not in KINDS or not all(
            math.isfinite(x) for x in (failure.at, failure.until, failure.timeout)
        ):
            return None
        return failure

    def blocked(self, base_url: str) -> ModelFailure | None:
        """The recorded failure of ``base_url`` while its back-off runs, else None."""
        url = strip_credentials(base_url)
        raw = self._load().get(url)
        failure = self._entry(url, raw) if raw is not None else None
        now = self.clock()
        # An `until` far in the future (clock change, edited file) is capped at one period.
        if failure is None or not now < failure.until <= now + self.seconds:
            return None
        return failure

    # -- writing ---------------------------------------------------------------------------
    def failed(self, base_url: str, kind: str, detail: str, timeout: float) -> ModelFailure:
        """Record a failure: ``base_url`` is skipped for the next ``seconds``."""
        url = strip_credentials(base_url)
        now = self.clock()
        failure = ModelFailure(url, kind, detail[:200], now, now + self.seconds, timeout)
        data = self._load()
        data[url] = {
            "kind": kind,
            "detail": failure.detail,
            "at": now,
            "until": failure.until,
            "timeout": timeout,
        }
        live = {}
        for key, value in data.items():
            entry = self._entry(key, value)
            if entry is not None and entry.until > now:
                live[key] = value
        self._save(dict(list(live.items())[-MAX_ENTRIES:]))
        return failure

    def succeeded(self, base_url: str) -> None:
        """The server answered: forget its failure (writes only if one was recorded)."""
        url = strip_credentials(base_url)
        data = self._load()
        if url in data:
            del data[url]
            self._save(data)

    def _save(self, data: dict[str, dict[str, Any]]) -> None:
        """Replace the file atomically; fail open (a read-only home only loses the hint)."""
        folder = self.path.parent
        if not folder.is_dir() or folder.is_symlink():
            return
        with contextlib.suppress(OSError):
            write_atomic(self.path, json.dumps(data))
