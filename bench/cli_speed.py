"""Wall time of everyday CLI commands against a bare interpreter, measured in the same run.

Usage: python bench/cli_speed.py [--runs 15] [--size 1000] [--source DIR] [--json]

Each command is a real ``llmem-hooks`` subprocess (the installed entry point) on a
``size``-memory store (bench/corpus.py) in a fresh LLMEM_HOME, with the model server
configured on a loopback port where nothing listens ("no model server"). The baseline is
``python -c pass`` with the same interpreter. Runs are interleaved (one of each command
per round) so load on a shared machine hits all of them alike; medians are reported with
their ratio to the baseline. Targets (issue 18): ``search`` <= 5x, ``list --limit 20`` and
``stats`` <= 4x the bare interpreter.

``--source DIR``: run another checkout's code (``python -m llmem_hooks.cli`` with DIR on
PYTHONPATH; DIR/llmem_hooks/adapters must link to DIR/adapters), e.g. the code before a
change, for a before/after in the same conditions.

Bytecode: the commands run with .pyc files as an installed package has them (one warm-up
run each writes them, PYTHONDONTWRITEBYTECODE is dropped for the subprocesses).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus

TARGETS = {"search": 5.0, "list --limit 20": 4.0, "stats": 4.0}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def entry_point(source: Path | None) -> list[str]:
    """The ``llmem-hooks`` script next to this interpreter, else (or for ``source``)
    ``python -m``."""
    script = Path(sys.executable).with_name("llmem-hooks")
    if script.exists() and source is None:
        return [str(script)]
    return [sys.executable, "-m", "llmem_hooks.cli"]


def setup(home: Path, size: int, source: Path | None) -> dict[str, str]:
    home.mkdir(mode=0o700)
    corpus.build_db(size, home / "memory.db")
    (home / "config.yaml").write_text(
        f"ollama:\n  enabled: true\n  base_url: http://127.0.0.1:{closed_port()}\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "LLMEM_DB")}
    env["LLMEM_HOME"] = str(home)
    if source is not None:
        env["PYTHONPATH"] = str(source)
    return env


def once(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return elapsed


def measure(runs: int, size: int, source: Path | None = None) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        env = setup(home, size, source)
        cli = entry_point(source)
        commands = {
            "bare interpreter": [sys.executable, "-c", "pass"],
            "--version": [*cli, "--version"],
            "search": [*cli, "search", "deploy staging database migration"],
            "list --limit 20": [*cli, "list", "--limit", "20"],
            "stats": [*cli, "stats"],
        }
        for argv in commands.values():  # warm-up: .pyc files, page cache
            once(argv, env, Path(tmp))
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(runs):
            for name, argv in commands.items():
                times[name].append(once(argv, env, Path(tmp)))
    base = statistics.median(times["bare interpreter"])
    out = {}
    for name, values in times.items():
        med = statistics.median(values)
        out[name] = {"median_ms": med * 1000, "min_ms": min(values) * 1000, "ratio": med / base}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--source", type=Path, help="another checkout to measure")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    result = measure(args.runs, args.size, args.source)
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"{args.size} memories, no model server, {args.runs} interleaved runs (median)")
    print("| command | median ms | min ms | x bare | target |\n|---|---|---|---|---|")
    for name, r in result.items():
        target = f"<= {TARGETS[name]:.0f}x" if name in TARGETS else ""
        print(
            f"| `{name}` | {r['median_ms']:.0f} | {r['min_ms']:.0f} | {r['ratio']:.1f} | {target} |"
        )


if __name__ == "__main__":
    main()
