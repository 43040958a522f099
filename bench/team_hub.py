"""The team hub at scale: many members pushing at once, hub search, push/pull cost by size.

Usage: python bench/team_hub.py [--members 20] [--per-member 1000] [--search-size 100000]
           [--queries 240] [--work DIR] [--json]

A real PostgreSQL 16 + pgvector (pgserver, on a Unix socket, passwords on: the tests'
`support.pg`), one project, ``--members`` PostgreSQL roles, each with an LLMEM_HOME of its
own (a real local store, enrolled, with its memories added through `MemoryStore.add`, so
the outbox triggers fill it as in use). Measured, in one run:

1. **Push at once**: every member's sidecar code (`TeamSync.push`) in its own process,
   started together; wall time from the start signal to the last member done, and
   memories per second over all members.
2. **Converge**: every member then pulls (`TeamSync.pull`) until its cursor reaches the
   hub's head; the time until the last member holds everyone's memories.
3. **Hub search at ``--search-size``** shared memories (the `corpus.py` memories, pushed
   by one more member): p50/p95 of `Hub.search` for the corpus questions, and beside it the
   same question on a local store holding the same memories (`Retriever.search`, FTS), and
   how often each finds the right memory in its top 10.
4. **Push and pull cost by hub size**: a batch of 200 new memories pushed, and 200
   mutations pulled by a fresh member, at each size the hub passes through (per change).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

import corpus  # noqa: E402

from llmem_hooks.config import Config  # noqa: E402
from llmem_hooks.store import MemoryStore  # noqa: E402
from llmem_hooks.store import team as local  # noqa: E402

PROJECT = "0" * 40  # the project key (a root commit's shape)
TYPES = ("decision", "procedure", "fact", "project_state")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _settings() -> Any:
    return Config.from_mapping({}).team


def _member_store(path: Path, who: int, count: int) -> None:
    """A member's local store: enrolled, ``count`` memories of theirs (queued by the
    triggers as they are added)."""
    with MemoryStore(path) as store:
        local.enroll(store.db, PROJECT, TYPES)
        with store.atomic():
            for i in range(count):
                store.add(
                    TYPES[i % len(TYPES)],
                    f"Member {who} note {i}: service s{who}-{i} runs on port {10000 + i} "
                    f"behind the gateway g{i % 13}.",
                    project=PROJECT,
                    dedupe=False,
                )


def _push_worker(args: tuple[str, str, Any, Any]) -> float:
    path, dsn, start, _ = args
    from llmem_hooks.store.hub import Hub
    from llmem_hooks.team.sync import SyncReport, TeamSync

    with MemoryStore(path) as store, Hub.connect(dsn) as hub:
        sync = TeamSync(store, hub, _settings())
        start.wait()
        t0 = time.perf_counter()
        sync.push(SyncReport())
        return time.perf_counter() - t0


def _pull_worker(args: tuple[str, str, Any, Any]) -> float:
    path, dsn, start, _ = args
    from llmem_hooks.store.hub import Hub
    from llmem_hooks.team.sync import SyncReport, TeamSync

    with MemoryStore(path) as store, Hub.connect(dsn) as hub:
        sync = TeamSync(store, hub, _settings())
        start.wait()
        t0 = time.perf_counter()
        head = hub.head(PROJECT)
        while local.cursor(store.db, PROJECT) < head:
            sync.pull(SyncReport(), [PROJECT])
        return time.perf_counter() - t0


def _run_all(fn: Any, jobs: list[tuple[str, str]]) -> tuple[float, list[float]]:
    ctx = mp.get_context("fork")
    with ctx.Manager() as manager:
        start = manager.Event()
        with ctx.Pool(len(jobs)) as pool:
            pending = pool.map_async(fn, [(p, d, start, None) for p, d in jobs])
            time.sleep(1.0)  # every worker connected and waiting
            t0 = time.perf_counter()
            start.set()
            each = pending.get()
            return time.perf_counter() - t0, each


def _batch_cost(hub: Any, dsn_fresh: str, work: Path, size_label: int) -> dict[str, float]:
    """Push 200 new memories in one batch; pull the last 200 mutations as a fresh member."""
    from llmem_hooks.store.hub import Hub, HubMemory
    from llmem_hooks.team.sync import SyncReport, TeamSync

    items = [
        HubMemory(
            id=f"cost-{size_label}-{i}",
            project=PROJECT,
            type="fact",
            content=f"Cost probe {size_label}/{i}: cache c{i} holds {i * 7} entries.",
            revision=1,
            updated_at="2026-11-27T00:00:00Z",
            device="bench",
        )
        for i in range(200)
    ]
    t0 = time.perf_counter()
    hub.push(items)
    push_s = time.perf_counter() - t0
    path = work / f"fresh-{size_label}.db"
    with MemoryStore(path) as store, Hub.connect(dsn_fresh) as fresh:
        local.enroll(store.db, PROJECT, TYPES)
        head = fresh.head(PROJECT)
        local.set_cursor(store.db, PROJECT, head - 200)
        t0 = time.perf_counter()
        TeamSync(store, fresh, _settings()).pull(SyncReport(), [PROJECT])
        pull_s = time.perf_counter() - t0
    return {
        "hub_changes": size_label,
        "push_ms_per_change": 1000 * push_s / 200,
        "pull_ms_per_change": 1000 * pull_s / 200,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--members", type=int, default=20)
    ap.add_argument("--per-member", type=int, default=1000)
    ap.add_argument("--search-size", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=240)
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from support.pg import server_folder, start_cluster

    from llmem_hooks.search.retriever import Retriever
    from llmem_hooks.store import MemoryFilter
    from llmem_hooks.store.hub import Hub, HubMemory
    from llmem_hooks.text.query import content_words

    out: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "members": args.members,
        "per_member": args.per_member,
    }
    work = args.work or Path(tempfile.mkdtemp(prefix="llmem-team-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    with server_folder() as folder:
        cluster = start_cluster(folder)
        try:
            with cluster.admin() as conn:
                conn.execute("CREATE DATABASE teambench")
            owner_dsn = cluster.dsn(db="teambench")
            with Hub.connect(owner_dsn) as owner:
                owner.migrate()
                owner.register_project(PROJECT, "acme/bench")
                dsns = []
                for m in range(args.members + 2):
                    role, pw = f"member{m:02d}", f"pw-{m}-{os.getpid()}"
                    owner.create_role(role, pw)
                    owner.add_member(PROJECT, role, "write")
                    dsns.append(cluster.dsn(role, pw, db="teambench"))
            paths = [work / f"member{m:02d}.db" for m in range(args.members)]
            t0 = time.perf_counter()
            for m, path in enumerate(paths):
                _member_store(path, m, args.per_member)
            out["setup_local_adds_s"] = round(time.perf_counter() - t0, 1)

            wall, each = _run_all(_push_worker, list(zip(map(str, paths), dsns, strict=False)))
            total = args.members * args.per_member
            out["push"] = {
                "wall_s": round(wall, 2),
                "memories_per_s": round(total / wall),
                "slowest_member_s": round(max(each), 2),
            }
            wall, each = _run_all(_pull_worker, list(zip(map(str, paths), dsns, strict=False)))
            out["converge"] = {
                "wall_s": round(wall, 2),
                "median_member_s": round(statistics.median(each), 2),
                "slowest_member_s": round(max(each), 2),
                "applied_per_member": total - args.per_member,
            }
            with MemoryStore(paths[0]) as store:
                out["converge"]["member0_holds"] = store.count()

            costs = []
            with Hub.connect(dsns[args.members]) as pusher:
                costs.append(
                    _batch_cost(pusher, dsns[args.members + 1], work, pusher.head(PROJECT))
                )
                made = corpus.generate(args.search_size * 5 // 4 + 10)
                mems = [m for m in made if m.record["type"] != "conversation"]
                mems = mems[: max(0, args.search_size - pusher.head(PROJECT))]
                batch: list[HubMemory] = []
                pushed = 0
                for m in mems:
                    rec = m.record
                    batch.append(
                        HubMemory(
                            id=rec["id"],
                            project=PROJECT,
                            type=rec["type"],
                            content=rec["content"],
                            revision=1,
                            updated_at=rec["created_at"],
                            device="bench",
                            tags=tuple(rec["tags"]),
                        )
                    )
                    if len(batch) == 500:
                        pusher.push(batch)
                        pushed += len(batch)
                        batch = []
                        if pushed in (10_000, 50_000):
                            costs.append(
                                _batch_cost(
                                    pusher, dsns[args.members + 1], work, pusher.head(PROJECT)
                                )
                            )
                if batch:
                    pusher.push(batch)
                costs.append(
                    _batch_cost(pusher, dsns[args.members + 1], work, pusher.head(PROJECT))
                )
                out["cost_by_size"] = [{k: round(v, 3) for k, v in c.items()} for c in costs]

                questions = corpus.queries([m for m in mems if m.key is not None], args.queries)
                local_path = work / "local-search.db"
                with MemoryStore(local_path) as store:
                    if store.count() == 0:
                        store.import_memories([{**m.record, "project": PROJECT} for m in mems])
                    retriever = Retriever.from_settings(
                        store, Config.from_mapping({}).retrieval, None
                    )
                    hub_ms, local_ms, hub_hit, local_hit = [], [], 0, 0
                    for rnd in range(2):
                        for q in questions:
                            words = content_words(q.text)
                            t0 = time.perf_counter()
                            found = pusher.search([PROJECT], words, limit=10)
                            dt = 1000 * (time.perf_counter() - t0)
                            t0 = time.perf_counter()
                            hits = retriever.find(
                                q.text,
                                MemoryFilter(project=PROJECT),
                                limit=10,
                                search_mode="fts",
                                track_access=False,
                            )
                            dl = 1000 * (time.perf_counter() - t0)
                            if rnd:
                                hub_ms.append(dt)
                                local_ms.append(dl)
                                hub_hit += any(h.id in q.relevant for h, _ in found)
                                local_hit += any(h.id in q.relevant for h in hits)
                n = len(questions)
                out["search"] = {
                    "hub_changes": pusher.head(PROJECT),
                    "questions": n,
                    "hub_p50_ms": round(statistics.median(hub_ms), 2),
                    "hub_p95_ms": round(pct(hub_ms, 0.95), 2),
                    "local_p50_ms": round(statistics.median(local_ms), 2),
                    "local_p95_ms": round(pct(local_ms, 0.95), 2),
                    "hub_recall_at_10": round(hub_hit / n, 3),
                    "local_recall_at_10": round(local_hit / n, 3),
                }
        finally:
            cluster.stop()
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
