"""DevMemBench end to end: sessions through the real OpenCode adapter and sidecar, questions
through `llmem-hooks search --json`.

Each of the 25 sessions of ``../shared/datasets/devmembench/sessions.json`` is written as an
OpenCode session (tests/support/opencode_db.py: a real ``opencode.db``) in a git repository
folder named after ``metadata.project``; ``llmem-hooks run`` runs until every session has
been idled (extraction and episodes), then each question of ``questions-dev.json`` is asked
with ``llmem-hooks search QUESTION --json --limit 10``. Reported:

- recall@10: the share of answerable questions with a result from an evidence session
  (``haystackSessionIds``), by the result's ``session_id``;
- coverage: of the ground truth's distinctive words (4+ characters, not stopwords) that the
  evidence sessions contain, the share found in the top 5 results' content; with the
  characters those 5 results hold (mean).

    .venv/bin/python bench/devmem.py [--no-episodes] [--data DIR] [--json]
        [--questions FILE] [--keep-db FILE] [--dump FILE] [--full] [--agent copilot]

``--agent copilot`` writes the sessions as Copilot CLI session folders instead (the same
project memory is expected from either agent).

``--no-episodes`` turns the episodes off (what main did before them). Skips cleanly
(exit 0, a message) when the dataset is absent.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.opencode_db import OpenCodeDB, text  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from keyword_floor import KeywordFloor, exchanges  # noqa: E402

CLI = [str(Path(sys.executable).parent / "llmem-hooks")]
STOP = set(
    [
        "about",
        "above",
        "after",
        "again",
        "against",
        "also",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "could",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "from",
        "further",
        "have",
        "having",
        "here",
        "into",
        "itself",
        "just",
        "more",
        "most",
        "other",
        "over",
        "same",
        "should",
        "some",
        "such",
        "than",
        "that",
        "their",
        "theirs",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "under",
        "until",
        "very",
        "what",
        "when",
        "where",
        "which",
        "while",
        "will",
        "with",
        "would",
        "your",
        "yours",
        "uses",
        "used",
        "using",
    ]
)
WORD = re.compile(r"[a-z0-9][a-z0-9_.+#-]*[a-z0-9+#]|[a-z0-9]")


def words(text: str) -> set[str]:
    return {w for w in WORD.findall(text.lower())}


def distinctive(text: str) -> set[str]:
    return {w for w in words(text) if len(w) >= 4 and w not in STOP}


def find_data(arg: str | None) -> Path | None:
    for cand in (
        arg,
        ROOT.parent / "shared/datasets/devmembench",
        ROOT.parent.parent / "shared/datasets/devmembench",
    ):
        if cand and (Path(cand) / "sessions.json").exists():
            return Path(cand)
    return None


def _session_ms(session: dict[str, Any]) -> int:
    """When a session began: 09:00 UTC on its ``metadata.date``. The sessions are written
    in date order at their dates (the dataset lists them by project), so "the latest"
    means what it meant to the developer."""
    date = datetime.fromisoformat(session["metadata"]["date"]).replace(hour=9, tzinfo=UTC)
    return int(date.timestamp() * 1000)


def write_sessions(sessions: list[dict[str, Any]], home: Path) -> tuple[Path, dict[str, str]]:
    """The sessions as OpenCode sessions; returns the db path and opencode id -> dataset id."""
    db = OpenCodeDB(home / "opencode" / "opencode.db")
    ids: dict[str, str] = {}
    db.ms = _session_ms(min(sessions, key=_session_ms)) - 120_000
    for s in sorted(sessions, key=_session_ms):
        project = s["metadata"]["project"]
        repo = home / "repos" / project
        if not repo.exists():
            repo.mkdir(parents=True)
            subprocess.run(["git", "init", "-q", str(repo)], check=True)
            db.project(project, str(repo))
        db.ms = max(db.ms, _session_ms(s))
        sid = db.session(s["sessionId"], project=project, directory=str(repo))
        ids[sid] = s["sessionId"]
        last_user: str | None = None
        for m in s["messages"]:
            db.tick(30_000)
            if m["role"] == "user":
                last_user = db.user(sid, m["content"])
            else:
                if last_user is None:
                    last_user = db.user(sid, "(continue)")
                db.assistant(sid, last_user, text(m["content"]))
    db.close()
    return db.path, ids


def write_copilot_sessions(
    sessions: list[dict[str, Any]], home: Path
) -> tuple[Path, dict[str, str]]:
    """The sessions as Copilot CLI sessions (``session-state/<id>/events.jsonl``, as
    tests/support/copilot_home.py writes them, each shut down); returns the Copilot home
    and session id -> dataset id."""
    from support.copilot_home import CopilotHome

    copilot = CopilotHome(home / "copilot")
    ids: dict[str, str] = {}
    copilot.ms = _session_ms(min(sessions, key=_session_ms)) - 120_000
    for s in sorted(sessions, key=_session_ms):
        repo = home / "repos" / s["metadata"]["project"]
        if not repo.exists():
            repo.mkdir(parents=True)
            subprocess.run(["git", "init", "-q", str(repo)], check=True)
        copilot.ms = max(copilot.ms, _session_ms(s))
        session = copilot.session(cwd=str(repo), name=s["sessionId"])
        ids[session.id] = s["sessionId"]
        prompt: str | None = None
        for m in s["messages"]:
            copilot.tick(30_000)
            if m["role"] == "user":
                if prompt is not None:  # two user messages in a row: the first unanswered
                    session.user(prompt)
                prompt = m["content"]
            else:
                session.exchange(prompt or "(continue)", m["content"])
                prompt = None
        if prompt is not None:
            session.user(prompt)
        session.shutdown()
    return copilot.root, ids


def run_sidecar(
    home: Path, env: dict[str, str], sessions: int, timeout: float = 600, agent: str = "opencode"
) -> float:
    """`llmem-hooks run` until every session has ended (its final extraction and summary
    are stored), then SIGTERM."""
    start = time.monotonic()
    proc = subprocess.Popen(
        [*CLI, "run"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    db = home / "memory.db"
    idled_at: float | None = None
    try:
        while time.monotonic() - start < timeout:
            time.sleep(1.0)
            if not db.exists():
                continue
            try:
                conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
                rows = dict(
                    conn.execute(
                        "SELECT source_type, count(DISTINCT source_id) FROM extraction_log"
                        " GROUP BY source_type"
                    ).fetchall()
                )
                conn.close()
            except sqlite3.Error:
                continue
            if rows.get(agent, 0) >= sessions and idled_at is None:
                idled_at = time.monotonic()
            # every session idled (extracted); endings (summaries) get up to 20 s more
            if rows.get(f"{agent}:ending", 0) >= sessions or (
                idled_at is not None and time.monotonic() - idled_at > 20
            ):
                time.sleep(1.0)
                break
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        progress = [line for line in err.splitlines() if "episodes:" in line]
        if progress:
            print(progress[-1], file=sys.stderr)
    return time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data")
    ap.add_argument("--no-episodes", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--dump", help="write each question's top 5 results here (JSON lines)")
    ap.add_argument("--full", action="store_true", help="results whole (search --full)")
    ap.add_argument("--keep-db", help="copy the memory database here at the end")
    ap.add_argument(
        "--agent",
        choices=("opencode", "copilot"),
        default="opencode",
        help="write the sessions as this agent stores them (the same figures are expected)",
    )
    ap.add_argument(
        "--questions",
        help="ask these questions instead (a JSON list in questions-dev.json's format: a set"
        " written by hand over the same sessions, to check the tuning on words it never saw)",
    )
    args = ap.parse_args(argv)
    data = find_data(args.data)
    if data is None:
        print("devmem: dataset not found (../shared/datasets/devmembench); skipped")
        return 0
    sessions = json.loads((data / "sessions.json").read_text())
    questions = json.loads(Path(args.questions or data / "questions-dev.json").read_text())
    session_words = {
        s["sessionId"]: words(" ".join(m["content"] for m in s["messages"])) for s in sessions
    }
    with tempfile.TemporaryDirectory(prefix="devmem-") as tmp:
        home = Path(tmp)
        (home / "llmem").mkdir()
        if args.agent == "copilot":
            copilot_home, ids = write_copilot_sessions(sessions, home)
            agents: dict[str, Any] = {
                "opencode": {"enabled": False},
                "copilot": {"home": str(copilot_home), "autostart_sidecar": False},
            }
        else:
            db_path, ids = write_sessions(sessions, home)
            agents = {
                "opencode": {"db_path": str(db_path), "autostart_sidecar": False},
                "copilot": {"enabled": False},
            }
        cfg = {
            **agents,
            "ollama": {"enabled": False},
            # the sessions are dated in the past: replayed, each ends (final extraction,
            # summary) as it would have after 30 quiet minutes
            "session": {"idle_quiet_seconds": 0, "idle_debounce_seconds": 0},
            # dated 2025: every episode kept (retention would skip what is a year old)
            "episodes": {"enabled": not args.no_episodes, "retention_days": 0},
        }
        (home / "llmem" / "config.yaml").write_text(json.dumps(cfg))
        env = {
            **os.environ,
            "LLMEM_HOME": str(home / "llmem"),
            "HOME": str(home),
            "XDG_DATA_HOME": str(home / "xdg"),
        }
        env["LLMEM_HOME"] = str(home / "llmem")
        took = run_sidecar(home / "llmem", env, len(sessions), agent=args.agent)
        found = answerable = 0
        cov_num = cov_den = 0
        chars: list[int] = []
        # the plain keyword floor (bench/keyword_floor.py), scored the same way
        floor = KeywordFloor()
        for s in sessions:
            turns = [(f"{i}", m["role"], m["content"]) for i, m in enumerate(s["messages"])]
            for tids, body in exchanges(turns):
                floor.add(f"{s['sessionId']}#{tids[0]}", body)
        at = {k: 0 for k in (1, 5, 10)}
        fat = {k: 0 for k in (1, 5, 10)}
        fcov_num = 0
        fchars: list[int] = []
        per_type: dict[str, list[float]] = {}
        for q in questions:
            out = subprocess.run(
                [
                    *CLI,
                    "search",
                    q["question"],
                    "--json",
                    "--limit",
                    "10",
                    *(["--full"] if args.full else []),
                ],
                env=env,
                capture_output=True,
                text=True,
            )
            hits = json.loads(out.stdout or "[]") if out.returncode == 0 else []
            evidence = set(q.get("haystackSessionIds") or [])
            if not evidence:
                continue
            answerable += 1
            got = {ids.get(h.get("session_id") or "", "") for h in hits[:10]}
            found += bool(got & evidence)
            fl = floor.search(q["question"], 10)
            for k in at:
                at[k] += bool({ids.get(h.get("session_id") or "", "") for h in hits[:k]} & evidence)
                fat[k] += bool({key.split("#")[0] for key, _ in fl[:k]} & evidence)
            ftop5 = " ".join(body for _, body in fl[:5])
            fchars.append(len(ftop5))
            top5 = " ".join(h["content"] for h in hits[:5])
            chars.append(sum(len(h["content"]) for h in hits[:5]))
            in_evidence = set().union(*(session_words[e] for e in evidence if e in session_words))
            target = {w for w in distinctive(q["groundTruth"]) if w in in_evidence}
            if target:
                hit = len(target & words(top5))
                fcov_num += len(target & words(ftop5))
                cov_num += hit
                cov_den += len(target)
                per_type.setdefault(q["questionType"], []).append(hit / len(target))
                if args.dump:
                    with open(args.dump, "a") as fh:
                        top = [
                            {k: h.get(k) for k in ("type", "content", "excerpt")} for h in hits[:5]
                        ]
                        row = {"q": q["question"], "missing": sorted(target - words(top5))}
                        fh.write(
                            json.dumps({**row, "coverage": hit / len(target), "top": top}) + "\n"
                        )
        db_bytes = (home / "llmem" / "memory.db").stat().st_size
        if args.keep_db:
            src = sqlite3.connect(home / "llmem" / "memory.db")
            dst = sqlite3.connect(args.keep_db)
            src.backup(dst)
            src.close()
            dst.close()
            Path(args.keep_db + ".ids.json").write_text(json.dumps(ids))
        out = subprocess.run([*CLI, "stats", "--json"], env=env, capture_output=True, text=True)
        ep = json.loads(out.stdout).get("episodes", {}) if out.returncode == 0 else {}
        result = {
            "episodes": not args.no_episodes,
            "questions": answerable,
            "recall@10": round(found / max(answerable, 1), 3),
            "coverage": round(cov_num / max(cov_den, 1), 3),
            "top5_chars_mean": round(sum(chars) / max(len(chars), 1)),
            "ours@1/5/10": [round(at[k] / max(answerable, 1), 3) for k in at],
            "floor@1/5/10": [round(fat[k] / max(answerable, 1), 3) for k in fat],
            "floor_coverage": round(fcov_num / max(cov_den, 1), 3),
            "floor_top5_chars_mean": round(sum(fchars) / max(len(fchars), 1)),
            "sidecar_seconds": round(took, 1),
            "db_bytes": db_bytes,
            "episodes_stored": ep.get("count"),
            "episode_text_bytes_mean": ep.get("bytes_per_episode"),
            "coverage_by_type": {k: round(sum(v) / len(v), 3) for k, v in sorted(per_type.items())},
        }
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for k, v in result.items():
            print(f"{k:>18}: {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
