"""Issue 12, Copilot side: per-prompt recall overhead of the hook, and MCP tool round trips.

Usage: python bench/agent_tools.py [--memories 2000] [--runs 40] [--calls 200]

1. The hook, as Copilot CLI runs it (``llmem-hooks hook copilot userPromptSubmitted``, a
   subprocess, .pyc present), in a fresh session each run with a prompt that has one
   relevant memory (so every run returns a block):
   - floor: the same command with ``recall.enabled: false`` (interpreter start-up,
     settings, the compaction check: what every prompt cost before recall);
   - recall through a running sidecar's socket;
   - recall in-process (no sidecar: the fallback).
   Reported: p50 / p95 wall time and the added p50 over the floor.
2. MCP: one SDK client session on ``llmem-hooks mcp`` (stdio), ``memory_search`` calls
   with varied queries, p50 / p95 per call; the floor is the same ``search`` sent
   straight to the sidecar's socket (`service_client.call`), interleaved, in the same
   run. Also without a sidecar (the server's in-process fallback), and the time from
   spawning the server to an initialized session.

Everything runs in a temporary directory that is removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# mcp first, without bench/ on sys.path: no module of bench/ may shadow one mcp imports.
sys.path[:] = [p for p in sys.path if not p or Path(p).resolve() != HERE]
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

for _p in (HERE, HERE.parent / "tests", HERE.parent / "tests" / "e2e"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from copilot_hook import HOOK_EXE, NO_AUTOSTART, World, machine, make_repo  # noqa: E402
from oc_harness import SidecarProcess  # noqa: E402
from report import pct  # noqa: E402

from llmem_hooks.project import project_key  # noqa: E402
from llmem_hooks.store import MemoryStore  # noqa: E402

RECALL_OFF = "recall:\n  enabled: false\n"


def seed(db: Path, project: str, count: int) -> None:
    kinds = ("fact", "decision", "preference", "procedure", "project_state")
    with MemoryStore(db) as store:
        for i in range(count):
            store.add(
                kinds[i % len(kinds)],
                f"service svc{i:04d} of this repo listens on port {8000 + i} and deploys "
                f"with make deploy-svc{i:04d} after the staging checks pass",
                project=project,
            )


def prompt_payload(world: World, i: int, count: int) -> dict[str, Any]:
    return {
        "sessionId": str(uuid.uuid4()),
        "timestamp": int(time.time() * 1000),
        "cwd": str(world.repo),
        "prompt": f"Which port does svc{(i * 37) % count:04d} listen on?",
    }


def hook_once(world: World, payload: dict[str, Any]) -> tuple[float, bool]:
    import subprocess

    env = {k: v for k, v in world.env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(world.root.parent / "pycache")
    t0 = time.perf_counter()
    proc = subprocess.run(
        [str(HOOK_EXE), "hook", "copilot", "userPromptSubmitted"],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env=env,
        cwd=world.root,
        check=False,
    )
    ms = (time.perf_counter() - t0) * 1000
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.decode())
    return ms, b"llmem-recall" in proc.stdout


def bench_hook(root: Path, repo: Path, db: Path, runs: int, count: int) -> dict[str, Any]:
    """The three cases in three worlds, interleaved run by run (other load on the machine
    hits them alike)."""
    from llmem_hooks.service.client import answers

    cases = [
        ("floor (recall off)", RECALL_OFF, False),
        ("sidecar socket", "", True),
        ("in-process fallback", "", False),
    ]
    worlds = [
        World(root / f"hook-{n}", repo, db, NO_AUTOSTART + extra)
        for n, (_, extra, _) in enumerate(cases)
    ]
    sidecars = [
        SidecarProcess(w.env, w.root / "sidecar.log").start() if c[2] else None
        for w, c in zip(worlds, cases, strict=True)
    ]
    rows: dict[str, Any] = {name: {"ms": [], "hits": 0} for name, _, _ in cases}
    try:
        for w, sc in zip(worlds, sidecars, strict=True):
            deadline = time.monotonic() + 30
            while sc is not None and answers(w.llmem_home) is None:
                if time.monotonic() > deadline:
                    raise RuntimeError("the sidecar's query service does not answer")
                time.sleep(0.1)
            for i in range(3):  # warm-up: .pyc files, page cache
                hook_once(w, prompt_payload(w, 10_000 + i, count))
        for i in range(runs):
            for (name, _, _), w in zip(cases, worlds, strict=True):
                ms, hit = hook_once(w, prompt_payload(w, i, count))
                rows[name]["ms"].append(ms)
                rows[name]["hits"] += hit
    finally:
        for sc in sidecars:
            if sc is not None:
                sc.stop()
    return rows


def table_hook(rows: dict[str, Any], runs: int) -> str:
    floor = statistics.median(rows["floor (recall off)"]["ms"])
    out = [
        "| userPromptSubmitted | p50 ms | p95 ms | added p50 over the floor | runs with a block |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, r in rows.items():
        p50 = statistics.median(r["ms"])
        out.append(
            f"| {name} | {p50:.0f} | {pct(r['ms'], 95):.0f} | {p50 - floor:+.0f} ms "
            f"({p50 / floor:.2f}x) | {r['hits']}/{runs} |"
        )
    return "\n".join(out)


async def mcp_calls(
    world: World, queries: list[str], socket_floor: bool
) -> tuple[float, list[float], list[float]]:
    from llmem_hooks.service.client import call

    params = StdioServerParameters(
        command=str(HOOK_EXE),
        args=["mcp", "--project-dir", str(world.repo)],
        env={k: v for k, v in world.env.items() if k != "PYTHONDONTWRITEBYTECODE"},
    )
    via_mcp: list[float] = []
    via_socket: list[float] = []
    t0 = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        start_ms = (time.perf_counter() - t0) * 1000
        for q in queries[:5]:  # warm-up
            await session.call_tool("memory_search", {"query": q})
        for q in queries:
            t = time.perf_counter()
            res = await session.call_tool("memory_search", {"query": q})
            via_mcp.append((time.perf_counter() - t) * 1000)
            if res.isError:
                raise RuntimeError(str(res.content))
            if socket_floor:
                t = time.perf_counter()
                call("search", {"query": q, "directory": str(world.repo)}, home=world.llmem_home)
                via_socket.append((time.perf_counter() - t) * 1000)
    return start_ms, via_mcp, via_socket


def bench_mcp(root: Path, repo: Path, db: Path, calls: int, count: int) -> str:
    queries = [f"port of svc{(i * 53) % count:04d}" for i in range(calls)]
    out = [
        "| memory_search | p50 ms | p95 ms | server start to initialized |",
        "|---|---:|---:|---:|",
    ]
    world = World(root / "mcp-sidecar", repo, db, NO_AUTOSTART)
    sidecar = SidecarProcess(world.env, world.root / "sidecar.log").start()
    try:
        from llmem_hooks.service.client import answers

        while answers(world.llmem_home) is None:
            time.sleep(0.1)
        start, mcp_ms, sock_ms = asyncio.run(mcp_calls(world, queries, True))
    finally:
        sidecar.stop()
    floor = statistics.median(sock_ms)
    out.append(
        f"| floor: `search` straight to the socket | {floor:.1f} | {pct(sock_ms, 95):.1f} | |"
    )
    p50 = statistics.median(mcp_ms)
    out.append(
        f"| MCP tool call, sidecar running | {p50:.1f} ({p50 / floor:.1f}x) | "
        f"{pct(mcp_ms, 95):.1f} | {start:.0f} ms |"
    )
    world = World(root / "mcp-alone", repo, db, NO_AUTOSTART)
    start, mcp_ms, _ = asyncio.run(mcp_calls(world, queries, False))
    p50 = statistics.median(mcp_ms)
    out.append(
        f"| MCP tool call, no sidecar (in-process) | {p50:.1f} ({p50 / floor:.1f}x) | "
        f"{pct(mcp_ms, 95):.1f} | {start:.0f} ms |"
    )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memories", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=40, help="hook runs per case")
    ap.add_argument("--calls", type=int, default=200, help="MCP calls per case")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="llmem-agent-tools-") as tmp:
        root = Path(tmp)
        repo = make_repo(root / "repo")
        db = root / "seed.db"
        seed(db, project_key(repo), args.memories)
        print(f"machine: {machine()}; {args.memories} memories\n")
        print(table_hook(bench_hook(root, repo, db, args.runs, args.memories), args.runs))
        print()
        print(bench_mcp(root, repo, db, args.calls, args.memories))


if __name__ == "__main__":
    main()
