"""CopilotAdapter against the recorded Copilot CLI 1.0.102 fixtures and COPILOT_HOME trees
written by tests/support/copilot_home.py."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import pytest
from support.copilot_home import (
    REPO,
    S_AUTO_COMPACTED,
    S_BUSY,
    S_COMPACTED,
    S_ERROR,
    S_INTERACTIVE,
    S_KILLED,
    S_LEGACY,
    S_RESUMED,
    S_SUBAGENT,
    SHARE_FIXTURE,
    SUBAGENT_ID,
    CopilotHome,
    copy_fixture_home,
    dead_pid,
    iso_ms,
    snapshot,
)

from llmem_hooks.adapters import CopilotAdapter, get_adapter_class, registered_adapters
from llmem_hooks.adapters.copilot import WATCH_MAX, read_share_transcript
from llmem_hooks.config import Config
from llmem_hooks.events import LifecycleEvent
from llmem_hooks.session.hooks import default_adapters

RECORDED = [
    S_RESUMED,
    S_COMPACTED,
    S_AUTO_COMPACTED,
    S_INTERACTIVE,
    S_SUBAGENT,
    S_ERROR,
    S_KILLED,
    S_BUSY,
]


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    return copy_fixture_home(tmp_path / "recorded", live_pid=os.getpid(), dead=dead_pid())


@pytest.fixture
def home(tmp_path: Path) -> CopilotHome:
    return CopilotHome(tmp_path / "copilot")


def lifecycle(events: list[LifecycleEvent], sid: str) -> list[tuple[str, str]]:
    """(kind, detail) of a session's events, without plain activity (resume kept)."""
    return [
        (e.kind, e.detail)
        for e in events
        if e.session_id == sid and (e.kind != "activity" or e.detail == "resume")
    ]


def poll_all(adapter: CopilotAdapter, cursor: str | None) -> tuple[list[LifecycleEvent], str]:
    events, cursor = adapter.poll(cursor)
    assert cursor is not None
    return events, cursor


def offset(cursor: str, sid: str) -> int:
    return json.loads(cursor)["s"][sid][0]


# -- configuration -------------------------------------------------------------------------


def test_registered_and_configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert get_adapter_class("copilot") is CopilotAdapter
    assert registered_adapters()["copilot"] is CopilotAdapter
    assert CopilotAdapter.from_config({"enabled": True, "home": str(tmp_path)}).root == tmp_path
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "env"))
    assert CopilotAdapter.from_config({"enabled": True, "home": None}).root == tmp_path / "env"
    typed = Config.from_mapping({"copilot": {"home": str(tmp_path)}})
    assert default_adapters(typed)["copilot"].root == tmp_path
    monkeypatch.delenv("COPILOT_HOME")
    assert CopilotAdapter().root == Path.home() / ".copilot"
    with pytest.raises(ValueError, match=r"\.\."):
        CopilotAdapter(tmp_path / "a" / ".." / "b")
    with pytest.raises(ValueError):
        CopilotAdapter(tmp_path, share_dir="x/../y")


def test_missing_home_is_empty_until_it_appears(tmp_path: Path) -> None:
    a = CopilotAdapter(tmp_path / "copilot")
    assert a.poll(None) == ([], None)
    assert not a.available()
    assert a.list_sessions() == [] and a.get_session("x") is None
    assert not a.session_exists("x") and a.get_messages("x") == []
    assert a.watch_paths() == [str(tmp_path / "copilot" / "session-state")]
    s = CopilotHome(tmp_path / "copilot").session()
    events, _ = a.poll(None)
    assert a.available()
    assert [(e.kind, e.session_id) for e in events] == [("created", s.id)]


# -- the recorded fixtures -----------------------------------------------------------------


