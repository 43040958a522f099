"""What team memory's triggers (migration 16) cost the common write path: `store.add` of
1,000 memories of a project, one transaction each, as the extractor writes them.

Usage: python bench/team_triggers.py [--count 1000] [--rounds 5] [--memory]

Four cases on a fresh database each: the team triggers dropped (the write path as it was
before migration 16), the triggers with no team at all, another project enrolled (the
policy lookup finds nothing), and the project enrolled (every add links and queues).
The median of the rounds is printed, wall time and CPU time (user + system: what a
shared, busy machine disturbs least). ``--memory``: an in-memory database, the SQL alone
(no file I/O, the least noise).

The timing runs on a connection of its own, opened after the set-up: statements run
before on the same connection change how the driver's statement cache serves the add
loop, which alone moved store.add by +40% in a first version of this benchmark.
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


def prepare(case: str, store: MemoryStore) -> None:
    # every case runs the same statements first (an in-memory store keeps its connection)
    team.enroll(store.db, "f" * 40, ["decision"])
    team.leave(store.db, "f" * 40)
    if case == CASES[0]:
        for name in TRIGGERS:
            store.db.execute(f"DROP TRIGGER {name}")
    elif case == CASES[2]:
        team.enroll(store.db, "0" * 40, ["decision", "fact"])
    elif case == CASES[3]:
        team.enroll(store.db, P, ["decision", "fact"])


def timed(case: str, store: MemoryStore, count: int) -> tuple[float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(count):
        store.add("decision", f"decision {i}: the build uses target {i * 7}", project=P)
    elapsed = (time.perf_counter() - t0, time.process_time() - c0)
    queued = team.outbox_size(store.db)
    assert queued == (count if case == CASES[3] else 0), queued
    return elapsed


def one(case: str, count: int, folder: Path | None) -> tuple[float, float]:
    if folder is None:  # in memory: one connection, the same set-up statements in each case
        with MemoryStore(":memory:") as store:
            prepare(case, store)
            return timed(case, store, count)
    path = folder / f"{case[:7]}-{time.monotonic_ns()}.db"
    with MemoryStore(path) as store:
        prepare(case, store)
    with MemoryStore(path) as store:
        return timed(case, store, count)


def run(count: int, rounds: int, memory: bool = False) -> str:
    times: dict[str, list[tuple[float, float]]] = {case: [] for case in CASES}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            for case in CASES:  # interleaved, so drift hits every case alike
                times[case].append(one(case, count, None if memory else Path(tmp)))

    def med(case: str, k: int) -> float:
        return statistics.median(t[k] for t in times[case])

    where = "in memory" if memory else "file"
    lines = [
        f"| case ({count:,} x store.add, {where}) | wall s | CPU s | CPU per add (us)"
        " | CPU vs before |",
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
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--memory", action="store_true")
    args = parser.parse_args()
    print(run(args.count, args.rounds, args.memory))


if __name__ == "__main__":
    main()
