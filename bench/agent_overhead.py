"""What the agent feels of us: real ``copilot -p`` and ``opencode run`` wall times with our
plugin and without it, side by side in one run.

Usage: python bench/agent_overhead.py [--runs 7] [--memories 400] [--only copilot|opencode]

One isolated world (the e2e harness's: HOME, XDG folders, COPILOT_HOME, LLMEM_HOME under a
temporary folder, removed at the end), a git repository whose project holds ``--memories``
memories, ``llmem-hooks run`` running, the fake OpenAI-compatible model server on loopback
(tests/e2e/fake_openai.py, answers at once). Runs alternate with / without so machine load
hits both alike; each agent gets one warm-up pair that is not counted.

* Copilot: ``copilot -p <prompt>`` in a new session, with ``--plugin-dir <this repo>``
  (hooks.json + the ``llmem`` MCP server of .github/plugin/plugin.json) vs without.
* OpenCode: ``opencode run <prompt>`` with ``llmem.ts`` in OpenCode's plugin folder vs the
  file moved away.

Reported: median wall time of each and the ratio of the medians. Target: <= 1.05x.
``--floor`` adds Copilot with a plugin of the same shape whose hooks run ``true`` and whose
MCP server (the standard library only) answers with no tools: what Copilot itself spends
on such a plugin, which no hook or server can go below. ``--parts`` adds our plugin with
its hooks only and with its MCP server only. Copilot's variants take turns round by round
(`interleaved`), so a drift in the machine's load hits each alike.
The hooks run from an installed copy of this checkout (`installed_copy`), as a user's do;
``--editable`` runs this checkout's editable install instead.
Needs node, npm and the two agents (installed into build/npm/ on first use, as the e2e
tests do).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for _p in (REPO / "tests", REPO / "tests" / "e2e"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from copilot_harness import COPILOT_VERSION, CopilotEnv, ensure_copilot  # noqa: E402
from fake_openai import FakeOpenAI  # noqa: E402
from oc_harness import (  # noqa: E402
    OPENCODE_VERSION,
    OpenCodeEnv,
    ensure_config_template,
    ensure_opencode,
)
from report import cpu_name  # noqa: E402

from llmem_hooks.store import MemoryStore  # noqa: E402

TARGET_RATIO = 1.05
PROMPT = "how do we deploy the billing service and which port does it listen on"
RUN_TIMEOUT_S = 120


def installed_copy(root: Path) -> Path:
    """llmem-hooks as a user has it: a non-editable install (byte-compiled by pip) in a
    venv of its own, its dependencies read from this venv through a path file. The
    editable install of a checkout costs every hook process ~20 ms of import hooks and,
    under ``PYTHONDONTWRITEBYTECODE``, a compile of each module: not what a user runs.
    Returns the copy's ``bin`` folder."""
    import site
    import sysconfig

    venv, wheels = root / "installed", root / "wheel"
    quiet = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    subprocess.run(
        [*pip, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(REPO)],
        check=True,
        env=quiet,
    )
    wheel = next(wheels.glob("llmem_hooks-*.whl"))
    subprocess.run(
        [*pip, "--python", str(venv / "bin" / "python"), "install", "-q", "--no-deps", str(wheel)],
        check=True,
        env=quiet,
    )
    purelib = Path(sysconfig.get_paths(vars={"base": str(venv), "platbase": str(venv)})["purelib"])
    ours = site.getsitepackages()[0]
    (purelib / "_llmem_bench_deps.pth").write_text(ours + "\n")
    return venv / "bin"


# The floor's MCP server: the standard library only, answers initialize and tools/list (no
# tools) and "method not found" to anything else.
FLOOR_MCP_SERVER = """import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if not isinstance(m, dict) or "id" not in m:
        continue
    method, params = m.get("method"), m.get("params") or {}
    if method == "initialize":
        info = {"name": "floor", "version": "0"}
        result = {"protocolVersion": params.get("protocolVersion"), "serverInfo": info,
                  "capabilities": {"tools": {"listChanged": False}}}
        out = {"jsonrpc": "2.0", "id": m["id"], "result": result}
    elif method == "tools/list":
        out = {"jsonrpc": "2.0", "id": m["id"], "result": {"tools": []}}
    else:
        error = {"code": -32601, "message": "Method not found"}
        out = {"jsonrpc": "2.0", "id": m["id"], "error": error}
    sys.stdout.write(json.dumps(out) + "\\n")
    sys.stdout.flush()
"""


