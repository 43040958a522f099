"""Ranking ablation (issue 23): one component of search off at a time, on every dev set,
beside the plain keyword floor (bench/keyword_floor.py).

The sets, each asked in process exactly as ``llmem-hooks search Q --json --limit 10`` asks
(`Retriever.find` with the configured weights, then `attach_passages`):

* DevMemBench dev (a store kept by ``bench/devmem.py --keep-db PATH``: episodes, the
  heuristic extraction and session summaries, as the real sidecar stored them); a hit is
  a result from an evidence session; coverage as in devmem.py;
* the technical conversations (a home kept by ``bench/techconv.py --keep DIR``);
* the conversational set (episodes built in process, bench/conversational.py).

Each variant switches one mechanism off (patching a constant or a function for the
duration of the run; nothing is written to the kept stores except on a copy):

    .venv/bin/python bench/ablation.py --devmem-db /tmp/devmem.db --techconv /tmp/tc \\
        [--variants baseline,no-lexicon] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shutil
import sqlite3
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

import conversational  # noqa: E402
import devmem  # noqa: E402
import techconv  # noqa: E402
from keyword_floor import KeywordFloor, exchanges  # noqa: E402

from llmem_hooks import MemoryStore  # noqa: E402
from llmem_hooks.config import RetrievalSettings  # noqa: E402
from llmem_hooks.search import coherence as CH  # noqa: E402
from llmem_hooks.search import compounds as CO  # noqa: E402
from llmem_hooks.search import retriever as R  # noqa: E402
from llmem_hooks.search.retriever import Retriever, attach_passages  # noqa: E402
from llmem_hooks.store import MemoryFilter  # noqa: E402
from llmem_hooks.store import memories as M  # noqa: E402
from llmem_hooks.text import query as Q  # noqa: E402

LONG = ROOT / "tests" / "fixtures" / "conversations_long"
MIXED = [
    ROOT / "tests" / "fixtures" / f
    for f in ("conversations", "conversations_long", "conversations_hard")
]
_TIME_WORDS = re.compile(r"\b\d{4}-\d{2}-\d{2} [A-Z][a-z]+day \d{1,2} [A-Z][a-z]+ \d{4}\b")


class Variant:
    """How one run differs from the default: settings, a filter, patches, a store edit."""

    def __init__(
        self,
        blend: float | None = None,
        episodes_only: bool = False,
        patches: dict[tuple[Any, str], Any] | None = None,
        store_edit: str | None = None,
        passages: bool = True,
        fuzzy: bool | None = None,
    ) -> None:
        self.blend = blend
        self.episodes_only = episodes_only
        self.patches = patches or {}
        self.store_edit = store_edit
        self.passages = passages
        self.fuzzy = fuzzy

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        saved = {(obj, name): getattr(obj, name) for obj, name in self.patches}
        try:
            for (obj, name), value in self.patches.items():
                setattr(obj, name, value)
            yield
        finally:
            for (obj, name), value in saved.items():
                setattr(obj, name, value)


VARIANTS: dict[str, Variant] = {
    "baseline": Variant(),
    "derived memories off (episodes only)": Variant(episodes_only=True),
    "lexicon expansions off": Variant(patches={(Q, "alternatives"): lambda term: []}),
    "time words off (index)": Variant(store_edit="time"),
    "neighbour context off (index)": Variant(store_edit="context"),
    "type/recency/confidence weights off (blend 0)": Variant(blend=0.0),
    "author prior off": Variant(
        patches={(R, "AUTHOR_BOOST"): 0.0, (R.Retriever, "_authors_named"): lambda s, p: set()}
    ),
    "quote boost off": Variant(patches={(R, "PHRASE_BOOST"): 0.0}),
    "when boost off": Variant(patches={(R, "WHEN_BOOST"): 0.0}),
    "fuzzy corrections off": Variant(fuzzy=False),
    "passage cuts off (whole results)": Variant(passages=False),
    "self-assessments off (index)": Variant(store_edit="no-self"),
    "carried questions off (index)": Variant(store_edit="no-asked"),
    "two-event comparisons off": Variant(patches={(R, "event_clauses"): lambda q: None}),
    "a digit for quantity questions off": Variant(patches={(Q, "_QUANTITY"): re.compile("(?!)")}),
    "answer kinds off (time / number)": Variant(patches={(R, "ANSWER_KIND_BOOST"): 0.0}),
    "names rule off": Variant(patches={(Q, "names_in"): lambda text: []}),
    "stray sessions kept (the session grain off)": Variant(patches={(CH, "SESSION_PENALTY"): 0.0}),
    "stray projects and sessions kept (coherence off)": Variant(
        patches={(R, "demote_strays"): lambda hits, parsed, rarity: hits}
    ),
    "a hyphenated word's parts said apart off": Variant(patches={(CO, "APART_MAX"): 0}),
    "each text once off": Variant(patches={(R, "_distinct"): lambda hits, want: hits[:want]}),
    "context weight 0.3 (was 0.45)": Variant(
        patches={(M, "BM25_RANK"): "bm25(memories_fts, 1.0, 0.5, 0.75, 0.0, 0.3, 0.1)"}
    ),
}


def edited_copy(db: Path, edit: str | None, into: Path) -> Path:
    """``db`` copied (with its WAL) into ``into``, with ``edit`` applied: "time" drops the
    episodes' date words from their context column, "context" drops both context columns."""
    out = into / db.name
    src = sqlite3.connect(db)
    dst = sqlite3.connect(out)
    src.backup(dst)
    src.close()
    if edit == "no-self":
        dst.execute("DELETE FROM memories WHERE type = 'self_assessment'")
        dst.commit()
    elif edit == "no-asked":  # the question an answer's exchange starts with, dropped
        dst.execute(
            "UPDATE memories SET content = substr(content, instr(content, char(10)) + 1)"
            " WHERE json_extract(metadata, '$.episode') AND content LIKE 'Assistant: %'"
            " AND substr(content, instr(content, char(10)) + 1) LIKE 'User: %'"
        )
        dst.commit()
    elif edit is not None:
        rows = dst.execute(
            "SELECT id, metadata FROM memories WHERE json_extract(metadata, '$.episode')"
        ).fetchall()
        for mid, raw in rows:
            meta = json.loads(raw)
            if edit == "time":
                meta["fts_context"] = _TIME_WORDS.sub(" ", meta.get("fts_context", ""))
            else:
                meta.pop("fts_context", None)
                meta.pop("fts_after", None)
            dst.execute("UPDATE memories SET metadata = ? WHERE id = ?", (json.dumps(meta), mid))
        dst.commit()
    dst.close()
    return out


