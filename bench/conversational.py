"""Conversational benchmark: long conversations between two named people, questions whose
evidence is a turn said months earlier (issue 11: recall@10 >= 0.80 with no model).

The set is ``tests/fixtures/conversations/*.json`` (format in the README there): four
conversations of 8 sessions each, two marked ``dev`` (looked at while tuning) and two
``heldout`` (run at the end only). Two ways to run it:

* ``--real`` (the figure): each session becomes an OpenCode session in a real
  ``opencode.db`` (tests/support/opencode_db.py), a real ``llmem-hooks run`` stores the
  episodes (and whatever heuristic extraction finds), and every question is asked with
  ``llmem-hooks search Q --json --full --limit 10``.
* in process (default, seconds): the same episodes built by ``episodes.build_episodes``
  from the same messages and stored the way the coordinator stores them, questions through
  ``Retriever.find`` with the configured settings (keyword-only, as without a model).

Speakers: the person who opens a session is the agent's *user* role, the other the
*assistant*; every message's text starts with the speaker's name (``Nadia: ...``), so an
episode reads ``User: Nadia: ...`` / ``Assistant: Tomas: ...`` and keeps who said what.

A result holds an evidence turn when its content contains the turn's text (whitespace and
case folded). Reported per split and per question kind: recall@10 and recall@5 (the share
of a question's evidence turns in the top k, averaged), any@10 (at least one), MRR (of the
first result holding any evidence).

    .venv/bin/python bench/conversational.py [--split dev|heldout|all] [--real] [--json]
        [--show-misses] [--only c1,c2]

Skips cleanly (exit 0, a message) when the fixtures are absent.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import convsets  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "conversations"
TURN_MS = 60_000  # a turn a minute
KS = (1, 5, 10)


def load(split: str = "all", only: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The conversations of ``split`` (dev, heldout or all), or just the ids in ``only``."""
    return convsets.load(FIXTURES, split, only)


session_ms = convsets.session_ms


def roles(session: dict[str, Any]) -> Iterable[tuple[dict[str, Any], str, int]]:
    """Each turn with its agent role (the session's opener is the user) and time."""
    opener = session["turns"][0]["speaker"]
    start = session_ms(session)
    for i, turn in enumerate(session["turns"]):
        yield turn, "user" if turn["speaker"] == opener else "assistant", start + i * TURN_MS


def said(turn: dict[str, Any]) -> str:
    """A turn as the message text: the speaker's name, then what they said."""
    return f"{turn['speaker']}: {turn['text']}"


def _fold(text: str) -> str:
    return " ".join(text.lower().split())


def holds(content: str, turn_text: str) -> bool:
    return _fold(turn_text) in _fold(content)


# -- in process ---------------------------------------------------------------------------
def store_in_process(store: Any, convs: Sequence[dict[str, Any]]) -> int:
    """The conversations' episodes, built and stored as `SessionHookCoordinator.store_episodes`
    does (build_episodes over the adapter's normalized messages, then MemoryStore.add)."""
    n = 0
    for conv in convs:
        for session in conv["sessions"]:
            turns = [
                (t["id"], role, f"{'User' if role == 'user' else 'Assistant'}: {said(t)}", ms)
                for t, role, ms in roles(session)
            ]
            n += convsets.store_episodes(store, conv["id"], session["id"], turns)
    return n


def in_process_asker(store: Any) -> Callable[[str], list[dict[str, Any]]]:
    """What ``llmem-hooks search Q --json --limit 10`` runs (keywords), in this process:
    results cut to their passages, as a person or an agent reads them."""
    from llmem_hooks import Retriever
    from llmem_hooks.config import DEFAULT_CONFIG
    from llmem_hooks.search.retriever import attach_passages

    r = DEFAULT_CONFIG["retrieval"]
    retriever = Retriever(
        store,
        alpha=r["alpha"],
        blend=r["blend"],
        fuzzy_threshold=r["fuzzy_threshold"],
        rrf_k_semantic=r["rrf_k_semantic"],
    )

    def ask(question: str) -> list[dict[str, Any]]:
        hits = retriever.find(question, limit=10, search_mode="fts", track_access=False)
        attach_passages(hits, question, r["passage_chars"])
        return [
            {**h.memory, "content": h.memory["content"] if h.passage is None else h.passage}
            for h in hits
        ]

    return ask


# -- the real path ------------------------------------------------------------------------
def store_real(
    convs: Sequence[dict[str, Any]], home: Path
) -> tuple[dict[str, str], dict[str, str], float]:
    """The sessions in a real opencode.db, stored by a real `llmem-hooks run`
    (`convsets.replay`); returns the environment to run the CLI in, OpenCode message id ->
    turn id, and the sidecar's seconds."""
    projects = [
        (
            conv["id"],
            conv["id"],
            [
                (s["id"], [(t["id"], role, said(t), ms) for t, role, ms in roles(s)])
                for s in conv["sessions"]
            ],
        )
        for conv in convs
    ]
    return convsets.replay(home, projects)


def cli_asker(
    env: dict[str, str], msg_turn: dict[str, str]
) -> Callable[[str], list[dict[str, Any]]]:
    """``llmem-hooks search Q --json --limit 10``; message ids read as the turns they are."""

    def ask(question: str) -> list[dict[str, Any]]:
        hits = convsets.cli_search(env, question)
        for h in hits:
            h["source_message_ids"] = [
                msg_turn.get(m, m) for m in h.get("source_message_ids") or ()
            ]
        return list(hits)

    return ask


