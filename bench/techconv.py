"""Technical conversations: a developer and a coding assistant over many sessions, questions
whose evidence is specific messages (issue 23), ours beside the plain keyword floor.

The set is ``tests/fixtures/techconv/*.json`` (format in the README there): long sessions
with a coding assistant, one project each, questions of eight kinds (single, update, multi,
second_hop, referent, speaker, temporal, paraphrase). ``dev`` conversations are what tuning
looks at; ``heldout`` ones are scored only at the end.

The real path: every session becomes an OpenCode session (tests/support/opencode_db.py: a
real ``opencode.db``) in a git repository named after the project; a real ``llmem-hooks
run`` stores episodes and whatever the heuristics extract; each question is asked with
``llmem-hooks search Q --json --limit 10`` (what a person or an agent reads: results cut to
their passages). ``--db DIR`` reuses a home kept by ``--keep DIR`` and asks in process
(`Retriever.find_hybrid_or_keywords` + `attach_passages`, what the CLI runs), for quick
comparisons.

Scoring. A result *holds* an evidence turn when it is the episode of that turn's exchange
(its ``source_message_ids``) or its content holds the turn's whole text (folded). recall@k:
the share of a question's evidence turns held by the top k, averaged. Coverage: the share
of the answer's distinctive words in the text of the top five as shown, and the characters
that text takes. The floor (`keyword_floor.KeywordFloor`): one row per exchange, whole, in
plain FTS5, bm25 over an OR of the question's non-stop words; scored the same way.

    .venv/bin/python bench/techconv.py [--split dev|heldout|all] [--json] [--show-misses]
        [--keep DIR | --db DIR] [--only t1,t3] [--long-replies around|before]

``--long-replies`` makes every assistant reply long, as an agent's turn is: lines of tool
calls ("Ran `pytest -q tests/test_gamma_12.py`, output checked, nothing new.", seeded),
5,000 characters before the reply's body and 5,000 after it (``around``: the body falls in
the middle of a 10,000-character exchange), or 7,000 after its first paragraph only
(``before``). No conversation of the set has an exchange over 6,000 characters, the most
an episode holds whole (`session.episodes.keep_ends`, `middle_parts`).

Skips cleanly (exit 0, a message) when the fixtures are absent.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "techconv"
TURN_MS = 90_000  # a turn every minute and a half
KS = (1, 5, 10)
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

import convsets  # noqa: E402
from keyword_floor import KeywordFloor, at_k, exchanges  # noqa: E402

_WORD = re.compile(r"[a-z0-9][a-z0-9_.+#/-]*[a-z0-9+#]|[a-z0-9]")
_STOP_TEXT = (
    "the and for with that this from have what which when where were does did you your our"
    " ours about into then than them they there their will would should could been being"
    " because after before also just only over under while more most some such very"
)
_STOP = frozenset(_STOP_TEXT.split())


def load(split: str = "dev", only: Sequence[str] = ()) -> list[dict[str, Any]]:
    return convsets.load(FIXTURES, split, only)


session_ms = convsets.session_ms


def store_in_process(store: Any, convs: Sequence[dict[str, Any]]) -> int:
    """The conversations' episodes stored in this process as the coordinator stores them
    (each turn one message, a turn every `TURN_MS`)."""
    n = 0
    for conv in convs:
        for session in conv["sessions"]:
            start = session_ms(session)
            turns = [
                (t["id"], t["role"], t["text"], start + i * TURN_MS)
                for i, t in enumerate(session["turns"])
            ]
            n += convsets.store_episodes(store, conv["id"], session["id"], turns)
    return n


_TOOL_LINES = ("pytest -q tests/test_{}.py", "ruff check src/{}.py", "git diff src/{}.py")
_NAMES = ("alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta")


def long_replies(convs: Sequence[dict[str, Any]], shape: str) -> None:
    """Every assistant reply of ``convs`` made long by seeded tool-call lines."""
    rng = random.Random(7)

    def lines(size: int) -> str:
        out: list[str] = []
        while sum(len(x) + 1 for x in out) < size:
            what = rng.choice(_TOOL_LINES).format(f"{rng.choice(_NAMES)}_{rng.randrange(99)}")
            out.append(f"Ran `{what}`, output checked, nothing new.")
        return "\n".join(out)

    for conv in convs:
        for session in conv["sessions"]:
            for turn in session["turns"]:
                if turn["role"] != "assistant":
                    continue
                first, *rest = turn["text"].split("\n\n")
                if shape == "around":
                    body = [first, lines(5000), *rest, lines(5000), "Done: the steps are in."]
                else:
                    body = [first, lines(7000), *rest]
                turn["text"] = "\n\n".join(body)


def fold(text: str) -> str:
    return " ".join(text.lower().split())


def answer_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in _STOP}


# -- the real path ------------------------------------------------------------------------
def store_real(
    convs: Sequence[dict[str, Any]], home: Path
) -> tuple[dict[str, str], dict[str, str], float]:
    """The sessions in a real opencode.db, stored by a real `llmem-hooks run`
    (`convsets.replay`). Returns the CLI's environment, OpenCode message id -> turn id, and
    the sidecar's seconds."""
    projects = [
        (
            conv["id"],
            conv["project"],
            [
                (
                    conv["title"],
                    [
                        (t["id"], t["role"], t["text"], session_ms(s) + i * TURN_MS)
                        for i, t in enumerate(s["turns"])
                    ],
                )
                for s in conv["sessions"]
            ],
        )
        for conv in convs
    ]
    env, msg_turn, took = convsets.replay(home, projects)
    (home / "msg_turn.json").write_text(json.dumps(msg_turn))
    return env, msg_turn, took


