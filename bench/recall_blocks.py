"""Recall blocks on labelled prompts (issue 20): is the right memory given, is a block noise?

Usage: python bench/recall_blocks.py [--set dev|dev2|dev3|heldout|heldout2|both|held|all]
           [--json] [--misses]
           [--recall KEY=VALUE ...]

Four hand-written sets (bench/data/recall_dev.json, recall_dev2.json and recall_dev3.json
for tuning, bench/data/recall_heldout.json and recall_heldout2.json for the final figure
only (heldout2 written later by another hand that saw neither the code nor the other sets;
``--set held`` reports both and their union): other companies,
other wording, written apart). Each holds a store (durable
memories of 3-4 company projects, a few global preferences, recorded exchanges as
``conversation`` episodes) and sessions of prompts as a person types them, each prompt with a
kind (durable, followup, offtopic, smalltalk) and the keys of the memories that would really
help answer it (``relevant``, empty when none would).

A fresh store per set in a temp dir; per session a new session id, ``QueryService.start`` (the
session-start context, recorded as given), then ``QueryService.recall`` per prompt in order,
as the plugin and the hook call them. Reported per kind and overall:

- right: among prompts with relevant memories none of which the session was given yet (by
  the start context or an earlier block; one of them answers), the share whose block holds
  one of them;
- noise: among non-empty blocks, the share with no relevant memory (the issue's figure);
- block: the share of prompts that get a block at all; items: mean entries per block;
- had+noise: among prompts whose answer the session already had, the share that still got a
  block (which then holds nothing relevant: given memories are never repeated).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from hashlib import sha1
from pathlib import Path
from typing import Any

from llmem_hooks import MemoryStore
from llmem_hooks.service.operations import QueryService
from llmem_hooks.store import recall as given

DATA = Path(__file__).resolve().parent / "data"
SETS = {
    "dev": DATA / "recall_dev.json",
    "dev2": DATA / "recall_dev2.json",
    "dev3": DATA / "recall_dev3.json",
    "heldout": DATA / "recall_heldout.json",
    "heldout2": DATA / "recall_heldout2.json",
}
KINDS = ("durable", "followup", "offtopic", "smalltalk")
SPREAD_DAYS = 42  # created_at spread over the six weeks before the run


@dataclass
class Outcome:
    """One prompt's recall block against its labels."""

    kind: str
    block: bool
    items: int
    relevant: bool  # the prompt has relevant memories
    had: bool  # ... and the session was given one of them before this prompt (it has the answer)
    hit: bool  # the block holds one of them
    text: str = ""
    given: tuple[str, ...] = ()  # the keys the block gave
    labels: tuple[str, ...] = ()


@dataclass
class Tally:
    """The figures of a group of outcomes."""

    outcomes: list[Outcome] = field(default_factory=list)

    def figures(self) -> dict[str, Any]:
        o = self.outcomes
        want = [x for x in o if x.relevant and not x.had]
        blocks = [x for x in o if x.block]
        had = [x for x in o if x.had]
        return {
            "prompts": len(o),
            "right_n": len(want),
            "right": _share(sum(x.hit for x in want), len(want)),
            "noise_n": len(blocks),
            "noise": _share(sum(not x.hit for x in blocks), len(blocks)),
            "block": _share(len(blocks), len(o)),
            "items": round(sum(x.items for x in blocks) / len(blocks), 2) if blocks else None,
            "had_n": len(had),
            "had_noise": _share(sum(x.block for x in had), len(had)),
        }


def _share(n: int, of: int) -> float | None:
    return round(n / of, 3) if of else None


def project_key(name: str) -> str:
    """A stand-in for a root-commit hash: 40 hex characters, stable per name."""
    return sha1(name.encode()).hexdigest()


