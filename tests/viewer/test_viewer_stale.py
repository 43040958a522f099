"""The viewer's review of stale memories (docs/viewer.md, "Stale memories"): the Stale tab
in headless Chromium (skipped where it is not installed: the `browser` fixture) with its
three actions (still holds, fix the citation, forget), and the API with bad input; a real
`llmem-hooks ui` subprocess over a store whose project has a real git working tree."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from support.browser import By, cards, click, detached, wait
from support.viewer import ViewerProcess, api, env_for, seed

from llmem_hooks.evidence.cite import Citation, text_hash
from llmem_hooks.store import MemoryStore
from llmem_hooks.store import citations as cited
from llmem_hooks.store import sessions as session_state

GIT = ["git", "-c", "user.email=dev@example.com", "-c", "user.name=dev"]
# what the Makefile says now: the deploy target moved down two lines since it was cited
MAKEFILE = "# build\n\nall:\n\tmake test\n\ndeploy-staging:\n\t./deploy.sh staging\n"


def _repo(path: Path) -> Path:
    path.mkdir()
    (path / "Makefile").write_text(MAKEFILE)
    (path / "deploy.sh").write_text('#!/bin/sh\necho deploying "$1"\n')
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "init"]):
        subprocess.run([*GIT, *args], cwd=path, check=True, capture_output=True, timeout=30)
    return path


def _stale(st: MemoryStore, mid: str, *cites: Citation) -> None:
    cited.add(st.db, mid, list(cites))
    for row in cited.of_memory(st.db, mid):
        cited.record_check(
            st.db, row.id, "stale", reason="the cited text is no longer in the file",
            changed_by="c" * 40,
        )  # fmt: skip


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, dict[str, str], Path]:
    """A seeded home whose project "acme" has a session in a git repository, and three
    stale memories of it (one citing a file that is gone), and one of a project no
    session is known of."""
    home = tmp_path / "llmem"
    ids = seed(home)
    repo = _repo(tmp_path / "acme")
    with MemoryStore(home / "memory.db") as st:
        now = int(time.time() * 1000)
        session_state.save(
            st.db,
            session_state.SessionRecord(
                agent="opencode", session_id="ses_recent", project="acme",
                directory=str(repo), created_ms=now, last_activity_ms=now,
            ),
        )  # fmt: skip
        ids["holds"] = st.add("procedure", "make deploy-staging runs deploy.sh", project="acme")
        ids["moved"] = st.add("fact", "The staging target calls deploy.sh", project="acme")
        ids["wrong"] = st.add("fact", "Staging deploys use Fabric", project="acme")
        ids["elsewhere"] = st.add("fact", "Elsewhere cites code too", project="other")
        h = "a" * 64
        _stale(st, ids["holds"], Citation("Makefile", 6, 7, h, "b" * 40),
               Citation("gone.py", 1, 2, h, "b" * 40))  # fmt: skip
        _stale(st, ids["moved"], Citation("Makefile", 4, 5, h, "b" * 40))
        _stale(st, ids["wrong"], Citation("fabfile.py", 1, 3, h, "b" * 40))
        _stale(st, ids["elsewhere"], Citation("x.py", 1, 1, h, None))
        cited.add(st.db, ids["deploy"], [Citation("Makefile", 1, 1, h, None)])  # unchecked
    return home, ids, repo


def _cites(home: Path, mid: str) -> list[tuple[str, str, str | None]]:
    with MemoryStore(home / "memory.db") as st:
        return [(c.spec(), c.status, c.text_hash) for c in cited.of_memory(st.db, mid)]


def test_the_api_lists_confirms_and_fixes(setup: Any, tmp_path: Path) -> None:
    home, ids, _ = setup
    viewer = ViewerProcess(env_for(home, tmp_path), "--idle-exit", "120")
    try:
        status, out = api(viewer, "/api/overview")
        assert status == 200
        listed = {m["id"]: m for m in out["stale"]}
        assert set(listed) == {ids[k] for k in ("holds", "moved", "wrong", "elsewhere")}
        assert out["totals"]["stale"] == 4
        assert listed[ids["moved"]]["stale_reason"] == (
            "Makefile:4-5 the cited text is no longer in the file (changed in cccccccccc)"
        )
        marked = {m["id"]: m["stale_reason"] for m in out["memories"]}
        assert marked[ids["moved"]] and marked[ids["deploy"]] is None  # unchecked: not stale

        # still holds: its Makefile lines read again from the working tree; gone.py dropped
        status, out = api(viewer, "/api/confirm", {"id": ids["holds"][:10]})
        assert status == 200, out
        assert out["kept"] == ["Makefile:6-7"] and out["dropped"] == ["gone.py:1-2"]
        assert out["provenance"]["citation_state"] == "valid"
        lines = MAKEFILE.splitlines()
        assert _cites(home, ids["holds"]) == [("Makefile:6-7", "valid", text_hash(lines[5:7]))]

        # fix: the citation points where the code is now
        status, out = api(viewer, "/api/fix-citation", {"id": ids["moved"], "spec": "Makefile:6-7"})
        assert status == 200, out
        assert out["citation"] == "Makefile:6-7"
        assert _cites(home, ids["moved"]) == [("Makefile:6-7", "valid", text_hash(lines[5:7]))]

        status, out = api(viewer, "/api/overview")
        assert {m["id"] for m in out["stale"]} == {ids["wrong"], ids["elsewhere"]}
    finally:
        assert viewer.close() == 0


def test_the_api_refuses_bad_input_and_changes_nothing(setup: Any, tmp_path: Path) -> None:
    home, ids, repo = setup
    os.symlink("/etc/hostname", repo / "outside")
    before = {k: _cites(home, ids[k]) for k in ("moved", "wrong", "elsewhere")}
    viewer = ViewerProcess(env_for(home, tmp_path), "--idle-exit", "120")
    try:
        fix, confirm = "/api/fix-citation", "/api/confirm"
        cases: list[tuple[str, dict[str, Any], int, str]] = [
            (confirm, {"id": "0000dead"}, 404, "no memory"),
            (fix, {"id": "0000dead", "spec": "Makefile:1"}, 404, "no memory"),
            (confirm, {}, 400, "give a memory id"),
            (confirm, {"id": 7}, 400, "give a memory id"),
            (fix, {"id": ids["moved"]}, 400, "path:START-END"),
            (fix, {"id": ids["moved"], "spec": ["Makefile:1"]}, 400, "path:START-END"),
            (fix, {"id": ids["moved"], "spec": "Makefile:9-3"}, 400, "START-END"),
            (fix, {"id": ids["moved"], "spec": "Makefile:1-999"}, 400, "at most 400 lines"),
            (fix, {"id": ids["moved"], "spec": "Makefile:80"}, 400, "the file has 7 lines"),
            (fix, {"id": ids["moved"], "spec": "../../etc/passwd:1"}, 400, "relative to the repo"),
            (fix, {"id": ids["moved"], "spec": "/etc/passwd:1"}, 400, "relative to the repo"),
            (fix, {"id": ids["moved"], "spec": "outside:1"}, 400, "no such file"),
            (fix, {"id": ids["moved"], "spec": "Make\nfile:1"}, 400, "not a citation"),
            (fix, {"id": ids["moved"], "spec": "Makefile:1", "replace": "nope.py:1"}, 400,
             "has no citation nope.py:1"),
            (fix, {"id": ids["elsewhere"], "spec": "x.py:1"}, 400, "no session of this"),
            (confirm, {"id": ids["elsewhere"]}, 400, "no session of this"),
            (confirm, {"id": ids["spare"]}, 400, "cites no code"),
            (confirm, {"id": ids["forgotten"]}, 400, "is forgotten"),
        ]  # fmt: skip
        for path, body, code, words in cases:
            status, out = api(viewer, path, body)
            assert status == code and words in out["error"], (body, status, out)
            assert "\n" not in out["error"]
        status, out = api(viewer, confirm, {"id": ids["wrong"]}, **{"X-LLMem-Token": "wrong"})
        assert status == 403
        # a folder that is gone is said as such
        with MemoryStore(home / "memory.db") as st:
            now = int(time.time() * 1000) + 1000
            session_state.save(
                st.db,
                session_state.SessionRecord(
                    agent="opencode", session_id="ses_gone", project="other",
                    directory=str(tmp_path / "gone"), created_ms=now, last_activity_ms=now,
                ),
            )  # fmt: skip
        status, out = api(viewer, confirm, {"id": ids["elsewhere"]})
        assert status == 400 and "is gone" in out["error"]
    finally:
        assert viewer.close() == 0
    assert {k: _cites(home, ids[k]) for k in before} == before


def test_review_in_chromium(browser: Any, setup: Any, tmp_path: Path) -> None:
    home, ids, _ = setup
    viewer = ViewerProcess(env_for(home, tmp_path), "--idle-exit", "120")
    try:
        browser.get(viewer.url)
        # the Memories tab marks a stale memory
        wait(browser, lambda d: ids["moved"] in cards(d))
        card = browser.find_element(By.CSS_SELECTOR, f'#list .memory[data-id="{ids["moved"]}"]')
        assert "stale" in card.text and "Makefile:4-5 the cited text is no longer" in card.text

        browser.find_element(By.ID, "tab-stale").click()
        stale = {ids[k] for k in ("holds", "moved", "wrong", "elsewhere")}
        wait(browser, lambda d: set(cards(d, "#stale-list")) == stale)

        def open_card(mid: str) -> None:
            """Open ``mid`` and wait for its panel: a new one even when ``mid`` is open
            already (the page fetches and renders it again)."""
            before = browser.find_elements(By.ID, "detail-panel")
            click(browser, By.CSS_SELECTOR, f'#stale-list .memory[data-id="{mid}"]')
            wait(
                browser,
                lambda d: (
                    all(detached(p) for p in before)
                    and d.find_element(By.ID, "detail-panel").get_attribute("data-id") == mid
                ),
            )

        # still holds
        open_card(ids["holds"])
        click(browser, By.ID, "confirm")
        wait(browser, lambda d: "confirmed" in d.find_element(By.ID, "note").text)
        assert "dropped gone.py:1-2" in browser.find_element(By.ID, "note").text
        wait(browser, lambda d: ids["holds"] not in cards(d, "#stale-list"))
        assert _cites(home, ids["holds"])[0][:2] == ("Makefile:6-7", "valid")

        # fix the citation
        open_card(ids["moved"])
        click(browser, By.ID, "fix")
        spec = browser.find_element(By.ID, "fix-spec")
        assert spec.get_attribute("value") == "Makefile:4-5"  # the stale one, to edit
        spec.clear()
        spec.send_keys("Makefile:6-7")
        click(browser, By.ID, "fix-save")
        wait(browser, lambda d: "citation fixed" in d.find_element(By.ID, "note").text)
        assert _cites(home, ids["moved"])[0][:2] == ("Makefile:6-7", "valid")
        wait(browser, lambda d: ids["moved"] not in cards(d, "#stale-list"))

        # a bad spec: one line on the page, nothing changed
        open_card(ids["wrong"])
        click(browser, By.ID, "fix")
        spec = browser.find_element(By.ID, "fix-spec")
        spec.clear()
        spec.send_keys("../secrets:1")
        click(browser, By.ID, "fix-save")
        wait(browser, lambda d: "relative to the repository" in d.find_element(By.ID, "note").text)
        assert _cites(home, ids["wrong"])[0][:2] == ("fabfile.py:1-3", "stale")

        # forget
        open_card(ids["wrong"])
        click(browser, By.ID, "forget")
        click(browser, By.ID, "forget-confirm")
        wait(browser, lambda d: "forgotten" in d.find_element(By.ID, "note").text)
        wait(browser, lambda d: set(cards(d, "#stale-list")) == {ids["elsewhere"]})
        with MemoryStore(home / "memory.db") as st:
            assert st.get(ids["wrong"])["valid_until"] is not None
    finally:
        assert viewer.close() == 0
