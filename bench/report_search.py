"""The static report's search (`report --html`, web/report_search.js run in node) against the
live viewer's (`ViewerData.search`: `Retriever.find_hybrid_or_keywords`, keywords here as
no model runs), on the same store.

Usage: python bench/report_search.py [--data DIR] [--memories 1000]

Two sets:

- the generated corpus of ``bench/corpus.py`` (``--memories`` coding memories, labelled
  questions in paraphrase, synonym, typo and keyword form, each with the one memory that
  answers it), asked without a project filter;
- DevMemBench's dev questions (``/work/shared/datasets/devmembench``, one ``conversation``
  memory per exchange as ``bench/devmem_questions.py`` stores them; skipped when absent),
  whose answer is any memory of the question's evidence sessions.

For each: how often the answer is in the top 10 (report / live; and the report's search
before the index: every word a substring of the memory), the MRR, overlap@10 (the
share of the live top 10 the report's top 10 holds) and top-1 agreement; and for the corpus
the report's size with and without the index. Needs ``node`` (skips without it).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from corpus import build_db, queries
from devmem_questions import DATA, load

from llmem_hooks import MemoryStore
from llmem_hooks.config import Config
from llmem_hooks.viewer.data import ViewerData
from llmem_hooks.viewer.page import render_page

JS = Path(__file__).resolve().parents[1] / "llmem_hooks" / "viewer" / "web" / "report_search.js"
RUNNER = """
const fs = require('fs'), vm = require('vm');
const [,, jsPath, indexPath, queriesPath, memoriesPath] = process.argv;
const ctx = {}; vm.createContext(ctx);
vm.runInContext(fs.readFileSync(jsPath, 'utf8') +
  ';globalThis.make = makeReportSearch; globalThis.memoryText = memoryText;', ctx);
const memories = JSON.parse(fs.readFileSync(memoriesPath, 'utf8'));
const texts = new Map(memories.map((m) => [m.id, ctx.memoryText(m)]));
const search = ctx.make(JSON.parse(fs.readFileSync(indexPath, 'utf8')), texts);
const qs = JSON.parse(fs.readFileSync(queriesPath, 'utf8'));
const t0 = process.hrtime.bigint();
const out = qs.map((q) => search(q, 50).map((h) => h.id));
const ms = Number(process.hrtime.bigint() - t0) / 1e6;
process.stdout.write(JSON.stringify({hits: out, ms}));
"""


def report_hits(
    index: dict[str, Any], memories: list[dict[str, Any]], questions: list[str], tmp: Path
) -> tuple[list[list[str]], float]:
    """Each question's report hits (ids, best first) from the real script, and the ms all took."""
    node = shutil.which("node")
    assert node is not None
    (tmp / "runner.js").write_text(RUNNER)
    (tmp / "index.json").write_text(json.dumps(index))
    (tmp / "questions.json").write_text(json.dumps(questions))
    (tmp / "memories.json").write_text(json.dumps(memories))
    files = ("runner.js", "index.json", "questions.json", "memories.json")
    proc = subprocess.run(
        [node, str(tmp / files[0]), str(JS), *(str(tmp / f) for f in files[1:])],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    out = json.loads(proc.stdout)
    return out["hits"], out["ms"]


def substring_filter(memories: list[dict[str, Any]], query: str) -> list[str]:
    """The report's search before the index: memories (newest first) whose text holds
    every whitespace-separated piece of the query."""
    pieces = query.lower().split()
    out = []
    for m in memories:
        hay = " ".join(
            [
                m["content"],
                m.get("summary") or "",
                m["type"],
                m.get("project_name") or "(global)",
                " ".join(m.get("tags") or []),
            ]
        ).lower()
        if all(p in hay for p in pieces):
            out.append(m["id"])
    return out


def compare(
    data: ViewerData,
    questions: list[str],
    right: list[Callable[[str], bool]],
    tmp: Path,
) -> dict[str, Any]:
    """The measures of the module docstring for ``questions`` (``right``: whether an id
    answers the question of the same position)."""
    overview = data.overview(details=True)
    t0 = time.perf_counter()
    index = data.search_index([m["id"] for m in overview["memories"]])
    build_s = time.perf_counter() - t0
    live = [[h["id"] for h in data.search(q)["hits"]] for q in questions]
    before = [substring_filter(overview["memories"], q) for q in questions]
    report, ms = report_hits(index, overview["memories"], questions, tmp)

    def summary(runs: list[list[str]]) -> dict[str, float]:
        ranks = [
            next((i + 1 for i, x in enumerate(r[:10]) if ok(x)), None)
            for r, ok in zip(runs, right, strict=True)
        ]
        n = len(ranks) or 1
        return {
            "found@10": round(sum(1 for x in ranks if x) / n, 3),
            "mrr@10": round(sum(1 / x for x in ranks if x) / n, 3),
        }

    overlaps = [
        len(set(r[:10]) & set(lv[:10])) / min(10, len(lv))
        for r, lv in zip(report, live, strict=True)
        if lv
    ]
    top1 = [r[:1] == lv[:1] for r, lv in zip(report, live, strict=True) if lv]
    with_index = render_page(overview, live=False, search_index=index)
    without = render_page(overview, live=False)
    return {
        "memories": len(overview["memories"]),
        "questions": len(questions),
        "report before (every word a substring)": summary(before),
        "before: nothing found": sum(1 for x in before if not x),
        "live": summary(live),
        "report": summary(report),
        "overlap@10": round(sum(overlaps) / (len(overlaps) or 1), 3),
        "top1 agreement": round(sum(top1) / (len(top1) or 1), 3),
        "live empty": sum(1 for x in live if not x),
        "report empty": sum(1 for x in report if not x),
        "index build s": round(build_s, 2),
        "report ms per question": round(ms / (len(questions) or 1), 2),
        "page bytes with index": len(with_index.encode()),
        "page bytes without index": len(without.encode()),
    }


def config(limit: int) -> Config:
    return Config.coerce({"viewer": {"list_limit": limit}})


def corpus_set(n: int, tmp: Path) -> dict[str, Any]:
    mems = build_db(n, tmp / "corpus.db")
    qs = queries(mems)
    with MemoryStore(tmp / "corpus.db", read_only=True) as st:
        data = ViewerData(st, config(max(n, 1)), home=tmp)
        right = [lambda x, q=q: x in q.relevant for q in qs]
        return compare(data, [q.text for q in qs], right, tmp)


def devmem_set(folder: Path, tmp: Path) -> dict[str, Any] | None:
    if not (folder / "sessions.json").is_file():
        return None
    sessions = json.loads((folder / "sessions.json").read_text())
    qs = [
        q
        for q in json.loads((folder / "questions-dev.json").read_text())
        if q["haystackSessionIds"]
    ]
    with MemoryStore(tmp / "devmem.db") as st:
        stored = load(st, sessions)
        data = ViewerData(st, config(stored), home=tmp)
        session_of = {m["id"]: m["session_id"] for m in st.list_all(limit=stored)}
        right = [lambda x, q=q: session_of.get(x) in q["haystackSessionIds"] for q in qs]
        return compare(data, [q["question"] for q in qs], right, tmp)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--memories", type=int, default=1000)
    args = ap.parse_args()
    if shutil.which("node") is None:
        print("skipped: node is not installed", file=sys.stderr)
        return 0
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        out: dict[str, Any] = {"corpus": corpus_set(args.memories, tmp)}
        dev = devmem_set(args.data, tmp)
        if dev is None:
            print(f"devmembench skipped: no {args.data}", file=sys.stderr)
        else:
            out["devmembench"] = dev
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
