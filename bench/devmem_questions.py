"""DevMemBench questions against the retriever, in process (no agents, no sidecar).

Usage: python bench/devmem_questions.py [--data DIR] [--limit 10] [--show-misses]

Each session of ``sessions.json`` is stored as ``conversation`` memories, one per exchange
(a user message and the assistant's reply), with its session id, project and date, the
way the sidecar stores episodes; then every question of ``questions-dev.json`` that has
evidence sessions runs through `Retriever.find` (FTS, no project filter). Reports
evidence-session recall@10 (a result from one of the question's sessions in the top 10),
recall@5, MRR of the first such result, and answer coverage: of the ground truth's
distinctive words (4+ letters, not stop words) that the evidence sessions hold, the share
found in the top 5 results, with the characters those 5 hold. Skips cleanly when the
dataset folder is absent. This is a quick harness for the retriever; ``bench/devmem.py``
(the real adapters and sidecar) is the end-to-end figure.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from llmem_hooks import MemoryStore, Retriever
from llmem_hooks.text.query import STOP_WORDS, words

sys.path.insert(0, str(Path(__file__).resolve().parent))
from keyword_floor import KeywordFloor

DATA = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "devmembench"
for _candidate in (
    Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "devmembench",
    Path(__file__).resolve().parents[2] / "shared" / "datasets" / "devmembench",
):
    if _candidate.is_dir():
        DATA = _candidate


def exchanges(session: dict[str, Any]) -> list[str]:
    """The session's messages paired: each user message with the replies that follow."""
    out: list[str] = []
    for msg in session["messages"]:
        who = "User" if msg["role"] == "user" else "Assistant"
        line = f"{who}: {msg['content']}"
        if msg["role"] == "user" or not out:
            out.append(line)
        else:
            out[-1] += "\n" + line
    return out


def load(store: MemoryStore, sessions: list[dict[str, Any]]) -> int:
    n = 0
    for s in sessions:
        date = s["metadata"]["date"]
        for i, text in enumerate(exchanges(s)):
            store.add(
                "conversation",
                text[:9000],
                session_id=s["sessionId"],
                project=s["metadata"].get("project"),
                entered_by="user",
                created_at=f"{date}T{10 + i // 60:02d}:{i % 60:02d}:00Z",
                metadata={"time": date},
                dedupe=False,
            )
            n += 1
    return n


def distinctive(text: str) -> set[str]:
    return {w for w in words(text) if len(w) >= 4 and w not in STOP_WORDS}


def evaluate(data: Path, limit: int = 10, show_misses: bool = False) -> dict[str, Any]:
    sessions = json.loads((data / "sessions.json").read_text())
    questions = json.loads((data / "questions-dev.json").read_text())
    by_id = {s["sessionId"]: s for s in sessions}
    with tempfile.TemporaryDirectory() as tmp, MemoryStore(Path(tmp) / "m.db") as store:
        stored = load(store, sessions)
        r = Retriever(store)
        floor = KeywordFloor()  # the plain FTS5 floor over the same exchanges
        for sess in sessions:
            for i, text in enumerate(exchanges(sess)):
                floor.add(f"{sess['sessionId']}#{i}", text)
        franks: list[int | None] = []
        ranks: list[int | None] = []
        per_type: dict[str, list[int | None]] = defaultdict(list)
        cover: list[float] = []
        chars: list[int] = []
        for q in questions:
            want = set(q["haystackSessionIds"])
            if not want:
                continue
            hits = r.find(q["question"], limit=limit, search_mode="fts", track_access=False)
            sids = [h.memory["session_id"] for h in hits]
            rank = next((i + 1 for i, s in enumerate(sids) if s in want), None)
            ranks.append(rank)
            fsids = [key.split("#")[0] for key, _ in floor.search(q["question"], limit)]
            franks.append(next((i + 1 for i, s in enumerate(fsids) if s in want), None))
            per_type[q["questionType"]].append(rank)
            evidence = " ".join(m["content"] for s in want for m in by_id[s]["messages"])
            gt = distinctive(q["groundTruth"]) & distinctive(evidence)
            top5 = " ".join(h.memory["content"] for h in hits[:5])
            chars.append(len(top5))
            if gt:
                cover.append(len(gt & distinctive(top5)) / len(gt))
            if show_misses and (rank is None or rank > 5):
                print(
                    f"MISS {q['questionId']} {q['question']!r} want={sorted(want)}", file=sys.stderr
                )
                print(f"     got {sids[:5]}", file=sys.stderr)
    n = len(ranks) or 1
    return {
        "episodes": stored,
        "questions": len(ranks),
        "recall@1": sum(1 for x in ranks if x == 1) / n,
        "recall@5": sum(1 for x in ranks if x and x <= 5) / n,
        "recall@10": sum(1 for x in ranks if x and x <= 10) / n,
        "mrr": sum(1 / x for x in ranks if x) / n,
        "floor@1/5/10": [round(sum(1 for x in franks if x and x <= k) / n, 3) for k in (1, 5, 10)],
        "coverage@5": sum(cover) / (len(cover) or 1),
        "chars@5": sum(chars) / (len(chars) or 1),
        "recall@10 by type": {
            t: round(sum(1 for x in v if x and x <= 10) / len(v), 3)
            for t, v in sorted(per_type.items())
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--show-misses", action="store_true")
    args = ap.parse_args()
    if not (args.data / "questions-dev.json").is_file():
        print(f"skipped: no DevMemBench at {args.data}")
        return
    print(json.dumps(evaluate(args.data, args.limit, args.show_misses), indent=1))


if __name__ == "__main__":
    main()
