"""OpenCodeAdapter against real opencode.db files built from OpenCode 1.18.33's schema
(see tests/support/opencode_db.py for how the rows are written)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.opencode_db import (
    PROJECT,
    REPO,
    T0,
    Demo,
    OpenCodeDB,
    build_demo,
    first_turns,
    text,
    tool,
)

from llmem_hooks.adapters import (
    OpenCodeAdapter,
    SessionAdapter,
    get_adapter_class,
    registered_adapters,
)
from llmem_hooks.adapters.opencode import default_db_path, validate_db_path
from llmem_hooks.events import LifecycleEvent, SessionInfo


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    d = build_demo(tmp_path / "opencode" / "opencode.db")
    yield d
    d.db.close()


@pytest.fixture
def adapter(demo: Demo) -> Iterator[OpenCodeAdapter]:
    with OpenCodeAdapter(demo.db.path) as a:
        yield a  # type: ignore[misc]


def summary(events: list[LifecycleEvent]) -> list[tuple[str, str, str | None, str]]:
    return [(e.kind, e.session_id, e.child_id, e.detail) for e in events]


# -- registry ------------------------------------------------------------------------------


def test_registered_as_opencode() -> None:
    assert get_adapter_class("opencode") is OpenCodeAdapter
    assert registered_adapters()["opencode"] is OpenCodeAdapter
    assert issubclass(OpenCodeAdapter, SessionAdapter)
    assert OpenCodeAdapter.agent == "opencode"


# -- locating and validating the DB ----------------------------------------------------------


def test_discovery_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.delenv("OPENCODE_DB", raising=False)
    assert default_db_path() == home / ".local/share/opencode/opencode.db"
    assert OpenCodeAdapter().db_path == home / ".local/share/opencode/opencode.db"

    xdg = tmp_path / "xdg"
    monkeypatch.setenv("XDG_DATA_HOME", str(xdg))
    assert OpenCodeAdapter().db_path == xdg / "opencode/opencode.db"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/ignored")  # not absolute: XDG says ignore
    assert OpenCodeAdapter().db_path == home / ".local/share/opencode/opencode.db"
    monkeypatch.setenv("XDG_DATA_HOME", str(xdg))

    monkeypatch.setenv("OPENCODE_DB", "custom.db")  # relative: against the data dir
    assert OpenCodeAdapter().db_path == xdg / "opencode/custom.db"
    absolute = tmp_path / "elsewhere" / "oc.db"
    monkeypatch.setenv("OPENCODE_DB", str(absolute))
    assert OpenCodeAdapter().db_path == absolute

    explicit = tmp_path / "explicit.db"
    assert OpenCodeAdapter(explicit).db_path == explicit  # the argument beats the env
    assert OpenCodeAdapter(str(explicit)).watch_paths() == [str(tmp_path)]


@pytest.mark.parametrize(
    "bad",
    [
        "/etc/opencode.db",
        "/var/lib/opencode/opencode.db",
        "/usr/share/opencode.db",
        "/proc/self/environ",
        "/dev/null",
        "/sys/kernel/opencode.db",
    ],
)
def test_system_directories_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="system directory"):
        OpenCodeAdapter(bad)


def test_traversal_symlink_and_non_files_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ValueError, match=r"'\.\.'"):
        OpenCodeAdapter(tmp_path / "a" / ".." / "opencode.db")
    monkeypatch.setenv("OPENCODE_DB", "../../etc/opencode.db")
    with pytest.raises(ValueError, match=r"'\.\.'"):
        OpenCodeAdapter()

    real = tmp_path / "real.db"
    OpenCodeDB(real).close()
    link = tmp_path / "link.db"
    link.symlink_to(real)
    with pytest.raises(ValueError, match="symlink"):
        OpenCodeAdapter(link)
    with pytest.raises(ValueError, match="not a regular file"):
        OpenCodeAdapter(tmp_path)


def test_temp_dirs_under_var_are_allowed() -> None:
    for ok in ("/var/tmp/llmem-test/opencode.db", "/var/folders/xy/T/opencode.db"):
        assert validate_db_path(ok) == Path(ok)  # missing is fine


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_unreadable_db_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "opencode.db"
    OpenCodeDB(path).close()
    path.chmod(0)
    try:
        with pytest.raises(ValueError, match="not readable"):
            OpenCodeAdapter(path)
    finally:
        path.chmod(0o600)


# -- missing / appearing / replaced DB -------------------------------------------------------


def test_missing_db_returns_empty_results_then_is_picked_up(tmp_path: Path) -> None:
    path = tmp_path / "opencode" / "opencode.db"
    with OpenCodeAdapter(path) as a:
        assert not a.available()
        assert a.list_sessions() == []
        assert a.get_session("ses_x") is None
        assert not a.session_exists("ses_x")
        assert a.existing(["ses_x"]) == set()
        assert a.get_messages("ses_x") == []
        assert a.get_session_transcript("ses_x") is None
        assert a.poll(None) == ([], None)
        assert a.poll("12:evt_x") == ([], "12:evt_x")
        assert not path.exists()  # reading never creates it

        db = OpenCodeDB(path)
        sid = db.session("late start")
        assert a.available()
        events, cursor = a.poll(None)
        assert summary(events) == [("created", sid, None, "")]
        assert cursor is not None
        db.close()


def test_empty_db_without_tables_is_empty(tmp_path: Path) -> None:
    path = tmp_path / "opencode.db"
    sqlite3.connect(path).close()  # OpenCode created the file, migrations not run yet
    with OpenCodeAdapter(path) as a:
        assert a.available()
        assert a.poll(None) == ([], None)
        assert a.list_sessions() == []
        assert a.get_messages("ses_x") == []


def test_replaced_db_is_reopened(tmp_path: Path) -> None:
    path = tmp_path / "opencode.db"
    db = OpenCodeDB(path)
    first = db.session("first")
    db.close()
    with OpenCodeAdapter(path) as a:
        assert [s.id for s in a.list_sessions()] == [first]
        fresh = tmp_path / "fresh.db"
        db2 = OpenCodeDB(fresh)
        second = db2.session("second")
        db2.close()
        os.replace(fresh, path)
        assert [s.id for s in a.list_sessions()] == [second]
        path.unlink()
        assert a.list_sessions() == []
        assert not a.available()


# -- read-only ---------------------------------------------------------------------------------


def _fingerprint(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return hashlib.sha256(path.read_bytes()).hexdigest(), st.st_mtime_ns, st.st_size


def test_reads_never_modify_the_db(demo: Demo) -> None:
    path = demo.db.path
    demo.db.close()  # checkpointed: every byte now lives in opencode.db
    before = _fingerprint(path)
    with OpenCodeAdapter(path) as a:
        a.poll(None)
        for s in a.list_sessions(include_children=True):
            a.get_messages(s.id)
            a.get_session_chunks(s.id, max_chars=100)
        a.existing([demo.main, demo.deleted])
        conn = a._connect()  # the adapter's own connections refuse writes
        assert conn is not None
        with pytest.raises(sqlite3.OperationalError):
            conn.execute("DELETE FROM session")
        with pytest.raises(sqlite3.OperationalError):
            conn.execute("CREATE TABLE llmem_probe (x)")
        # No -wal file (OpenCode is not running): opened immutable, so SQLite reads the
        # checkpointed file as is and needs no -shm.
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        conn.close()
    assert _fingerprint(path) == before
    assert sorted(os.listdir(path.parent)) == ["opencode.db"]  # no -wal/-shm left behind
    check = sqlite3.connect(path)
    assert check.execute("SELECT count(*) FROM session").fetchone()[0] == 4
    check.close()


# -- sessions ----------------------------------------------------------------------------------


def test_sessions(adapter: OpenCodeAdapter, demo: Demo) -> None:
    top = adapter.list_sessions()
    assert [s.id for s in top] == [demo.archived, demo.parent, demo.main]  # newest first
    assert demo.child not in {s.id for s in top}
    assert len(adapter.list_sessions(limit=1)) == 1
    every = {s.id for s in adapter.list_sessions(include_children=True)}
    assert every == {demo.main, demo.parent, demo.child, demo.archived}

    main = adapter.get_session(demo.main)
    assert main == SessionInfo(
        id=demo.main,
        agent="opencode",
        directory=REPO,
        native_project_id=PROJECT,
        parent_id=None,
        title="Fake session title",
        created_ms=main.created_ms,
        updated_ms=main.updated_ms,
        archived=False,
    )
    assert main.created_ms > T0 and main.updated_ms > main.created_ms

    child = adapter.get_session(demo.child)
    assert child is not None and child.parent_id == demo.parent
    old = adapter.get_session(demo.archived)
    assert old is not None and old.archived and old.native_project_id is None  # 'global'
    assert adapter.get_session(demo.deleted) is None

    assert adapter.session_exists(demo.main)
    assert not adapter.session_exists(demo.deleted)
    asked = [demo.main, demo.deleted, demo.child, "ses_never", demo.main]
    assert adapter.existing(asked) == {demo.main, demo.child}
    assert adapter.existing([]) == set()


def test_existing_handles_many_ids(adapter: OpenCodeAdapter, demo: Demo) -> None:
    ids = [f"ses_missing{i}" for i in range(5000)] + [demo.parent]
    assert adapter.existing(ids) == {demo.parent}


# -- transcripts -------------------------------------------------------------------------------


def test_transcript_format_files_and_commands(tmp_path: Path) -> None:
    db = OpenCodeDB(tmp_path / "opencode.db")
    sid, first_user, step = first_turns(db)
    with OpenCodeAdapter(db.path) as a:
        msgs = a.get_messages(sid)
        assert a.get_session_transcript(sid) == "\n".join(
            [
                "User: hello",
                "Assistant: Reasoning: The user greets me.",
                "Assistant: Hi! How can I help?",
                "User: run the tests and fix app.py",
                "Assistant: Running the tests first.",
                "Assistant: Tool: bash: pytest -q tests/",
                f"Assistant: Tool: edit: {REPO}/src/app.py",
                f"Assistant: Patch: {REPO}/src/app.py",
                "Assistant: Fixed the off-by-one in app.py.",
            ]
        )
        assert [m.role for m in msgs] == ["user", "assistant", "user", "assistant", "assistant"]
        assert msgs[0].id == first_user and msgs[0].session_id == sid
        assert [m.created_ms for m in msgs] == sorted(m.created_ms for m in msgs)
        tool_msg = next(m for m in msgs if m.id == step)
        assert tool_msg.commands == ("pytest -q tests/",)
        assert tool_msg.files == (f"{REPO}/src/app.py",)
        assert msgs[-1].files == (f"{REPO}/src/app.py",)
        assert msgs[0].files == () and msgs[0].commands == ()
        chunks = a.get_session_chunks(sid, max_chars=80)
        assert len(chunks) > 1 and "\n".join(chunks) == a.get_session_transcript(sid)
    db.close()


def test_tool_summaries_are_one_short_line(tmp_path: Path) -> None:
    db = OpenCodeDB(tmp_path / "opencode.db")
    sid = db.session()
    u = db.user(sid, "do things")
    long_cmd = "for f in *.py; do\n  python -m py_compile $f\ndone && " + "echo done " * 40
    db.assistant(
        sid,
        u,
        tool("bash", command=long_cmd),
        tool("read", filePath="/repo/README.md"),
        tool("write", filePath="/repo/new.txt", content="x" * 5000),
        tool("grep", pattern="TODO", path="/repo/src"),
        tool("bash", status="error", command="make lint"),
        tool("todowrite", todos=[{"content": "a"}]),
        {"type": "file", "filename": "spec.md", "source": {"path": "/repo/spec.md"}},
        {"type": "snapshot", "snapshot": "abc"},
        {"type": "text", "text": "   "},
    )
    with OpenCodeAdapter(db.path) as a:
        (_, msg) = a.get_messages(sid)
    lines = msg.text.splitlines()
    assert lines[0].startswith("Assistant: Tool: bash: for f in *.py; do python -m py_compile")
    assert len(lines[0]) <= len("Assistant: Tool: bash: ") + 200 and lines[0].endswith("...")
    assert lines[1:] == [
        "Assistant: Tool: read: /repo/README.md",
        "Assistant: Tool: write: /repo/new.txt",
        "Assistant: Tool: grep: TODO",
        "Assistant: Tool: bash: make lint [error]",
        "Assistant: Tool: todowrite",
    ]
    assert msg.commands == (long_cmd.strip(), "make lint")
    assert msg.files == ("/repo/README.md", "/repo/new.txt", "/repo/spec.md")  # not grep's dir
    db.close()


def test_compaction_cuts_the_transcript(tmp_path: Path) -> None:
    db = OpenCodeDB(tmp_path / "opencode.db")
    sid, _, _ = first_turns(db)
    with OpenCodeAdapter(db.path) as a:
        before = a.get_session_transcript(sid)
        # Requested, summary still being written: nothing is cut yet (the sidecar's
        # compacting hook reads the pre-compaction transcript exactly now).
        marker = db.user(sid, None, {"type": "compaction", "auto": True, "overflow": False})
        pending = db.assistant(sid, marker, text("## Summary\npartial"), mode="compaction")
        # (assistant() completed it; roll back to the in-progress shape for this check)
        db.conn.execute(
            "UPDATE message SET data = json_remove(json_remove(data, '$.finish'),"
            " '$.time.completed') WHERE id = ?",
            (pending,),
        )
        assert a.get_session_transcript(sid) == before + "\nAssistant: ## Summary\npartial"
        db.conn.execute("DELETE FROM part WHERE message_id = ?", (pending,))
        db.conn.execute("DELETE FROM message WHERE id = ?", (pending,))
        summary_id = db.assistant(sid, marker, text("## Summary\nhello + fix"), mode="compaction")
        cont = db.user(
            sid, None, {"type": "text", "synthetic": True, "text": "Continue if you have..."}
        )
        final = db.assistant(sid, cont, text("Continuing."))
        msgs = a.get_messages(sid)
        assert [m.id for m in msgs] == [summary_id, final]
        assert a.get_session_transcript(sid) == (
            "Assistant: ## Summary\nhello + fix\nAssistant: Continuing."
        )
        # A second compaction moves the cut again.
        m2 = db.user(sid, None, {"type": "compaction", "auto": False})
        s2 = db.assistant(sid, m2, text("## Summary\nsecond"), mode="compaction")
        assert [m.id for m in a.get_messages(sid)] == [s2]
    db.close()


def test_after_id(adapter: OpenCodeAdapter, demo: Demo) -> None:
    msgs = adapter.get_messages(demo.main)
    assert [m.id for m in msgs] == [demo.summary, demo.final]
    assert adapter.get_messages(demo.main, after_id=demo.summary) == msgs[1:]
    assert adapter.get_messages(demo.main, after_id=demo.final) == []
    # An id from before the compaction: everything the model still sees.
    assert adapter.get_messages(demo.main, after_id=demo.first_user) == msgs
    # An id that no longer exists (e.g. removed): ids ascend with time.
    gone = demo.summary[:-1] + "~"
    assert adapter.get_messages(demo.main, after_id=gone) == msgs[1:]


def test_subagent_messages_stay_in_their_own_session(adapter: OpenCodeAdapter, demo: Demo) -> None:
    parent = adapter.get_session_transcript(demo.parent)
    assert parent is not None
    assert "SUBAGENT-PROMPT" not in parent and "README.md, src/app.py" not in parent
    assert "Assistant: Tool: task: List repo files" in parent
    child = adapter.get_session_transcript(demo.child)
    assert child == (
        "User: SUBAGENT-PROMPT: list the files in the repository\nAssistant: README.md, src/app.py"
    )
    assert adapter.get_messages(demo.deleted) == []


# -- tailing the event log ---------------------------------------------------------------------


def test_poll_maps_rows_to_lifecycle_events(adapter: OpenCodeAdapter, demo: Demo) -> None:
    events, cursor = adapter.poll(None)
    assert cursor is not None and cursor.split(":")[1].startswith("evt_")
    kinds = summary(events)
    main, parent, child, old = demo.main, demo.parent, demo.child, demo.archived

    created = [e for e in events if e.kind == "created"]
    assert [e.session_id for e in created] == [main, parent, old]  # never the child
    assert created[0].session == SessionInfo(
        id=main,
        agent="opencode",
        directory=REPO,
        native_project_id=PROJECT,
        title="Fake session title",
        created_ms=created[0].at_ms,
        updated_ms=created[0].at_ms,
    )
    assert created[2].session is not None and created[2].session.native_project_id is None

    turn_done = [(k, s) for k, s, c, _ in kinds if k == "turn_done"]
    # main: hello, fix (not the tool-calls step), after compaction; parent: final; old: one
    assert turn_done == [("turn_done", main)] * 3 + [("turn_done", parent), ("turn_done", old)]
    assert ("compacting", main, None, "requested") in kinds
    assert ("compacting", main, None, "done") in kinds
    assert kinds.index(("compacting", main, None, "requested")) < kinds.index(
        ("compacting", main, None, "done")
    )
    assert ("ended", old, None, "archived") in kinds

    child_events = [e for e in events if e.child_id == child]
    assert child_events and all(e.kind == "activity" for e in child_events)
    assert all(e.session_id == parent for e in child_events)
    assert {e.detail for e in child_events} >= {"subagent created", "subagent turn_done"}
    assert not any(e.session_id == child for e in events)

    # The deleted session left no rows: nothing about it (existing() notices deletions).
    assert not any(e.session_id == demo.deleted for e in events)
    assert all(e.agent == "opencode" and e.at_ms > T0 for e in events)
    activity = [e for e in events if e.kind == "activity" and e.child_id is None]
    assert {e.detail for e in activity} >= {"user message", "part text", "session updated"}


def test_poll_sees_a_deletion_only_while_its_row_lives(tmp_path: Path) -> None:
    db = OpenCodeDB(tmp_path / "opencode.db")
    sid = db.session("short-lived")
    child = db.session("child", parent=sid)
    with OpenCodeAdapter(db.path) as a:
        _, cursor = a.poll(None)
        db.announce_delete(child)
        db.remove(child)
        db.announce_delete(sid)
        events, cursor = a.poll(cursor)  # polled within OpenCode's ~10 ms window
        assert summary(events) == [("ended", sid, None, "deleted")]
        assert abs(events[0].at_ms - db.ms) <= 1  # from the event id: the row has no time
        assert events[0].session is not None and events[0].session.title == "short-lived"
        db.remove(sid)
        assert a.existing([sid]) == set()
        assert a.poll(cursor) == ([], cursor)
    db.close()


def test_cursor_resumption(tmp_path: Path) -> None:
    db = OpenCodeDB(tmp_path / "opencode.db")
    sid, _, _ = first_turns(db)
    with OpenCodeAdapter(db.path) as a:
        events, cursor = a.poll(None)
        assert events
        assert a.poll(cursor) == ([], cursor)
        assert a.poll(cursor) == ([], cursor)
        u = db.user(sid, "one more thing")
        db.assistant(sid, u, text("done"))
        events, cursor2 = a.poll(cursor)
        assert cursor2 != cursor
        assert summary(events)[0] == ("activity", sid, None, "user message")
        assert [e.kind for e in events].count("turn_done") == 1
    # A new adapter (the sidecar restarted) continues from the saved cursor.
    with OpenCodeAdapter(db.path) as b:
        assert b.poll(cursor2) == ([], cursor2)
        assert len(b.poll(cursor)[0]) == len(events)
        assert b.poll(cursor.split(":")[0])[0] == b.poll(cursor)[0]  # a bare rowid works
        assert b.poll("garbage")[0] == b.poll(None)[0]
    db.close()


def test_rowids_reused_after_deleting_the_newest_session(tmp_path: Path) -> None:
    """event has no AUTOINCREMENT: deleting the newest rows frees their rowids."""
    db = OpenCodeDB(tmp_path / "opencode.db")
    keep = db.session("keep")
    with OpenCodeAdapter(db.path) as a:
        _, base = a.poll(None)
        gone = db.session("gone")
        db.assistant(gone, db.user(gone, "hi"), text("hello"))
        _, cursor = a.poll(base)
        db.delete(gone)
        new = db.session("new")
        db.user(new, "after the delete")
        max_rowid = db.conn.execute("SELECT max(rowid) FROM event").fetchone()[0]
        assert max_rowid < int(cursor.split(":")[0])  # the new rows took old rowids
        events, cursor2 = a.poll(cursor)
        assert ("created", new, None, "") in summary(events)
        assert any(e.detail == "user message" and e.session_id == new for e in events)
        assert a.poll(cursor2) == ([], cursor2)
        assert keep in a.existing([keep, gone])
    db.close()


def test_poll_batches_at_5000_rows(tmp_path: Path) -> None:
    db = OpenCodeDB(tmp_path / "opencode.db")
    sid = db.session()
    with db.conn:
        db.conn.execute("BEGIN")
        for i in range(5100):
            data = {"sessionID": sid, "part": {"id": f"prt_{i}", "type": "text"}, "time": T0}
            db.conn.execute(
                "INSERT INTO event (id, aggregate_id, seq, type, data) VALUES (?, ?, ?, ?, ?)",
                (
                    f"evt_{0xFFFFFFF0000 + i:012x}",
                    sid,
                    i + 1,
                    "message.part.updated.1",
                    json.dumps(data),
                ),
            )
    with OpenCodeAdapter(db.path) as a:
        first, c1 = a.poll(None)
        second, c2 = a.poll(c1)
        assert (len(first), len(second)) == (5000, 101)
        assert a.poll(c2) == ([], c2)
    db.close()


def test_malformed_json_rows_are_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = OpenCodeDB(tmp_path / "opencode.db")
    sid, _, step = first_turns(db)
    bad_evt = db.event(sid, "message.updated.1", "{not json")
    db.event(sid, "message.updated.1", "[1, 2]")  # JSON, but not an object
    db.conn.execute("UPDATE message SET data = 'garbage' WHERE id = ?", (step,))
    first_part = db.conn.execute(
        "SELECT id FROM part WHERE session_id = ? ORDER BY id LIMIT 1", (sid,)
    ).fetchone()[0]
    db.conn.execute("UPDATE part SET data = '{\"type\": ' WHERE id = ?", (first_part,))
    u = db.user(sid, "still here")
    db.assistant(sid, u, text("yes"))
    caplog.set_level(logging.WARNING, logger="llmem_hooks.adapters.opencode")
    with OpenCodeAdapter(db.path) as a:
        events, cursor = a.poll(None)
        assert events[-1].kind == "activity"
        assert [e.kind for e in events].count("turn_done") == 3
        assert a.poll(cursor) == ([], cursor)  # the bad rows are behind the cursor
        # One rate-limited line for both bad event rows (the second is counted, due in a
        # minute), naming the first.
        bad_logs = [r for r in caplog.records if "event row skipped" in r.getMessage()]
        assert len(bad_logs) == 1 and bad_evt in bad_logs[0].getMessage()

        transcript = a.get_session_transcript(sid)
        assert transcript is not None
        assert "User: hello" not in transcript  # its only part is unreadable
        assert "Running the tests first." not in transcript  # the message is unreadable
        assert transcript.endswith("User: still here\nAssistant: yes")
        a.get_messages(sid)  # again: no second warning for the same rows
    row_logs = [r for r in caplog.records if "message row skipped" in r.getMessage()]
    part_logs = [r for r in caplog.records if "part row skipped" in r.getMessage()]
    assert len(row_logs) == 1 and len(part_logs) == 1
    assert a._skips.total == 6  # 2 event rows, and a message and a part row read twice
    db.close()


# -- locks -----------------------------------------------------------------------------------


def test_wal_writer_holding_a_transaction_does_not_block_reads(demo: Demo) -> None:
    writer = sqlite3.connect(demo.db.path, isolation_level=None, timeout=0)
    writer.execute("BEGIN EXCLUSIVE")
    writer.execute("UPDATE session SET title = 'uncommitted' WHERE id = ?", (demo.main,))
    writer.execute(
        "INSERT INTO event (id, aggregate_id, seq, type, data) VALUES (?, ?, 999, ?, ?)",
        ("evt_ffffffffffffZZZ", demo.main, "session.updated.1", "{}"),
    )
    try:
        with OpenCodeAdapter(demo.db.path, busy_timeout_ms=5000) as a:
            t0 = time.monotonic()
            events, cursor = a.poll(None)
            assert events
            assert a.get_session(demo.main).title == "Fake session title"  # last commit
            assert a.get_messages(demo.main)
            assert a.existing([demo.main]) == {demo.main}
            assert time.monotonic() - t0 < 1.0  # no waiting on the writer
            writer.execute("COMMIT")
            more, _ = a.poll(cursor)
            assert summary(more) == [("activity", demo.main, None, "session updated")]
    finally:
        if writer.in_transaction:
            writer.execute("ROLLBACK")
        writer.close()


def test_rollback_journal_exclusive_lock_times_out_quietly_in_poll(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    demo = build_demo(tmp_path / "opencode.db", wal=False)
    with OpenCodeAdapter(demo.db.path, busy_timeout_ms=150) as a:
        _, cursor = a.poll(None)
        locker = sqlite3.connect(demo.db.path, isolation_level=None)
        locker.execute("BEGIN EXCLUSIVE")
        try:
            t0 = time.monotonic()
            assert a.poll(cursor) == ([], cursor)
            assert a.poll(None) == ([], None)
            assert time.monotonic() - t0 < 1.5
            assert any("busy" in r.getMessage() for r in caplog.records)
            # existing() must not answer "nothing exists" during a lock: it raises.
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                a.existing([demo.main])
        finally:
            locker.execute("ROLLBACK")
            locker.close()
        u = demo.db.user(demo.main, "after the lock")
        events, _ = a.poll(cursor)
        assert any(e.session_id == demo.main and e.detail == "user message" for e in events)
        assert u in {m.id for m in a.get_messages(demo.main)}
    demo.db.close()


def test_plugin_recall_part_is_never_read_back(tmp_path: Path) -> None:
    """The plugin's recall block, as OpenCode stores it (a synthetic text part of the user's
    message, ``metadata.llmem == "recall"``), is left out of messages, transcripts and
    episodes: what we injected is never learned back."""
    from llmem_hooks.session.episodes import build_episodes

    db = OpenCodeDB(tmp_path / "opencode.db")
    sid = db.session()
    block = (
        "<llmem-recall>\n- [1a2b3c4d] (fact, 2026-01-02) MARKER-RECALLED we deploy with make\n"
        "</llmem-recall>"
    )
    recall_part = {"type": "text", "text": block, "synthetic": True}
    recall_part["metadata"] = {"llmem": "recall"}
    user = db.user(sid, "how do we deploy staging?", recall_part)
    db.assistant(sid, user, text("With make deploy-staging."))
    db.conn.commit()
    with OpenCodeAdapter(db.path) as a:
        msgs = a.get_messages(sid)
        assert [m.role for m in msgs] == ["user", "assistant"]
        assert msgs[0].text == "User: how do we deploy staging?"
        transcript = a.get_session_transcript(sid) or ""
        assert "how do we deploy staging?" in transcript
        assert "MARKER-RECALLED" not in transcript and "llmem-recall" not in transcript
        episodes = build_episodes(msgs)
        assert episodes, "the exchange itself is an episode"
        assert all("MARKER-RECALLED" not in str(e) for e in episodes)
    db.close()
