"""Durable memories in front, episodes apart (issue 20 §1): the viewer's default list
holds the durable memories and the newest episodes (``conversation`` memories, what was
said) sit in their own list, the *Conversations* tab; a search covers the kind of the tab
it is made in; the counts add up. Through the real `llmem-hooks ui` and its API, then in
headless Chromium (skipped where it is missing: tests/viewer/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.browser import By, cards, search, wait
from support.viewer import ViewerProcess, api, env_for, write_report

from llmem_hooks.store import MemoryStore, projects

API_KEY = "4f0c2b6e9d1a3c5e7f9b0d2a4c6e8f0a1b3d5f7a"
EPISODES = 6  # newer than every durable memory, more than the list limit
LIST_LIMIT = 4


def seed_chatty(home: Path) -> dict[str, list[str]]:
    """Three durable memories, then six episodes (the newest rows in the store), one of
    them global; a forgotten episode that counts nowhere live."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    (home / "config.yaml").write_text(f"viewer:\n  list_limit: {LIST_LIMIT}\n")
    ids: dict[str, list[str]] = {"durable": [], "episodes": []}
    with MemoryStore(home / "memory.db") as st:
        projects.set_name(st.db, API_KEY, "acme/api")
        for kind, text in (
            ("decision", "We deploy staging with make ship-staging"),
            ("procedure", "Run the api tests with make test-api"),
            ("fact", "The ledger database listens on port 5433"),
        ):
            ids["durable"].append(st.add(kind, text, project=API_KEY))
        for n in range(EPISODES):
            ids["episodes"].append(
                st.add(
                    "conversation",
                    f"user: how do we deploy staging, take {n}?\n"
                    "assistant: make ship-staging, after the api tests pass",
                    source="episode",
                    project=None if n == 0 else API_KEY,
                    session_id=f"ses_chat{n}",
                    source_message_ids=[f"msg_{n}"],
                    entered_by="opencode",
                )
            )
        gone = st.add("conversation", "user: hello\nassistant: hi", source="episode")
        st.invalidate(gone, "throwaway")
    return ids


@pytest.fixture
def chatty(tmp_path: Path) -> Iterator[tuple[ViewerProcess, dict[str, list[str]]]]:
    home = tmp_path / "llmem"
    ids = seed_chatty(home)
    viewer = ViewerProcess(env_for(home, tmp_path), "--idle-exit", "120")
    try:
        yield viewer, ids
    finally:
        assert viewer.close() == 0


def test_overview_lists_durable_memories_and_episodes_apart(chatty) -> None:
    viewer, ids = chatty
    status, ov = api(viewer, "/api/overview")
    assert status == 200
    # the list limit is not spent on the (newer) episodes
    assert sorted(m["id"] for m in ov["memories"]) == sorted(ids["durable"])
    assert {m["type"] for m in ov["conversations"]} == {"conversation"}
    assert [m["id"] for m in ov["conversations"]] == ids["episodes"][::-1][:LIST_LIMIT]
    t = ov["totals"]
    assert t["conversations"] == EPISODES and t["active"] == 3 + EPISODES
    assert t["listed"] == 3 and t["conversations_listed"] == LIST_LIMIT
    assert sum(c["count"] for c in ov["counts"]) == t["active"]
    assert sum(c["count"] for c in ov["counts"] if c["type"] == "conversation") == EPISODES
    assert ov["episode_type"] == "conversation"


def test_search_covers_the_kind_of_its_tab(chatty) -> None:
    viewer, ids = chatty
    q = "/api/search?q=deploy+staging"
    status, out = api(viewer, q + "&kind=memories")
    assert status == 200 and [h["id"] for h in out["hits"]][:1] == [ids["durable"][0]]
    assert {h["type"] for h in out["hits"]} <= {"decision", "procedure", "fact"}
    status, out = api(viewer, q + "&kind=conversations")
    assert status == 200 and {h["id"] for h in out["hits"]} == set(ids["episodes"])
    status, out = api(viewer, q + "&kind=memories&type=conversation")  # not this tab's
    assert status == 200 and out["hits"] == []
    status, out = api(viewer, q + "&kind=conversations&type=decision")
    assert status == 200 and out["hits"] == []
    status, out = api(viewer, q)  # no kind (as before): both
    assert status == 200 and {h["type"] for h in out["hits"]} >= {"decision", "conversation"}
    status, out = api(viewer, q + "&kind=episodes")
    assert status == 400 and "unknown kind" in out["error"]
    status, out = api(viewer, q + "&kind=" + "x" * 4000)  # one short line, not an echo
    assert status == 400 and len(out["error"]) < 80