def test_recorded_lifecycle(recorded: Path) -> None:
    a = CopilotAdapter(recorded)
    events, cursor = poll_all(a, None)
    done = [("turn_done", "turn_end")]
    shutdown = [("ended", "shutdown")]
    resume = [("activity", "resume")]
    compact = [("compacting", "requested"), ("compacting", "done")]
    created = [("created", "")]
    assert lifecycle(events, S_RESUMED) == created + done * 2 + shutdown + resume + done + shutdown
    for sid in (S_COMPACTED, S_AUTO_COMPACTED):
        assert lifecycle(events, sid) == created + done * 2 + shutdown + resume + compact + shutdown
    assert lifecycle(events, S_INTERACTIVE) == created + done * 3 + shutdown
    assert lifecycle(events, S_SUBAGENT) == created + done * 2 + shutdown
    assert lifecycle(events, S_ERROR) == created + done + shutdown
    assert lifecycle(events, S_KILLED) == created + done + [("ended", "crashed")]
    assert lifecycle(events, S_BUSY) == created + done * 2  # live pid: still running
    assert events[-1].session_id == S_COMPACTED or events[-1].kind == "ended"
    assert {e.session_id for e in events} == set(RECORDED)  # the legacy file is no session
    assert all(e.agent == "copilot" for e in events)

    first = next(e for e in events if e.session_id == S_RESUMED)
    assert first.kind == "created" and first.session is not None
    info = first.session
    assert (info.id, info.agent, info.directory, info.native_project_id) == (
        S_RESUMED,
        "copilot",
        REPO,
        None,
    )
    assert info.title == "Please USE_TOOL to echo hello"
    assert info.created_ms == iso_ms("2026-11-22T07:19:55.867Z")
    assert first.at_ms == iso_ms("2026-11-22T07:19:55.922Z")
    ended = [e for e in events if e.session_id == S_RESUMED and e.kind == "ended"]
    assert ended[-1].at_ms == iso_ms("2026-11-22T07:20:36.270Z")

    # Sub-agent lines stay in their parent, as activity.
    sub = [e for e in events if e.child_id is not None]
    assert sub and all(e.child_id == SUBAGENT_ID for e in sub)
    assert all(e.session_id == S_SUBAGENT and e.kind == "activity" for e in sub)
    assert all(e.detail.startswith("subagent ") for e in sub)

    # Nothing new: no events, the very same cursor.
    assert a.poll(cursor) == ([], cursor)
    assert CopilotAdapter(recorded).poll(cursor) == ([], cursor)


def test_recorded_transcripts(recorded: Path) -> None:
    a = CopilotAdapter(recorded)
    msgs = a.get_messages(S_RESUMED)
    assert [m.text for m in msgs] == [
        "User: Please USE_TOOL to echo hello",
        "Assistant: Tool: bash: echo hello-from-fake-tool && pwd",
        "Assistant: The tool ran and printed hello-from-fake-tool. Done.",
        "User: Second prompt after resume",
        msgs[4].text,
    ]
    assert msgs[4].text.startswith("Assistant: Fake model reply to:")
    assert [m.role for m in msgs] == ["user", "assistant", "assistant", "user", "assistant"]
    assert msgs[0].id == "bb667e32-c1f1-49d8-b5b7-25a3712cc6e1"  # data.messageId
    assert msgs[0].created_ms == iso_ms("2026-11-22T07:19:56.975Z")
    assert msgs[1].commands == ("echo hello-from-fake-tool && pwd",)
    assert all(m.session_id == S_RESUMED for m in msgs)
    assert a.get_messages(S_RESUMED, after_id=msgs[2].id) == msgs[3:]
    assert a.get_messages(S_RESUMED, after_id="no-such-id") == msgs
    assert a.get_messages(S_RESUMED, after_id=msgs[-1].id) == []
    assert a.get_session_transcript(S_RESUMED) == "\n".join(m.text for m in msgs)

    # After the compaction only its summary is left.
    summary = "<overview>Fake summary of the conversation so far: user asked for a tool call;"
    for sid in (S_COMPACTED, S_AUTO_COMPACTED):
        (only,) = a.get_messages(sid)
        assert only.role == "assistant" and only.text.startswith(f"Assistant: {summary}")

    sub = a.get_messages(S_SUBAGENT)
    assert "Assistant: Tool: task: Explore repo" in [m.text for m in sub]
    assert not any("SUBAGENT_PROMPT" in m.text for m in sub)
    assert [m.text for m in a.get_messages(S_ERROR)] == [
        "User: Please ERR_MODEL now",
        "Assistant: Error: 400 fake bad request",
    ]
    assert [m.text for m in a.get_messages(S_INTERACTIVE) if m.role == "user"] == [
        "User: Interactive hello USE_TOOL",
        "User: Second interactive message",
    ]
    assert a.get_messages(S_LEGACY) == []


