"""End-to-end proof of issue 22: memories learned in real sessions cite the code they are
about, the sidecar checks the citations when a session starts, and the next session's
context and recall follow what the check found.

One world: a real git repository, one LLMEM_HOME and one sidecar shared by the real
OpenCode 1.18.33 and Copilot CLI 1.0.102 binaries (the fake provider on 127.0.0.1 makes
their models read the file with their own read tools). OpenCode learns where the retry
limit is (``src/net/retry.py``), Copilot where the ledger's port is (``config/db.py``).
Then five commits, each followed by a session whose start makes the sidecar check, and
the next session, whose context and recall are read off the model requests:

  a. an unrelated change        -> valid
  b. 40 lines inserted above     -> valid, the lines updated
  c. ``git mv`` of both files    -> valid, the path updated
  d. the cited lines changed     -> stale, changed by that commit
  e. the files deleted           -> stale, deleted by that commit

Episodes are on (the default): the exchange a stale memory was learned from says what it
said, and is left out with it (store/citation_review.py).
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from copilot_harness import CopilotEnv, session_context
from oc_harness import OpenCodeEnv, system_texts, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.opencode, pytest.mark.copilot]

WAIT_S = 40
PAD = "".join(f"def helper_{i}():\n    return {i}\n\n" for i in range(6))
RETRY = f"import time\n\n{PAD}MAX_RETRIES = 5\nBACKOFF_SECONDS = 0.5\n\n{PAD}"
DB = f"import os\n\n{PAD}LEDGER_DB_PORT = 5433\nLEDGER_DB_HOST = 'ledger.internal'\n\n{PAD}"
RENAMED = {"src/net/retry.py": "src/net/retrying.py", "config/db.py": "config/database.py"}
RETRY_SAYS = "Remember: the retry limit is set in src/net/retry.py (MAX_RETRIES = 5)."
DB_SAYS = "Remember: the ledger database port is set in config/db.py (LEDGER_DB_PORT = 5433)."


def _git(repo: Path, *args: str) -> str:
    cmd = ["git", "-c", "user.email=dev@example.com", "-c", "user.name=dev", *args]
    return subprocess.run(
        cmd, cwd=repo, check=True, capture_output=True, text=True, timeout=30
    ).stdout.strip()


def _commit(repo: Path, message: str) -> str:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", message)
    return _git(repo, "rev-parse", "HEAD")


def _shown(world: OpenCodeEnv, memory_id: str) -> dict[str, Any]:
    shown: dict[str, Any] = json.loads(world.llmem("show", memory_id, "--json").stdout)
    return shown


def _learned(world: OpenCodeEnv, token: str) -> dict[str, Any] | None:
    for m in world.memories():
        if token in m["content"] and m["type"] != "conversation":
            shown = _shown(world, m["id"])
            if shown.get("citations"):
                return shown
    return None


def _checked(world: OpenCodeEnv, memory_id: str, after: str) -> dict[str, Any] | None:
    """The memory's only citation once a check newer than ``after`` recorded it."""
    (cite,) = _shown(world, memory_id)["citations"]
    return cite if (cite.get("checked_at") or "") > after else None


def _insert_lines(path: Path, count: int) -> None:
    path.write_text("".join(f"# note {i}\n" for i in range(count)) + path.read_text())