environment = convsets.environment


Asker = Callable[[str], list[dict[str, Any]]]


def cli_asker(env: dict[str, str]) -> Asker:
    return lambda question: convsets.cli_search(env, question)


def in_process_asker(home: Path) -> Asker:
    """What `llmem-hooks search Q --json --limit 10` runs, in this process (keywords)."""
    from llmem_hooks import MemoryStore
    from llmem_hooks.config import load_settings
    from llmem_hooks.search.retriever import Retriever, attach_passages

    os.environ["LLMEM_HOME"] = str(home / "llmem")
    cfg = load_settings(home / "llmem" / "config.yaml", create=False)
    store = MemoryStore(home / "llmem" / "memory.db")
    retriever = Retriever.from_settings(store, cfg.retrieval)

    def ask(question: str) -> list[dict[str, Any]]:
        hits = retriever.find(question, limit=10, search_mode="fts", track_access=False)
        attach_passages(hits, question, cfg.retrieval.passage_chars)
        return [
            {**h.memory, "content": h.passage if h.passage is not None else h.memory["content"]}
            for h in hits
        ]

    return ask


# -- scoring ------------------------------------------------------------------------------
def evaluate(
    convs: Sequence[dict[str, Any]], ask: Asker, msg_turn: dict[str, str]
) -> list[dict[str, Any]]:
    """One row per question: the rank of each evidence turn in ours and in the floor, and
    the answer's coverage and characters in each top five."""
    floor = KeywordFloor()
    turn_exchange: dict[str, str] = {}
    for conv in convs:
        for session in conv["sessions"]:
            turns = [(t["id"], t["role"], t["text"]) for t in session["turns"]]
            for ids, body in exchanges(turns):
                floor.add(ids[0], body)
                for tid in ids:
                    turn_exchange[tid] = ids[0]
    rows: list[dict[str, Any]] = []
    for conv in convs:
        turns = {t["id"]: t for s in conv["sessions"] for t in s["turns"]}
        for q in conv["questions"]:
            results = ask(q["question"])
            held: list[set[str]] = []
            for r in results:
                got = {msg_turn[m] for m in r.get("source_message_ids") or () if m in msg_turn}
                if r.get("type") != "conversation":
                    got = set()  # a derived memory counts only by the text it holds
                content = fold(r.get("content", ""))
                got |= {e for e in q["evidence"] if fold(turns[e]["text"]) in content}
                held.append(got)
            ours = convsets.first_ranks(q["evidence"], held)
            fl = floor.search(q["question"], 10)
            held_fl = [{e for e in q["evidence"] if turn_exchange[e] == k} for k, _ in fl]
            flr = convsets.first_ranks(q["evidence"], held_fl)
            target = answer_words(q["answer"])
            in_ev = answer_words(" ".join(turns[e]["text"] for e in q["evidence"]))
            target &= in_ev
            top5 = " ".join(r.get("content", "") for r in results[:5])
            ftop5 = " ".join(t for _, t in fl[:5])
            rows.append(
                {
                    "id": q["id"],
                    "split": conv["split"],
                    "kind": q["kind"],
                    "question": q["question"],
                    "ours": ours,
                    "floor": flr,
                    "cov": len(target & answer_words(top5)) / len(target) if target else None,
                    "fcov": len(target & answer_words(ftop5)) / len(target) if target else None,
                    "chars": sum(len(r.get("content", "")) for r in results[:5]),
                    "fchars": sum(len(t) for _, t in fl[:5]),
                    "top": [
                        f"{r.get('type')}: " + " ".join(r.get("content", "").split())[:100]
                        for r in results
                    ],
                }
            )
    floor.close()
    return rows


