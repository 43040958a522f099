"""Where Copilot's extra time goes: the timeline of real ``copilot -p`` runs without a
plugin, with the floor plugin (hooks running ``true``, a bare MCP server) and with ours,
read from each session's own ``events.jsonl``.

Usage: python bench/copilot_timeline.py [--runs 20] [--memories 400] [--user-level]

``--user-level`` compares the hooks ``install --copilot`` writes to
``$COPILOT_HOME/hooks/llmem.json`` instead of plugins: calling llmem-hooks directly (what
it wrote before) against running the installed copy's launcher (what it writes now).

The same world as `bench/agent_overhead.py` (its helpers: an installed copy of this
checkout, a running sidecar, the fake model server). Per variant, the medians (ms) of:
the hooks' start and end times after ``session.start`` (``sessionStart`` ss0/ss1,
``userPromptSubmitted`` up0/up1), ``session.start`` -> the first ``assistant.turn_start``
(start_turn), that -> ``session.shutdown`` (turn_shut), the process start -> session.start
(pre) and shutdown -> exit (post), and the whole run (wall). The first round is not
counted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import agent_overhead as bench  # noqa: E402  (puts tests/ and tests/e2e on sys.path)
from copilot_harness import CopilotEnv, ensure_copilot  # noqa: E402
from fake_openai import FakeOpenAI  # noqa: E402
from oc_harness import OpenCodeEnv, ensure_config_template, ensure_opencode  # noqa: E402


def first_times(events: Path) -> dict[str, float]:
    """Each event type's first time (epoch s); hooks as ``hook.start:<type>``."""
    out: dict[str, float] = {}
    for line in events.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        when = datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()
        name = event["type"]
        if name.startswith("hook."):
            name += ":" + str(event.get("data", {}).get("hookType"))
        out.setdefault(name, when)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--memories", type=int, default=400)
    ap.add_argument("--user-level", action="store_true", help="user-level hooks, not plugins")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="llmem-timeline-"))
    try:
        with FakeOpenAI(root / "fake.jsonl") as fake:
            opencode = ensure_opencode()
            template = ensure_config_template(opencode, root / "scratch")
            world = OpenCodeEnv(root / "w", opencode, template, fake)
            bench.seed(world.llmem_home, world.project_key, args.memories)
            copilot = ensure_copilot(root / "scratch")
            cp = CopilotEnv(root / "cp", copilot, fake, base=world)
            bin_dir = bench.installed_copy(root)
            cp.env["PATH"] = os.pathsep.join([str(bin_dir), cp.env["PATH"]])
            cp.env["LLMEM_HOOKS_BIN"] = str(bin_dir / "llmem-hooks")
            sidecar = cp.sidecar().start()
            variants: dict[str, Path | dict[str, object] | None]
            variants = {"none": None, "floor": bench.shell_plugin(root), "ours": bench.REPO}
            hooks_file = Path(cp.env["COPILOT_HOME"]) / "hooks" / "llmem.json"
            if args.user_level:
                from llmem_hooks.agents.install import copilot_hooks, launcher_hooks

                launcher = bin_dir.parent / "share" / "llmem-hooks" / "llmem-hook"
                variants = {
                    "none": None,
                    "direct hooks": copilot_hooks(str(bin_dir / "llmem-hooks")),
                    "launcher hooks": launcher_hooks(launcher),
                }
            rows: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
            try:
                for _ in range(args.runs + 1):
                    for name, plugin in variants.items():
                        sid = str(uuid.uuid4())
                        cmd = [str(copilot), "-p", bench.PROMPT, f"--session-id={sid}"]
                        cmd += ["--allow-all-tools", "--no-auto-update"]
                        hooks_file.unlink(missing_ok=True)
                        if isinstance(plugin, dict):
                            hooks_file.parent.mkdir(parents=True, exist_ok=True)
                            hooks_file.write_text(json.dumps(plugin))
                        elif plugin is not None:
                            cmd += ["--plugin-dir", str(plugin)]
                        t0 = time.time()
                        wall = bench.timed(cmd, cp.repo, cp.env)
                        t1 = time.time()
                        events = Path(cp.env["COPILOT_HOME"]) / "session-state" / sid
                        at = first_times(events / "events.jsonl")
                        s = at["session.start"]

                        def rel(key: str, at: dict[str, float] = at, s: float = s) -> float:
                            return at.get(key, s) - s

                        turn = at["assistant.turn_start"]
                        rows[name].append(
                            {
                                "ss0": rel("hook.start:sessionStart"),
                                "ss1": rel("hook.end:sessionStart"),
                                "up0": rel("hook.start:userPromptSubmitted"),
                                "up1": rel("hook.end:userPromptSubmitted"),
                                "start_turn": turn - s,
                                "turn_shut": at["session.shutdown"] - turn,
                                "pre": s - t0,
                                "post": t1 - at["session.shutdown"],
                                "wall": wall,
                            }
                        )
            finally:
                sidecar.stop()
                cp.close()
                world.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{args.runs} rounds, {args.memories} memories; medians in ms after session.start")
    keys = list(next(iter(rows.values()))[0])
    print("| variant | " + " | ".join(keys) + " |")
    print("|---|" + "---:|" * len(keys))
    for name, runs in rows.items():
        cells = [f"{statistics.median(r[k] for r in runs[1:]) * 1000:.0f}" for k in keys]
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
