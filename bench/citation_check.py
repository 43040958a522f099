"""Checking citations (issue 22): the cost of a session start, and the precision of 'stale'.

Usage: python bench/citation_check.py [--files 10000] [--citations 1000] [--runs 5]
           [--pairs 200] [--history /work/main] [--seed 22] [--work DIR] [--json]

1. **Cost**: a generated git repository of ``--files`` files (60 lines each, one commit),
   ``--citations`` citations captured at that commit, then a second commit that moves the
   cited lines of 15% of them 40 lines down, renames 10% of the files (``git mv``), changes
   the cited lines of 10%, deletes 5% and leaves the rest alone. The session-start check
   (`check_many`) is timed ``--runs`` times (p50/p95 of the whole), with each citation's own
   time (p50/p95), beside a bare ``git rev-parse HEAD`` and ``git status`` in the same run.
2. **Precision**: ``--pairs`` (citation, later commit) pairs from a real repository's
   history (a clone of ``--history`` in a temporary folder; nothing written to it): at a
   commit A on the first-parent line, a run of 3-15 lines of a Python or Markdown file
   (half the time of a file the next commits change), checked at a commit B 1-40 commits
   later. The truth comes from git, not from the checker: ``git blame -w --reverse A..B``
   of the cited lines says, for each line, the last commit it was still there (renames
   followed); the citation is stale when any line did not survive to B.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmem_hooks.evidence.check import check_many  # noqa: E402
from llmem_hooks.evidence.cite import Citation, capture, text_hash  # noqa: E402
from llmem_hooks.session.citation_check import check_project  # noqa: E402
from llmem_hooks.store import MemoryStore  # noqa: E402
from llmem_hooks.store import citations as cited  # noqa: E402

GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(root: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", *args], cwd=root, env=GIT_ENV, capture_output=True, text=True, check=True
    )
    return out.stdout


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def timed(root: Path, *args: str) -> float:
    t = time.perf_counter()
    subprocess.run(["git", *args], cwd=root, capture_output=True, check=True)
    return (time.perf_counter() - t) * 1000


def cost(work: Path, files: int, citations: int, runs: int, rng: random.Random) -> dict[str, Any]:
    root = work / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    paths = [f"pkg{i % 100:02d}/mod_{i:05d}.py" for i in range(files)]
    for i, path in enumerate(paths):
        (root / path).parent.mkdir(exist_ok=True)
        body = [f"def f_{i}_{n}(x):  # {i}.{n}\n    return x + {n}" for n in range(30)]
        (root / path).write_text("\n".join(body) + "\n", encoding="utf-8")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "A")
    chosen = rng.sample(paths, citations)
    cites = []
    for path in chosen:
        start = rng.randint(1, 50)
        cites.append(capture(root, Citation(path, start, start + rng.randint(2, 9))))
    kinds = ["same"] * 60 + ["moved"] * 15 + ["renamed"] * 10 + ["changed"] * 10 + ["deleted"] * 5
    expect: dict[str, int] = {}
    for c in cites:
        kind = rng.choice(kinds)
        target = root / c.path
        lines = target.read_text(encoding="utf-8").splitlines()
        if kind == "moved":
            lines = [f"# pad {n}" for n in range(40)] + lines
        elif kind == "changed":
            lines[c.line_start] = "    return None  # changed"
        if kind in ("moved", "changed"):
            target.write_text("\n".join(lines) + "\n", encoding="utf-8")
        elif kind == "renamed":
            git(root, "mv", c.path, c.path.replace("mod_", "renamed_"))
        elif kind == "deleted":
            git(root, "rm", "-q", c.path)
        expect[kind] = expect.get(kind, 0) + 1
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "B")
    whole: list[float] = []
    per: list[float] = []
    statuses: dict[str, int] = {}
    bare_head: list[float] = []
    bare_status: list[float] = []
    for _ in range(runs):
        bare_head.append(timed(root, "rev-parse", "HEAD"))
        bare_status.append(timed(root, "status", "--porcelain"))
        t = time.perf_counter()
        results = check_many(root, cites)
        whole.append((time.perf_counter() - t) * 1000)
        per.extend(r.ms for r in results)
        statuses = {}
        for r in results:
            key = r.status + ("+updated" if r.updated else "")
            statuses[key] = statuses.get(key, 0) + 1
    project = _sidecar_store(work / "store.db", cites)
    sidecar: list[float] = []
    recorded: dict[str, int] = {}
    for n in range(runs):  # each run on a fresh copy: a run records, and moves citations
        db = work / f"run{n}.db"
        shutil.copy(work / "store.db", db)
        with MemoryStore(db) as st:
            t = time.perf_counter()
            done = check_project(st, project, root, total_s=600.0, per_citation_s=0.5)
            sidecar.append((time.perf_counter() - t) * 1000)
            recorded = done.counts()
        db.unlink()
    return {
        "files": files,
        "citations": citations,
        "runs": runs,
        "sidecar_p50_ms": pct(sidecar, 50),
        "sidecar_p95_ms": pct(sidecar, 95),
        "sidecar_recorded": recorded,
        "made": expect,
        "statuses": statuses,
        "whole_p50_ms": pct(whole, 50),
        "whole_p95_ms": pct(whole, 95),
        "per_p50_ms": pct(per, 50),
        "per_p95_ms": pct(per, 95),
        "git_rev_parse_p50_ms": pct(bare_head, 50),
        "git_status_p50_ms": pct(bare_status, 50),
    }


def _sidecar_store(path: Path, cites: list[Citation]) -> str:
    """A memory store with one memory per citation, all of one project (what the sidecar
    checks at a session start); its project key."""
    project = "bench-project"
    with MemoryStore(path) as st, st.atomic():
        for i, c in enumerate(cites):
            mid = st.add("fact", f"function f_{i} in {c.path} adds its argument", project=project)
            cited.add(st.db, mid, [c])
    return project


def truth_stale(
    clone: Path, a: str, b: str, c: Citation, cited: list[str], line: list[str]
) -> tuple[bool, tuple[str, str] | None]:
    """Stale unless every cited line (blank edges aside) survives from A to B and they still
    stand together, in order: reverse blame (whitespace ignored) gives each line's last
    commit and its line number there."""
    first = next(i for i, x in enumerate(cited) if x.strip())
    last = max(i for i, x in enumerate(cited) if x.strip())
    lo, hi = c.line_start + first, c.line_start + last
    out = git(
        clone,
        "blame",
        "-w",
        "--reverse",
        "--porcelain",
        "-L",
        f"{lo},{hi}",
        f"{a}..{b}",
        "--",
        c.path,
    )
    rows = [
        r.split() for r in out.splitlines() if len(r) > 41 and r[40] == " " and r[:40].isalnum()
    ]
    shas = [r[0] for r in rows]
    at_b = [int(r[1]) for r in rows]
    lost = [sha for sha in shas if sha != b]
    if lost:  # the commit after the earliest last-seen one changed it (on the first-parent line)
        seen = [line.index(sha) for sha in lost if sha in line]
        return True, (line[min(seen)], line[min(seen) + 1]) if seen else None
    return at_b != list(range(at_b[0], at_b[0] + len(at_b))), None


def same_change(clone: Path, said: str | None, seen: str, after: str) -> bool:
    """``said`` is the commit after the lines' last sighting, or (when that one is a merge)
    a commit the merge brought in: reachable from it, not from the last sighting."""
    if said is None or said == after:
        return said is not None

    def reach(x: str, y: str) -> bool:
        return (
            subprocess.run(["git", "merge-base", "--is-ancestor", x, y], cwd=clone).returncode == 0
        )

    return reach(said, after) and not reach(said, seen)


def precision(history: Path, work: Path, pairs: int, rng: random.Random) -> dict[str, Any]:
    clone = work / "clone"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(history), str(clone)], check=True)
    line = git(clone, "rev-list", "--first-parent", "--reverse", "HEAD").split()
    made: list[tuple[str, str, Citation, list[str]]] = []
    tries = 0
    while len(made) < pairs and tries < pairs * 50:
        tries += 1
        i = rng.randrange(0, len(line) - 2)
        a, b = line[i], line[min(len(line) - 1, i + rng.randint(1, 40))]
        files = [
            f
            for f in git(clone, "ls-tree", "-r", "--name-only", a).splitlines()
            if f.endswith((".py", ".md"))
        ]
        touched = [
            f
            for f in git(clone, "diff", "--name-only", "--no-renames", a, b).splitlines()
            if f in files
        ]
        pool = touched if touched and rng.random() < 0.5 else files
        if not pool:
            continue
        path = rng.choice(pool)
        text = git(clone, "show", f"{a}:{path}").splitlines()
        if len(text) < 20:
            continue
        start = rng.randint(1, len(text) - 16)
        end = start + rng.randint(2, 14)
        cited = text[start - 1 : end]
        if sum(1 for x in cited if x.strip()) < 2:
            continue
        made.append((a, b, Citation(path, start, end, text_hash(cited), a), cited))
    by_b: dict[str, list[tuple[str, Citation, list[str]]]] = {}
    for a, b, c, cited in made:
        by_b.setdefault(b, []).append((a, c, cited))
    tp = fp = fn = tn = unknown = by_known = by_right = 0
    disagreements: list[str] = []
    for b, group in by_b.items():
        git(clone, "checkout", "-q", "--force", b)
        results = check_many(clone, [c for _, c, _ in group], budget_s=2.0)
        for (a, c, cited), r in zip(group, results, strict=True):
            truth, changer = truth_stale(clone, a, b, c, cited, line)
            if truth and changer and r.status == "stale":
                by_known += 1
                right = same_change(clone, r.changed_by, *changer)
                by_right += right
                if not right and len(disagreements) < 12:
                    disagreements.append(
                        f"{c.spec()} {a[:8]}..{b[:8]}: changed_by {str(r.changed_by)[:8]}, "
                        f"reverse blame {changer[1][:8]}"
                    )
            if r.status == "unknown":
                unknown += 1
                continue
            said = r.status == "stale"
            tp += said and truth
            fp += said and not truth
            fn += truth and not said
            tn += not truth and not said
            if said != truth and len(disagreements) < 12:
                disagreements.append(
                    f"{c.spec()} {a[:8]}..{b[:8]}: truth {'stale' if truth else 'valid'}, "
                    f"checker {r.status} ({r.reason})"
                )
    return {
        "pairs": len(made),
        "true_stale": tp,
        "false_stale": fp,
        "missed_stale": fn,
        "true_valid": tn,
        "unknown": unknown,
        "stale_precision": tp / (tp + fp) if tp + fp else None,
        "stale_missed_rate": fn / (tp + fn) if tp + fn else None,
        "changed_by_checked": by_known,
        "changed_by_right": by_right,
        "disagreements": disagreements,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--citations", type=int, default=1_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--pairs", type=int, default=200)
    ap.add_argument("--history", type=Path, default=Path("/work/main"))
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--work", type=Path)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        work = Path(tmp)
        (work / "cost").mkdir()
        (work / "precision").mkdir()
        got = {
            "machine": f"{platform.system()} {platform.release()}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}",
            "cost": cost(work / "cost", args.files, args.citations, args.runs, rng),
            "precision": precision(args.history, work / "precision", args.pairs, rng),
        }
    if args.json:
        print(json.dumps(got, indent=2))
        return
    c, p = got["cost"], got["precision"]
    print(f"Machine: {got['machine']}\n")
    print(
        f"### Session-start check: {c['citations']:,} citations in a {c['files']:,}-file "
        f"repository ({c['runs']} runs)\n"
    )
    print("| measure | p50 ms | p95 ms |")
    print("|---|---:|---:|")
    print(f"| whole check (`check_many`) | {c['whole_p50_ms']:.0f} | {c['whole_p95_ms']:.0f} |")
    print(
        f"| the sidecar's session-start check (`check_project`: read, check, record) "
        f"| {c['sidecar_p50_ms']:.0f} | {c['sidecar_p95_ms']:.0f} |"
    )
    print(f"| per citation | {c['per_p50_ms']:.3f} | {c['per_p95_ms']:.3f} |")
    print(f"| bare `git rev-parse HEAD` | {c['git_rev_parse_p50_ms']:.1f} | |")
    print(f"| bare `git status --porcelain` | {c['git_status_p50_ms']:.1f} | |")
    print(f"\nMade: {c['made']}; checker said: {c['statuses']}; recorded {c['sidecar_recorded']}\n")
    print(f"### Precision of 'stale' on {p['pairs']} pairs from this repository's history\n")
    print("| truth \\ checker | stale | valid |")
    print("|---|---:|---:|")
    print(f"| stale | {p['true_stale']} | {p['missed_stale']} |")
    print(f"| valid | {p['false_stale']} | {p['true_valid']} |")
    sp, mr = p["stale_precision"], p["stale_missed_rate"]
    right = "n/a" if sp is None else f"{sp:.3f}"
    missed = "n/a" if mr is None else f"{mr:.3f}"
    print(f"\n'stale' right: {right}; stale missed: {missed}; unknown: {p['unknown']}")
    print(
        f"changed_by = the commit (or merged-in commit) after the lines' last sighting "
        f"(reverse blame): "
        f"{p['changed_by_right']} of {p['changed_by_checked']}"
    )
    for d in p["disagreements"]:
        print(f"- {d}")


if __name__ == "__main__":
    main()