def load(path: Path) -> dict[str, Any]:
    """A set, checked: unique keys, labels that name stored memories, known kinds."""
    data: dict[str, Any] = json.loads(path.read_text())
    keys = [m["key"] for m in data["memories"]]
    if len(keys) != len(set(keys)):
        dup = sorted({k for k in keys if keys.count(k) > 1})
        raise SystemExit(f"{path.name}: duplicate memory keys {dup}")
    known = set(keys)
    for s in data["sessions"]:
        for p in s["prompts"]:
            if p["kind"] not in KINDS:
                raise SystemExit(f"{path.name}: unknown kind {p['kind']!r} ({p['text']!r})")
            missing = [k for k in p["relevant"] if k not in known]
            if missing:
                raise SystemExit(f"{path.name}: unknown keys {missing} ({p['text']!r})")
    return data


def fill(store: MemoryStore, memories: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Add the set's memories; returns memory id -> key. Creation times are spread over
    the `SPREAD_DAYS` before now, in a fixed order (so decay and recency rank the same way
    on every run)."""
    now = datetime.now(UTC)
    ids: dict[str, str] = {}
    n = len(memories)
    for i, m in enumerate(memories):
        # a fixed shuffle of the order (key hash) so no project is all old or all new
        slot = int(sha1(m["key"].encode()).hexdigest()[:8], 16) % max(n, 1)
        when = now - timedelta(days=SPREAD_DAYS * slot / max(n, 1), minutes=i)
        episode = m["type"] == "conversation"
        # extracted memories carry different confidences; a fixed one per key
        spread = int(sha1(m["key"].encode()).hexdigest()[8:12], 16) / 0xFFFF
        mid = store.add(
            m["type"],
            m["content"],
            project=project_key(m["project"]) if m.get("project") else None,
            created_at=when.isoformat().replace("+00:00", "Z"),
            source="episode" if episode else "manual",
            confidence=0.6 if episode else round(0.6 + 0.35 * spread, 2),
            dedupe=False,
        )
        ids[mid] = m["key"]
    return ids


def run_set(
    data: Mapping[str, Any],
    work: Path,
    start: bool = True,
    recall: Mapping[str, Any] | None = None,
) -> tuple[list[Outcome], dict[str, int]]:
    """Every session of ``data`` through a fresh store in ``work``; without ``start``
    no session-start context (recall alone, as if the store were far larger than the
    context, so every labelled answer is still to be given). ``recall``: settings of the
    ``recall:`` section to try instead of the defaults."""
    outcomes: list[Outcome] = []
    stats = {"sessions": 0, "context_gave": 0, "memories": len(data["memories"])}
    with MemoryStore(work / f"recall-blocks-{int(start)}.db") as store:
        key_of = fill(store, data["memories"])
        svc = QueryService(store, {"ollama": {"enabled": False}, "recall": dict(recall or {})})
        for s in data["sessions"]:
            stats["sessions"] += 1
            sid = f"bench-{uuid.uuid4()}"
            project = project_key(s["project"]) if s.get("project") else None
            if start:
                svc.start(sid, project=project)
            had = {key_of.get(mid, "") for mid in given.given_ids(store.db, sid)}
            labelled = {k for p in s["prompts"] for k in p["relevant"]}
            stats["context_gave"] += len(had & labelled)
            for p in s["prompts"]:
                out = svc.recall(sid, p["text"], project=project)
                keys = [key_of.get(mid, "") for mid in out["memory_ids"]]
                rel = set(p["relevant"])
                outcomes.append(
                    Outcome(
                        kind=p["kind"],
                        block=bool(out["block"]),
                        items=len(keys) if out["block"] else 0,
                        relevant=bool(rel),
                        had=bool(rel & had),
                        hit=bool(rel & set(keys)),
                        text=p["text"],
                        given=tuple(keys),
                        labels=tuple(p["relevant"]),
                    )
                )
                had.update(keys)
    return outcomes, stats


def report(outcomes: Iterable[Outcome]) -> dict[str, dict[str, Any]]:
    """Figures per kind and overall."""
    groups: dict[str, Tally] = {k: Tally() for k in (*KINDS, "all")}
    for o in outcomes:
        groups[o.kind].outcomes.append(o)
        groups["all"].outcomes.append(o)
    return {k: t.figures() for k, t in groups.items()}


def _pct(x: float | None, n: int) -> str:
    return "-" if x is None else f"{100 * x:.0f}% ({n})"


def misses(outcomes: Iterable[Outcome]) -> None:
    """The prompts to look at when tuning: noisy blocks and missed answers."""
    for o in outcomes:
        if o.block and not o.hit:
            print(f"noise  [{o.kind}] {o.text!r} gave {list(o.given)} want {list(o.labels)}")
        elif o.labels and not o.had and not o.hit:
            print(f"missed [{o.kind}] {o.text!r} gave {list(o.given)} want {list(o.labels)}")
    print()


def table(name: str, figs: Mapping[str, Mapping[str, Any]], stats: Mapping[str, int] | None) -> str:
    head = f"{name}: {figs['all']['prompts']} prompts"
    if stats is not None:
        head = (
            f"{name}: {stats['memories']} memories, {stats['sessions']} sessions,"
            f" {figs['all']['prompts']} prompts; the start contexts gave"
            f" {stats['context_gave']} labelled memories"
        )
    lines = [
        head,
        "| kind | prompts | right (n) | noise (n blocks) | block | items | had+noise (n) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for k, f in figs.items():
        lines.append(
            f"| {k} | {f['prompts']} | {_pct(f['right'], f['right_n'])}"
            f" | {_pct(f['noise'], f['noise_n'])} | {_pct(f['block'], f['prompts'])}"
            f" | {'-' if f['items'] is None else f['items']}"
            f" | {_pct(f['had_noise'], f['had_n'])} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument(
        "--set",
        choices=("dev", "dev2", "dev3", "heldout", "heldout2", "both", "held", "all"),
        default="both",
        help="both: the tuning sets dev, dev2 and dev3; held: heldout and heldout2; all: every set",
    )
    ap.add_argument("--json", action="store_true", help="machine-readable figures")
    ap.add_argument(
        "--misses", action="store_true", help="list noisy blocks and missed answers (dev sets only)"
    )
    ap.add_argument(
        "--recall",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a recall setting to try (e.g. relative_floor=0.6); repeatable",
    )
    args = ap.parse_args()
    recall = {k: json.loads(v) for k, v in (a.split("=", 1) for a in args.recall)}
    names = {
        "both": ["dev", "dev2", "dev3"],
        "held": ["heldout", "heldout2"],
        "all": list(SETS),
    }.get(args.set, [args.set])
    result: dict[str, Any] = {}
    together: list[list[Any]] = [[], []]  # every set's outcomes: with the start context, alone
    with tempfile.TemporaryDirectory(prefix="llmem-recall-blocks-") as tmp:
        os.environ["LLMEM_HOME"] = str(Path(tmp) / "home")  # no real sessions' files
        for name in names:
            work = Path(tmp) / name
            work.mkdir(mode=0o700)
            data = load(SETS[name])
            outcomes, stats = run_set(data, work, recall=recall)
            alone, _ = run_set(data, work, start=False, recall=recall)
            together[0] += outcomes
            together[1] += alone
            result[name] = {
                "stats": stats,
                "figures": report(outcomes),
                "recall_alone": report(alone),
            }
            if args.misses and name.startswith("dev"):
                print(f"{name}, with the start context:")
                misses(outcomes)
                print(f"{name}, recall alone:")
                misses(alone)
    if len(names) > 1:  # the sets pooled: one figure over every prompt
        union = "+".join(names)
        result[union] = {
            "stats": None,
            "figures": report(together[0]),
            "recall_alone": report(together[1]),
        }
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
        return
    for name, r in result.items():
        print(table(name, r["figures"], r["stats"]))
        print()
        print(table(f"{name}, recall alone (no start context)", r["recall_alone"], None))
        print()


if __name__ == "__main__":
    main()
