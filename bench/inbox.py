"""The inbox on the learning corpus: how many true statements it recovers, how many false
ones it promotes (docs/benchmarks.md, "The inbox").

Usage: python bench/inbox.py [--split dev|held-out|both] [--devmem DIR] [--show] [--json]

Each utterance of ``tests/fixtures/learning/{dev,held-out}.tsv`` (bench/learning.py) is sent
as one user message of its own session, as an agent stores it, through the real extraction
(`ExtractionEngine.extract_staged`, the heuristics) into a real store: sure candidates
become memories, unsure ones go to the inbox with the metadata the session hooks give them.
Then the dream's deep phase runs (`Dreamer`, applied) in two worlds:

- said once: nobody says anything again; the dream runs ``dream.inbox_days`` + 1 days later;
- said again: every utterance, positives AND noise, is said a second time, word for word,
  in a later session (the worst case for false promotions: noise repeated as often as
  facts), then the dream runs.

Recovered: positives no memory was made of at once, promoted from the inbox; false:
noise promoted. ``--devmem DIR`` (default ``../shared/datasets/devmembench``, skipped when
absent) also feeds the user messages of the DevMemBench sessions, in order, one session
each, and lists what the inbox stages and what a later session's words promote: no
labels there, so ``--show`` prints them to be judged by hand.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from learning import SPLITS, Utterance, load  # noqa: E402

from llmem_hooks.config import Config  # noqa: E402
from llmem_hooks.dream.cycle import Dreamer  # noqa: E402
from llmem_hooks.events import Message  # noqa: E402
from llmem_hooks.extraction import ExtractionEngine  # noqa: E402
from llmem_hooks.store import MemoryStore  # noqa: E402

PROJECT = "bench-project"
DEVMEM = ROOT.parent / "shared" / "datasets" / "devmembench"


def say(
    store: MemoryStore, engine: ExtractionEngine, sid: str, texts: list[str], project: str = PROJECT
) -> tuple[int, int]:
    """One session: its user messages through extraction into the store, as the session
    hooks store them. Returns (memories added, candidates staged)."""
    msgs = [Message(f"{sid}-m{i}", sid, "user", f"User: {t}") for i, t in enumerate(texts)]
    found = engine.extract_staged(msgs, project=project)
    added = 0
    for c in found.memories:
        added += bool(
            store.add(
                c.type,
                c.content,
                confidence=c.confidence,
                tags=c.tags,
                source="extract",
                entered_by="bench",
                project=project,
                session_id=sid,
                source_message_ids=c.source_message_ids,
            )
        )
    for c in found.inbox:
        meta = {
            "type": c.type,
            "tags": c.tags,
            "project": project,
            "agent": "bench",
            "session_id": sid,
            "source_message_ids": c.source_message_ids,
        }
        store.add_to_inbox(c.content, "extract", c.confidence, meta)
    return added, len(found.inbox)


# The heuristics' inbox: no model is asked to confirm (none runs here; a model's verdicts
# would be a measure of that model).
CONFIG = Config.from_mapping({"ollama": {"enabled": False}})


def deep(store: MemoryStore, home: Path, days_later: float = 0.0) -> Any:
    now = datetime.now(UTC) + timedelta(days=days_later)
    return Dreamer(store, CONFIG, home=home, now=now).run(["deep"], apply=True).results[0]


@dataclass
class Row:
    split: str
    world: str
    n: int
    positives: int
    learned_true: int = 0
    learned_false: int = 0
    staged_true: int = 0
    staged_false: int = 0
    recovered: int = 0
    promoted_false: int = 0
    dropped: int = 0
    recovered_texts: list[str] = field(default_factory=list)
    false_texts: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        keep = self.learned_true + self.recovered
        kept_all = keep + self.learned_false + self.promoted_false
        return {
            "split": self.split,
            "world": self.world,
            "utterances": self.n,
            "positives": self.positives,
            "learned_true": self.learned_true,
            "learned_false": self.learned_false,
            "staged_true": self.staged_true,
            "staged_false": self.staged_false,
            "recovered": self.recovered,
            "promoted_false": self.promoted_false,
            "dropped": self.dropped,
            "recall_before": round(self.learned_true / self.positives, 3),
            "recall_after": round(keep / self.positives, 3),
            "precision_after": round(keep / kept_all, 3) if kept_all else 1.0,
        }


def run_world(split: str, world: str, items: list[Utterance], tmp: Path) -> Row:
    row = Row(split, world, len(items), sum(u.positive for u in items))
    engine = ExtractionEngine()
    home = tmp / f"{split}-{world}"
    home.mkdir()
    with MemoryStore(home / "memory.db") as store:
        first: dict[int, tuple[int, int]] = {}
        for i, u in enumerate(items):
            first[i] = say(store, engine, f"a{i}", [u.text])
            added, staged = first[i]
            if added:
                row.learned_true += u.positive
                row.learned_false += not u.positive
            elif staged:
                row.staged_true += u.positive
                row.staged_false += not u.positive
        if world == "said again":
            for i, u in enumerate(items):
                say(store, engine, f"b{i}", [u.text])
            result = deep(store, home)
        else:
            result = deep(store, home, CONFIG.dream.inbox_days + 1)
        made = {c["content"] for c in result.consolidated if c["how"] == "said again"}
        row.dropped = len(result.evicted)
        for i, u in enumerate(items):
            if first[i][0] or not first[i][1]:
                continue
            staged = engine.extract_staged([Message("x", "s", "user", f"User: {u.text}")]).inbox
            if any(c.content in made for c in staged):
                if u.positive:
                    row.recovered += 1
                    row.recovered_texts.append(u.text)
                else:
                    row.promoted_false += 1
                    row.false_texts.append(u.text)
    return row


def devmem(data: Path, tmp: Path) -> dict[str, Any] | None:
    path = data / "sessions.json"
    if not path.exists():
        return None
    sessions = json.loads(path.read_text(encoding="utf-8"))
    engine = ExtractionEngine()
    home = tmp / "devmem"
    home.mkdir()
    users = 0
    memories = 0
    staged: list[str] = []
    with MemoryStore(home / "memory.db") as store:
        for s in sessions:
            texts = [m["content"] for m in s["messages"] if m["role"] == "user"]
            users += len(texts)
            project = str(s.get("metadata", {}).get("project") or PROJECT)
            added, _ = say(store, engine, str(s["sessionId"]), texts, project)
            memories += added
        staged = [i["content"] for i in store.list_inbox(10_000)]
        result = deep(store, home)
    return {
        "sessions": len(sessions),
        "user_messages": users,
        "memories": memories,
        "staged": len(staged),
        "promoted": [c["content"] for c in result.consolidated if c["how"] == "said again"],
        "known": [c["content"] for c in result.consolidated if c["how"] == "already a memory"],
        "staged_texts": staged,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", default="both", choices=("dev", "held-out", "both"))
    ap.add_argument("--devmem", type=Path, default=DEVMEM)
    ap.add_argument("--show", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    splits = SPLITS if args.split == "both" else (args.split,)
    with tempfile.TemporaryDirectory() as tmp:
        rows = [
            run_world(s, w, load(s), Path(tmp)) for s in splits for w in ("said once", "said again")
        ]
        dm = devmem(args.devmem, Path(tmp))
    if args.json:
        print(json.dumps({"corpus": [r.as_dict() for r in rows], "devmem": dm}, indent=2))
        return
    print(
        f"{'split':<9} {'world':<10} {'pos':>4} {'learned':>7} {'staged +/-':>10}"
        f" {'recovered':>9} {'false':>5} {'dropped':>7} {'recall':>13} {'precision':>9}"
    )
    for r in rows:
        d = r.as_dict()
        print(
            f"{r.split:<9} {r.world:<10} {r.positives:>4} {r.learned_true:>7}"
            f" {f'{r.staged_true}/{r.staged_false}':>10} {r.recovered:>9} {r.promoted_false:>5}"
            f" {r.dropped:>7} {d['recall_before']:>6.3f}->{d['recall_after']:.3f}"
            f" {d['precision_after']:>9.3f}"
        )
        if args.show:
            for t in r.recovered_texts:
                print(f"  [recovered] {t}")
            for t in r.false_texts:
                print(f"  [false] {t}")
    if dm is not None:
        print(
            f"devmembench: {dm['sessions']} sessions, {dm['user_messages']} user messages ->"
            f" {dm['memories']} memories, {dm['staged']} staged, {len(dm['promoted'])} promoted"
            f" (said again), {len(dm['known'])} already a memory"
        )
        if args.show:
            for t in dm["promoted"]:
                print(f"  [promoted] {t}")
            for t in dm["staged_texts"]:
                print(f"  [staged] {t}")


if __name__ == "__main__":
    main()
