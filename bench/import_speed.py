"""Import speed: `MemoryStore.import_memories` and the `llmem-hooks import` command.

Usage: python bench/import_speed.py [--sizes 10000,100000]

Target (issue 2): >= 2,000 memories/s for 100k memories. The CLI figure is wall time of
the whole process (start-up, reading and validating the JSON file, one transaction).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus

from llmem_hooks import MemoryStore
from llmem_hooks.store import archive


def fresh(path: Path) -> Path:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return path


def measure(size: int) -> dict[str, float]:
    records = list(corpus.records(corpus.generate(size)))
    work = corpus.CACHE_DIR
    work.mkdir(parents=True, exist_ok=True)
    db = fresh(work / f"import-{size}.db")
    with MemoryStore(db) as store:
        t0 = time.perf_counter()
        added = store.import_memories(records)
        api_s = time.perf_counter() - t0
    assert added == size, added
    src = work / f"import-{size}.json"
    src.write_text(json.dumps(archive.wrap(records)), encoding="utf-8")
    db = fresh(work / f"import-cli-{size}.db")
    cli = [sys.executable, "-m", "llmem_hooks.cli", "--db", str(db), "import", str(src)]
    t0 = time.perf_counter()
    subprocess.run(cli, check=True, capture_output=True)
    cli_s = time.perf_counter() - t0
    with MemoryStore(db) as store:
        assert store.count() == size
    return {"api_s": api_s, "cli_s": cli_s, "api_rate": size / api_s, "cli_rate": size / cli_s}


def run(sizes: list[int]) -> str:
    lines = [
        "| memories | API s | API memories/s | CLI s | CLI memories/s | target |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for size in sizes:
        m = measure(size)
        lines.append(
            f"| {size:,} | {m['api_s']:.2f} | {m['api_rate']:,.0f} | {m['cli_s']:.2f} | "
            f"{m['cli_rate']:,.0f} | 2,000/s |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    args = ap.parse_args()
    print(run([int(s) for s in args.sizes.split(",")]))


if __name__ == "__main__":
    main()
