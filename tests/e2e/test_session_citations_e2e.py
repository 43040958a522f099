"""End-to-end: a memory learned in a real agent session cites the lines the agent read
(issue 22, section 1; docs/citations.md "Citations learned from sessions").

In the world's git repository, the agent reads lines 1-4 of ``src/net/retry.py`` with its
own read tool (the fake provider asks for it: OpenCode ``read`` with offset/limit, Copilot
``view`` with view_range); in the next prompt of the same session the user says what to
remember. The sidecar stores the memory with a citation of the ``MAX_RETRIES`` line (line
4): that line's hash and HEAD's commit. A memory about ``BACKOFF`` (line 5, not read) in
another such session cites nothing: the read's range was understood. Real OpenCode
1.18.33 / Copilot CLI 1.0.102 against the fake provider.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from copilot_harness import CopilotEnv
from oc_harness import OpenCodeEnv, SidecarProcess, wait_until

pytestmark = [pytest.mark.e2e]

RETRY = "import time\n\n\nMAX_RETRIES = 5\nBACKOFF = 0.5\n\n\ndef retry(fn):\n    pass\n"
WAIT_S = 30
ABOUT = "the retry limit is set in src/net/retry.py (MAX_RETRIES = 5)"
UNSEEN = "failed calls wait BACKOFF seconds between tries"


def commit_retry(world: OpenCodeEnv | CopilotEnv) -> tuple[Path, str]:
    """src/net/retry.py committed in the world's repository; (its path, HEAD)."""
    path = world.repo / "src" / "net" / "retry.py"
    if not path.exists():
        path.parent.mkdir(parents=True)
        path.write_text(RETRY)
        git = ["git", "-c", "user.email=dev@example.com", "-c", "user.name=dev"]
        for args in (["add", "-A"], ["commit", "-q", "-m", "retry"]):
            subprocess.run([*git, *args], cwd=world.repo, env=world.env, check=True, timeout=30)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"],
        cwd=world.repo,
        env=world.env,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.strip()
    return path, head


def cited(world: OpenCodeEnv | CopilotEnv, token: str) -> dict[str, Any] | None:
    """``show --json`` of the memory holding ``token``, once it is stored."""
    for m in world.memories():
        if token in m["content"] and m["type"] != "conversation":
            shown: dict[str, Any] = json.loads(world.llmem("show", m["id"], "--json").stdout)
            return shown
    return None


def check(shown: dict[str, Any], head: str) -> None:
    assert [
        (c["path"], c["line_start"], c["line_end"], c["text_hash"], c["commit"])
        for c in shown["citations"]
    ] == [
        (
            "src/net/retry.py",
            4,
            4,
            hashlib.sha256(b"MAX_RETRIES = 5").hexdigest(),
            head,
        )
    ]


@pytest.mark.opencode
def test_opencode_read_then_remember_cites_the_line(
    oc_env: OpenCodeEnv, oc_sidecar: SidecarProcess
) -> None:
    path, head = commit_retry(oc_env)
    # Lines 1-4 read: MAX_RETRIES (line 4) was seen, BACKOFF (line 5) was not.
    args = json.dumps({"filePath": str(path), "offset": 1, "limit": 4})
    for words in (ABOUT, UNSEEN):
        sid = oc_env.run(f"USE-TOOL read {args}")
        oc_env.run(f"Remember: {words}", "--session", sid, split=False)
    shown = wait_until(
        lambda: cited(oc_env, "MAX_RETRIES"), WAIT_S, 0.3, f"the memory\n{oc_sidecar.log()}"
    )
    check(shown, head)
    unseen = wait_until(lambda: cited(oc_env, "BACKOFF"), WAIT_S, 0.3, "the BACKOFF memory")
    assert unseen["citations"] == [] and unseen["citation_state"] == "not checkable"


@pytest.mark.copilot
def test_copilot_view_then_remember_cites_the_line(
    cp_env: CopilotEnv, cp_sidecar: SidecarProcess
) -> None:
    path, head = commit_retry(cp_env)
    args = json.dumps({"path": str(path), "view_range": [1, 4]})
    for words in (ABOUT, UNSEEN):
        run = cp_env.prompt(f"USE-TOOL view {args}")
        cp_env.prompt(f"Remember: {words}", resume=run.session_id)
    shown = wait_until(
        lambda: cited(cp_env, "MAX_RETRIES"), WAIT_S, 0.3, f"the memory\n{cp_env.sidecar_log()}"
    )
    check(shown, head)
    unseen = wait_until(lambda: cited(cp_env, "BACKOFF"), WAIT_S, 0.3, "the BACKOFF memory")
    assert unseen["citations"] == [] and unseen["citation_state"] == "not checkable"
