"""Property/fuzz suite over the adapters' parsing (issue 9): Copilot events.jsonl lines
and OpenCode rows of every wrong shape, against real files and a real SQLite file with
OpenCode's schema. Whatever comes before it, no exception escapes, the cursor moves past
every complete record, and a good record after the bad ones is still handled.

Each test has a fixed budget (``max_examples``, no deadline) so the file stays well under
a minute while covering thousands of cases per run.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.copilot_home import CopilotHome
from support.opencode_db import OpenCodeDB, text

from llmem_hooks.adapters import CopilotAdapter, OpenCodeAdapter
from llmem_hooks.adapters.copilot import KNOWN_TYPES
from llmem_hooks.adapters.copilot_jsonl import decode_line as _decode
from llmem_hooks.events import BadRecord, LifecycleEvent, record_ms, session_id_problem

FAST = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)

# -- strategies ----------------------------------------------------------------------------

ODD_NUMBERS = st.sampled_from(
    ["1e999", "-1e999", "NaN", "Infinity", "-Infinity", "1e308", "-0", "9" * 5000, "1.5e-400"]
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)
TYPES = sorted(KNOWN_TYPES)
event_types = st.one_of(st.sampled_from(TYPES), st.text(max_size=20), json_values)


@st.composite
def envelopes(draw: st.DrawFn) -> dict[str, Any]:
    """A Copilot event envelope with random field types."""
    obj: dict[str, Any] = {"type": draw(event_types)}
    for key in ("data", "id", "timestamp", "parentId", "agentId"):
        if draw(st.booleans()):
            obj[key] = draw(json_values)
    if draw(st.booleans()):
        obj["data"] = draw(st.dictionaries(st.sampled_from(DATA_KEYS), json_values, max_size=5))
    return obj


DATA_KEYS = [
    "content",
    "toolRequests",
    "toolCallId",
    "toolName",
    "arguments",
    "success",
    "summaryContent",
    "checkpointPath",
    "context",
    "startTime",
    "attachments",
    "messageId",
    "reasoningText",
    "source",
    "isAutopilotContinuation",
]


def _with_odd_number(obj: dict[str, Any], number: str) -> str:
    """The envelope as JSON with its timestamp (or a data value) replaced by raw text that
    Python's JSON writer would never produce."""
    obj = {**obj, "timestamp": "@@ODD@@"}
    return json.dumps(obj).replace('"@@ODD@@"', number)


def _deep(depth: int, opener: str) -> str:
    """A user.message line whose data nests ``depth`` objects or arrays."""
    inner = '{"a":' * depth + "1" + "}" * depth if opener == "{" else "[" * depth + "]" * depth
    return '{"type":"user.message","data":' + inner + "}"


bad_lines = st.one_of(
    st.binary(max_size=200),
    envelopes().map(json.dumps),
    st.tuples(envelopes(), ODD_NUMBERS).map(lambda t: _with_odd_number(*t)),
    json_values.map(json.dumps),
    envelopes().map(json.dumps).flatmap(lambda s: st.integers(0, len(s)).map(lambda n: s[:n])),
    st.tuples(st.integers(100, 5000), st.sampled_from("[{")).map(lambda t: _deep(*t)),
)


def _as_line(value: str | bytes) -> bytes:
    """One complete line (a truncated line is one whose JSON is cut, but ends in \\n)."""
    raw = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
    return raw.replace(b"\n", b" ") + b"\n"


# -- Copilot ---------------------------------------------------------------------------------


@settings(FAST, max_examples=1000)
@given(st.one_of(bad_lines.map(_as_line), st.binary(max_size=300)))
def test_copilot_decode_never_raises(raw: bytes) -> None:
    obj = _decode(raw.rstrip(b"\n"))
    assert isinstance(obj, str | dict)
    if isinstance(obj, dict):
        assert isinstance(obj["type"], str) and obj["type"]
        try:
            ms = record_ms(obj.get("timestamp"))
        except BadRecord:
            return
        assert 0 <= ms <= 253_402_300_799_999


def _turns(events: list[LifecycleEvent], sid: str) -> list[str]:
    return [e.detail for e in events if e.session_id == sid and e.kind == "turn_done"]


