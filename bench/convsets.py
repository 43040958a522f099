"""What the conversation benches share (bench/conversational.py, bench/techconv.py): loading
a fixture folder's conversations by split, session dates, storing episodes in process the
way the coordinator does, and the rank of each evidence turn in a result list."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def load(folder: Path, split: str = "all", only: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The conversations of ``split`` (dev, heldout or all) in ``folder``, or the ids in
    ``only``."""
    convs = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
    if only:
        return [c for c in convs if c["id"] in only]
    return [c for c in convs if split == "all" or c["split"] == split]


def session_ms(session: Mapping[str, Any]) -> int:
    """When a session started, in epoch milliseconds (its ``date``, UTC)."""
    when = datetime.fromisoformat(session["date"].replace("Z", "+00:00")).astimezone(UTC)
    return int(when.timestamp() * 1000)


def store_episodes(
    store: Any, project: str, session_id: str, turns: Iterable[tuple[str, str, str, int]]
) -> int:
    """One session's turns (id, role, text, ms) as episodes, built and stored as
    `SessionHookCoordinator.store_episodes` does (build_episodes, then MemoryStore.add)."""
    from llmem_hooks.events import Message
    from llmem_hooks.session.episodes import build_episodes
    from llmem_hooks.timestamps import to_iso

    msgs = [Message(tid, session_id, role, text, ms) for tid, role, text, ms in turns]  # type: ignore[arg-type]
    n = 0
    with store.atomic():
        for ep in build_episodes(msgs):
            store.add(
                "conversation",
                ep.content,
                source="episode",
                metadata=ep.metadata(),
                entered_by="opencode",
                project=project,
                session_id=session_id,
                source_message_ids=ep.message_ids,
                created_at=to_iso(datetime.fromtimestamp(ep.time_ms / 1000, UTC)),
                dedupe=False,
            )
            n += 1
    return n


def first_ranks(evidence: Sequence[str], held: Sequence[set[str]]) -> dict[str, int | None]:
    """Each evidence turn's rank (from 1) in a list whose results hold ``held`` turns; None
    when no result holds it."""
    return {e: next((i for i, g in enumerate(held, 1) if e in g), None) for e in evidence}


Turn = tuple[str, str, str, int]  # turn id, role ("user" / "assistant"), text, epoch ms


def environment(home: Path) -> dict[str, str]:
    """The environment the CLI and the sidecar run in for a replay under ``home``."""
    import os

    return {
        **os.environ,
        "LLMEM_HOME": str(home / "llmem"),
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "xdg"),
    }


def replay(
    home: Path, projects: Sequence[tuple[str, str, Sequence[tuple[str, Sequence[Turn]]]]]
) -> tuple[dict[str, str], dict[str, str], float]:
    """The real path: each project (its id, its repository folder's name, its sessions as
    (title, turns)) written as OpenCode sessions in a real ``opencode.db``, one git
    repository each, then a real ``llmem-hooks run`` until every session has been stored.
    Returns the CLI's environment, OpenCode message id -> turn id, and the sidecar's
    seconds. Every episode is kept (the sets are dated years back)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root / "tests"))
    sys.path.insert(0, str(root / "bench"))
    from devmem import run_sidecar
    from support.opencode_db import OpenCodeDB, text

    db = OpenCodeDB(home / "opencode" / "opencode.db")
    msg_turn: dict[str, str] = {}
    # Each session at its own date, all of them in date order (as a person works on several
    # projects over months): the episodes carry the dates the questions' time words mean.
    dated = sorted(
        (
            (turns[0][3], project, folder, title, turns)
            for project, folder, project_sessions in projects
            for title, turns in project_sessions
            if turns
        ),
        key=lambda d: d[0],
    )
    if dated:
        db.ms = dated[0][0] - 120_000
    for project, folder, _ in projects:
        repo = home / "repos" / folder
        repo.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        db.project(project, str(repo))
    for first, project, folder, title, turns in dated:
        db.ms = max(db.ms, first - 60_000)
        sid = db.session(title, project=project, directory=str(home / "repos" / folder))
        last_user = ""
        for tid, role, said, ms in turns:
            db.ms = max(db.ms, ms)
            if role == "user":
                last_user = db.user(sid, said)
                msg_turn[last_user] = tid
            else:
                msg_turn[db.assistant(sid, last_user, text(said))] = tid
    sessions = len(dated)
    db.close()
    (home / "llmem").mkdir()
    cfg = {
        "opencode": {"db_path": str(db.path), "autostart_sidecar": False},
        "copilot": {"enabled": False},
        "ollama": {"enabled": False},
        "session": {"idle_quiet_seconds": 0, "idle_debounce_seconds": 0},
        "episodes": {"enabled": True, "retention_days": 0},
    }
    (home / "llmem" / "config.yaml").write_text(json.dumps(cfg))
    took = run_sidecar(home / "llmem", environment(home), sessions)
    return environment(home), msg_turn, took


def cli_search(env: Mapping[str, str], question: str) -> list[dict[str, Any]]:
    """``llmem-hooks search QUESTION --json --limit 10`` as a person or an agent runs it
    (results cut to their passages); [] when it fails."""
    import subprocess
    import sys

    cli = str(Path(sys.executable).parent / "llmem-hooks")
    out = subprocess.run(
        [cli, "search", question, "--json", "--limit", "10"],
        env=dict(env),
        capture_output=True,
        text=True,
    )
    return list(json.loads(out.stdout or "[]")) if out.returncode == 0 else []


def parser(doc: str | None) -> Any:
    """The options every conversation bench takes (split, only, json, show-misses)."""
    import argparse

    ap = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    ap.add_argument("--split", default="dev", choices=("dev", "heldout", "all"))
    ap.add_argument("--only", default="", help="conversation ids, comma-separated")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--show-misses", action="count", default=0, help="twice: with their top 10")
    ap.add_argument(
        "--folder",
        action="append",
        help="another fixture folder of the same format (again for more: all in one store)",
    )
    return ap


def chosen(folder: Path, args: Any) -> list[dict[str, Any]]:
    """The conversations the parsed ``args`` ask for (from the ``--folder``s when given)."""
    only = [c for c in args.only.split(",") if c]
    folders = [Path(f) for f in getattr(args, "folder", None) or ()] or [folder]
    return [c for f in folders for c in load(f, args.split, only)]


def print_scores(scores: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> None:
    """One line per split and question kind ("all" first)."""
    for split, kinds in scores.items():
        for kind, m in sorted(kinds.items(), key=lambda kv: (kv[0] != "all", kv[0])):
            cols = "  ".join(f"{k} {v}" for k, v in m.items())
            print(f"{split:>8} {kind:>10}  {cols}")
