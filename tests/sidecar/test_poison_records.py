"""Poison records (issue 9, defects 1, 2 and 10): one record an adapter cannot read is
skipped with one rate-limited log line, the cursor moves past it, and later records and
other sessions are unaffected; ids that could not be file names never leave an adapter;
reading an agent's store creates nothing in the agent's folders.

Everything runs against real files: a COPILOT_HOME written by tests/support/copilot_home.py and an
opencode.db built from OpenCode's schema by tests/support/opencode_db.py.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

import pytest
from support.copilot_home import CopilotHome, copy_fixture_home, dead_pid
from support.opencode_db import OpenCodeDB, build_demo, first_turns, text

from llmem_hooks import MemoryStore, SessionHookCoordinator
from llmem_hooks.adapters import CopilotAdapter, OpenCodeAdapter
from llmem_hooks.config import DEFAULT_CONFIG
from llmem_hooks.events import (
    BadRecord,
    LifecycleEvent,
    SkipLog,
    load_json_object,
    record_ms,
    session_id_problem,
)

COPILOT_LOG = "llmem_hooks.adapters.copilot"
OPENCODE_LOG = "llmem_hooks.adapters.opencode"


def kinds(events: list[LifecycleEvent], sid: str) -> list[tuple[str, str]]:
    return [(e.kind, e.detail) for e in events if e.session_id == sid and e.kind != "activity"]


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def tree(root: Path) -> dict[str, str]:
    """Every path below ``root`` with a checksum of its bytes (or a marker for folders)."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            out[os.path.relpath(os.path.join(dirpath, name), root)] = "dir"
        for name in filenames:
            p = Path(dirpath) / name
            st = os.lstat(p)
            digest = hashlib.sha256(p.read_bytes()).hexdigest()
            out[os.path.relpath(p, root)] = f"{digest}:{st.st_mode:o}:{st.st_mtime_ns}"
    return out


# -- Copilot: bad lines ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "timestamp",
    ["1e999", "-1e999", "1e300", "-5", "true", '"ses_x"', '"+275760-09-13T00:00:00Z"', "NaN"],
)
def test_copilot_timestamp_1e999_line_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, timestamp: str
) -> None:
    home = CopilotHome(tmp_path / "copilot")
    s = home.session()
    other = home.session()
    a = CopilotAdapter(home.root)
    _, cursor = a.poll(None)
    s.raw('{"type":"assistant.turn_end","data":{},"id":"x","timestamp":' + timestamp + "}\n")
    s.user("after the bad line")
    s.turn_end()
    other.turn_end()
    caplog.set_level(logging.WARNING, logger=COPILOT_LOG)
    events, cursor = a.poll(cursor)
    # The bad line is skipped (no turn_done of its own), the good ones after it count.
    assert kinds(events, s.id) == [("turn_done", "turn_end")]
    assert kinds(events, other.id) == [("turn_done", "turn_end")]
    assert json.loads(cursor)["s"][s.id][0] == s.events.stat().st_size  # moved past it
    assert len(warnings(caplog)) == 1 and "skipped 1 bad record" in warnings(caplog)[0]
    assert a.poll(cursor) == ([], cursor)
    assert [m.text for m in a.get_messages(s.id)] == ["User: after the bad line"]