def test_sessions_listing(recorded: Path) -> None:
    a = CopilotAdapter(recorded)
    for i, sid in enumerate(RECORDED):  # RECORDED[-1] becomes the newest
        os.utime(recorded / "session-state" / sid / "events.jsonl", (1e9 + i, 1e9 + i))
    assert [s.id for s in a.list_sessions()] == RECORDED[::-1]
    assert [s.id for s in a.list_sessions(limit=2)] == [S_BUSY, S_KILLED]
    info = a.get_session(S_COMPACTED)
    assert info is not None and info.directory == REPO and info.updated_ms >= info.created_ms
    assert info.title == "Please USE_TOOL again for session two"
    assert a.session_exists(S_RESUMED)
    for bad in (S_LEGACY, "../session-state", "", ".session-operation-locks", "a/b"):
        assert not a.session_exists(bad) and a.get_session(bad) is None
        assert a.get_messages(bad) == []
    assert a.existing([S_RESUMED, S_LEGACY, "gone"]) == {S_RESUMED}
    # The store's folder, then the followed sessions' folders (at most WATCH_MAX, the
    # most recently changed), never an ended one nobody follows (test_sidecar_rest).
    for i, sid in enumerate(RECORDED):
        os.utime(recorded / "session-state" / sid, (1e9 + i, 1e9 + i))
    assert a.watch_paths() == [str(recorded / "session-state")]
    paths = a.watch_paths([*RECORDED, "gone", "../x"])
    assert paths[0] == str(recorded / "session-state")
    newest = RECORDED[-WATCH_MAX:]
    assert sorted(paths[1:]) == sorted(str(recorded / "session-state" / s) for s in newest)
    assert a.watch_paths([S_RESUMED])[1:] == [str(recorded / "session-state" / S_RESUMED)]
    # A folder that just appeared, not read yet, is watched before anyone follows it.
    fresh = recorded / "session-state" / "0a1b2c3d-0000-4000-8000-00000000f00d"
    fresh.mkdir()
    assert a.watch_paths() == [str(recorded / "session-state"), str(fresh)]


# -- tailing -------------------------------------------------------------------------------


def test_cursor_resumes_after_appends(home: CopilotHome) -> None:
    a = CopilotAdapter(home.root)
    s = home.session()
    s.exchange("Run the tests", "All green.", tool=("bash", {"command": "make test"}))
    events, cursor = poll_all(a, None)
    assert lifecycle(events, s.id) == [
        ("created", ""),
        ("turn_done", "turn_end"),
        ("turn_done", "turn_end"),
    ]
    assert offset(cursor, s.id) == s.events.stat().st_size
    s.exchange("Now lint", "Clean.")
    events, cursor2 = poll_all(a, cursor)
    assert lifecycle(events, s.id) == [("turn_done", "turn_end")]
    assert events[0].kind == "activity" and events[-1].kind == "activity"  # the agentStop hook
    s.shutdown()
    events, _ = poll_all(a, cursor2)
    assert lifecycle(events, s.id) == [("ended", "shutdown")]
    assert [m.text for m in a.get_messages(s.id)][-2:] == ["User: Now lint", "Assistant: Clean."]


