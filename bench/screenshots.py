"""Take the viewer's pictures in docs/ from a demo store, in headless Chromium.

Usage: python bench/screenshots.py [--out docs]

A realistic store (projects known as acme/api, acme/web and dotfiles; durable memories,
one long procedure, conversation episodes newer than all of them, a session that taught
a memory) is written to a temporary LLMEM_HOME; the real `llmem-hooks ui` serves it, and
Chromium (the driver of the browser tests: tests/support/browser.py) saves:

- viewer.png: the default list (durable memories in front, the long card clamped with
  "more") and a learned memory's provenance with the episode it came from;
- viewer-conversations.png: the Conversations tab (the episodes, counted apart).

Each picture is a PNG under 200 KB (checked). Nothing outside the temporary folder and
``--out`` is touched; the server binds 127.0.0.1 and is stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.browser import MISSING, By, cards, start, wait  # noqa: E402

from llmem_hooks.store import MemoryStore, projects  # noqa: E402
from llmem_hooks.store import sessions as session_state  # noqa: E402

MAX_BYTES = 200 * 1024
API = "4f0c2b6e9d1a3c5e7f9b0d2a4c6e8f0a1b3d5f7a"  # root-commit hashes: the projects' keys
WEB = "9a8b7c6d5e4f30211fedcba98765432100abcdef"
DOTFILES = "0c1d2e3f405162738495a6b7c8d9eaf00112233f"
RELEASE = (
    "Cut a release of the api:\n"
    "1. make check (lint, types, the whole test suite)\n"
    "2. bump the version in pyproject.toml and write the changelog entry\n"
    "3. git tag -s vX.Y.Z and push the tag; CI builds and signs the image\n"
    "4. make deploy-staging, watch the error rate for 15 minutes\n"
    "5. make deploy-prod with the same image digest\n"
    "6. announce in #releases with the changelog link"
)
DURABLE = [  # (type, text, project, tags, entered by, days ago)
    (
        "decision",
        "We deploy staging with make deploy-staging; prod only from a signed tag",
        API,
        "deploy",
        "user",
        0.2,
    ),
    ("procedure", RELEASE, API, "release", "user", 0.4),
    (
        "fact",
        "The ledger database listens on port 5433 (the notifications one on 5434)",
        API,
        "",
        "opencode",
        1.2,
    ),
    ("preference", "Prefer ripgrep over grep for searching code", None, "", "user", 2.5),
    (
        "decision",
        "The web app talks to the api through /v2 only; /v1 is frozen",
        WEB,
        "api",
        "copilot",
        3.1,
    ),
    (
        "project_state",
        "Migrating the web app from webpack to Vite; the admin pages remain",
        WEB,
        "",
        "copilot",
        4.0,
    ),
    (
        "fact",
        "zsh is the login shell; aliases live in ~/.config/zsh/aliases.zsh",
        DOTFILES,
        "",
        "user",
        6.0,
    ),
]
LEARNED = ("procedure", "Run the api tests with make test-all (it sets PYTHONPATH)")
EPISODES = [  # (project, agent, user turn, assistant turn, days ago)
    (
        API,
        "opencode",
        "how do we run the tests?",
        "Use make test-all: it sets PYTHONPATH and starts the test database.",
        0.1,
    ),
    (
        WEB,
        "copilot",
        "why does the admin page still load webpack?",
        "The admin pages are not migrated to Vite yet; see the migration notes.",
        0.15,
    ),
    (
        API,
        "opencode",
        "which port does the ledger database use?",
        "5433; the notifications database is on 5434.",
        1.2,
    ),
    (
        DOTFILES,
        "copilot",
        "where do my zsh aliases live?",
        "In ~/.config/zsh/aliases.zsh, sourced from .zshrc.",
        6.0,
    ),
]


def demo_store(home: Path) -> str:
    """Fill ``home``/memory.db; returns the id of the learned memory (its provenance is
    opened in the first picture)."""
    home.mkdir(parents=True, mode=0o700)
    now = datetime.now(UTC)
    at = lambda days: (now - timedelta(days=days)).isoformat()  # noqa: E731
    with MemoryStore(home / "memory.db") as st:
        for key, name in ((API, "acme/api"), (WEB, "acme/web"), (DOTFILES, "dotfiles")):
            projects.set_name(st.db, key, name)
        for kind, text, project, tags, by, days in DURABLE:
            st.add(
                kind, text, project=project, tags=tags or None, entered_by=by, created_at=at(days)
            )
        learned = ""
        for n, (project, agent, user, reply, days) in enumerate(EPISODES):
            sid = f"ses_demo{n}"
            st.add(
                "conversation",
                f"user: {user}\nassistant: {reply}",
                source="episode",
                project=project,
                session_id=sid,
                source_message_ids=[f"msg_{n}a", f"msg_{n}b"],
                entered_by=agent,
                created_at=at(days),
            )
            session_state.save(
                st.db,
                session_state.SessionRecord(
                    agent=agent, session_id=sid, project=project, title=user
                ),
            )
            if n == 0:
                learned = st.add(
                    LEARNED[0],
                    LEARNED[1],
                    source="extract",
                    project=project,
                    session_id=sid,
                    source_message_ids=[f"msg_{n}b"],
                    entered_by=agent,
                    created_at=at(days - 0.01),
                )
        old = st.add("fact", "CI runs on Jenkins", project=API, created_at=at(30))
        st.invalidate(old, "we moved to GitHub Actions")
        st.add_to_inbox("Maybe pin the sqlite version in CI", source="note", attention_score=0.7)
    return learned


def serve(env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmem_hooks.cli", "ui", "--idle-exit", "10"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()))  # type: ignore[union-attr]
    reader.start()
    reader.join(30)
    if not line or "http://" not in line[0]:
        proc.kill()
        raise SystemExit(f"the viewer did not start: {line!r}")
    return proc, line[0].split(": ", 1)[1].strip()


def shoot(driver: object, path: Path) -> int:
    driver.save_screenshot(str(path))  # type: ignore[attr-defined]
    size = path.stat().st_size
    if size >= MAX_BYTES:
        raise SystemExit(f"{path} is {size} bytes (at most {MAX_BYTES})")
    return size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    args = parser.parse_args()
    if MISSING:
        raise SystemExit(MISSING)
    work = Path(tempfile.mkdtemp(prefix="llmem-demo-"))
    try:
        home = work / ".config" / "llmem"
        learned = demo_store(home)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LLMEM_", "XDG_"))}
        env.update(LLMEM_HOME=str(home), HOME=str(work), TZ="UTC")
        proc, url = serve(env)
        driver = start(work / "chromium", size="1200,860")
        try:
            driver.get(url)
            wait(driver, lambda d: learned in cards(d))
            wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#list .more"))
            driver.find_element(By.CSS_SELECTOR, f'.memory[data-id="{learned}"]').click()
            wait(driver, lambda d: d.find_elements(By.ID, "episode"))
            print("viewer.png", shoot(driver, args.out / "viewer.png"), "bytes")
            driver.find_element(By.ID, "tab-conversations").click()
            wait(driver, lambda d: len(cards(d)) == len(EPISODES))
            print(
                "viewer-conversations.png",
                shoot(driver, args.out / "viewer-conversations.png"),
                "bytes",
            )
        finally:
            driver.quit()
            proc.terminate()
            proc.wait(10)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