# -- scoring ------------------------------------------------------------------------------
def evaluate(
    convs: Sequence[dict[str, Any]], ask: Callable[[str], list[dict[str, Any]]]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Scores per split and kind, and one row per question: the rank of each evidence turn
    in ours and in the plain keyword floor (bench/keyword_floor.py), and the characters of
    each top five. A result holds a turn when it is that turn's episode (its
    ``source_message_ids``) or its content holds the turn's text."""
    sys.path.insert(0, str(ROOT / "bench"))
    from keyword_floor import KeywordFloor, exchanges

    floor = KeywordFloor()
    key_of: dict[str, str] = {}
    for conv in convs:
        for session in conv["sessions"]:
            turns = [(t["id"], role, said(t)) for t, role, _ in roles(session)]
            for ids, body in exchanges(turns):
                floor.add(ids[0], body)
                key_of.update((tid, ids[0]) for tid in ids)
    rows: list[dict[str, Any]] = []
    for conv in convs:
        turns = {t["id"]: t for s in conv["sessions"] for t in s["turns"]}
        for q in conv["questions"]:
            results = ask(q["question"])
            top = [" ".join(r.get("content", "").split())[:110] for r in results]
            held = []
            for r in results:
                own = (
                    set(r.get("source_message_ids") or ())
                    if r.get("type") == "conversation"
                    else set()
                )
                held.append(
                    own
                    | {e for e in q["evidence"] if holds(r.get("content", ""), turns[e]["text"])}
                )
            ranks = convsets.first_ranks(q["evidence"], held)
            fl = floor.search(q["question"], 10)
            held_fl = [{e for e in q["evidence"] if key_of[e] == k} for k, _ in fl]
            franks = convsets.first_ranks(q["evidence"], held_fl)
            rows.append(
                {
                    "id": q["id"],
                    "split": conv["split"],
                    "kind": q["kind"],
                    "question": q["question"],
                    "ranks": ranks,
                    "floor": franks,
                    "chars": sum(len(r.get("content", "")) for r in results[:5]),
                    "floor_chars": sum(len(t) for _, t in fl[:5]),
                    "top": top,
                }
            )
    floor.close()
    return summarize(rows), rows


def _share(ranks: dict[str, int | None], k: int) -> float:
    return sum(1 for r in ranks.values() if r and r <= k) / len(ranks)


def _measures(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    n = max(len(rows), 1)
    out: dict[str, float] = {"questions": len(rows)}
    for k in KS:
        out[f"recall@{k}"] = round(sum(_share(row["ranks"], k) for row in rows) / n, 3)
    for k in KS:
        out[f"floor@{k}"] = round(sum(_share(row["floor"], k) for row in rows) / n, 3)
    out["any@10"] = round(
        sum(any(r and r <= 10 for r in row["ranks"].values()) for row in rows) / n, 3
    )
    firsts = [min((r for r in row["ranks"].values() if r), default=0) for row in rows]
    out["mrr"] = round(sum(1 / f for f in firsts if f) / n, 3)
    out["chars"] = round(sum(row["chars"] for row in rows) / n)
    out["floor_chars"] = round(sum(row["floor_chars"] for row in rows) / n)
    return out


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    by: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        for split in (row["split"], "all"):
            by[split]["all"].append(row)
            by[split][row["kind"]].append(row)
    return {
        split: {kind: _measures(rs) for kind, rs in kinds.items()} for split, kinds in by.items()
    }


def result_shares(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    """The share of all results (top 10 of every question) that are episodes and session
    summaries (issue 20: summaries repeating the first exchange crowded the results)."""
    tops = [t for row in rows for t in row["top"]]
    n = max(len(tops), 1)
    return {
        "episodes": round(sum(t.startswith(("User:", "Assistant:")) for t in tops) / n, 3),
        "summaries": round(sum(t.startswith("Session summary") for t in tops) / n, 3),
    }


def main(argv: list[str] | None = None) -> int:
    ap = convsets.parser(__doc__)
    ap.add_argument("--real", action="store_true", help="opencode.db + llmem-hooks run + CLI")
    args = ap.parse_args(argv)
    convs = convsets.chosen(FIXTURES, args)
    if not convs:
        print(f"conversational: no conversations in {FIXTURES}; skipped")
        return 0
    extra: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="convo-") as tmp:
        if args.real:
            env, msg_turn, took = store_real(convs, Path(tmp))
            extra["sidecar_seconds"] = round(took, 1)
            scores, rows = evaluate(convs, cli_asker(env, msg_turn))
        else:
            from llmem_hooks import MemoryStore

            with MemoryStore(Path(tmp) / "memory.db") as store:
                extra["episodes"] = store_in_process(store, convs)
                scores, rows = evaluate(convs, in_process_asker(store))
    extra["shares"] = result_shares(rows)
    result = {"mode": "real" if args.real else "in-process", **extra, "scores": scores}
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(f"mode: {result['mode']}  {extra}")
        convsets.print_scores(scores)
    if args.show_misses:
        for row in rows:
            missed = [e for e, r in row["ranks"].items() if not r or r > 10]
            if missed:
                print(f"MISS {row['id']} [{row['kind']}] {row['question']} {row['ranks']}")
                if args.show_misses > 1:
                    print("".join(f"    {i}. {t}\n" for i, t in enumerate(row["top"], 1)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