def test_citations_follow_the_code_through_five_commits(
    make_opencode_env: Callable[..., OpenCodeEnv],
    make_copilot_env: Callable[..., CopilotEnv],
) -> None:
    oc = make_opencode_env()
    cp = make_copilot_env(base=oc)
    repo = oc.repo
    (repo / "src" / "net").mkdir(parents=True)
    (repo / "config").mkdir()
    (repo / "src" / "net" / "retry.py").write_text(RETRY)
    (repo / "config" / "db.py").write_text(DB)
    learned_at = _commit(repo, "retry and ledger settings")
    oc.opencode("session", "list")  # OpenCode creates its database
    sidecar = cp.sidecar().start()  # its env sees both agents' stores

    # -- learned in real sessions, from what their tools read ---------------------------------
    retry_file = repo / "src" / "net" / "retry.py"
    oc.run(f'USE-TOOL read {{"filePath": "{retry_file}"}}\n{RETRY_SAYS}', split=False)
    retry = wait_until(
        lambda: _learned(oc, "MAX_RETRIES"), WAIT_S, 0.3, f"the retry memory\n{sidecar.log()}"
    )
    db_file = repo / "config" / "db.py"
    cp.prompt(f'USE-TOOL view {{"path": "{db_file}"}}\n{DB_SAYS}')
    ledger = wait_until(
        lambda: _learned(oc, "LEDGER_DB_PORT"), WAIT_S, 0.3, f"the ledger memory\n{sidecar.log()}"
    )
    for memory, path, token in (
        (retry, "src/net/retry.py", "MAX_RETRIES = 5"),
        (ledger, "config/db.py", "LEDGER_DB_PORT = 5433"),
    ):
        (cite,) = memory["citations"]
        assert cite["path"] == path and cite["commit"] == learned_at, cite
        lines = (repo / path).read_text().splitlines()
        cited = lines[cite["line_start"] - 1 : cite["line_end"]]
        assert any(token in line for line in cited), (cite, cited)

    # -- five commits ---------------------------------------------------------------------------
    def unrelated() -> None:
        (repo / "README.md").write_text("# demo repo\n\nNow with a changelog.\n")

    def moved_down() -> None:
        _insert_lines(repo / "src" / "net" / "retry.py", 40)
        _insert_lines(repo / "config" / "db.py", 40)

    def renamed() -> None:
        _git(repo, "mv", "src/net/retry.py", "src/net/retrying.py")
        _git(repo, "mv", "config/db.py", "config/database.py")

    def changed() -> None:
        for path, old, new in (
            ("src/net/retrying.py", "MAX_RETRIES = 5", "MAX_RETRIES = 8"),
            ("config/database.py", "LEDGER_DB_PORT = 5433", "LEDGER_DB_PORT = 6543"),
        ):
            file = repo / path
            file.write_text(file.read_text().replace(old, new))

    def deleted() -> None:
        _git(repo, "rm", "-q", "src/net/retrying.py", "config/database.py")

    steps: list[tuple[str, Callable[[], None], str]] = [
        ("a", unrelated, "valid"),
        ("b", moved_down, "valid"),
        ("c", renamed, "valid"),
        ("d", changed, "stale"),
        ("e", deleted, "stale"),
    ]
    paths = {retry["id"]: "src/net/retry.py", ledger["id"]: "config/db.py"}
    for i, (name, change, want) in enumerate(steps):
        cites = {mid: _shown(oc, mid)["citations"][0] for mid in paths}  # one `show` each
        before = {mid: cite.get("checked_at") or "" for mid, cite in cites.items()}
        lines_before = {mid: cite["line_start"] for mid, cite in cites.items()}
        change()
        commit = _commit(repo, f"step {name}")
        # A session starts: the sidecar checks the project's citations.
        checker = oc if i % 2 == 0 else cp
        if isinstance(checker, CopilotEnv):
            checker.prompt(f"Starting step {name}.")
        else:
            checker.run(f"Starting step {name}.", split=False)
        for mid in paths:
            cite = wait_until(
                lambda mid=mid, after=before[mid]: _checked(oc, mid, after),
                WAIT_S,
                0.3,
                f"step {name}: the check of {mid}\n{sidecar.log()}",
            )
            assert cite["status"] == want, (name, cite)
            if name == "b":
                assert cite["line_start"] == lines_before[mid] + 40, (name, cite)
            if name == "c":
                assert cite["path"] == RENAMED[paths[mid]], (name, cite)
            if name in ("d", "e"):
                assert cite["changed_by"] == commit, (name, cite)
                assert cite["reason"], cite
            else:
                assert cite["changed_by"] in (None, ""), (name, cite)

        # The next session: its context (and recall for a prompt about both) has the
        # memories exactly while they hold.
        question = "What is the retry limit and which port does the ledger database use?"
        reader = cp if i % 2 == 0 else oc
        if isinstance(reader, CopilotEnv):
            run = reader.prompt(question, session_id=str(uuid.uuid4()))
            context = session_context(run.first)
            sent = json.dumps([r["body"] for r in run.requests])
        else:
            sid = reader.run(question, split=False)
            requests = oc.fake.chat_requests(sid)
            context = "\n".join(t for r in requests for t in system_texts(r))
            sent = json.dumps([r["body"] for r in requests])
        for token in ("MAX_RETRIES = 5", "LEDGER_DB_PORT = 5433"):
            if want == "valid":
                assert token in context, (name, token, context[:3000])
            else:
                at = sent.find(token)
                assert at < 0, (name, token, sent[max(0, at - 1500) : at + 200])