def test_partial_last_line_waits(home: CopilotHome) -> None:
    a = CopilotAdapter(home.root)
    s = home.session()
    _, cursor = poll_all(a, None)
    size = s.events.stat().st_size
    s.turn_end()
    line = s.events.read_bytes()[size:]
    with open(s.events, "r+b") as fh:  # the CLI is mid-write: half a line
        fh.truncate(size + len(line) // 2)
    events, cursor2 = poll_all(a, cursor)
    assert events == [] and cursor2 == cursor and offset(cursor2, s.id) == size
    s.raw(line[len(line) // 2 :])
    events, cursor3 = poll_all(a, cursor2)
    assert lifecycle(events, s.id) == [("turn_done", "turn_end")]
    assert offset(cursor3, s.id) == s.events.stat().st_size


def test_new_session_folder_is_read_from_the_start(home: CopilotHome) -> None:
    a = CopilotAdapter(home.root)
    first = home.session()
    _, cursor = poll_all(a, None)
    second = home.session()  # several lines land before the next poll
    second.exchange("Hello", "Hi")
    second.shutdown()
    events, cursor = poll_all(a, cursor)
    assert lifecycle(events, first.id) == []
    assert lifecycle(events, second.id) == [
        ("created", ""),
        ("turn_done", "turn_end"),
        ("ended", "shutdown"),
    ]
    assert str(second.folder) in a.watch_paths([second.id])
    # A folder without events.jsonl yet (--resume can leave one) is no session.
    (home.sessions / "0a1b2c3d-0000-4000-8000-000000000000").mkdir()
    assert a.poll(cursor) == ([], cursor)


def test_shrunk_file_is_reread_quietly(home: CopilotHome, caplog: pytest.LogCaptureFixture) -> None:
    a = CopilotAdapter(home.root)
    s = home.session()
    s.exchange("First", "One")
    keep = s.events.stat().st_size
    s.exchange("Second", "Two")
    s.shutdown()
    _, cursor = poll_all(a, None)
    with open(s.events, "r+b") as fh:  # rewind: history truncated to the first exchange
        fh.truncate(keep)
    s.exchange("Third", "Three")
    caplog.set_level(logging.INFO, logger="llmem_hooks.adapters.copilot")
    events, cursor = poll_all(a, cursor)
    # Old lines are not reported again: no created, no second shutdown; the new turn is.
    assert lifecycle(events, s.id) == [("turn_done", "turn_end")]
    assert "shrank" in caplog.text
    assert offset(cursor, s.id) == s.events.stat().st_size
    assert [m.text for m in a.get_messages(s.id) if m.role == "user"] == [
        "User: First",
        "User: Third",
    ]


def test_replaced_file_is_reread_quietly(home: CopilotHome) -> None:
    a = CopilotAdapter(home.root)
    s = home.session()
    s.exchange("First", "One")
    _, cursor = poll_all(a, None)
    copy = s.folder / "events.jsonl.new"
    copy.write_bytes(s.events.read_bytes())
    os.replace(copy, s.events)  # a rewrite through a new file: new inode, same prefix
    s.exchange("Second", "Two")
    events, cursor = poll_all(a, cursor)
    assert lifecycle(events, s.id) == [("turn_done", "turn_end")]
    assert json.loads(cursor)["s"][s.id][1] == s.events.stat().st_ino


def test_in_place_rewrite_is_detected(home: CopilotHome) -> None:
    a = CopilotAdapter(home.root)
    s = home.session()
    s.exchange("First", "One")
    _, cursor = poll_all(a, None)
    size = s.events.stat().st_size
    data = s.events.read_bytes()
    with open(s.events, "r+b") as fh:  # same inode, the bytes before the offset differ
        fh.write(data.replace(b'"One"', b'"Uno"'))
    s.shutdown()
    assert s.events.stat().st_size > size
    events, _ = poll_all(a, cursor)
    assert lifecycle(events, s.id) == [("ended", "shutdown")]
    assert "Assistant: Uno" in [m.text for m in a.get_messages(s.id)]


def test_fuzzed_lines_are_skipped_and_logged(
    home: CopilotHome, caplog: pytest.LogCaptureFixture
) -> None:
    a = CopilotAdapter(home.root)
    s = home.session()
    _, cursor = poll_all(a, None)
    s.raw(b'{"type":"user.message","data":{"content":"trunc\n')  # truncated line
    s.raw(b"\xff\xfe not utf-8 \x80\n")
    s.raw(b"[1, 2, 3]\n")
    s.raw(b'"just a string"\n')
    s.raw(b"\n\r\n   \n")  # empty lines: skipped silently
    s.raw(b'{"data": {}}\n')  # no type
    s.raw(b'{"type": "totally.new_type", "data": {}}\n')
    s.raw(b"[" * 200_000 + b"\n")  # too deep for the JSON parser
    s.raw(b'{"type": "hook.start", "data": [1, 2]}\n')  # data not an object: still activity
    big = b'{"type":"user.message","data":{"content":"' + b"x" * (10 << 20)
    s.raw(big)  # a 10 MB line still being written
    caplog.set_level(logging.INFO, logger="llmem_hooks.adapters.copilot")
    t0 = time.perf_counter()
    events, cursor = poll_all(a, cursor)
    assert [e.kind for e in events] == ["activity"]
    assert offset(cursor, s.id) == s.events.stat().st_size - len(big)  # waits for its end
    s.raw(b'"}}\n')
    s.turn_end()
    events, cursor = poll_all(a, cursor)
    assert time.perf_counter() - t0 < 2
    assert lifecycle(events, s.id) == [("turn_done", "turn_end")]
    assert offset(cursor, s.id) == s.events.stat().st_size
    records = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    # One line for the skipped lines (the next report is due in a minute, with a count),
    # one naming the unknown type.
    assert len(records) == 2
    assert "skipped 6 bad record(s): malformed events.jsonl line(s)" in records[0]
    assert "totally.new_type" in records[1]
    assert a._skips.total == 7  # the over-long line of the second poll counted, not logged
    caplog.clear()
    s.raw(b'{"type": "totally.new_type", "data": {}}\n')  # known to be unknown: not again
    assert a.poll(cursor)[0] == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert a.get_messages(s.id) == []  # the 10 MB prompt is over the transcript cap too


def test_legacy_and_garbage_entries_are_skipped(home: CopilotHome) -> None:
    a = CopilotAdapter(home.root)
    real = home.session()
    legacy = home.sessions / "1e9ac701-0000-4000-8000-000000000001.jsonl"
    legacy.write_text(real.events.read_text())
    (home.sessions / ".session-operation-locks").mkdir()
    (home.sessions / ".session-operation-locks" / f"{real.id}.lock").write_text("")
    (home.sessions / "not a session").mkdir()
    (home.sessions / "dir-events" / "events.jsonl").mkdir(parents=True)
    (home.sessions / "link-events").mkdir()
    (home.sessions / "link-events" / "events.jsonl").symlink_to(real.events)
    (home.sessions / "link-folder").symlink_to(real.folder, target_is_directory=True)
    (home.sessions / "fifo-events").mkdir()
    os.mkfifo(home.sessions / "fifo-events" / "events.jsonl")  # must not block a reader
    events, cursor = poll_all(a, None)
    assert {e.session_id for e in events} == {real.id}
    assert list(json.loads(cursor)["s"]) == [real.id]
    assert [s.id for s in a.list_sessions()] == [real.id]
    for sid in ("dir-events", "link-events", "link-folder", "fifo-events"):
        assert not a.session_exists(sid) and a.get_messages(sid) == []


def test_subagent_lines_stay_in_the_parent(home: CopilotHome) -> None:
    a = CopilotAdapter(home.root)
    s = home.session()
    s.user("Explore the repo")
    s.subagent("agent-7", "SUB: list files", "SUB: three files")
    s.turn_start(1)
    s.assistant("There are three files.")
    s.turn_end(1)
    events, _ = poll_all(a, None)
    assert {e.session_id for e in events} == {s.id}
    sub = [e for e in events if e.child_id]
    assert sub and {(e.kind, e.child_id) for e in sub} == {("activity", "agent-7")}
    assert lifecycle(events, s.id) == [("created", "")] + [("turn_done", "turn_end")] * 2
    texts = [m.text for m in a.get_messages(s.id)]
    assert texts == [
        "User: Explore the repo",
        "Assistant: Tool: task: Explore repo",
        "Assistant: There are three files.",
    ]


def test_stale_lock_reports_crash_once(home: CopilotHome) -> None:
    a = CopilotAdapter(home.root)
    s = home.session()
    s.exchange("Hello", "Hi")
    _, cursor = poll_all(a, None)
    dead = dead_pid()
    s.lock(os.getpid())
    s.lock(dead)  # two processes had it open; one is still alive
    assert a.poll(cursor) == ([], cursor)
    s.unlock(os.getpid())  # now only the dead one remains (SIGKILL)
    events, cursor = poll_all(a, cursor)
    assert [(e.kind, e.detail) for e in events] == [("ended", "crashed")]
    assert a.poll(cursor) == ([], cursor)  # once
    s.unlock(dead)
    s.resume()  # reopened later: it can end again
    s.lock(os.getpid())
    events, cursor = poll_all(a, cursor)
    assert lifecycle(events, s.id) == [("activity", "resume")]
    assert events[0].session is not None and events[0].session.directory == REPO
    s.unlock(os.getpid())
    s.lock(dead_pid())
    events, cursor = poll_all(a, cursor)
    assert lifecycle(events, s.id) == [("ended", "crashed")]
    s.resume()
    s.shutdown()  # a clean exit: a stale lock after a shutdown is no crash
    events, cursor = poll_all(a, cursor)
    assert lifecycle(events, s.id) == [("activity", "resume"), ("ended", "shutdown")]
    assert a.poll(cursor) == ([], cursor)


def test_no_lock_or_live_lock_is_no_crash(home: CopilotHome) -> None:
    a = CopilotAdapter(home.root)
    quiet = home.session()  # no inuse lock at all: no verdict (the idle timer decides)
    live = home.session()
    live.lock(os.getpid())
    events, cursor = poll_all(a, None)
    assert not [e for e in events if e.kind == "ended"]
    assert a.poll(cursor) == ([], cursor)
    assert quiet.id in json.loads(cursor)["s"]


def test_compaction_cuts_the_transcript(home: CopilotHome) -> None:
    a = CopilotAdapter(home.root)
    s = home.session()
    s.exchange("Old question", "Old answer")
    failed = home.session()
    failed.exchange("Keep me", "Kept")
    failed.compaction("never used", success=False)
    s.compaction("Summary: we fixed the login bug.", in_event=False)  # in checkpoints/ only
    s.exchange("After compaction", "Noted.")
    events, _ = poll_all(a, None)
    assert lifecycle(events, s.id) == [
        ("created", ""),
        ("turn_done", "turn_end"),
        ("compacting", "requested"),
        ("compacting", "done"),
        ("turn_done", "turn_end"),
    ]
    msgs = a.get_messages(s.id)
    assert [m.text for m in msgs] == [
        "Assistant: Summary: we fixed the login bug.",
        "User: After compaction",
        "Assistant: Noted.",
    ]
    assert a.get_messages(s.id, after_id=msgs[0].id) == msgs[1:]
    assert ("activity", "compaction failed") in [
        (e.kind, e.detail) for e in events if e.session_id == failed.id
    ]
    assert [m.text for m in a.get_messages(failed.id)][:2] == ["User: Keep me", "Assistant: Kept"]
    lost = home.session()  # a summary neither in the event nor on disk: nothing is cut
    lost.exchange("Still here", "Yes")
    lost.compaction("gone", in_event=False).unlink()
    assert [m.text for m in a.get_messages(lost.id)] == ["User: Still here", "Assistant: Yes"]


def test_tools_reasoning_files_and_commands(home: CopilotHome) -> None:
    a = CopilotAdapter(home.root)
    s = home.session()
    s.user("Fix it", attachments=[{"type": "file", "path": "/repo/README.md"}])
    long_cmd = "pytest " + " ".join(f"tests/test_{i}.py" for i in range(40))
    patch = "*** Begin Patch\n*** Update File: src/app.py\n@@\n-a\n+b\n*** End Patch"
    tools = [
        ("bash", {"command": long_cmd, "description": "Run tests"}),
        ("view", {"path": "/repo/src/app.py"}),
        ("edit", {"path": "/repo/src/app.py", "old_str": "a", "new_str": "b"}),
        ("create", {"file_path": "/repo/src/new.py", "file_text": "x"}),
        ("grep", {"pattern": "TODO", "path": "/repo/src"}),
        ("apply_patch", patch),
    ]
    mid, calls = s.assistant("Looking.", tools, reasoning="The bug is in app.py.")
    for call, (name, args) in zip(calls, tools, strict=True):
        s.tool_run(call, name, args, success=name != "edit")
    s.tool_run("user_1", "bash", {"command": "git status"})  # user-requested: no request line
    msgs = a.get_messages(s.id)
    assert msgs[0].files == ("/repo/README.md",)
    lines = msgs[1].text.splitlines()
    assert msgs[1].id == mid
    assert lines[:2] == ["Assistant: Reasoning: The bug is in app.py.", "Assistant: Looking."]
    assert lines[2].startswith("Assistant: Tool: bash: pytest tests/test_0.py")
    assert lines[2].endswith("...") and len(lines[2].split(": ", 3)[3]) <= 200
    assert lines[3:] == [
        "Assistant: Tool: view: /repo/src/app.py",
        "Assistant: Tool: edit: /repo/src/app.py [error]",
        "Assistant: Tool: create: /repo/src/new.py",
        "Assistant: Tool: grep: TODO",
        "Assistant: Tool: apply_patch: src/app.py",
    ]
    assert msgs[1].files == ("/repo/src/app.py", "/repo/src/new.py", "src/app.py")
    assert msgs[1].commands == (long_cmd,)
    assert msgs[2].text == "Assistant: Tool: bash: git status"
    assert msgs[2].commands == ("git status",)
    for m in msgs:
        assert all(line.startswith(("User: ", "Assistant: ")) for line in m.text.splitlines())


def test_broken_or_missing_workspace_yaml(home: CopilotHome) -> None:
    a = CopilotAdapter(home.root)
    broken = home.session()
    (broken.folder / "workspace.yaml").write_text("id: [unclosed\nname: : :\n")
    missing = home.session(workspace=False)
    numeric = home.session(name="123", start=False)
    numeric.raw(b"")  # events.jsonl exists but is empty
    for s in (broken, missing):
        info = a.get_session(s.id)
        assert info is not None and info.directory == REPO and info.title is None
        assert info.created_ms > 0
    info = a.get_session(numeric.id)
    assert info is not None and info.title == "123" and info.directory == REPO
    events, _ = poll_all(a, None)
    created = [e for e in events if e.kind == "created"]
    assert {e.session_id for e in created} == {broken.id, missing.id}


def test_bad_cursor_reads_everything_again(
    recorded: Path, caplog: pytest.LogCaptureFixture
) -> None:
    a = CopilotAdapter(recorded)
    full = a.poll(None)
    with caplog.at_level(logging.WARNING):
        for bad in ("garbage", "[]", '{"v": 99}'):
            assert a.poll(bad) == full
    assert caplog.text.count("unreadable cursor") == 3
    # A malformed entry is dropped: that session is read again from the start.
    assert a.poll('{"v":1,"s":{"x":[1]}}') == full


def test_small_budget_resumes_deterministically(recorded: Path) -> None:
    a = CopilotAdapter(recorded)
    full, final = poll_all(a, None)
    a.poll_bytes = 4096
    cursor: str | None = None
    got: list[LifecycleEvent] = []
    for _ in range(200):
        events, new = a.poll(cursor)
        got.extend(events)
        if new == cursor:
            break
        cursor = new
    assert cursor == final
    assert [e for e in got if e.kind != "activity"] == [e for e in full if e.kind != "activity"]


# -- --share markdown ----------------------------------------------------------------------


def test_share_markdown_transcript() -> None:
    msgs = read_share_transcript(SHARE_FIXTURE)
    sid = "5f0c2b1e-0000-4000-8000-0000000000aa"
    assert {m.session_id for m in msgs} == {sid}
    assert [(m.id, m.role) for m in msgs][:2] == [("share-2", "user"), ("share-3", "assistant")]
    assert [m.text for m in msgs] == [
        "User: Remember that we deploy with `make release`.\n\n---\n\n"
        "Also, what does the config loader do?",
        "Assistant: I'll look at the loader first.",
        'Assistant: Tool: bash: ls config && grep -rn "load" src/config.py',
        "Assistant: Tool: view: /home/dev/projects/demo-repo/src/config.py",
        "Assistant: Tool: create: /home/dev/projects/demo-repo/src/config.py [error]",
        "Assistant: Tool: powershell: pytest -q tests/test_config.py",
        "Assistant: The loader reads `config.yaml` and merges the defaults.",
        "Assistant: Tool: grep: load",
    ]
    assert msgs[2].commands == ('ls config && grep -rn "load" src/config.py',)
    assert msgs[3].files == ("/home/dev/projects/demo-repo/src/config.py",)
    assert msgs[5].commands == ("pytest -q tests/test_config.py",)
    assert msgs[7].files == ()  # a search path is not a file touched


def test_share_plain_format_and_fallback(home: CopilotHome, tmp_path: Path) -> None:
    s = home.session(cwd=str(tmp_path / "proj"))  # start only: no messages in events.jsonl
    text = (
        "# Copilot CLI Session\n\n> [!NOTE]\n> - **Session ID:** `other`  \n\n---\n\n"
        "<sub>0s</sub>\n\n### User\n\nhello there\n\n---\n\n"
        "<sub>3s</sub>\n\n### Copilot\n\nhi\n\n---\n\n"
        "<sub>5s</sub>\n\n### `bash`\n\n**List files**\n\n$ ls -la\n\n"
        "<details>\n<summary>2 lines</summary>\n\n```\na\nb\n```\n\n</details>\n"
    )
    share = tmp_path / "share"
    share.mkdir()
    (share / f"copilot-session-{s.id}.md").write_text(text)
    expected = ["User: hello there", "Assistant: hi", "Assistant: Tool: bash: ls -la"]
    msgs = CopilotAdapter(home.root, share_dir=share).get_messages(s.id)
    assert [m.text for m in msgs] == expected
    assert {m.session_id for m in msgs} == {s.id}
    assert [m.session_id for m in read_share_transcript(share / f"copilot-session-{s.id}.md")] == [
        "other"
    ] * 3
    # Without share_dir, --share's default location: the session's working directory.
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / f"copilot-session-{s.id}.md").write_text(text)
    from_cwd = CopilotAdapter(home.root).get_messages(s.id, after_id=msgs[0].id)
    assert [m.text for m in from_cwd] == expected[1:]
    s.exchange("real prompt", "real answer")  # events.jsonl wins once it has messages
    assert [m.text for m in CopilotAdapter(home.root).get_messages(s.id)] == [
        "User: real prompt",
        "Assistant: real answer",
    ]
    assert read_share_transcript(tmp_path / "missing.md") == []
    assert CopilotAdapter.read_share_transcript(share / f"copilot-session-{s.id}.md")


# -- read-only -----------------------------------------------------------------------------


def test_never_writes_into_copilot_home(recorded: Path, home: CopilotHome) -> None:
    s = home.session()
    s.exchange("Hello", "Hi")
    s.lock(dead_pid())
    for root in (recorded, home.root):
        before = snapshot(root)
        a = CopilotAdapter(root)
        cursor = None
        for _ in range(2):
            _, cursor = a.poll(cursor)
        for info in a.list_sessions():
            assert a.get_session(info.id) is not None
            a.get_messages(info.id)
            a.get_session_chunks(info.id, max_chars=500)
        a.existing([*RECORDED, s.id])
        a.watch_paths()
        a.close()
        assert snapshot(root) == before
