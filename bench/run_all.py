"""Run every benchmark and print one markdown report (paste it into docs/benchmarks.md).

Usage: python bench/run_all.py [--sizes 10000,100000] [--quick]

--quick runs the 10k corpus only. Corpora are cached under build/bench/ (git-ignored).
"""

from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import sys
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import import_speed
import quality
import search_speed
from report import cpu_name


def machine() -> str:
    cpu = cpu_name()
    try:
        import sqlean

        sqlite_version = f"sqlean {sqlean.sqlite_version}"
    except ImportError:
        sqlite_version = f"sqlite3 {sqlite3.sqlite_version}"
    return (
        f"{datetime.now(UTC):%Y-%m-%d}, {platform.system()} {platform.release()}, {cpu}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, {sqlite_version}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    sizes = [10_000] if args.quick else [int(s) for s in args.sizes.split(",")]
    print(f"Machine: {machine()}\n")
    print("### Retrieval quality (FTS mode)\n")
    print(quality.run(sizes, 240), "\n")
    print("### Retriever.find speed (FTS mode, natural-language questions)\n")
    print(search_speed.run(sizes, 240, 3), "\n")
    print("### Import speed\n")
    print(import_speed.run(sizes))


if __name__ == "__main__":
    main()