def _counts(driver: Any) -> list[tuple[str, int, bool]]:
    """The sidebar's rows: (label, count, is a type row)."""
    rows = []
    for li in driver.find_elements(By.CSS_SELECTOR, "#projects li"):
        label, count = (s.text for s in li.find_elements(By.CSS_SELECTOR, ":scope > span"))
        rows.append((label, int(count), "type" in (li.get_attribute("class") or "")))
    return rows


def _add_up(rows: list[tuple[str, int, bool]]) -> None:
    """'all projects' is the sum of the projects, each project the sum of its types."""
    assert rows[0][0] == "all projects"
    projects_ = [r for r in rows[1:] if not r[2]]
    assert rows[0][1] == sum(r[1] for r in projects_)
    at = 1
    while at < len(rows):
        label, total, _ = rows[at]
        at += 1
        types = []
        while at < len(rows) and rows[at][2]:
            types.append(rows[at][1])
            at += 1
        assert not types or sum(types) == total, label


def test_default_list_holds_memories_and_conversations_have_a_tab_in_chromium(
    browser: Any, chatty
) -> None:
    viewer, ids = chatty
    browser.get(viewer.url)
    wait(browser, lambda d: len(cards(d)) == 3)
    assert sorted(cards(browser)) == sorted(ids["durable"])  # no episode among them
    rows = _counts(browser)
    _add_up(rows)
    assert rows[0] == ("all projects", 3, False)
    assert "conversation" not in [r[0] for r in rows]
    totals = browser.find_element(By.ID, "totals").text
    assert "9 live (3 memories, 6 conversation episodes)" in totals

    # a search in the memories tab finds no episode, though all six say "deploy staging"
    search(browser, "deploy staging")
    wait(browser, lambda d: cards(d)[:1] == [ids["durable"][0]])
    assert not set(cards(browser)) & set(ids["episodes"])

    # the Conversations tab: the newest episodes, their own counts
    browser.find_element(By.ID, "tab-conversations").click()
    wait(browser, lambda d: len(cards(d)) == LIST_LIMIT)
    assert cards(browser) == ids["episodes"][::-1][:LIST_LIMIT]
    assert browser.find_element(By.ID, "q").get_attribute("value") == ""  # the search stayed
    rows = _counts(browser)
    _add_up(rows)
    assert rows[0] == ("all projects", EPISODES, False)
    assert ("acme/api", EPISODES - 1, False) in rows and ("(global)", 1, False) in rows
    assert not any(r[2] for r in rows)  # one type: no type rows
    search(browser, "deploy staging")
    wait(browser, lambda d: len(cards(d)) == EPISODES)
    assert set(cards(browser)) == set(ids["episodes"])
    browser.find_element(By.CSS_SELECTOR, '#projects li[data-project="(global)"]').click()
    wait(browser, lambda d: cards(d) == [ids["episodes"][0]])

    # back to the memories: durable ones only again
    browser.find_element(By.ID, "tab-memories").click()
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#list p.note"))
    browser.find_element(By.CSS_SELECTOR, "#projects li").click()  # all projects
    wait(browser, lambda d: sorted(cards(d)) == sorted(ids["durable"]))


def test_static_report_keeps_conversations_apart_in_chromium(browser: Any, tmp_path: Path) -> None:
    home = tmp_path / "llmem"
    ids = seed_chatty(home)
    out = tmp_path / "report.html"
    write_report(env_for(home, tmp_path), out)
    browser.get(out.as_uri())
    wait(browser, lambda d: len(cards(d)) == 3)
    assert sorted(cards(browser)) == sorted(ids["durable"])
    _add_up(_counts(browser))
    browser.find_element(By.ID, "tab-conversations").click()
    wait(browser, lambda d: cards(d) == ids["episodes"][::-1][:LIST_LIMIT])
    _add_up(_counts(browser))
    newest = ids["episodes"][-1]
    browser.find_element(By.CSS_SELECTOR, f'.memory[data-id="{newest}"]').click()
    panel = wait(browser, lambda d: d.find_element(By.ID, "detail-panel"))
    assert f"ses_chat{EPISODES - 1}" in panel.text  # its provenance is in the file too
