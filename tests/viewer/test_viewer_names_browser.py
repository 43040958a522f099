"""Project names in the viewer, in headless Chromium (issue 20 §2): the sidebar and the
cards show the name a project is known by, never its root-commit hash, and a long name
ends in an ellipsis instead of running into its count. Skipped where Chromium or its
driver is not installed (the `browser` fixture of tests/viewer/conftest.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.browser import By, wait
from support.viewer import ViewerProcess, env_for, write_report

from llmem_hooks.store import MemoryStore, projects

API = "4f0c2b6e9d1a3c5e7f9b0d2a4c6e8f0a1b3d5f7a"
LONG = "f" * 40
LONG_NAME = "an-organisation-with-a-long-name/a-repository-whose-name-goes-on-and-on"


def seed_named(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    with MemoryStore(home / "memory.db") as st:
        projects.set_name(st.db, API, "acme/api")
        projects.set_name(st.db, LONG, LONG_NAME)
        st.add("decision", "We deploy staging with make ship", project=API)
        for n in range(3):
            st.add("fact", f"Long-named project fact number {n}", project=LONG)
        st.add("preference", "Prefer ripgrep for searching code")


def _check_page(driver: Any) -> None:
    wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#list .memory")) >= 5)
    side = driver.find_element(By.ID, "side")
    assert "acme/api" in side.text and API not in side.text and LONG not in side.text
    heads = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#list .memory .head")]
    assert any("acme/api" in h for h in heads) and not any(API in h for h in heads)
    row = driver.find_element(By.CSS_SELECTOR, f'#projects li[data-project="{LONG_NAME}"]')
    name = row.find_element(By.CSS_SELECTOR, ".name")
    count = row.find_element(By.CSS_SELECTOR, ".count")
    assert count.text == "3"
    box = driver.execute_script(
        "const n = arguments[0], c = arguments[1], a = n.getBoundingClientRect(),"
        " b = c.getBoundingClientRect();"
        " return {nameRight: a.right, countLeft: b.left, clipped: n.scrollWidth > n.clientWidth,"
        " overflow: getComputedStyle(n).textOverflow, title: n.title};",
        name,
        count,
    )
    assert box["clipped"] and box["overflow"] == "ellipsis"
    assert box["nameRight"] <= box["countLeft"]  # the name stops before its count
    assert LONG_NAME in box["title"]  # the whole name (and key) on hover


def test_sidebar_and_cards_show_names_in_chromium(browser: Any, tmp_path: Path) -> None:
    home = tmp_path / "llmem"
    seed_named(home)
    viewer = ViewerProcess(env_for(home, tmp_path), "--idle-exit", "120")
    try:
        browser.get(viewer.url)
        _check_page(browser)
    finally:
        assert viewer.close() == 0


def test_static_report_shows_names_in_chromium(browser: Any, tmp_path: Path) -> None:
    home = tmp_path / "llmem"
    seed_named(home)
    out = tmp_path / "report.html"
    write_report(env_for(home, tmp_path), out)
    browser.get(out.as_uri())
    _check_page(browser)