@settings(FAST, max_examples=300)
@given(st.lists(bad_lines, min_size=1, max_size=6))
def test_copilot_poll_survives_bad_lines_and_reads_the_good_one_after(
    lines: list[str | bytes],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = CopilotHome(Path(tmp) / "copilot")
        s = home.session()
        a = CopilotAdapter(home.root)
        _, cursor = a.poll(None)
        s.raw(b"".join(_as_line(v) for v in lines))
        s.user("GOOD-PROMPT")
        s.turn_end(turn=7)
        events, cursor = a.poll(cursor)
        assert cursor is not None
        assert json.loads(cursor)["s"][s.id][0] == s.events.stat().st_size
        assert "turn_end" in _turns(events, s.id)
        assert all(session_id_problem(e.session_id) is None for e in events)
        assert a.poll(cursor) == ([], cursor)
        texts = [m.text for m in a.get_messages(s.id)]
        assert texts and texts[-1] == "User: GOOD-PROMPT"
        a.list_sessions()
        a.get_session(s.id)


@settings(FAST, max_examples=200)
@given(st.text(min_size=1, max_size=40), st.binary(max_size=120))
def test_copilot_odd_session_folders_and_cursors(name: str, cursor_bytes: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = CopilotHome(Path(tmp) / "copilot")
        good = home.session()
        try:
            odd = home.session(name)
            odd.user("odd")
        except (OSError, ValueError):
            odd = None  # not a possible folder name here (/, NUL, too long, exists)
        a = CopilotAdapter(home.root)
        for cur in (None, cursor_bytes.decode("utf-8", "replace")):
            events, new = a.poll(cur)
            assert all(session_id_problem(e.session_id) is None for e in events)
            assert new is not None
            assert good.id in json.loads(new)["s"]
            if odd is not None and session_id_problem(name) is not None:
                assert name not in {e.session_id for e in events}


# -- OpenCode --------------------------------------------------------------------------------

sqlite_values = st.one_of(
    st.none(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["ses_x", "evt_", "", "..", "a\nb", "msg_zzzz", "1e999"]),
    st.binary(max_size=20),
)
json_texts = st.one_of(
    json_values.map(json.dumps),
    st.tuples(json_values, ODD_NUMBERS).map(
        lambda t: json.dumps({"info": {"time": {"created": "@@"}, "x": t[0]}}).replace('"@@"', t[1])
    ),
    st.integers(200, 3000).map(lambda n: '{"info": ' + "[" * n + "]" * n + "}"),
    st.dictionaries(
        st.sampled_from(["info", "part", "time", "sessionID"]),
        st.one_of(
            json_values,
            st.fixed_dictionaries(
                {},
                optional={
                    "id": sqlite_values.filter(lambda v: not isinstance(v, bytes | float)),
                    "role": st.sampled_from(["user", "assistant", 5, None]),
                    "time": json_values,
                    "parentID": json_values,
                    "summary": json_values,
                    "finish": json_values,
                    "type": st.sampled_from(["compaction", "text", "tool", 1]),
                },
            ),
        ),
        max_size=4,
    ).map(json.dumps),
)
data_values = st.one_of(sqlite_values, json_texts)
EVENT_TYPES = st.one_of(
    st.sampled_from(
        [
            "session.created.1",
            "session.updated.1",
            "session.deleted.1",
            "message.updated.1",
            "message.part.updated.1",
        ]
    ),
    sqlite_values,
)


@st.composite
def bad_rows(draw: st.DrawFn) -> tuple[str, tuple[Any, ...]]:
    table = draw(st.sampled_from(["event", "session", "message", "part"]))
    v = sqlite_values
    if table == "event":
        row = (draw(v), draw(v), draw(v), draw(EVENT_TYPES), draw(data_values))
    elif table == "session":
        row = tuple(draw(v) for _ in range(9))
    elif table == "message":
        row = (draw(v), draw(v), draw(v), draw(v), draw(data_values))
    else:
        row = (draw(v), draw(v), draw(v), draw(v), draw(v), draw(data_values))
    return table, row


INSERT = {
    "event": "INSERT INTO event (id, aggregate_id, seq, type, data) VALUES (?, ?, ?, ?, ?)",
    "session": "INSERT INTO session (id, project_id, parent_id, slug, directory, title, version,"
    " time_created, time_updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "message": "INSERT INTO message (id, session_id, time_created, time_updated, data)"
    " VALUES (?, ?, ?, ?, ?)",
    "part": "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data)"
    " VALUES (?, ?, ?, ?, ?, ?)",
}


def _insert(db: OpenCodeDB, table: str, row: tuple[Any, ...], sid: str) -> None:
    """A bad row; half of the message/part/event rows land in the good session."""
    if table in ("message", "part", "event") and isinstance(row[0], int) and row[0] % 2:
        row = (row[0], sid, *row[2:]) if table != "part" else (row[0], row[1], sid, *row[3:])
    with contextlib.suppress(sqlite3.IntegrityError, OverflowError):
        db.conn.execute(INSERT[table], row)  # NOT NULL / duplicate key: refused, as by OpenCode


def _drain(a: OpenCodeAdapter, cursor: str | None) -> tuple[list[LifecycleEvent], str | None]:
    events: list[LifecycleEvent] = []
    for _ in range(50):
        batch, new = a.poll(cursor)
        events.extend(batch)
        if new == cursor:
            return events, cursor
        cursor = new
    raise AssertionError("the cursor never settled")


@settings(FAST, max_examples=150, suppress_health_check=list(HealthCheck))
@given(st.lists(bad_rows(), min_size=1, max_size=8))
def test_opencode_bad_rows_never_stall_the_poll(rows: list[tuple[str, tuple[Any, ...]]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = OpenCodeDB(Path(tmp) / "opencode.db")
        try:
            first = db.session("First")
            u = db.user(first, "FIRST-PROMPT")
            db.assistant(first, u, text("first answer"))
            a = OpenCodeAdapter(db.path)
            _, cursor = _drain(a, None)
            db.conn.execute("PRAGMA foreign_keys = OFF")
            for table, row in rows:
                _insert(db, table, row, first)
            db.conn.execute("PRAGMA foreign_keys = ON")
            later = db.session("Later")
            u2 = db.user(later, "LATER-PROMPT")
            db.assistant(later, u2, text("later answer"))
            events, cursor = _drain(a, cursor)
            assert next(e.kind for e in events if e.session_id == later) == "created"
            assert "stop" in _turns(events, later)
            assert all(session_id_problem(e.session_id) is None for e in events)
            assert [m.text for m in a.get_messages(later)] == [
                "User: LATER-PROMPT",
                "Assistant: later answer",
            ]
            assert "User: FIRST-PROMPT" in [m.text for m in a.get_messages(first)]
            listed = a.list_sessions(limit=100, include_children=True)
            assert {first, later} <= {s.id for s in listed}
            assert all(session_id_problem(s.id) is None for s in listed)
            ids = [r[1][0] for r in rows if isinstance(r[1][0], str)]
            assert a.existing([first, later, *ids]) >= {first, later}
            for sid in ids:
                a.get_messages(sid)
                a.get_session(sid)
            # The poll from the start reads the same and settles too.
            _drain(OpenCodeAdapter(db.path), None)
        finally:
            db.close()
