"""A hung model server and the interactive CLI (issue 9, defect 11).

Usage: python bench/model_hang.py [--runs 3]

A TCP server on 127.0.0.1 accepts connections and never answers. We time real
`llmem-hooks store` and `search` processes against it, next to a floor measured in the
same run: the same commands with the model switched off (process start, imports, SQLite).
Target: the first command pays at most ~2 s over the floor, the next ones (within the
shared 60 s back-off) pay nothing. Before the fix each command waited ~30 s.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

CLI = [sys.executable, "-m", "llmem_hooks.cli"]


def hung_server(lifetime: float) -> tuple[str, threading.Event]:
    """Listen on 127.0.0.1, accept, never reply; stops by itself after ``lifetime`` s."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    sock.settimeout(0.2)
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        deadline = time.monotonic() + lifetime
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                held.append(sock.accept()[0])
            except TimeoutError:
                continue
        for conn in held:
            conn.close()
        sock.close()

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{sock.getsockname()[1]}", stop


def timed(home: Path, *args: str) -> float:
    env = {**os.environ, "LLMEM_HOME": str(home)}
    t0 = time.perf_counter()
    subprocess.run([*CLI, *args], env=env, capture_output=True, timeout=120, check=True)
    return time.perf_counter() - t0


def configure(home: Path, url: str, enabled: bool) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(
        f"ollama:\n  base_url: {url}\n  enabled: {str(enabled).lower()}\n", encoding="utf-8"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    floor, first, later = [], [], []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            off = Path(tmp) / "off"
            configure(off, "http://127.0.0.1:9", enabled=False)
            floor.append(timed(off, "store", "the deploy uses blue green switches"))
            url, stop = hung_server(lifetime=60)
            hung = Path(tmp) / "hung"
            configure(hung, url, enabled=True)
            first.append(timed(hung, "store", "the deploy uses blue green switches"))
            later.append(timed(hung, "search", "deploy"))
            later.append(timed(hung, "store", "the cache is warmed at 06:00"))
            stop.set()
    f, a, b = (statistics.median(x) for x in (floor, first, later))
    print(f"floor (model off)          {f:6.2f} s")
    print(f"first command, hung model  {a:6.2f} s  (+{a - f:.2f} s over the floor)")
    print(f"next commands, backed off  {b:6.2f} s  (+{b - f:.2f} s over the floor)")


if __name__ == "__main__":
    main()