def shell_plugin(root: Path, events: list[str] | None = None) -> Path:
    """Copilot's own cost of a plugin (``--floor``): this plugin's manifest and hook
    events (or only ``events``), each hook the shell's ``true``, and an MCP server that
    starts a bare interpreter and answers with no tools (`FLOOR_MCP_SERVER`). What Copilot
    spends starting hook processes and waiting for a server is a floor no hook or server
    of ours can go below."""
    import json

    folder = root / ("shell-plugin-" + "-".join(events) if events else "shell-plugin")
    (folder / ".github" / "plugin").mkdir(parents=True)
    manifest = json.loads((REPO / ".github" / "plugin" / "plugin.json").read_text())
    (folder / "mcp_floor.py").write_text(FLOOR_MCP_SERVER)
    server = manifest["mcpServers"]["llmem"]
    server["command"], server["args"] = sys.executable, ["-I", "-S", str(folder / "mcp_floor.py")]
    (folder / ".github" / "plugin" / "plugin.json").write_text(json.dumps(manifest))
    hooks = json.loads((REPO / "hooks.json").read_text())
    if events:
        hooks["hooks"] = {k: v for k, v in hooks["hooks"].items() if k in events}
    for entries in hooks["hooks"].values():
        for entry in entries:
            entry["bash"] = "true"
    (folder / "hooks.json").write_text(json.dumps(hooks))
    return folder


def part_plugin(root: Path, part: str) -> Path:
    """Our plugin with one part only (``--parts``): ``hooks`` (no MCP server) or ``mcp``
    (the MCP server, no hooks): which of the two the agent waits for."""
    import json

    folder = root / f"part-{part}"
    (folder / ".github" / "plugin").mkdir(parents=True)
    shutil.copytree(REPO / "bin", folder / "bin")
    manifest = json.loads((REPO / ".github" / "plugin" / "plugin.json").read_text())
    hooks = json.loads((REPO / "hooks.json").read_text())
    if part == "hooks":
        manifest.pop("mcpServers", None)
    elif part == "minmcp":
        hooks["hooks"] = {}
        manifest["mcpServers"]["llmem"]["command"] = "python3"
        manifest["mcpServers"]["llmem"]["args"] = ["-I", "-S", "/tmp/minmcp/server.py"]
    else:
        hooks["hooks"] = {}
    (folder / ".github" / "plugin" / "plugin.json").write_text(json.dumps(manifest))
    (folder / "hooks.json").write_text(json.dumps(hooks))
    return folder


def seed(llmem_home: Path, project: str, n: int) -> int:
    """``n`` memories of the project (everyday developer wording), a tenth of them global."""
    words = ("deploy", "port", "service", "billing", "staging", "tests", "config", "cache")
    with MemoryStore(llmem_home / "memory.db") as store:
        for i in range(n):
            w = words[i % len(words)]
            store.add(
                ("fact", "decision", "preference", "procedure")[i % 4],
                f"{w} note {i}: service svc-{i:03d} listens on port {8000 + i} and we "
                f"{w} it with `make {w}-svc-{i:03d}` after the staging checks pass",
                project=None if i % 10 == 0 else project,
                dedupe=False,
            )
        return store.count()


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> float:
    """Wall seconds of one agent run (fails loudly on a non-zero exit)."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        cmd,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
        start_new_session=True,
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return wall


def side_by_side(
    runs: int, without: Callable[[], float], with_: Callable[[], float]
) -> tuple[list[float], list[float]]:
    without(), with_()  # warm-up: file caches, the agents' own first-run work
    a: list[float] = []
    b: list[float] = []
    for i in range(runs):
        pair = (without, with_) if i % 2 == 0 else (with_, without)
        first, second = pair[0](), pair[1]()
        if pair[0] is without:
            a.append(first)
            b.append(second)
        else:
            b.append(first)
            a.append(second)
    return a, b


def interleaved(
    runs: int, without: Callable[[], float], variants: dict[str, Callable[[], float]]
) -> tuple[list[float], dict[str, list[float]]]:
    """``runs`` rounds, each running the agent without us and every variant once, in an
    order that rotates from round to round (a drift in the machine's load hits all alike;
    one warm-up round is not counted). Returns the times without us and each variant's."""
    order: list[tuple[str, Callable[[], float]]] = [("", without), *variants.items()]
    for _, run in order:
        run()
    base: list[float] = []
    times: dict[str, list[float]] = {name: [] for name in variants}
    for i in range(runs):
        k = i % len(order)
        for name, run in order[k:] + order[:k]:
            (times[name] if name else base).append(run())
    return base, times


