"""Recall for the file in hand: what it costs per read / edit tool call (issue 22 §3).

Usage: python bench/file_recall.py [--runs 200] [--memories 10000] [--files 2000]

A git repository with ``--files`` files; a store with ``--memories`` memories of its
project, 1,000 of them citing one of 200 files, and 2,000 episodes that touched files
(`store.file_touches`); the sidecar (``llmem-hooks run``) serves the query service. Then,
in the same run, each ``--runs`` times:

1. ``git rev-parse --show-toplevel`` as a subprocess (the bare git call of the issue's
   "beside a bare git call");
2. ``file_recall`` over the sidecar's socket (the service's own cost plus the round trip):
   a new session each time for a cited file (the block is built), and the same file again
   (the "already given" answer);
3. the Copilot plugin's ``postToolUse`` command as Copilot runs it (``sh bin/llmem-hook
   copilot postToolUse`` with the payload on stdin): for ``view`` of a cited file (Python
   starts and asks the socket), and for ``bash`` (the launcher answers alone).

Prints p50 / p95 in ms. Everything runs in a temporary directory removed at the end.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for _p in (REPO / "tests", REPO / "tests" / "e2e"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from oc_harness import SidecarProcess, isolated_env  # noqa: E402
from report import cpu_name, pct  # noqa: E402

from llmem_hooks.evidence.cite import Citation, capture  # noqa: E402
from llmem_hooks.project import project_key  # noqa: E402
from llmem_hooks.service.client import answers, call  # noqa: E402
from llmem_hooks.store import MemoryStore  # noqa: E402
from llmem_hooks.store import citations as cited  # noqa: E402
from llmem_hooks.store import file_touches as touches  # noqa: E402

CITED_FILES = 200


def make_repo(root: Path, files: int) -> list[str]:
    paths = [f"pkg{i % 40}/mod{i}.py" for i in range(files)]
    for rel in paths:
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("".join(f"value_{j} = {j}\n" for j in range(30)))
    git = ["git", "-c", "user.email=b@example.com", "-c", "user.name=b"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "files"]):
        subprocess.run([*git, *args], cwd=root, check=True, capture_output=True, timeout=300)
    return paths


def seed(db_path: Path, repo: Path, paths: list[str], memories: int) -> None:
    rng = random.Random(22)
    key = project_key(repo)
    cited_files = paths[:CITED_FILES]
    with MemoryStore(db_path) as store:
        for i in range(memories):
            mid = store.add(
                "fact",
                f"Memory {i}: module m{i % 97} uses setting s{i % 89} for case c{i % 53}",
                project=key,
                dedupe=False,
            )
            if i < 1000:
                rel = cited_files[i % CITED_FILES]
                start = rng.randint(1, 25)
                cited.add(store.db, mid, [capture(repo, Citation(rel, start, start + 3), "a" * 40)])
        for i in range(2000):
            mid = store.add(
                "conversation",
                f"User: change module {i}\nAssistant: [edit] {paths[i % len(paths)]}",
                project=key,
                session_id=f"old-{i % 300}",
                dedupe=False,
            )
            with store.atomic():
                touches.add_touches(
                    store.db, mid, [paths[i % len(paths)]], f"2026-11-{1 + i % 25:02d}T10:00:00Z"
                )


def timed(fn, runs: int) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for i in range(runs):
        t0 = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def row(name: str, values: list[float]) -> str:
    return f"| {name} | {pct(values, 50):.2f} | {pct(values, 95):.2f} |"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--files", type=int, default=2000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="llmem-bench-file-recall-") as tmp:
        root = Path(tmp)
        home = root / "llmem"
        home.mkdir(mode=0o700)
        (home / "config.yaml").write_text("copilot:\n  autostart_sidecar: false\n")
        env = isolated_env(root, home)
        (root / "tmp").mkdir(exist_ok=True)
        repo = root / "repo"
        repo.mkdir()
        paths = make_repo(repo, args.files)
        t0 = time.perf_counter()
        seed(home / "memory.db", repo, paths, args.memories)
        print(f"seeded {args.memories} memories in {time.perf_counter() - t0:.1f} s")
        sidecar = SidecarProcess(env, root / "sidecar.log").start()
        try:
            deadline = time.monotonic() + 30  # the socket opens after the pid file
            while answers(home) is None and time.monotonic() < deadline:
                time.sleep(0.1)

            def git(_: int) -> None:
                subprocess.run(
                    ["git", "rev-parse", "--show-toplevel"],
                    cwd=repo / "pkg1",
                    capture_output=True,
                    check=True,
                )

            def ask(sid: str, rel: str) -> dict:  # type: ignore[type-arg]
                params = {"session_id": sid, "path": rel, "directory": str(repo)}
                return call("file_recall", params, home=home, timeout=5)

            sids = [str(uuid.uuid4()) for _ in range(args.runs)]
            got = [ask(sids[0], paths[0])]
            assert got[0]["reason"] == "recalled", got

            def first(i: int) -> None:
                got.append(ask(sids[i], str(repo / paths[1 + i % (CITED_FILES - 1)])))

            def repeat(i: int) -> None:
                ask(sids[0], paths[0])

            payload = {
                "sessionId": "",
                "timestamp": 0,
                "cwd": str(repo),
                "toolName": "view",
                "toolArgs": {"path": ""},
                "toolResult": {"resultType": "success", "textResultForLlm": "..."},
            }
            launcher = ["sh", str(REPO / "bin" / "llmem-hook"), "copilot", "postToolUse"]
            hook_env = {**env, "LLMEM_HOOKS_BIN": str(Path(sys.executable).parent / "llmem-hooks")}
            outs: list[str] = []

            def hook(i: int, tool: str = "view") -> None:
                body = {
                    **payload,
                    "sessionId": sids[i],
                    "toolName": tool,
                    "toolArgs": {"path": str(repo / paths[(7 + i) % CITED_FILES])},
                }
                proc = subprocess.run(
                    launcher, input=json.dumps(body).encode(), env=hook_env, capture_output=True
                )
                outs.append(proc.stdout.decode())

            def bash(i: int) -> None:
                hook(i, "bash")

            cases = [
                ("`git rev-parse --show-toplevel` (bare git, subprocess)", git),
                ("`file_recall` over the socket: a cited file, new session", first),
                ("`file_recall` over the socket: the same file again", repeat),
                ("`bin/llmem-hook copilot postToolUse`, `view` of a cited file", hook),
                ("`bin/llmem-hook copilot postToolUse`, `bash` (no Python)", bash),
            ]
            rows = [row(name, timed(fn, args.runs)) for name, fn in cases]
            recalled = sum(1 for g in got if g.get("reason") == "recalled")
            blocks = sum(1 for o in outs if "<llmem-recall>" in o)
        finally:
            sidecar.stop()
    print(
        f"\n{cpu_name()}; {args.memories} memories (1,000 citing {CITED_FILES} files), 2,000"
        f" episodes with touches, {args.files}-file repository, {args.runs} runs each\n"
    )
    print("| per call | p50 ms | p95 ms |\n|---|---:|---:|")
    print("\n".join(rows))
    print(f"\nblocks built: {recalled}/{len(got)} socket calls, {blocks}/{2 * args.runs} hook runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
