"""The MCP handshake Copilot waits for before every first turn: spawn -> the answer to
``tools/list``, for Copilot CLI 1.0.102's opening (server/discover, initialize,
notifications/initialized, tools/list).

Usage: python bench/mcp_handshake.py [--runs 50]

Variants, interleaved round by round, each a fresh process as Copilot starts it:
- a minimal shell server that answers only ``tools/list`` (the floor of any server);
- the floor plugin's server (`agent_overhead.FLOOR_MCP_SERVER`, ``python -I -S``, no tools);
- ``llmem-hooks mcp`` straight (the Python front, answering from its cache);
- ``sh bin/llmem-hook mcp`` (the launcher: the handshake in the shell from the front's copy).
Wall time to the ``tools/list`` answer and the CPU time of the whole process tree
(user + system, read from ``RUSAGE_CHILDREN`` after it exits), medians. Our processes run
from an installed copy of this checkout (as a user's would: compiled modules).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import agent_overhead as bench  # noqa: E402

OPENING = [
    '{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{"_meta":{}}}',
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    '"capabilities":{},"clientInfo":{"name":"copilot-cli","version":"1.0.102"}}}',
    '{"jsonrpc":"2.0","method":"notifications/initialized"}',
    '{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"progressToken":0}}}',
]


MINIMAL_SHELL = """while IFS= read -r l; do case $l in *tools/list*)
  echo '{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}' ;; esac; done"""


def once(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds to the tools/list answer (the process is then told to stop) and the
    CPU seconds of its whole tree."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(("\n".join(OPENING) + "\n").encode())
    proc.stdin.flush()
    wall = float("nan")
    for line in proc.stdout:
        if line.startswith(b'{"jsonrpc":"2.0","id":2,') or b'"id": 2' in line:
            wall = time.perf_counter() - t0
            break
    proc.stdin.close()
    proc.stdout.read()
    proc.wait(30)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=50)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="llmem-mcp-handshake-"))
    try:
        bin_dir = bench.installed_copy(root)
        exe = bin_dir / "llmem-hooks"
        home = root / "llmem"
        home.mkdir(mode=0o700)
        env = {k: v for k, v in os.environ.items() if not k.startswith("LLMEM_")}
        env.update(LLMEM_HOME=str(home), LLMEM_HOOKS_BIN=str(exe), HOME=str(root))
        floor = root / "mcp_floor.py"
        floor.write_text(bench.FLOOR_MCP_SERVER)
        variants = {
            "a minimal shell server (answers tools/list only)": ["sh", "-c", MINIMAL_SHELL],
            "floor: `python -I -S` server, no tools": [sys.executable, "-I", "-S", str(floor)],
            "`llmem-hooks mcp` (the Python front)": [str(exe), "mcp"],
            "`sh bin/llmem-hook mcp` (the launcher)": [
                "sh",
                str(bench.REPO / "bin/llmem-hook"),
                "mcp",
            ],
        }
        once([str(exe), "mcp"], env)  # fills the front's cache and the launcher's copy
        assert (home / "mcp-front" / "handshake").is_file(), "the launcher has no copy"
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
        names = list(variants)
        for i in range(args.runs):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                times[name].append(once(variants[name], env))
        print(f"{args.runs} runs each, medians; load {os.getloadavg()[0]:.1f}")
        print("| server | spawn -> tools/list answer | CPU of its processes |")
        print("|---|---:|---:|")
        for name, runs in times.items():
            walls = [w for w, _ in runs if w == w]
            wall = f"{statistics.median(walls) * 1000:.1f} ms" if walls else "n/a"
            cpu = statistics.median(c for _, c in runs) * 1000
            print(f"| {name} | {wall} | {cpu:.1f} ms |")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
