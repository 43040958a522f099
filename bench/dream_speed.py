"""Dream cycle speed: a dry run and an applied run of all three phases over 100k memories.

Usage: python bench/dream_speed.py [--sizes 10000,100000]

The store is the bench corpus (`corpus.generate`: templated memories of many projects,
20% of them conversation summaries) plus the work a dream finds: a reworded duplicate of
every 20th memory, recalls on every 50th, an expired one every 100th, 2% of the store in
episodes past their retention. The floor, measured in the same run, is one read of every
live memory's text and its normalized words (what any merge by wording needs). The apply
runs on a fresh copy of the store, so both runs see the same work.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

# bench/ after the stdlib: none of its modules may shadow a standard one
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE] + [str(_HERE)]

import corpus  # noqa: E402

from llmem_hooks import Dreamer, MemoryStore  # noqa: E402
from llmem_hooks.config import DEFAULT_CONFIG  # noqa: E402
from llmem_hooks.dream.likeness import words  # noqa: E402
from llmem_hooks.store.dream import live_memories  # noqa: E402
from llmem_hooks.timestamps import now_iso  # noqa: E402


def seeded(size: int) -> list[dict[str, Any]]:
    rng = random.Random(5)
    now = datetime.now(UTC)
    out: list[dict[str, Any]] = []
    for i, rec in enumerate(corpus.records(corpus.generate(size))):
        rec = dict(rec)
        rec["created_at"] = (now - timedelta(days=rng.uniform(0, 200))).isoformat()
        if i % 50 == 0:
            rec["access_count"] = 4
            rec["accessed_at"] = (now - timedelta(days=1)).isoformat()
        if i % 100 == 1:
            rec["expires_at"] = (now - timedelta(days=1)).isoformat()
        out.append(rec)
        if i % 20 == 0 and rec["type"] != "conversation":
            dup = dict(rec, id=f"dup-{i}", tags=[], access_count=0, accessed_at=None)
            dup["content"] = rec["content"].lower().rstrip(".") + "."
            out.append(dup)
    for j in range(size // 50):
        out.append(
            {
                "id": f"old-episode-{j}",
                "type": "conversation",
                "source": "episode",
                "content": f"user: question {j} about the build\nassistant: answer {j}",
                "created_at": (now - timedelta(days=400 + j % 30)).isoformat(),
                "session_id": f"s{j % 97}",
            }
        )
    return out


def measure(size: int, work: Path) -> dict[str, Any]:
    base = work / f"dream-{size}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{base}{suffix}").unlink(missing_ok=True)
    with MemoryStore(base) as st:
        st.import_memories(seeded(size))
        total = st.count(valid_only=False)
        st.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    cfg = {k: dict(v) for k, v in DEFAULT_CONFIG.items()}
    out: dict[str, Any] = {"size": size, "stored": total}
    with MemoryStore(base) as st:
        t0 = time.perf_counter()
        live = live_memories(st, now_iso())
        for m in live:
            words(m["content"])
        out["floor_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        dry = Dreamer(st, cfg, home=work).run(apply=False)
        out["dry_s"] = time.perf_counter() - t0
    copy = work / f"dream-{size}-apply.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{copy}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(base, copy)
    with MemoryStore(copy) as st:
        t0 = time.perf_counter()
        run = Dreamer(st, cfg, home=work).run(apply=True)
        out["apply_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = Dreamer(st, cfg, home=work).run(apply=False)
        out["next_s"] = time.perf_counter() - t0
        out["next_counts"] = again.counts()
        t0 = time.perf_counter()
        Dreamer(st, cfg, home=work).undo(run.run_id)
        out["undo_s"] = time.perf_counter() - t0
    out["dry_counts"] = dry.counts()
    out["apply_counts"] = run.counts()
    out["phases_s"] = {r.phase: round(r.seconds, 2) for r in run.results}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100000")
    args = ap.parse_args()
    work = corpus.CACHE_DIR / "dream"
    work.mkdir(parents=True, exist_ok=True)
    os.environ["LLMEM_HOME"] = str(work)  # backups, diary, report: never the user's home
    print("| memories (+dups, episodes) | floor s | dry run s | x floor | apply s | x floor"
          " | next dry run s | undo s | apply by phase s |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for size in (int(s) for s in args.sizes.split(",")):
        m = measure(size, work)
        f = m["floor_s"]
        print(
            f"| {m['size']:,} ({m['stored']:,}) | {f:.2f} | {m['dry_s']:.2f} |"
            f" {m['dry_s'] / f:.1f}x | {m['apply_s']:.2f} | {m['apply_s'] / f:.1f}x |"
            f" {m['next_s']:.2f} | {m['undo_s']:.2f} | {m['phases_s']} |"
        )
        print(f"  changes: {m['apply_counts']}")
        same = "yes" if m["dry_counts"] == m["apply_counts"] else f"NO: {m['dry_counts']}"
        print(f"  the dry run's counts equal the apply's: {same}")
        print(f"  the next run would change: {m['next_counts']}")
    shutil.rmtree(work / "backups", ignore_errors=True)


if __name__ == "__main__":
    main()
