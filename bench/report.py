"""What every benchmark report shares: the machine line, percentiles, target verdicts."""

from __future__ import annotations

import os
import platform
from datetime import UTC, datetime
from pathlib import Path


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo (platform.processor() is empty on Linux)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine_line(extra: str = "") -> str:
    u = platform.uname()
    line = (
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {u.system} {u.release} {u.machine}, "
        f"{cpu_name()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    return f"{line}, {extra}" if extra else line


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"