def asker(store: MemoryStore, v: Variant) -> techconv.Asker:
    """`llmem-hooks search Q --json --limit 10` (keywords) in this process, under ``v``."""
    settings = RetrievalSettings()
    if v.blend is not None:
        settings = RetrievalSettings(blend=v.blend)
    retriever = Retriever.from_settings(store, settings)
    flt = MemoryFilter(type="conversation") if v.episodes_only else MemoryFilter()

    def ask(question: str) -> list[dict[str, Any]]:
        hits = retriever.find(
            question, flt, limit=10, search_mode="fts", track_access=False, fuzzy=v.fuzzy
        )
        if v.passages:
            attach_passages(hits, question, settings.passage_chars)
        return [
            {**h.memory, "content": h.passage if h.passage is not None else h.memory["content"]}
            for h in hits
        ]

    return ask


# -- the sets -------------------------------------------------------------------------------
def run_devmem(
    db: Path, v: Variant, tmp: Path, questions_file: Path | None = None
) -> dict[str, float]:
    data = devmem.find_data(None)
    assert data is not None
    sessions = json.loads((data / "sessions.json").read_text())
    questions = json.loads((questions_file or data / "questions-dev.json").read_text())
    ids = json.loads(Path(str(db) + ".ids.json").read_text())
    words = {
        s["sessionId"]: devmem.words(" ".join(m["content"] for m in s["messages"]))
        for s in sessions
    }
    floor = KeywordFloor()
    for s in sessions:
        turns = [(str(i), m["role"], m["content"]) for i, m in enumerate(s["messages"])]
        for tids, body in exchanges(turns):
            floor.add(f"{s['sessionId']}#{tids[0]}", body)
    with MemoryStore(edited_copy(db, v.store_edit, tmp)) as store, v.applied():
        ask = asker(store, v)
        at = {1: 0, 5: 0, 10: 0}
        fat = {1: 0, 5: 0, 10: 0}
        n = num = den = fnum = 0
        chars = fchars = 0
        for q in questions:
            ev = set(q.get("haystackSessionIds") or [])
            if not ev:
                continue
            n += 1
            hits = ask(q["question"])
            fl = floor.search(q["question"], 10)
            for k in at:
                at[k] += bool({ids.get(h.get("session_id") or "", "") for h in hits[:k]} & ev)
                fat[k] += bool({key.split("#")[0] for key, _ in fl[:k]} & ev)
            top5 = " ".join(h["content"] for h in hits[:5])
            ftop5 = " ".join(b for _, b in fl[:5])
            chars += len(top5)
            fchars += len(ftop5)
            seen = set().union(*(words[e] for e in ev if e in words))
            target = {w for w in devmem.distinctive(q["groundTruth"]) if w in seen}
            num += len(target & devmem.words(top5))
            fnum += len(target & devmem.words(ftop5))
            den += len(target)
    floor.close()
    out = {f"@{k}": round(at[k] / n, 3) for k in at}
    out |= {f"floor@{k}": round(fat[k] / n, 3) for k in fat}
    return out | {
        "cov": round(num / den, 3),
        "floor_cov": round(fnum / den, 3),
        "chars": round(chars / n),
        "floor_chars": round(fchars / n),
    }


