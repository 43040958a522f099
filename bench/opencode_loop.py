"""The OpenCode loop: session created -> context file, plugin cost per call, sidecar idle cost.

Usage: python bench/opencode_loop.py [--sessions 20] [--idle-seconds 30]
                                     [--store-sessions 200] [--quick]

1. created -> context file: sessions created one after another with ``POST /session``
   against one warm ``opencode serve`` (the e2e harness's isolated world, fake provider,
   default config.yaml, a few memories stored), with ``llmem-hooks run`` running. The file
   is polled every 1 ms. Target: p95 <= 100 ms.
2. plugin overhead: ``experimental.chat.system.transform`` of the compiled plugin under
   Node (``bench/plugin_overhead.mjs``), a cached file and a file changed before every
   call. Target: <= 2 ms per call.
3. sidecar idle cost: ``llmem-hooks run`` on an opencode.db with ``--store-sessions``
   sessions (tests/support/opencode_db.py), once it has caught up: CPU seconds over
   ``--idle-seconds`` (utime + stime of all its threads) and RSS. Targets: <= 0.05 s CPU
   per 30 s, RSS <= 60 MB.

Needs node, npm and the OpenCode binary (installed into build/npm/ on first use, as the
e2e tests do). Everything runs under a temporary directory that is removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for _p in (REPO / "tests", REPO / "tests" / "e2e"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from fake_openai import FakeOpenAI  # noqa: E402
from oc_harness import (  # noqa: E402
    BUILD_NPM,
    OPENCODE_VERSION,
    OpenCodeEnv,
    SidecarProcess,
    ensure_config_template,
    ensure_opencode,
    file_lock,
    isolated_env,
    npm,
)
from report import cpu_name, pct, verdict  # noqa: E402
from support.opencode_db import OpenCodeDB, text, tool  # noqa: E402

from llmem_hooks.config import DEFAULT_CONFIG  # noqa: E402
from llmem_hooks.store import MemoryStore  # noqa: E402

CREATED_TARGET_MS = 100.0
PLUGIN_TARGET_MS = 2.0
IDLE_CPU_TARGET_S = 0.05  # per 30 s
RSS_TARGET_MB = 60.0
WARMUP_SESSIONS = 2
FILE_TIMEOUT_S = 10.0
CLK_TCK = os.sysconf("SC_CLK_TCK")
HOOK_LINE = re.compile(r"session=(\S+) event=(\w+) result=(\S+) value=.* ms=([\d.]+)")


# -- helpers --------------------------------------------------------------------------------


def stats(values: list[float]) -> tuple[float, float, float]:
    return pct(values, 50), pct(values, 95), max(values)


def machine() -> str:
    cpu = cpu_name()
    u = platform.uname()
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False)
    return (
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {u.system} {u.release} {u.machine}, {cpu}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, "
        f"Node {node.stdout.strip() or '?'}, opencode-ai {OPENCODE_VERSION}"
    )


def write_default_config(llmem_home: Path) -> None:
    """config.yaml with every default (the e2e harness writes a fast-idle one)."""
    llmem_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = llmem_home / "config.yaml"
    path.write_text(yaml.safe_dump(DEFAULT_CONFIG, sort_keys=False))
    path.chmod(0o600)


def seed_memories(llmem_home: Path, project: str) -> int:
    """A few project and global memories, so the context file has real content."""
    kinds = ("fact", "decision", "preference", "procedure")
    with MemoryStore(llmem_home / "memory.db") as store:
        for i in range(40):
            store.add(
                kinds[i % 4],
                f"service svc-{i:02d} of this repo listens on port {8000 + i} and deploys "
                f"with `make deploy-svc-{i:02d}` after the staging checks pass",
                project=project,
            )
        for i in range(10):
            store.add("preference", f"global preference {i}: keep commits small (rule {i})")
        return store.count()


# -- 1. created -> context file --------------------------------------------------------------
def _create_and_wait(server: Any, ctx_dir: Path) -> dict[str, Any]:
    t_send = time.perf_counter()
    resp = server.http.post("/session", json={})
    t_ret = time.perf_counter()
    wall_ret = time.time()
    resp.raise_for_status()
    info = resp.json()
    sid = str(info["id"])
    created_ms = float(info["time"]["created"])
    path = ctx_dir / f"{sid}.md"
    already = path.exists()
    while not path.exists():
        if time.perf_counter() - t_ret > FILE_TIMEOUT_S:
            raise RuntimeError(f"no context file for {sid} after {FILE_TIMEOUT_S} s")
        time.sleep(0.001)
    t_seen = time.perf_counter()
    wall_seen = wall_ret + (t_seen - t_ret)
    return {
        "sid": sid,
        "post_ms": (t_ret - t_send) * 1000,
        "from_post_ms": (t_seen - t_ret) * 1000,
        "from_created_ms": wall_seen * 1000 - created_ms,
        "created_to_mtime_ms": path.stat().st_mtime * 1000 - created_ms,
        "already": already,
        "bytes": path.stat().st_size,
    }


def _hook_ms(log_text: str, sids: set[str]) -> list[float]:
    """The on_created hook times of ``sids`` (the sidecar's stderr holds each line twice:
    its own handler and the root logger's; the first one per session counts)."""
    out: dict[str, float] = {}
    for m in HOOK_LINE.finditer(log_text):
        if m.group(1) in sids and m.group(2) == "created":
            out.setdefault(m.group(1), float(m.group(4)))
    return list(out.values())


def measure_created(n: int, root: Path) -> dict[str, Any]:
    opencode_bin = ensure_opencode()
    scratch = root / "oc-template"
    scratch.mkdir(parents=True)
    template = ensure_config_template(opencode_bin, scratch)
    fake = FakeOpenAI(root / "fake-requests.jsonl").start()
    world_root = root / "oc"
    world_root.mkdir()
    world = OpenCodeEnv(world_root, opencode_bin, template, fake)
    try:
        write_default_config(world.llmem_home)
        memories = seed_memories(world.llmem_home, world.project_key)
        world.opencode("session", "list")  # OpenCode has run here: opencode.db exists
        sidecar = world.sidecar().start()
        server = world.serve()
        for _ in range(WARMUP_SESSIONS):
            _create_and_wait(server, world.context_dir)
        samples = [_create_and_wait(server, world.context_dir) for _ in range(n)]
        time.sleep(0.2)  # let the last hook line reach the log
        log_text = sidecar.log_path.read_text(errors="replace")
        hook = _hook_ms(log_text, {s["sid"] for s in samples})
        return {"samples": samples, "hook_ms": hook, "memories": memories}
    finally:
        world.close()
        fake.stop()


def table_created(res: dict[str, Any]) -> str:
    samples = res["samples"]
    rows = [
        ("POST /session returned -> file seen", "from_post_ms", True),
        ("session time_created -> file seen", "from_created_ms", True),
        ("session time_created -> file mtime", "created_to_mtime_ms", False),
        ("POST /session round trip (for reference)", "post_ms", False),
    ]
    lines = [
        "| measure | n | p50 ms | p95 ms | max ms | target |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for label, key, targeted in rows:
        p50, p95, mx = stats([s[key] for s in samples])
        target = (
            f"p95 <= {CREATED_TARGET_MS:.0f} ms: {verdict(p95 <= CREATED_TARGET_MS)}"
            if targeted
            else ""
        )
        lines.append(f"| {label} | {len(samples)} | {p50:.1f} | {p95:.1f} | {mx:.1f} | {target} |")
    if res["hook_ms"]:
        p50, p95, mx = stats(res["hook_ms"])
        lines.append(
            f"| sidecar on_created hook (its log) | {len(res['hook_ms'])} | {p50:.1f} | "
            f"{p95:.1f} | {mx:.1f} | |"
        )
    already = sum(s["already"] for s in samples)
    size = max(s["bytes"] for s in samples)
    lines.append("")
    lines.append(
        f"{len(samples)} sessions one after another against one warm `opencode serve` "
        f"({WARMUP_SESSIONS} warm-up sessions not counted), default config.yaml, "
        f"{res['memories']} memories in the store, context files up to {size} bytes; "
        f"{already} file(s) already existed when the POST returned."
    )
    return "\n".join(lines)


# -- 2. plugin overhead ----------------------------------------------------------------------
def compile_plugin(root: Path) -> Path:
    """tsc the plugin (toolchain in build/npm/plugin-check, as the plugin tests use) into
    ``root/dist``; the sources are copied next to a symlink to its node_modules."""
    folder = BUILD_NPM / "plugin-check"
    manifest = (REPO / "plugin" / "package.json").read_bytes()
    with file_lock(BUILD_NPM / "plugin-check.lock"):
        folder.mkdir(parents=True, exist_ok=True)
        stamp = folder / ".installed-from"
        fresh = stamp.exists() and stamp.read_bytes() == manifest
        if not fresh or not (folder / "node_modules" / "typescript").is_dir():
            (folder / "package.json").write_bytes(manifest)
            npm(["install"], cwd=folder, timeout=600)
            stamp.write_bytes(manifest)
    src = root / "plugin-src"
    src.mkdir(parents=True)
    for name in ("llmem.ts", "tsconfig.json"):
        shutil.copy2(REPO / "plugin" / name, src / name)
    (src / "node_modules").symlink_to(folder / "node_modules")
    dist = root / "dist"
    tsc = folder / "node_modules" / "typescript" / "bin" / "tsc"
    proc = subprocess.run(
        ["node", str(tsc), "-p", str(src), "--outDir", str(dist)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"tsc failed:\n{proc.stdout}\n{proc.stderr}")
    (dist / "package.json").write_text('{"type": "module"}\n')
    return dist / "llmem.js"


def measure_plugin(calls: int, root: Path, size: int = 6000) -> dict[str, Any]:
    plugin = compile_plugin(root)
    scratch = root / "plugin-scratch"
    scratch.mkdir()
    script = HERE / "plugin_overhead.mjs"
    proc = subprocess.run(
        ["node", str(script), str(plugin), str(scratch), str(calls), str(size)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"plugin_overhead.mjs failed:\n{proc.stdout}\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def table_plugin(res: dict[str, Any]) -> str:
    lines = [
        "| context file | calls | p50 ms | p95 ms | max ms | mean ms | target <= 2 ms |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    labels = {"cached": "cached (unchanged)", "changed": "changed before every call"}
    for name, values in res["cases"].items():
        p50, p95, mx = stats(values)
        mean = sum(values) / len(values)
        lines.append(
            f"| {labels.get(name, name)} | {len(values)} | {p50:.3f} | {p95:.3f} | {mx:.3f} | "
            f"{mean:.3f} | p95: {verdict(p95 <= PLUGIN_TARGET_MS)} |"
        )
    lines.append("")
    lines.append(
        f"Compiled plugin/llmem.ts under Node {res['node']}, {res['bytes']}-byte context file, "
        "100 untimed warm-up calls per case; only the hook call is timed (the rewrite in "
        "the changed case is not)."
    )
    return "\n".join(lines)


# -- 3. sidecar idle cost --------------------------------------------------------------------
def build_store(path: Path, sessions: int, recent: bool) -> None:
    db = OpenCodeDB(path)
    if recent:  # within session.end_after_minutes: they stay active sessions
        db.ms = int(time.time() * 1000) - sessions * 150 - 60_000
    for i in range(sessions):
        sid = db.session(f"Session {i}: fix the build of svc-{i}")
        u1 = db.user(sid, f"why does svc-{i} fail to start on port {8000 + i}?")
        db.assistant(sid, u1, text(f"svc-{i} reads PORT from .env; it was unset. Fixed it."))
        u2 = db.user(sid, f"remember that svc-{i} needs PORT={8000 + i} in .env")
        db.assistant(
            sid,
            u2,
            text("Running the tests."),
            tool("bash", command="pytest -q tests/", description="Run tests"),
            finish="tool-calls",
        )
        db.assistant(sid, u2, text(f"Noted: svc-{i} needs PORT={8000 + i}. Tests pass."))
    db.close()


def _threads(pid: int) -> dict[str, dict[str, int]]:
    """Per thread: CPU ticks and context switches (wakeups)."""
    out: dict[str, dict[str, int]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
            status = (task / "status").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        rest = stat[stat.rindex(")") + 2 :].split()
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        name = "main" if task.name == str(pid) else f"{comm} {int(task.name) - pid:+d}"
        out[name] = {
            "ticks": int(rest[11]) + int(rest[12]),
            "vcsw": int(fields["voluntary_ctxt_switches"]),
            "ncsw": int(fields["nonvoluntary_ctxt_switches"]),
        }
    return out


def _ticks(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    rest = stat[stat.rindex(")") + 2 :].split()
    return int(rest[11]) + int(rest[12])


def _status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def _wait_quiet(pid: int, quiet_s: float = 3.0, timeout: float = 600.0) -> float:
    """Wait until the process used no CPU tick for ``quiet_s``; returns the seconds from
    the call until its last busy moment."""
    t0 = last_busy = time.monotonic()
    ticks = _ticks(pid)
    while True:
        time.sleep(0.05)
        now, cur = time.monotonic(), _ticks(pid)
        if cur != ticks:
            ticks, last_busy = cur, now
        elif now - last_busy >= quiet_s:
            return last_busy - t0
        if now - t0 > timeout:
            raise RuntimeError(f"the sidecar did not go quiet within {timeout:.0f} s")


def measure_idle(store_sessions: int, idle_s: float, root: Path, recent: bool) -> dict[str, Any]:
    root.mkdir(parents=True)
    llmem_home = root / "llmem"
    env = isolated_env(root, llmem_home)
    write_default_config(llmem_home)
    db_path = Path(env["XDG_DATA_HOME"]) / "opencode" / "opencode.db"
    build_store(db_path, store_sessions, recent)
    sc = SidecarProcess(env, root / "sidecar.out")
    log_file = llmem_home / "logs" / "sidecar.log"
    t_start = time.monotonic()
    sc.start()
    pid = sc.pid
    assert pid is not None
    try:
        since_start = time.monotonic() - t_start
        catchup_s = since_start + _wait_quiet(pid)  # start -> its last busy moment
        catchup_cpu = _ticks(pid) / CLK_TCK
        log_before = log_file.read_text(errors="replace")
        before = _threads(pid)
        t0 = time.monotonic()
        ticks0 = _ticks(pid)
        time.sleep(idle_s)
        ticks1 = _ticks(pid)
        elapsed = time.monotonic() - t0
        after = _threads(pid)
        log_after = log_file.read_text(errors="replace")
        hwm_kb = _status_kb(pid, "VmHWM")
        rss_kb = _status_kb(pid, "VmRSS")
    finally:
        code = sc.stop()
    time.sleep(0.1)
    left = Path(f"/proc/{pid}").exists()
    hooks: dict[str, int] = {}
    for m in HOOK_LINE.finditer(log_before):
        hooks[m.group(2)] = hooks.get(m.group(2), 0) + 1
    per_thread = {
        name: {k: after[name][k] - before.get(name, dict.fromkeys(v, 0))[k] for k in v}
        for name, v in after.items()
    }
    return {
        "recent": recent,
        "sessions": store_sessions,
        "db_mb": db_path.stat().st_size / 1e6,
        "catchup_s": catchup_s,
        "catchup_cpu_s": catchup_cpu,
        "hooks": hooks,
        "idle_s": elapsed,
        "cpu_s": (ticks1 - ticks0) / CLK_TCK,
        "hwm_mb": hwm_kb / 1024,
        "rss_mb": rss_kb / 1024,
        "log_lines_idle": len(log_after.splitlines()) - len(log_before.splitlines()),
        "threads": per_thread,
        "exit": code,
        "left_running": left,
    }


def table_idle(results: list[dict[str, Any]]) -> str:
    lines = [
        "| opencode.db | catch-up s (CPU s) | hooks fired in catch-up | idle window s "
        "| CPU s in window | CPU s per 30 s | peak RSS MB | RSS MB | targets |",
        "|---|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        kind = "recent, still active" if r["recent"] else "1 h old, ended at catch-up"
        per30 = r["cpu_s"] * 30 / r["idle_s"]
        hooks = ", ".join(f"{k} {v}" for k, v in sorted(r["hooks"].items())) or "none"
        ok_cpu = per30 <= IDLE_CPU_TARGET_S
        ok_rss = r["hwm_mb"] <= RSS_TARGET_MB
        lines.append(
            f"| {r['sessions']} sessions ({kind}), {r['db_mb']:.1f} MB "
            f"| {r['catchup_s']:.1f} ({r['catchup_cpu_s']:.2f}) | {hooks} | {r['idle_s']:.1f} "
            f"| {r['cpu_s']:.2f} | {per30:.3f} | {r['hwm_mb']:.1f} | {r['rss_mb']:.1f} "
            f"| CPU: {verdict(ok_cpu)}, RSS: {verdict(ok_rss)} |"
        )
    lines.append("")
    lines.append("Threads during the idle window (CPU ticks, voluntary / involuntary switches):")
    lines.append("")
    lines.append("| opencode.db | thread (tid - pid) | CPU ticks | voluntary | involuntary |")
    lines.append("|---|---|---:|---:|---:|")
    for r in results:
        kind = "recent" if r["recent"] else "old"
        for name, t in sorted(r["threads"].items()):
            lines.append(f"| {kind} | {name} | {t['ticks']} | {t['vcsw']} | {t['ncsw']} |")
    lines.append("")
    notes = [
        f"{r['log_lines_idle']} log line(s) in the {'recent' if r['recent'] else 'old'} "
        f"window, exit code {r['exit']}, left running: {r['left_running']}"
        for r in results
    ]
    lines.append(
        f"CPU = utime + stime from /proc/<pid>/stat (1 tick = {1 / CLK_TCK:.2f} s); catch-up "
        "= until the CPU was quiet for 3 s; default config.yaml; " + "; ".join(notes) + "."
    )
    return "\n".join(lines)


# -- report ----------------------------------------------------------------------------------
def run(
    sessions: int = 20,
    idle_seconds: float = 30.0,
    store_sessions: int = 200,
    plugin_calls: int = 1000,
) -> str:
    with tempfile.TemporaryDirectory(prefix="llmem-bench-oc-") as tmp:
        root = Path(tmp)
        created = measure_created(sessions, root / "created")
        plugin = measure_plugin(plugin_calls, root / "plugin-work")
        idle = [
            measure_idle(store_sessions, idle_seconds, root / f"idle-{kind}", kind == "recent")
            for kind in ("old", "recent")
        ]
    return "\n\n".join(
        [
            f"Machine: {machine()}",
            "### Session created -> context file written\n\n" + table_created(created),
            "### Plugin overhead per model call (system.transform)\n\n" + table_plugin(plugin),
            "### Sidecar idle cost\n\n" + table_idle(idle),
        ]
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--idle-seconds", type=float, default=30.0)
    ap.add_argument("--store-sessions", type=int, default=200)
    ap.add_argument("--quick", action="store_true", help="5 sessions, 5 s idle, 50 stored")
    args = ap.parse_args()
    calls = 1000
    if args.quick:
        args.sessions, args.idle_seconds, args.store_sessions, calls = 5, 5.0, 50, 200
    t0 = time.monotonic()
    print(run(args.sessions, args.idle_seconds, args.store_sessions, calls))
    print(f"\nTotal runtime: {time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main()
