"""Property/fuzz suite over the Copilot hook's stdin (issue 9): random bytes, random JSON
and payloads of the right shape with wrong field types go through
`copilot_hook.main` in-process (the real entry point, real SQLite store in a temp
LLMEM_HOME); a few go through the real ``llmem-hooks hook copilot ...`` command.

Whatever arrives: exit 0, stdout empty or exactly one ``{"additionalContext": ...}``
line, no file whose name is not a usable session id, nothing half-written, and a good
payload afterwards still gets its context.
"""

from __future__ import annotations

import io
import json
import os
import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmem_hooks import MemoryStore
from llmem_hooks.agents import copilot_hook, hook_log
from llmem_hooks.events import session_id_problem

HOOK_EXE = Path(sys.executable).parent / "llmem-hooks"
NO_AUTOSTART = "copilot:\n  autostart_sidecar: false\n"
GOOD_SID = "55634ac8-b1c4-44ad-a4cf-4c99a1b09a4c"
MARK = "FUZZ-HOOK-MARKER: deploys go through the blue-green pipeline"
EVENT_NAMES = [*copilot_hook.EVENTS, *copilot_hook.EVENT_ALIASES, "nope", ""]

FUZZ = settings(
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(),
    st.text(max_size=20),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
session_ids = st.one_of(
    st.just(GOOD_SID),
    st.sampled_from(["backup..2026-01-01", "a\nb", "tab\t", "../../x", "a/b", "", " ", "\x00"]),
    st.text(min_size=1, max_size=40),
    json_values,
)
FIELDS = {
    "sessionId": session_ids,
    "session_id": session_ids,
    "agentId": session_ids,
    "parentAgentId": session_ids,
    "hookEventName": st.one_of(st.sampled_from(EVENT_NAMES), json_values),
    "timestamp": st.one_of(
        json_values, st.sampled_from([10**30, -1, "2026-01-01T00:00:00Z", "ses_x"])
    ),
    "cwd": st.one_of(json_values, st.sampled_from(["/", "/nonexistent", "..", "a\nb"])),
    "source": st.one_of(st.sampled_from(["new", "resume", "startup"]), json_values),
    "initialPrompt": json_values,
    "transcriptPath": st.one_of(json_values, st.just(f"/tmp/{GOOD_SID}/events.jsonl")),
}


@st.composite
def payloads(draw: st.DrawFn) -> bytes:
    obj = draw(st.fixed_dictionaries({}, optional=FIELDS))
    raw = json.dumps(obj).encode()
    how = draw(st.integers(0, 9))
    if how == 0:  # truncated
        return raw[: draw(st.integers(0, len(raw)))]
    if how == 1:  # a number Python's writer never emits
        return raw.replace(b"{", b'{"timestamp": 1e999, ', 1) if raw != b"{}" else b"[NaN]"
    if how == 2:  # deep nesting
        depth = draw(st.integers(100, 100_000))
        return b'{"sessionId": ' + b"[" * depth + b"]" * depth + b"}"
    return raw


stdin_data = st.one_of(
    payloads(), st.binary(max_size=200), json_values.map(lambda v: json.dumps(v).encode())
)


@pytest.fixture
def hook_world(llmem_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """LLMEM_HOME with autostart off (the fuzz must never start sidecars) and one global
    memory, COPILOT_HOME and HOME in tmp."""
    llmem_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    (llmem_home / "config.yaml").write_text(NO_AUTOSTART)
    with MemoryStore(llmem_home / "memory.db") as st_:
        st_.add("preference", MARK)
    copilot = tmp_path / "copilot-home"
    (copilot / "session-state").mkdir(parents=True)
    monkeypatch.setenv("COPILOT_HOME", str(copilot))
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    return llmem_home


def _check_output(stdout: str) -> None:
    if not stdout:
        return
    lines = stdout.splitlines()
    assert len(lines) == 1, stdout
    obj = json.loads(lines[0])
    assert list(obj) == ["additionalContext"] and isinstance(obj["additionalContext"], str)


def _check_home(home: Path) -> None:
    """Every context file is named after a usable session id, and no temp file of an
    atomic write is left behind anywhere in LLMEM_HOME."""
    for dirpath, _dirs, files in os.walk(home):
        for name in files:
            assert not any(c in name for c in "\n\r\t"), name
            assert not name.endswith((".tmp", ".part")) and ".tmp" not in name, name
            if Path(dirpath).name == "context":
                sid = name
                for suffix in (".compact.injected", ".compact.md", ".md"):
                    sid = sid.removesuffix(suffix)
                assert session_id_problem(sid) is None, name


def _call(event: str | None, data: bytes) -> str:
    out = io.StringIO()
    argv = ["copilot"] if event is None else ["copilot", event]
    assert copilot_hook.main(argv, stdin=io.BytesIO(data), stdout=out, deadline_s=5) == 0
    return out.getvalue()


def _good_start() -> str:
    payload = {"sessionId": GOOD_SID, "cwd": "/", "source": "new", "timestamp": 1}
    return _call("sessionStart", json.dumps(payload).encode())


@settings(FUZZ, max_examples=750)
@given(st.one_of(st.none(), st.sampled_from(EVENT_NAMES)), stdin_data)
def test_hook_stdin_fuzz_in_process(hook_world: Path, event: str | None, data: bytes) -> None:
    _check_output(_call(event, data))
    _check_home(hook_world)


def test_good_payload_after_fuzz_still_gets_its_context(hook_world: Path) -> None:
    rng = random.Random(9)
    for _ in range(60):
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(80)))
        _check_output(_call(rng.choice(EVENT_NAMES), junk))
        bad = {"sessionId": rng.choice(["backup..x", "a\nb", "t\tb"]), "timestamp": 10**30}
        _check_output(_call("sessionStart", json.dumps(bad).encode()))
    context = json.loads(_good_start())["additionalContext"]
    assert MARK in context
    assert (hook_world / "context" / f"{GOOD_SID}.md").read_text() == context
    _check_home(hook_world)
    with sqlite3.connect(hook_world / "memory.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


@pytest.mark.parametrize(
    "data",
    [
        b'{"sessionId": "backup..2026-01-01", "cwd": "/"}',
        b'{"sessionId": "a\\nb", "cwd": "/", "timestamp": 1e999}',
        b'{"sessionId": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
        bytes(random.Random(3).randrange(256) for _ in range(500)),
    ],
    ids=["dotdot", "newline-1e999", "deep", "random-bytes"],
)
def test_hook_command_fails_open_on_fuzzed_stdin(hook_world: Path, data: bytes) -> None:
    t0 = time.monotonic()
    proc = subprocess.run(
        [str(HOOK_EXE), "hook", "copilot", "sessionStart"],
        input=data,
        capture_output=True,
        env=dict(os.environ),
        timeout=30,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b""
    assert time.monotonic() - t0 < 5
    assert not (hook_world / "context").exists() or not any(
        "\n" in n or ".." in n for n in os.listdir(hook_world / "context")
    )
    log = (hook_world / "logs" / hook_log.LOG_NAME).read_text()
    assert "sessionStart failed" in log
