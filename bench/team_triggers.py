"""What team memory's triggers (migration 16) cost the common write path: `store.add` of
1,000 memories of a project, one transaction each, as the extractor writes them.

Usage: python bench/team_triggers.py [--count 1000] [--rounds 5]

Four cases on a fresh database each: the team triggers dropped (the write path as it was
before migration 16), the triggers with no team at all, another project enrolled (the
policy lookup finds nothing), and the project enrolled (every add links and queues).
The median of the rounds is printed, wall time and CPU time (user + system: what a
shared, busy machine disturbs least).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from llmem_hooks import MemoryStore
from llmem_hooks.store import team

P = "a3f0c1d2e4b5a6978877665544332211aabbccdd"
TRIGGERS = ("team_memory_inserted", "team_memory_updated", "team_memory_deleted")
CASES = ("before (no triggers)", "triggers, no team", "another project enrolled", "enrolled")


def one(case: str, count: int, folder: Path) -> tuple[float, float]:
    with MemoryStore(folder / f"{case[:7]}-{time.monotonic_ns()}.db") as store:
        if case == CASES[0]:
            for name in TRIGGERS:
                store.db.execute(f"DROP TRIGGER {name}")
        elif case == CASES[2]:
            team.enroll(store.db, "0" * 40, ["decision", "fact"])
        elif case == CASES[3]:
            team.enroll(store.db, P, ["decision", "fact"])
        t0, c0 = time.perf_counter(), time.process_time()
        for i in range(count):
            store.add("decision", f"decision {i}: the build uses target {i * 7}", project=P)
        elapsed = (time.perf_counter() - t0, time.process_time() - c0)
        queued = team.outbox_size(store.db)
        assert queued == (count if case == CASES[3] else 0), queued
    return elapsed


def run(count: int, rounds: int) -> str:
    times: dict[str, list[tuple[float, float]]] = {case: [] for case in CASES}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            for case in CASES:  # interleaved, so drift hits every case alike
                times[case].append(one(case, count, Path(tmp)))

    def med(case: str, k: int) -> float:
        return statistics.median(t[k] for t in times[case])

    lines = [
        f"| case ({count:,} x store.add) | wall s | CPU s | CPU per add (us) | CPU vs before |",
        "|---|---:|---:|---:|---:|",
    ]
    for case in CASES:
        wall, cpu, base = med(case, 0), med(case, 1), med(CASES[0], 1)
        lines.append(
            f"| {case} | {wall:.3f} | {cpu:.3f} | {cpu / count * 1e6:.0f}"
            f" | {(cpu / base - 1) * 100:+.1f}% |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(run(args.count, args.rounds))


if __name__ == "__main__":
    main()