def run_techconv(home: Path, v: Variant, tmp: Path) -> dict[str, float]:
    convs = techconv.load("dev")
    msg_turn = json.loads((home / "msg_turn.json").read_text())
    db = edited_copy(home / "llmem" / "memory.db", v.store_edit, tmp)
    with MemoryStore(db) as store, v.applied():
        rows = techconv.evaluate(convs, asker(store, v), msg_turn)
    m = techconv.measures(rows)
    return {
        k: m[k]
        for k in (
            "@1",
            "floor@1",
            "@5",
            "floor@5",
            "@10",
            "floor@10",
            "cov",
            "floor_cov",
            "chars",
            "floor_chars",
        )
    }


def run_conversational(
    v: Variant, tmp: Path, folder: Path | Sequence[Path] | None = None
) -> dict[str, float]:
    """The dev half of one fixture folder (the short set when None), or of several folders
    in one store (the names rule matters most there: many people's chats together)."""
    folders = [folder] if isinstance(folder, Path) else list(folder or ())
    convs = [c for f in folders for c in conversational.convsets.load(f)] or conversational.load(
        "dev"
    )
    convs = [c for c in convs if c["split"] == "dev"]
    path = tmp / (f"{'+'.join(f.name for f in folders)}.db" if folders else "conv.db")
    if not path.exists():
        with MemoryStore(path) as store:
            conversational.store_in_process(store, convs)
    with MemoryStore(edited_copy(path, v.store_edit, tmp / "edit")) as store, v.applied():
        _, rows = conversational.evaluate(convs, asker(store, v))
    m = conversational.summarize(rows)["dev"]["all"]
    keys = (
        "recall@1",
        "floor@1",
        "recall@5",
        "floor@5",
        "recall@10",
        "floor@10",
        "chars",
        "floor_chars",
    )
    return {k.replace("recall", ""): m[k] for k in keys}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--devmem-db")
    ap.add_argument("--techconv")
    ap.add_argument("--variants", default="", help="names (prefixes), comma-separated")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    wanted = [w for w in args.variants.split(",") if w]
    names = [n for n in VARIANTS if not wanted or any(n.startswith(w) for w in wanted)]
    result: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="ablation-") as tmp_s:
        tmp = Path(tmp_s)
        (tmp / "edit").mkdir()
        for name in names:
            v = VARIANTS[name]
            row: dict[str, Any] = {}
            with tempfile.TemporaryDirectory(dir=tmp) as one:
                if args.devmem_db:
                    row["devmem"] = run_devmem(Path(args.devmem_db), v, Path(one))
                if args.techconv:
                    row["techconv"] = run_techconv(Path(args.techconv), v, Path(one))
                row["conversational"] = run_conversational(v, tmp)
                row["long conversations"] = run_conversational(v, tmp, LONG)
                row["dev chats of 3 sets, one store"] = run_conversational(v, tmp, MIXED)
            result[name] = row
            if not args.json:
                print(name)
                for set_name, m in row.items():
                    print(f"  {set_name:>15}: " + "  ".join(f"{k} {val}" for k, val in m.items()))
                sys.stdout.flush()
            shutil.rmtree(tmp / "edit")
            (tmp / "edit").mkdir()
    if args.json:
        print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
