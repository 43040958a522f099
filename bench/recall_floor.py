"""Recall's relevance floor, measured: what the settings give and what they keep out.

Usage: python bench/recall_floor.py [--memories 10000] [--episodes 100000] [--prompts 240]

On `question_speed`'s store (10k seeded memories + 100k seeded episodes), for each
setting of the floor (``recall.min_coverage``, ``recall.common_word_share``,
``recall.min_content_words``):

- answered: the share of the corpus questions (each with its one relevant memory,
  asked in its project) whose relevant memory is in the recall block;
- entries: the mean number of entries in those blocks (each costs prompt tokens);
- small talk: the share of `SMALL_TALK` prompts that got a block (should be 0);
- off topic: the share of `OFF_TOPIC` prompts (work talk about things the store does not
  hold) that got a block (lower is better; each such block is noise);
- ms: mean recall time in process.

Every prompt runs in a new session, so "already given" never hides anything.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus
import question_speed

from llmem_hooks import MemoryStore
from llmem_hooks.service.operations import QueryService

SMALL_TALK = [
    "hi",
    "hello!",
    "continue",
    "thanks",
    "thank you!",
    "ok",
    "ok, continue please",
    "yes go ahead",
    "looks good",
    "perfect, thanks",
    "keep going",
    "sounds good to me",
    "great work",
    "try again",
    "what next?",
    "go on",
    "yes",
    "no",
    "do it",
    "sure, why not",
]
OFF_TOPIC = [
    "write a haiku about autumn leaves",
    "explain how photosynthesis works in simple words",
    "what is the capital of australia?",
    "translate good morning into japanese",
    "summarize the plot of hamlet",
    "how many bones are in the human hand?",
    "recommend a good book about medieval castles",
    "convert 30 celsius to fahrenheit",
    "draw an ascii art cat",
    "what rhymes with orange?",
]
SETTINGS = [
    {"min_coverage": 0.5, "common_word_share": 0.1},  # the defaults
    {"min_coverage": 0.0, "common_word_share": 1.0},
    {"min_coverage": 0.34, "common_word_share": 1.0},
    {"min_coverage": 0.5, "common_word_share": 1.0},
    {"min_coverage": 0.67, "common_word_share": 1.0},
    {"min_coverage": 0.5, "common_word_share": 0.05},
    {"min_coverage": 0.45, "common_word_share": 0.1},  # the defaults before issue 20's blocks
    {"min_coverage": 0.5, "common_word_share": 0.15},
    {"min_coverage": 0.5, "common_word_share": 0.2},
    {"min_coverage": 0.34, "common_word_share": 0.15},
    {"min_coverage": 0.5, "common_word_share": 0.15, "min_content_words": 1},
    {"min_coverage": 0.5, "common_word_share": 0.15, "min_content_words": 3},
]


def run(store: MemoryStore, qs: list[corpus.Query], recall: dict[str, float]) -> dict[str, float]:
    cfg = {"ollama": {"enabled": False}, "recall": recall}
    svc = QueryService(store, cfg)
    n = 0
    answered = 0
    entries: list[int] = []
    times: list[float] = []

    def ask(prompt: str, project: str | None) -> dict:
        nonlocal n
        n += 1
        t0 = time.perf_counter()
        out = svc.recall(f"floor-{n}-{time.monotonic_ns()}", prompt, project=project)
        times.append((time.perf_counter() - t0) * 1000)
        return out

    for q in qs:
        out = ask(q.text, q.project)
        answered += bool(set(out["memory_ids"]) & set(q.relevant))
        if out["block"]:
            entries.append(len(out["ids"]))
    small = sum(bool(ask(p, None)["block"]) for p in SMALL_TALK)
    off = sum(bool(ask(p, None)["block"]) for p in OFF_TOPIC)
    return {
        "answered": answered / len(qs),
        "entries": statistics.mean(entries) if entries else 0.0,
        "small_talk": small / len(SMALL_TALK),
        "off_topic": off / len(OFF_TOPIC),
        "ms": statistics.mean(times),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--episodes", type=int, default=100_000)
    ap.add_argument("--prompts", type=int, default=240)
    ap.add_argument("--work", type=Path, default=corpus.CACHE_DIR)
    args = ap.parse_args()
    mems = question_speed.build(args.memories, args.episodes, args.work)
    qs = corpus.queries(mems, args.prompts)
    db = question_speed.db_path(args.memories, args.episodes, args.work)
    home = args.work / "recall-floor-home"
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.environ["LLMEM_HOME"] = str(home)  # no context files of real sessions
    # a copy: recall writes what it gave (recall_given); the cached corpus stays as built
    copy = args.work / "recall-floor.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{copy}{suffix}").unlink(missing_ok=True)
    with MemoryStore(db) as src:
        src.conn.execute("VACUUM INTO ?", (str(copy),))
    print(
        "| min_coverage | common_word_share | min_content_words | answered | entries |"
        " small talk | off topic | ms |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    with MemoryStore(copy) as store:
        for setting in SETTINGS:
            r = run(store, qs, setting)
            print(
                f"| {setting['min_coverage']} | {setting['common_word_share']} "
                f"| {setting.get('min_content_words', 2)} | {r['answered']:.3f} "
                f"| {r['entries']:.2f} | {r['small_talk']:.2f} | {r['off_topic']:.2f} "
                f"| {r['ms']:.1f} |"
            )
    for suffix in ("", "-wal", "-shm"):
        Path(f"{copy}{suffix}").unlink(missing_ok=True)


if __name__ == "__main__":
    main()
