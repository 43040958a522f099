"""The sidecar at rest: CPU, threads and memory of a real `llmem-hooks run` with N ended
Copilot sessions and nothing happening.

Usage: python bench/sidecar_rest.py [--sessions 20 200] [--window 30] [--opencode]
           [--source DIR] [--json]

A COPILOT_HOME with ``sessions`` ended sessions (each: start, one exchange, shutdown; as
tests/support/copilot_home.py writes them, shaped like Copilot CLI 1.0.102's) in a temp
folder; the model off; no OpenCode store, or with ``--opencode`` one in WAL mode with a
session, kept open for the whole run as a running OpenCode keeps it. The sidecar starts,
catches up (the episode backfill, every session's ending), and once its CPU use has
settled (under 0.05 s in a 2 s sample) the window starts: CPU seconds (utime + stime from
/proc/<pid>/stat), the thread count (/proc/<pid>/status), RSS. Target (issue 18): <= 0.15
s CPU per 30 s, <= 10 threads, flat in the number of ended sessions (run with --sessions
20 and 200). Linux only (/proc). ``--source DIR``: another checkout's code on PYTHONPATH (see
bench/cli_speed.py), for a before/after.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.copilot_home import CopilotHome  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def status(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("Threads", "VmRSS"):
            out[key] = int(value.split()[0])
    return out


def make_home(root: Path, sessions: int) -> Path:
    home = CopilotHome(root / "copilot-home")
    for i in range(sessions):
        s = home.session(name=f"task {i}")
        s.exchange(f"remember that service {i} listens on port {7000 + i}", "Noted.")
        s.shutdown()
    return home.root


def measure(
    sessions: int,
    window: float,
    settle_max: float,
    source: Path | None = None,
    opencode: bool = False,
) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        root = Path(tmp)
        copilot = make_home(root, sessions)
        if opencode:  # open until the end, as OpenCode holds it
            from support.opencode_db import OpenCodeDB

            oc = OpenCodeDB(root / "opencode" / "opencode.db")
            stack.callback(oc.conn.close)
            sid = oc.session("tidy the logger")
            ask = oc.user(sid, "remember that the logger lives in lib/log.ts")
            oc.assistant(sid, ask, {"type": "text", "text": "Noted."})
        llmem = root / "llmem-home"
        llmem.mkdir(mode=0o700)
        (llmem / "config.yaml").write_text(
            f"ollama:\n  enabled: false\ncopilot:\n  home: {copilot}\n"
            f"opencode:\n  db_path: {root / 'opencode' / 'opencode.db'}\n"
        )
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(LLMEM_HOME=str(llmem), COPILOT_HOME=str(copilot))
        env["OPENCODE_DB"] = str(root / "opencode" / "opencode.db")
        if source is not None:
            env["PYTHONPATH"] = str(source)
        log = (root / "sidecar.err").open("w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "llmem_hooks.cli", "run"],
            env=env,
            cwd=tmp,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
        try:
            started = time.monotonic()
            last = cpu_seconds(proc.pid)
            while True:  # caught up: CPU use has settled
                time.sleep(2.0)
                if proc.poll() is not None:
                    raise SystemExit((root / "sidecar.err").read_text())
                now = cpu_seconds(proc.pid)
                if now - last < 0.05 or time.monotonic() - started > settle_max:
                    break
                last = now
            settle = time.monotonic() - started
            before = cpu_seconds(proc.pid)
            threads = []
            t_end = time.monotonic() + window
            while time.monotonic() < t_end:
                threads.append(status(proc.pid)["Threads"])
                time.sleep(1.0)
            used = cpu_seconds(proc.pid) - before
            st = status(proc.pid)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            log.close()
    return {
        "sessions": sessions,
        "opencode": opencode,
        "settle_s": round(settle, 1),
        "cpu_s_per_30s": round(used * 30 / window, 3),
        "threads_max": max(threads),
        "rss_mb": round(st["VmRSS"] / 1024, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, nargs="+", default=[200])
    ap.add_argument("--window", type=float, default=30.0)
    ap.add_argument("--settle-max", type=float, default=180.0)
    ap.add_argument("--opencode", action="store_true", help="an open WAL OpenCode store too")
    ap.add_argument("--source", type=Path, help="another checkout to measure")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results = [
        measure(n, args.window, args.settle_max, args.source, args.opencode) for n in args.sessions
    ]
    if args.json:
        print(json.dumps(results, indent=1))
        return
    print("| ended sessions | OpenCode store | CPU s per 30 s | threads | RSS MB | caught up, s |")
    print("|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['sessions']} | {'open, WAL' if r['opencode'] else 'none'} "
            f"| {r['cpu_s_per_30s']:.2f} | {r['threads_max']} "
            f"| {r['rss_mb']:.0f} | {r['settle_s']:.0f} |"
        )


if __name__ == "__main__":
    main()