def test_copilot_bad_lines_are_logged_once_a_minute(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home = CopilotHome(tmp_path / "copilot")
    s = home.session()
    a = CopilotAdapter(home.root)
    _, cursor = a.poll(None)
    caplog.set_level(logging.WARNING, logger=COPILOT_LOG)
    for _ in range(50):  # a store that keeps producing bad lines
        s.raw('{"type":"user.message","timestamp":1e999}\n')
        _, cursor = a.poll(cursor)
    assert len(warnings(caplog)) == 1
    assert a._skips.total == 50


# -- OpenCode: bad rows ----------------------------------------------------------------------


def test_opencode_1000_deep_event_row_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = OpenCodeDB(tmp_path / "opencode" / "opencode.db")
    sid, _, _ = first_turns(db)
    a = OpenCodeAdapter(db.path)
    _, cursor = a.poll(None)
    caplog.set_level(logging.WARNING, logger=OPENCODE_LOG)
    deep = '{"info": ' + "[" * 1000 + "]" * 1000 + "}"
    bad = db.event(sid, "message.updated.1", deep)
    db.event(sid, "message.updated.1", '{"info": {"time": {"created": ' + "[" * 100_000 + "}")
    later = db.session("Later session")
    u = db.user(later, "hi")
    db.assistant(later, u, text("hello"))
    events, cursor = a.poll(cursor)
    assert kinds(events, later) == [("created", ""), ("turn_done", "stop")]
    assert len(warnings(caplog)) == 1 and bad in warnings(caplog)[0]
    assert a.poll(cursor) == ([], cursor)  # the cursor is past both bad rows
    db.close()


def test_opencode_time_created_ses_x(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    db = OpenCodeDB(tmp_path / "opencode" / "opencode.db")
    sid, _, _ = first_turns(db)
    good = db.session("Good session")
    db.conn.execute("UPDATE session SET time_created = 'ses_x' WHERE id = ?", (sid,))
    # A created event without times in its info makes the adapter read the session row.
    db.event(sid, "session.created.1", {"sessionID": sid, "info": {"id": sid}})
    db.event(sid, "session.updated.1", {"info": {"time": {"updated": "ses_x"}}})
    db.event(sid, "message.updated.1", {"info": {"role": "assistant", "time": [1]}})
    db.event(sid, "message.updated.1", {"info": {"time": {"completed": 1e300}}})
    db.event(sid, "message.updated.1", {"info": {"time": {"completed": True}}})
    u = db.user(good, "still read")
    db.assistant(good, u, text("yes"))
    caplog.set_level(logging.WARNING, logger=OPENCODE_LOG)
    a = OpenCodeAdapter(db.path)
    events, cursor = a.poll(None)
    assert ("turn_done", "stop") in kinds(events, good)
    assert a.poll(cursor) == ([], cursor)
    assert [s.id for s in a.list_sessions()] == [good]  # the bad row is skipped
    assert a.get_session(sid) is None and a.get_session(good) is not None
    assert a.session_exists(sid)  # skipped, not taken for deleted
    assert warnings(caplog)  # said, rate-limited
    db.close()


def test_bad_message_row_inside_a_good_session(
    tmp_path: Path, store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    db = OpenCodeDB(tmp_path / "opencode" / "opencode.db")
    sid = db.session("Mixed session")
    u1 = db.user(sid, "remember that the staging DB needs a VPN")
    db.assistant(sid, u1, text("Noted: staging needs the VPN."))
    bad_time = db.user(sid, "this row's time is text")
    bad_json = db.user(sid, "this row's JSON is 1000 deep")
    bad_part = db.user(sid, "this row's part is broken")
    u2 = db.user(sid, "now fix the login test")
    db.assistant(sid, u2, text("Fixed the login test."))
    db.conn.execute("UPDATE message SET time_created = 'ses_x' WHERE id = ?", (bad_time,))
    db.conn.execute("UPDATE message SET data = ? WHERE id = ?", ("[" * 1000 + "]" * 1000, bad_json))
    db.conn.execute(
        "UPDATE part SET data = ? WHERE message_id = ?", ('{"type": "text", "text": ', bad_part)
    )
    db.conn.execute(
        "UPDATE message SET data = json_set(data, '$.attachments', 5) WHERE id = ?", (u2,)
    )
    db.archive(sid)
    a = OpenCodeAdapter(db.path)
    caplog.set_level(logging.WARNING, logger=OPENCODE_LOG)
    events, _ = a.poll(None)
    assert ("ended", "archived") in kinds(events, sid)
    texts = [m.text for m in a.get_messages(sid)]
    assert texts == [
        "User: remember that the staging DB needs a VPN",
        "Assistant: Noted: staging needs the VPN.",
        "User: now fix the login test",
        "Assistant: Fixed the login test.",
    ]
    cfg = {k: dict(v) for k, v in DEFAULT_CONFIG.items()}
    coord = SessionHookCoordinator(store, {"opencode": a}, cfg, tmp_path / "ctx")
    assert coord.on_created(sid)[0] == "success"
    result, written = coord.on_ending(sid, "archived")
    assert result == "success" and written >= 1  # the ending is recorded
    (summary,) = store.list_all(type="event")
    assert summary["session_id"] == sid
    assert any("VPN" in m["content"] for m in store.list_all())
    db.close()


# -- ids that could not be file names --------------------------------------------------------


@pytest.mark.parametrize("name", ["backup..2026-01-01", "abc\n", "a\tb", "tab\t", "cr\rid"])
def test_copilot_folder_with_a_bad_id_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    home = CopilotHome(tmp_path / "copilot")
    good = home.session()
    bad = home.session(name)
    bad.user("hidden")
    bad.shutdown()
    a = CopilotAdapter(home.root)
    caplog.set_level(logging.WARNING, logger=COPILOT_LOG)
    events, cursor = a.poll(None)
    assert {e.session_id for e in events} == {good.id}
    assert list(json.loads(cursor)["s"]) == [good.id]
    assert [s.id for s in a.list_sessions()] == [good.id]
    assert not a.session_exists(name) and a.get_messages(name) == []
    assert a.get_session(name) is None
    (line,) = warnings(caplog)
    assert "session folder skipped" in line and "\n" not in line and "\t" not in line
    a.poll(cursor)
    assert len(warnings(caplog)) == 1  # rate-limited


@pytest.mark.parametrize("bad", ["ses_a..b", "ses_nl\n", "ses\ttab", "a/b", "", "x" * 300])
def test_opencode_rows_with_a_bad_session_id_are_skipped(tmp_path: Path, bad: str) -> None:
    db = OpenCodeDB(tmp_path / "opencode" / "opencode.db")
    sid, _, _ = first_turns(db)
    db.event(bad, "session.created.1", {"info": {"id": bad, "time": {"created": 1}}})
    db.event(bad, "session.deleted.1", {"info": {"id": bad}})
    db.event(sid, "session.updated.1", {"info": {"id": bad, "time": {"created": 1}}})
    db.conn.execute("UPDATE session SET parent_id = ? WHERE id = ?", ("p..q", sid))
    child = db.session("Child with a bad parent id")
    db.conn.execute("UPDATE session SET parent_id = ? WHERE id = ?", ("bad\nparent", child))
    db.user(child, "hi")
    later = db.session("Later")
    a = OpenCodeAdapter(db.path)
    events, cursor = a.poll(None)
    assert all(session_id_problem(e.session_id) is None for e in events)
    assert all(e.session is None or session_id_problem(e.session.id) is None for e in events)
    assert bad not in {e.session_id for e in events}
    assert ("created", "") in kinds(events, later)
    assert a.poll(cursor) == ([], cursor)
    assert a.existing([bad, later]) == {later}
    db.close()


def test_session_id_rule() -> None:
    for ok in ("ses_2f1d", "4f2ad85e-fa2c-402f-a6ce-9aedfb155865", "a.b_c-d"):
        assert session_id_problem(ok) is None
    for bad in ("backup..2026-01-01", "a\nb", "a\rb", "a\tb", "a\x7fb", "a\u2028b", "../x"):
        assert session_id_problem(bad) is not None
    assert session_id_problem(" padded ") is not None
    assert session_id_problem(5) is not None


# -- nothing created in an agent's folders --------------------------------------------------


def test_opencode_folder_listing_and_checksums_unchanged_after_polls(tmp_path: Path) -> None:
    folder = tmp_path / "opencode-data"
    demo = build_demo(folder / "opencode.db")
    demo.db.close()  # OpenCode is not running: no -wal, no -shm
    before = tree(folder)
    assert sorted(before) == ["opencode.db"]
    a = OpenCodeAdapter(folder / "opencode.db")
    cursor = None
    for _ in range(3):
        _, cursor = a.poll(cursor)
        for s in a.list_sessions(include_children=True):
            a.get_messages(s.id)
            a.get_session(s.id)
        a.existing([demo.main, demo.deleted])
        assert tree(folder) == before  # between polls too: no connection kept open
    a.close()
    assert tree(folder) == before


def test_opencode_reads_a_running_store_without_leaving_files(tmp_path: Path) -> None:
    """While OpenCode runs (its -wal and -shm exist) we read them; when it stops, its own
    last connection removes them and nothing of ours keeps them alive."""
    folder = tmp_path / "opencode-data"
    db = OpenCodeDB(folder / "opencode.db")
    sid, _, _ = first_turns(db)
    a = OpenCodeAdapter(db.path)
    events, cursor = a.poll(None)
    assert ("created", "") in kinds(events, sid)
    db.close()
    assert sorted(os.listdir(folder)) == ["opencode.db"]
    a.poll(cursor)
    assert sorted(os.listdir(folder)) == ["opencode.db"]


def test_opencode_crash_left_wal_without_shm_gets_no_shm_from_us(tmp_path: Path) -> None:
    """OpenCode killed after a commit: its -wal stays, its -shm may be gone. A plain
    read-only open would create a -shm; we read the checkpointed file instead."""
    src = tmp_path / "live"
    db = OpenCodeDB(src / "opencode.db")
    sid, _, _ = first_turns(db)
    db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.conn.execute("PRAGMA wal_autocheckpoint = 0")
    later = db.session("Only in the -wal")
    folder = tmp_path / "crashed"
    folder.mkdir()
    for name in ("opencode.db", "opencode.db-wal"):
        (folder / name).write_bytes((src / name).read_bytes())
    db.close()
    before = tree(folder)
    a = OpenCodeAdapter(folder / "opencode.db")
    events, _ = a.poll(None)
    assert ("created", "") in kinds(events, sid)
    assert later not in {e.session_id for e in events}  # until OpenCode recovers it
    a.get_messages(sid)
    assert tree(folder) == before


def test_copilot_creates_nothing_under_session_state(tmp_path: Path) -> None:
    home = copy_fixture_home(tmp_path / "copilot", live_pid=os.getpid(), dead=dead_pid())
    before = tree(home)
    a = CopilotAdapter(home)
    cursor = None
    for _ in range(3):
        _, cursor = a.poll(cursor)
        for s in a.list_sessions():
            a.get_messages(s.id)
        a.watch_paths()
    assert tree(home) == before


# -- the helpers themselves -----------------------------------------------------------------


def test_record_ms_and_load_json_limits() -> None:
    assert record_ms(None) == 0
    assert record_ms(1_700_000_000_000) == 1_700_000_000_000
    assert record_ms("2026-01-01T00:00:00Z") == 1_767_225_600_000
    for bad in (float("inf"), float("nan"), 1e300, -1, True, "ses_x", [1], "9" * 100):
        with pytest.raises(BadRecord):
            record_ms(bad)
    assert load_json_object('{"a": [[1]]}') == {"a": [[1]]}
    assert load_json_object(b'{"s": "[[[[' + b"[" * 500 + b'"}') == {"s": "[[[[" + "[" * 500}
    for bad_json in ("[" * 129 + "]" * 129, '{"a": NaN}', '{"a": 1e999}', "[1]", "{", 5, None):
        with pytest.raises(BadRecord):
            load_json_object(bad_json)
    with pytest.raises(BadRecord):
        load_json_object("{}" + " " * 100, max_bytes=50)


def test_skip_log_rate_limit() -> None:
    now = [0.0]
    records: list[str] = []

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    logger = logging.getLogger("test_poison_records.skiplog")
    logger.addHandler(Catch())
    skips = SkipLog(logger, interval=60, clock=lambda: now[0])
    for _ in range(10):
        skips.skip("copilot", "bad line", "x\ny")
    assert records == ["copilot: skipped 1 bad record(s): bad line (x?y)"]
    now[0] = 61
    skips.skip("copilot", "bad line")
    assert records[-1] == "copilot: skipped 10 bad record(s) in the last 61 s: bad line"
    skips.skip("opencode", "bad line")  # another adapter: its own first line
    assert len(records) == 3 and skips.total == 12
