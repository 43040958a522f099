"""An opencode.db writer for tests: rows shaped the way OpenCode 1.18.33 writes them.

`OpenCodeDB` writes rows the way OpenCode does (shapes from the reference's
sample_rows.json): a ``session``/``message``/``part`` row plus an ``event`` row per write,
assistant messages written in place (first without, then with ``time.completed``).
`build_demo` makes a store with every lifecycle moment the adapter must understand.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA = Path(__file__).resolve().parents[1] / "fixtures" / "opencode_schema.sql"
PROJECT = "0a059e5f2893945737c123136315ef95f8562a5b"
REPO = "/home/dev/projects/demo-repo"
MASK48 = (1 << 48) - 1
T0 = int(time.time() * 1000) - 3_600_000  # an hour ago: ids decode relative to now


class OpenCodeDB:
    """Writes an opencode.db the way OpenCode 1.18 does (one event row per write)."""

    def __init__(self, path: Path, wal: bool = True) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute(f"PRAGMA journal_mode = {'WAL' if wal else 'DELETE'}")
        # As OpenCode opens it (reference README): no fsync on every commit in WAL mode.
        self.conn.execute("PRAGMA synchronous = NORMAL")
        self.conn.execute("PRAGMA foreign_keys = ON")
        self.conn.executescript(SCHEMA.read_text())
        self.ms = T0
        self._n = 0
        self._msgs: dict[str, tuple[str, dict[str, Any]]] = {}
        self._parts: dict[str, tuple[str, str, dict[str, Any]]] = {}
        self.project(PROJECT, REPO)
        self.project("global", "/")

    # ids and time, as OpenCode makes them
    def tick(self, ms: int = 7) -> int:
        self.ms += ms
        return self.ms

    def _id(self, prefix: str, descending: bool = False) -> str:
        self._n += 1
        value = ((self.ms << 12) + (self._n & 0xFFF)) & MASK48
        if descending:
            value = ~value & MASK48
        return f"{prefix}_{value:012x}T{self._n:013d}"

    def project(self, pid: str, worktree: str) -> None:
        self.conn.execute(
            "INSERT INTO project (id, worktree, vcs, time_created, time_updated, sandboxes) "
            "VALUES (?, ?, 'git', ?, ?, '[]')",
            (pid, worktree, self.ms, self.ms),
        )

    def event(self, sid: str, typ: str, data: dict[str, Any] | str) -> str:
        eid = self._id("evt")
        with self.conn:
            self.conn.execute("BEGIN")
            row = self.conn.execute(
                "SELECT seq FROM event_sequence WHERE aggregate_id = ?", (sid,)
            ).fetchone()
            seq = 0 if row is None else row[0] + 1
            self.conn.execute(
                "INSERT INTO event_sequence (aggregate_id, seq) VALUES (?, ?) "
                "ON CONFLICT(aggregate_id) DO UPDATE SET seq = excluded.seq",
                (sid, seq),
            )
            raw = data if isinstance(data, str) else json.dumps(data)
            self.conn.execute(
                "INSERT INTO event (id, aggregate_id, seq, type, data) VALUES (?, ?, ?, ?, ?)",
                (eid, sid, seq, typ, raw),
            )
        return eid

    # sessions
    def _session_info(self, sid: str) -> dict[str, Any]:
        row = self.conn.execute(
            "SELECT slug, project_id, directory, title, parent_id, time_created, time_updated,"
            " time_archived FROM session WHERE id = ?",
            (sid,),
        ).fetchone()
        slug, project, directory, title, parent, created, updated, archived = row
        info: dict[str, Any] = {
            "id": sid,
            "slug": slug,
            "projectID": project,
            "directory": directory,
            "path": "",
            "cost": 0,
            "title": title,
            "version": "1.18.33",
            "time": {"created": created, "updated": updated},
        }
        if parent:
            info["parentID"] = parent
        if archived:
            info["time"]["archived"] = archived
        return info

    def session(
        self,
        title: str = "New session",
        parent: str | None = None,
        project: str = PROJECT,
        directory: str = REPO,
    ) -> str:
        self.tick()
        sid = self._id("ses", descending=True)
        self.conn.execute(
            "INSERT INTO session (id, project_id, parent_id, slug, directory, path, title,"
            " version, agent, time_created, time_updated)"
            " VALUES (?, ?, ?, 'quiet-forest', ?, '', ?, '1.18.33', 'build', ?, ?)",
            (sid, project, parent, directory, title, self.ms, self.ms),
        )
        self.event(sid, "session.created.1", {"sessionID": sid, "info": self._session_info(sid)})
        return sid

    def session_updated(self, sid: str, **cols: Any) -> None:
        cols["time_updated"] = self.tick()
        sets = ", ".join(f"{k} = ?" for k in cols)
        self.conn.execute(f"UPDATE session SET {sets} WHERE id = ?", (*cols.values(), sid))
        self.event(sid, "session.updated.1", {"sessionID": sid, "info": self._session_info(sid)})

    def archive(self, sid: str) -> None:
        self.session_updated(sid, time_archived=self.ms + 1)

    def announce_delete(self, sid: str) -> None:
        """The first half of a deletion: the short-lived session.deleted.1 row."""
        self.event(sid, "session.deleted.1", {"sessionID": sid, "info": self._session_info(sid)})

    def remove(self, sid: str) -> None:
        """The second half: every row of the session vanishes (no tombstone)."""
        with self.conn:
            self.conn.execute("BEGIN")
            self.conn.execute("DELETE FROM part WHERE session_id = ?", (sid,))
            self.conn.execute("DELETE FROM message WHERE session_id = ?", (sid,))
            self.conn.execute("DELETE FROM event WHERE aggregate_id = ?", (sid,))
            self.conn.execute("DELETE FROM event_sequence WHERE aggregate_id = ?", (sid,))
            self.conn.execute("DELETE FROM session WHERE id = ?", (sid,))

    def delete(self, sid: str) -> None:
        for (child,) in self.conn.execute(
            "SELECT id FROM session WHERE parent_id = ?", (sid,)
        ).fetchall():
            self.delete(child)
        self.announce_delete(sid)
        self.remove(sid)

    # messages and parts
    def message(self, sid: str, data: dict[str, Any]) -> str:
        self.tick()
        mid = self._id("msg")
        data = {**data, "time": {"created": self.ms, **data.get("time", {})}}
        self.conn.execute(
            "INSERT INTO message (id, session_id, time_created, time_updated, data)"
            " VALUES (?, ?, ?, ?, ?)",
            (mid, sid, self.ms, self.ms, json.dumps(data)),
        )
        self._msgs[mid] = (sid, data)
        self.event(sid, "message.updated.1", {"sessionID": sid, "info": {"id": mid, **data}})
        return mid

    def update_message(self, mid: str, **fields: Any) -> None:
        sid, data = self._msgs[mid]
        data = {**data, **fields}
        self.tick()
        self.conn.execute(
            "UPDATE message SET data = ?, time_updated = ? WHERE id = ?",
            (json.dumps(data), self.ms, mid),
        )
        self._msgs[mid] = (sid, data)
        info = {"id": mid, "sessionID": sid, **data}
        self.event(sid, "message.updated.1", {"sessionID": sid, "info": info})

    def part(self, mid: str, data: dict[str, Any]) -> str:
        sid = self._msgs[mid][0]
        self.tick(3)
        pid = self._id("prt")
        self.conn.execute(
            "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (pid, mid, sid, self.ms, self.ms, json.dumps(data)),
        )
        self._parts[pid] = (sid, mid, data)
        self._part_event(pid)
        return pid

    def update_part(self, pid: str, data: dict[str, Any]) -> None:
        sid, mid, _old = self._parts[pid]
        self.tick(3)
        self.conn.execute(
            "UPDATE part SET data = ?, time_updated = ? WHERE id = ?",
            (json.dumps(data), self.ms, pid),
        )
        self._parts[pid] = (sid, mid, data)
        self._part_event(pid)

    def _part_event(self, pid: str) -> None:
        sid, mid, data = self._parts[pid]
        part = {"id": pid, "sessionID": sid, "messageID": mid, **data}
        self.event(sid, "message.part.updated.1", {"sessionID": sid, "part": part, "time": self.ms})

    # whole turns
    def user(self, sid: str, text: str | None, *extra: dict[str, Any]) -> str:
        mid = self.message(sid, {"role": "user", "agent": "build", "model": MODEL})
        if text is not None:
            self.part(mid, {"type": "text", "text": text})
        for p in extra:
            self.part(mid, p)
        return mid

    def assistant(
        self,
        sid: str,
        parent: str,
        *parts: dict[str, Any],
        finish: str = "stop",
        mode: str = "build",
        complete: bool = True,
    ) -> str:
        data: dict[str, Any] = {"role": "assistant", "parentID": parent, "mode": mode}
        data.update(agent=mode, path={"cwd": REPO, "root": REPO}, cost=0, **FAKE)
        if mode == "compaction":
            data["summary"] = True
        mid = self.message(sid, data)
        self.part(mid, {"type": "step-start", "snapshot": "3b701afa"})
        for p in parts:
            self.part(mid, p)
        self.part(mid, {"type": "step-finish", "reason": finish, "snapshot": "3b701afa"})
        if complete:
            self.complete(mid, finish)
        return mid

    def complete(self, mid: str, finish: str = "stop") -> None:
        created = self._msgs[mid][1]["time"]["created"]
        self.update_message(mid, finish=finish)
        self.update_message(mid, finish=finish, time={"created": created, "completed": self.ms})
        self.session_updated(self._msgs[mid][0])

    def close(self) -> None:
        self.conn.close()


MODEL = {"providerID": "fake", "modelID": "fake-model"}
FAKE = {"modelID": "fake-model", "providerID": "fake", "tokens": {"total": 49}}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value, "time": {"start": T0, "end": T0}}


def tool(name: str, status: str = "completed", **inp: Any) -> dict[str, Any]:
    state: dict[str, Any] = {"status": status, "input": inp, "time": {"start": T0, "end": T0}}
    if status == "completed":
        state.update(output="ok\n", metadata={}, title=name)
    return {"type": "tool", "tool": name, "callID": "call_fake", "state": state}


@dataclass
class Demo:
    db: OpenCodeDB
    main: str
    parent: str
    child: str
    archived: str
    deleted: str
    first_user: str
    tool_step: str
    summary: str
    cont_user: str
    final: str


def first_turns(db: OpenCodeDB) -> tuple[str, str, str]:
    """A first turn and a tool turn (bash + edit, then a patch) in a new session."""
    sid = db.session("Fake session title")
    u1 = db.user(sid, "hello")
    db.assistant(
        sid, u1, {"type": "reasoning", "text": "The user greets me."}, text("Hi! How can I help?")
    )
    u2 = db.user(sid, "run the tests and fix app.py")
    step = db.assistant(
        sid,
        u2,
        text("Running the tests first."),
        tool("bash", command="pytest -q tests/", description="Run tests"),
        tool("edit", filePath=f"{REPO}/src/app.py", oldString="i <= n", newString="i < n"),
        finish="tool-calls",
    )
    db.assistant(
        sid,
        u2,
        {"type": "patch", "hash": "abc123", "files": [f"{REPO}/src/app.py"]},
        text("Fixed the off-by-one in app.py."),
    )
    return sid, u1, step


def compaction(db: OpenCodeDB, sid: str) -> tuple[str, str, str]:
    """An automatic compaction, the synthetic 'continue' message and the next turn."""
    marker = db.user(sid, None, {"type": "compaction", "auto": True, "overflow": False})
    summary = db.assistant(
        sid,
        marker,
        text("## Summary\nThe user said hello; the off-by-one in app.py is fixed."),
        mode="compaction",
    )
    cont = db.user(
        sid,
        None,
        {
            "type": "text",
            "synthetic": True,
            "metadata": {"compaction_continue": True},
            "text": "Continue if you have next steps, or stop and ask for clarification.",
        },
    )
    final = db.assistant(sid, cont, text("Continuing: all tests pass now."))
    return summary, cont, final


def subagent(db: OpenCodeDB) -> tuple[str, str]:
    """A parent whose task tool runs a sub-agent session (child written mid-step)."""
    parent = db.session("Explore the repo")
    u = db.user(parent, "list the repo files with a subagent")
    step_data: dict[str, Any] = {"role": "assistant", "parentID": u, "mode": "build"}
    step = db.message(parent, {**step_data, **FAKE})
    task = db.part(step, tool("task", "running", description="List repo files", prompt="ls"))
    child = db.session("List repo files (@general subagent)", parent=parent)
    cu = db.message(child, {"role": "user", "agent": "general", "model": MODEL})
    db.part(cu, text("SUBAGENT-PROMPT: list the files in the repository"))
    db.assistant(child, cu, text("README.md, src/app.py"), mode="general")
    done = tool("task", description="List repo files", prompt="ls")
    done["state"]["metadata"] = {"sessionId": child, "parentSessionId": parent}
    db.update_part(task, done)
    db.complete(step, "tool-calls")
    db.assistant(parent, u, text("The repo has README.md and src/app.py."))
    return parent, child


def build_demo(path: Path, wal: bool = True) -> Demo:
    db = OpenCodeDB(path, wal=wal)
    main, first_user, step = first_turns(db)
    summary, cont, final = compaction(db, main)
    parent, child = subagent(db)
    archived = db.session("Old work", project="global", directory="/tmp/scratch")
    db.assistant(archived, db.user(archived, "old question"), text("old answer"))
    db.archive(archived)
    deleted = db.session("Throwaway")
    db.assistant(deleted, db.user(deleted, "temp"), text("temp answer"))
    db.delete(deleted)
    return Demo(db, main, parent, child, archived, deleted, first_user, step, summary, cont, final)