def measures(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    n = max(len(rows), 1)
    out: dict[str, float] = {"n": len(rows)}
    for k in KS:
        out[f"@{k}"] = round(sum(at_k(list(r["ours"].values()), k) for r in rows) / n, 3)
        out[f"floor@{k}"] = round(sum(at_k(list(r["floor"].values()), k) for r in rows) / n, 3)
    covs = [r for r in rows if r["cov"] is not None]
    out["cov"] = round(sum(r["cov"] for r in covs) / max(len(covs), 1), 3)
    out["floor_cov"] = round(sum(r["fcov"] for r in covs) / max(len(covs), 1), 3)
    out["chars"] = round(sum(r["chars"] for r in rows) / n)
    out["floor_chars"] = round(sum(r["fchars"] for r in rows) / n)
    return out


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    by: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        for split in (row["split"], "all"):
            by[split]["all"].append(row)
            by[split][row["kind"]].append(row)
    return {s: {k: measures(rs) for k, rs in kinds.items()} for s, kinds in by.items()}


def main(argv: list[str] | None = None) -> int:
    ap = convsets.parser(__doc__)
    ap.add_argument("--keep", help="keep the stored home here (for --db)")
    ap.add_argument("--db", help="a home kept by --keep: ask in process, no sidecar")
    ap.add_argument("--long-replies", choices=("around", "before"), help="see the docstring")
    args = ap.parse_args(argv)
    convs = convsets.chosen(FIXTURES, args)
    if not convs:
        print(f"techconv: no conversations in {FIXTURES}; skipped")
        return 0
    extra: dict[str, Any] = {}
    if args.long_replies:
        long_replies(convs, args.long_replies)
        extra["long_replies"] = args.long_replies
    if args.db:
        home = Path(args.db)
        msg_turn = json.loads((home / "msg_turn.json").read_text())
        rows = evaluate(convs, in_process_asker(home), msg_turn)
        extra["mode"] = "in-process over a kept store"
    else:
        with tempfile.TemporaryDirectory(prefix="techconv-") as tmp:
            env, msg_turn, took = store_real(convs, Path(tmp))
            extra.update(mode="real", sidecar_seconds=round(took, 1))
            rows = evaluate(convs, cli_asker(env), msg_turn)
            if args.keep:
                shutil.copytree(tmp, args.keep, dirs_exist_ok=True)
    scores = summarize(rows)
    if args.json:
        print(json.dumps({**extra, "scores": scores}, indent=1))
    else:
        print(extra)
        convsets.print_scores(scores)
    if args.show_misses:
        for row in rows:
            missed = [e for e, r in row["ours"].items() if not r or r > 5]
            if missed:
                print(
                    f"MISS@5 {row['id']} [{row['kind']}] {row['question']}"
                    f" ours={row['ours']} floor={row['floor']}"
                )
                if args.show_misses > 1:
                    print("".join(f"    {i}. {t}\n" for i, t in enumerate(row["top"], 1)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