def row(name: str, without: list[float], with_: list[float]) -> str:
    m0, m1 = statistics.median(without), statistics.median(with_)
    ratio = m1 / m0
    ok = "meets" if ratio <= TARGET_RATIO else "misses"
    each = f"without {', '.join(f'{x:.2f}' for x in without)}; with "
    each += ", ".join(f"{x:.2f}" for x in with_)
    cells = f"{m0:.2f} s | {m1:.2f} s | {ratio:.2f}x | <= {TARGET_RATIO}x ({ok})"
    # The runs were made in pairs (or rounds): the median of the pairs' differences is
    # steadier than the difference of the medians when the machine's load drifts.
    paired = statistics.median(b - a for a, b in zip(without, with_, strict=True))
    return f"| {name} | {cells} | {paired * 1000:+.0f} ms | {each} |"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--memories", type=int, default=400)
    ap.add_argument("--only", choices=("copilot", "opencode"))
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument(
        "--floor-events",
        help="with --floor: only these hook events (comma-separated), e.g. to see what "
        "each costs Copilot",
    )
    ap.add_argument(
        "--floor",
        action="store_true",
        help="also time Copilot with a plugin whose hooks do nothing (Copilot's own cost)",
    )
    ap.add_argument(
        "--parts",
        action="store_true",
        help="also time Copilot with our hooks only and with our MCP server only",
    )
    ap.add_argument(
        "--editable",
        action="store_true",
        help="the hooks run this checkout's editable install (default: an installed copy)",
    )
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="llmem-agent-bench-"))
    rows: list[str] = []
    try:
        with FakeOpenAI(root / "fake.jsonl") as fake:
            opencode_bin = ensure_opencode()
            template = ensure_config_template(opencode_bin, root / "scratch")
            world = OpenCodeEnv(root / "w", opencode_bin, template, fake)
            n = seed(world.llmem_home, world.project_key, args.memories)
            cp = None
            if args.only in (None, "copilot"):
                copilot_bin = ensure_copilot(root / "scratch")
                cp = CopilotEnv(root / "cp", copilot_bin, fake, base=world)
            if not args.editable:
                bin_dir = installed_copy(root)
                for env in (world.env, *((cp.env,) if cp is not None else ())):
                    env["PATH"] = os.pathsep.join([str(bin_dir), env["PATH"]])
                    env["LLMEM_HOOKS_BIN"] = str(bin_dir / "llmem-hooks")
            # One sidecar for both agents (the Copilot world's env: it watches COPILOT_HOME).
            sidecar = (cp or world).sidecar().start()
            try:
                if cp is not None:

                    def copilot(plugin: Path | None) -> Callable[[], float]:
                        def run() -> float:
                            cmd = [str(copilot_bin), "-p", PROMPT, f"--session-id={uuid.uuid4()}"]
                            cmd += ["--allow-all-tools", "--no-auto-update"]
                            if plugin is not None:
                                cmd += ["--plugin-dir", str(plugin)]
                            return timed(cmd, cp.repo, cp.env)

                        return run

                    variants = {"`copilot -p`": copilot(REPO)}
                    if args.floor:
                        events = args.floor_events.split(",") if args.floor_events else None
                        what = f" ({args.floor_events})" if args.floor_events else ""
                        name = f"`copilot -p`, a plugin whose hooks{what} run `true`"
                        variants[name + " and whose MCP server answers with no tools"] = copilot(
                            shell_plugin(root, events)
                        )
                    for part in ("hooks", "mcp") if args.parts else ():
                        only = "hooks, no MCP server" if part == "hooks" else "MCP server, no hooks"
                        variants[f"`copilot -p`, our plugin's {only}"] = copilot(
                            part_plugin(root, part)
                        )
                    base, timings = interleaved(args.runs, copilot(None), variants)
                    for name, times in timings.items():
                        rows.append(row(name, base, times))
                        print(rows[-1], flush=True)
                if args.only in (None, "opencode"):
                    plugin_dir = Path(world.env["XDG_CONFIG_HOME"]) / "opencode" / "plugin"
                    stash = root / "stash"
                    stash.mkdir()

                    def opencode(plugin: bool) -> Callable[[], float]:
                        def run() -> float:
                            here, away = plugin_dir / "llmem.ts", stash / "llmem.ts"
                            if plugin and away.exists():
                                shutil.move(away, here)
                            if not plugin and here.exists():
                                shutil.move(here, away)
                            cmd = [str(opencode_bin), "run", PROMPT]
                            return timed(cmd, world.repo, world.env)

                        return run

                    a, b = side_by_side(args.runs, opencode(False), opencode(True))
                    rows.append(row("`opencode run`", a, b))
                    print(rows[-1], flush=True)
            finally:
                if cp is not None:
                    cp.close()
                sidecar.stop()
                world.close()
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    u = platform.uname()
    print(
        f"\n{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {u.system} {u.machine}, {cpu_name()}, "
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; copilot {COPILOT_VERSION}, "
        f"opencode-ai {OPENCODE_VERSION}; {n} memories, {args.runs} runs each (median); "
        f"hooks from {'this checkout (editable)' if args.editable else 'an installed copy'}"
    )
    print("| what | without | with | ratio | target | paired difference | each run (s) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
