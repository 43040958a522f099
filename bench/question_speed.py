"""Question speed: the retriever against a raw FTS5 OR-query, on one store, in one run.

Usage: python bench/question_speed.py [--memories 10000] [--episodes 100000]
           [--queries 240] [--rounds 3] [--work DIR]

Target (issue 11 §3): at 10k memories + 100k episodes, `Retriever.find` (FTS mode, the
whole cascade: strict AND, relaxation, fuzzy, the question boosts: quoted phrases, named
authors, "when") has a p50 at most 3x the p50 of a raw FTS5 query over the same store:
the OR of the question's content words, ranked by BM25, LIMIT 10 (what a bare keyword
search costs). Both run over the same questions, interleaved, after one warm-up pass.

The corpus: the 10k memories of `corpus.py` (seeded) plus 100k seeded ``conversation``
episodes (a user turn and the assistant's reply about the same services, environments,
files and tools, with session id, speaker and time), imported once and cached in the
work dir. Questions: `corpus.queries` (natural language, synonyms, typos, keywords) and,
for a quarter of them, the same question as a "when" question, with a quoted phrase, or
naming an author.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus

from llmem_hooks import MemoryStore, Retriever
from llmem_hooks.session.episodes import after_words, time_words
from llmem_hooks.store import MemoryFilter
from llmem_hooks.text.query import parse_query

CORPUS_VERSION = 3  # 2: episodes carry their context words; 3: fts_after
SPEAKERS = ["user", "assistant", "reviewer", "alice", "bob"]
# ``--vocab realistic``: the everyday words of developer talk, as an agent's transcripts
# repeat them. Each sentence joins a row with probability `EVERYDAY_SHARE` and no word is
# in two of them; a search also matches a row by its context columns (the exchange before
# and after), so each word is found in about half of the rows (`recall_latency` prints
# the shares). "kept", "ran", "made" are there on purpose: their other forms (keep, run,
# make) are search synonyms (`lexicon.IRREGULAR_VERBS`).
EVERYDAY = (
    "I kept the change small and ran it again.",
    "The output made a new error in the code.",
    "Let me look at the function first; it works now.",
    "Updated the script and added a note about it.",
    "Still the same issue with the old version.",
)
EVERYDAY_SHARE = 0.25


def episode(rng: random.Random, project: str, session: str, when: datetime) -> dict[str, Any]:
    """One exchange: what a user asked and what the assistant answered."""
    s, t, e = rng.choice(corpus.SERVICES), rng.choice(corpus.TARGETS), rng.choice(corpus.ENVS)
    c, f, tool = (
        rng.choice(corpus.COMPONENTS),
        rng.choice(corpus.FILES),
        rng.choice(corpus.TOOLS),
    )
    tech = rng.choice(corpus.TECH[c])
    user = rng.choice(
        [
            f"Can you check why the {s} {t} fails on {e}?",
            f"Let's move the {c} to {tech} for {s}.",
            f"Please update {f} so the {s} {t} reads its port from the env.",
            f"What does `{tool}` do in the {s} repo?",
            f"The {e} deploy of {s} is slow again, any idea?",
        ]
    )
    reply = rng.choice(
        [
            f"I looked at {f}: the {c} times out on {e}; raised the limit and reran {tool}.",
            f"Done: {s} now uses {tech} for the {c}. Tool: bash: {tool} (ok)",
            f"The {t} reads PORT since this change; tests pass locally.",
            f"{tool} runs the {s} checks; it failed once on {e} because of the {c}.",
        ]
    )
    return {
        "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "type": "conversation",
        "content": f"User: {user}\nAssistant: {reply}",
        "confidence": 0.6,
        "project": project,
        "session_id": session,
        "entered_by": rng.choice(["opencode", "copilot"]),
        "metadata": {"speaker": rng.choice(SPEAKERS), "time": when.date().isoformat()},
        "created_at": when.isoformat().replace("+00:00", "Z"),
        "source": "episode",
    }


def everyday(rng: random.Random) -> str:
    """The everyday sentences one row of the realistic corpus adds (often none)."""
    return " ".join(s for s in EVERYDAY if rng.random() < EVERYDAY_SHARE)


def build(
    memories: int, episodes: int, work: Path, seed: int = 5, vocab: str = "rare"
) -> list[corpus.Memory]:
    """The store at ``work``/questions-M-E.db (cached); returns the generated memories.
    ``vocab="realistic"``: every memory and episode also holds `everyday` sentences
    (another file, questions-M-E-realistic.db)."""
    mems = corpus.generate(memories)
    path = db_path(memories, episodes, work, vocab)
    stamp = path.with_suffix(".ok")
    if (
        path.exists()
        and stamp.exists()
        and stamp.read_text() == (f"{memories}:{episodes}:{seed}:{CORPUS_VERSION}:{vocab}")
    ):
        return mems
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    projects = corpus.projects_for(memories)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    vrng = random.Random(seed + 1)
    with MemoryStore(path) as store:
        recs = list(corpus.records(mems))
        if vocab == "realistic":
            for rec in recs:
                rec["content"] = f"{rec['content']} {everyday(vrng)}".strip()
        store.import_memories(recs)
        batch: list[dict[str, Any]] = []
        session, project, when = "", projects[0], start
        for i in range(episodes):
            if i % 8 == 0:  # about eight exchanges per session
                session = f"ses_{rng.getrandbits(48):012x}"
                project = rng.choice(projects)
                when = start + timedelta(minutes=rng.randrange(0, 60 * 24 * 300))
            when += timedelta(minutes=rng.randrange(1, 9))
            ep = episode(rng, project, session, when)
            if vocab == "realistic":
                ep["content"] = f"{ep['content']} {everyday(vrng)}".strip()
            # the context words the sidecar writes (llmem_hooks.session.episodes): the exchange
            # before, the time as words, and (added later) the exchange after
            prev = batch[-1] if batch and batch[-1]["session_id"] == session else None
            ep["metadata"]["fts_context"] = " ".join(
                x for x in (prev["content"][:600] if prev else "", time_words(when_ms(when))) if x
            )
            if prev:
                prev["metadata"]["fts_after"] = after_words(ep["content"])
            batch.append(ep)
            if len(batch) >= 10_000 and i % 8 == 7:
                store.import_memories(batch)
                batch = []
        if batch:
            store.import_memories(batch)
    stamp.write_text(f"{memories}:{episodes}:{seed}:{CORPUS_VERSION}:{vocab}")
    return mems


def when_ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


def db_path(memories: int, episodes: int, work: Path, vocab: str = "rare") -> Path:
    tail = "" if vocab == "rare" else f"-{vocab}"
    return work / f"questions-{memories}-{episodes}{tail}.db"


def questions(mems: list[corpus.Memory], count: int, seed: int = 3) -> list[tuple[str, str | None]]:
    """(question, project filter) pairs: corpus questions, a quarter of them reshaped."""
    rng = random.Random(seed)
    out: list[tuple[str, str | None]] = []
    for i, q in enumerate(corpus.queries(mems, count)):
        text = q.text
        content = parse_query(text).terms
        if i % 12 == 1:
            text = "when did we " + " ".join(content[:4]) + "?"
        elif i % 12 == 5 and len(content) >= 2:
            text = f'what did we say about "{content[0]} {content[1]}"?'
        elif i % 12 == 9:
            text = (
                f"what did the {rng.choice(['reviewer', 'user', 'alice'])} say about "
                + " ".join(content[:3])
            )
        out.append((text, q.project))
    return out


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def measure(
    memories: int, episodes: int, count: int, rounds: int, work: Path
) -> dict[str, dict[str, float]]:
    mems = build(memories, episodes, work)
    qs = questions(mems, count)
    raw_t: list[float] = []
    ret_t: list[float] = []
    with MemoryStore(db_path(memories, episodes, work)) as store:
        r = Retriever(store)

        def raw(text: str, project: str | None) -> None:
            parsed = parse_query(text)
            if parsed.terms:
                store.fts_search(parsed.any_of(parsed.terms), MemoryFilter(project=project), 10)

        def full(text: str, project: str | None) -> None:
            r.find(
                text,
                MemoryFilter(project=project),
                limit=10,
                search_mode="fts",
                track_access=False,
            )

        for text, project in qs:  # warm-up
            raw(text, project)
            full(text, project)
        for _ in range(rounds):
            for text, project in qs:
                t0 = time.perf_counter()
                raw(text, project)
                t1 = time.perf_counter()
                full(text, project)
                t2 = time.perf_counter()
                raw_t.append((t1 - t0) * 1000)
                ret_t.append((t2 - t1) * 1000)
    return {
        name: {"n": len(v), "p50": statistics.median(v), "p95": percentile(v, 95)}
        for name, v in (("raw FTS5 OR", raw_t), ("Retriever.find", ret_t))
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--episodes", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=240)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", type=Path, default=corpus.CACHE_DIR)
    args = ap.parse_args()
    res = measure(args.memories, args.episodes, args.queries, args.rounds, args.work)
    print("| store | query | searches | p50 ms | p95 ms |")
    print("|---|---|---:|---:|---:|")
    label = f"{args.memories:,} + {args.episodes:,} episodes"
    for name, m in res.items():
        print(f"| {label} | {name} | {m['n']} | {m['p50']:.2f} | {m['p95']:.2f} |")
    ratio = res["Retriever.find"]["p50"] / res["raw FTS5 OR"]["p50"]
    print(f"\np50 ratio: {ratio:.2f}x (target <= 3x)")


if __name__ == "__main__":
    main()
