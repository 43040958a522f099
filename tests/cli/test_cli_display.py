"""What the CLI shows a person (issue 20): times in local time without microseconds and
with "N days ago", confidence to two decimals, `stats` figures that add up, a one-line
answer for a too-short id, forgotten memories marked in `list --all`, whole texts with
`search --full`, and why a second `recall` prints nothing. ``--json`` keeps the exact
stored values. The real CLI in a subprocess (TZ set, so local time differs from UTC) on
real SQLite files."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

TZ = "Asia/Kolkata"  # UTC+05:30: a UTC clock or a dropped offset shows


def run(*args: str, home: Path, code: int = 0) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMEM_")}
    env.update(LLMEM_HOME=str(home), TZ=TZ)
    proc = subprocess.run(
        [sys.executable, "-m", "llmem_hooks.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    return proc


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "llmem"


def stored(home: Path, text: str, *extra: str) -> str:
    return run("store", text, *extra, home=home).stdout.strip()


def sql(home: Path, query: str, params: tuple[object, ...]) -> None:
    conn = sqlite3.connect(home / "memory.db")
    with conn:
        conn.execute(query, params)
    conn.close()


def test_show_prints_local_relative_times_and_two_decimal_confidence(home: Path) -> None:
    mid = stored(home, "The ledger database listens on port 5433")
    said = (datetime.now(UTC) - timedelta(days=3, hours=2)).replace(microsecond=654321)
    sql(
        home,
        "UPDATE memories SET created_at = ?, confidence = ? WHERE id = ?",
        (said.isoformat(), 0.8 + 0.05, mid),
    )
    out = run("show", mid[:8], home=home).stdout
    local = said.astimezone(ZoneInfo(TZ)).strftime("%Y-%m-%d %H:%M")
    assert f"created_at:          {local} (3 days ago)" in out
    assert "confidence:          0.85\n" in out
    assert "654321" not in out and "+00:00" not in out and "0.8500000000000001" not in out
    md = run("show", mid[:8], "--markdown", home=home).stdout
    assert f"- **created_at**: {local} (3 days ago)" in md and "- **confidence**: 0.85" in md
    # --json keeps the stored values exactly: machines read it
    data = json.loads(run("show", mid, "--json", home=home).stdout)
    assert data["created_at"] == said.isoformat()
    assert data["confidence"] == 0.8 + 0.05


def test_stats_figures_add_up_when_a_memory_is_forgotten_and_expired(home: Path) -> None:
    ids = [stored(home, f"Fact number {n} about the ledger service") for n in range(4)]
    past = (datetime.now(UTC) - timedelta(days=1)).isoformat(timespec="microseconds")
    run("forget", ids[0], home=home)
    sql(home, "UPDATE memories SET expires_at = ? WHERE id IN (?, ?)", (past, ids[0], ids[1]))
    out = run("stats", home=home).stdout
    assert "memories: 2 active, 1 forgotten, 1 expired, 4 stored;" in out
    s = json.loads(run("stats", "--json", home=home).stdout)
    assert s["active"] + s["invalidated"] + s["expired"] == s["total"] == 4


def test_stats_episode_line_reads_as_exchanges_from_sessions(home: Path) -> None:
    from llmem_hooks.store import MemoryStore

    home.mkdir(mode=0o700)
    st = MemoryStore(home / "memory.db")
    try:
        for n, sid in enumerate(("ses_a", "ses_a", "ses_b")):
            st.add(
                "conversation",
                f"User: question {n} about the ledger\nAssistant: answer {n}",
                source="episode",
                session_id=sid,
                entered_by="opencode",
                dedupe=False,
            )
    finally:
        st.close()
    out = run("stats", home=home).stdout
    assert "episodes: 3 exchanges from 2 sessions," in out  # was "3 of 2 sessions"


def test_show_short_id_says_four_characters(home: Path) -> None:
    stored(home, "The ledger database listens on port 5433")
    proc = run("show", "059", home=home, code=2)
    assert proc.stdout == ""
    assert proc.stderr == "error: id '059' is too short: give at least 4 characters of the id\n"


def test_list_all_marks_forgotten_and_expired(home: Path) -> None:
    gone = stored(home, "CI ran on Jenkins")
    old = stored(home, "The staging certificate expires soon")
    kept = stored(home, "CI runs on GitHub Actions")
    run("forget", gone, home=home)
    past = (datetime.now(UTC) - timedelta(days=1)).isoformat(timespec="microseconds")
    sql(home, "UPDATE memories SET expires_at = ? WHERE id = ?", (past, old))
    lines = {ln[:8]: ln for ln in run("list", "--all", home=home).stdout.splitlines()}
    assert "[forgotten] CI ran on Jenkins" in lines[gone[:8]]
    assert "[expired] The staging certificate" in lines[old[:8]]
    assert "[" not in lines[kept[:8]]
    md = run("list", "--all", "--markdown", home=home).stdout
    assert f"`{gone[:8]}`: [forgotten] CI ran on Jenkins" in md


def test_search_full_prints_the_whole_text(home: Path) -> None:
    body = "\n".join(
        [f"Line {n}: the billing worker retries failed invoices nightly." for n in range(12)]
        + ["The ledger database listens on port 5433 in staging."]
    )
    mid = stored(home, body)
    plain = run("search", "ledger port", home=home).stdout
    full = run("search", "ledger port", "--full", home=home).stdout
    assert plain.count("\n") == 1  # one line per result
    assert full.splitlines()[0].startswith(mid[:8])
    assert "    Line 0: the billing worker" in full
    assert "    The ledger database listens on port 5433 in staging." in full
    assert full != plain


def test_second_identical_recall_says_why_it_prints_nothing(home: Path) -> None:
    stored(home, "The ledger database listens on port 5433 in staging")
    db = str(home / "memory.db")
    ask = ("--db", db, "recall", "which port does the ledger database use", "--session", "s1")
    first = run(*ask, home=home)
    assert "5433" in first.stdout and first.stderr == ""
    second = run(*ask, home=home)
    assert second.stdout == ""
    assert second.stderr == (
        "recall: nothing to add: what matches was already given in this session\n"
    )
    other = run("--db", db, "recall", "what colour is the office cat", "--session", "s1", home=home)
    assert other.stdout == "" and "already given" not in other.stderr
    assert other.stderr.startswith("recall: nothing to add: ")
