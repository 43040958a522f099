"""Nothing a person was in the middle of follows them to another view (issue 20 §4): in
headless Chromium, switching tab, project or type closes an open memory with its edit or
forget panel (and the text typed into it, never sent) and clears the status note, so
neither shows next to a list it does not belong to. Skipped where Chromium or its driver
is missing (tests/viewer/conftest.py)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from support.browser import By, cards, search, wait
from support.viewer import ViewerProcess, api, env_for, seed


def _open(driver: Any, memory_id: str) -> None:
    driver.find_element(By.CSS_SELECTOR, f'#list .memory[data-id="{memory_id}"]').click()
    wait(
        driver, lambda d: d.find_elements(By.CSS_SELECTOR, f'#detail-panel[data-id="{memory_id}"]')
    )


def _left_behind(driver: Any) -> list[str]:
    """What is still open: the detail panel, its edit or forget fields, a selected card,
    a status note (read in one go: the page may re-render between two reads)."""
    return driver.execute_script(
        "const found = ['#detail-panel', '#edit-content', '#forget-reason', '.card.sel']"
        ".filter((s) => document.querySelector(s));"
        " const n = document.getElementById('note');"
        " if (n && n.textContent) found.push('note: ' + n.textContent);"
        " return found;"
    )


def _side(driver: Any, text: str) -> Any:
    """The sidebar row whose first label is ``text``."""
    for li in driver.find_elements(By.CSS_SELECTOR, "#projects li"):
        if li.find_element(By.CSS_SELECTOR, "span").text == text:
            return li
    raise AssertionError(f"no sidebar row {text!r}")


def test_switching_view_closes_the_open_panel_and_clears_the_note(
    browser: Any, tmp_path: Path
) -> None:
    home = tmp_path / "llmem"
    ids = seed(home)
    viewer = ViewerProcess(env_for(home, tmp_path), "--idle-exit", "120")
    try:
        browser.get(viewer.url)
        wait(browser, lambda d: ids["deploy"] in cards(d))

        # an edit in progress, then another tab: the panel and the draft do not follow
        _open(browser, ids["deploy"])
        browser.find_element(By.ID, "edit").click()
        browser.find_element(By.ID, "edit-content").send_keys(" UNSENT DRAFT")
        browser.find_element(By.ID, "tab-forgotten").click()
        wait(browser, lambda d: d.find_elements(By.ID, "forgotten-list"))
        assert _left_behind(browser) == []
        browser.find_element(By.ID, "tab-memories").click()
        wait(browser, lambda d: ids["deploy"] in cards(d))
        assert _left_behind(browser) == []
        assert "UNSENT DRAFT" not in browser.find_element(By.TAG_NAME, "body").text

        # an edit in progress, then another project in the sidebar
        _open(browser, ids["deploy"])
        browser.find_element(By.ID, "edit").click()
        browser.find_element(By.ID, "edit-content").send_keys(" UNSENT DRAFT")
        _side(browser, "(global)").click()
        wait(browser, lambda d: ids["deploy"] not in cards(d))
        assert _left_behind(browser) == []

        # a forget reason typed but not sent, then a type in the sidebar
        _open(browser, ids["spare"])
        browser.find_element(By.ID, "forget").click()
        browser.find_element(By.ID, "forget-reason").send_keys("not sent")
        _side(browser, "fact").click()
        wait(browser, lambda d: ids["spare"] not in cards(d))
        assert _left_behind(browser) == []

        # the status note of a change stays with the view it was made in
        _side(browser, "all projects").click()
        _open(browser, ids["filler0"])
        browser.find_element(By.ID, "forget").click()
        browser.find_element(By.ID, "forget-confirm").click()
        wait(browser, lambda d: d.find_element(By.ID, "note").text.startswith("forgotten"))
        browser.find_element(By.ID, "tab-forgotten").click()
        wait(browser, lambda d: ids["filler0"] in cards(d, "#forgotten-list"))
        assert _left_behind(browser) == []

        # nothing was saved by leaving
        status, out = api(viewer, f"/api/memory?id={ids['deploy']}")
        assert status == 200 and "UNSENT" not in out["memory"]["content"]
        status, out = api(viewer, f"/api/memory?id={ids['spare']}")
        assert status == 200 and out["memory"]["valid_until"] is None
    finally:
        assert viewer.close() == 0


def _answered(driver: Any, path: str) -> bool:
    return driver.execute_script(
        "return performance.getEntriesByType('resource')"
        ".some((e) => e.name.includes(arguments[0]) && e.responseEnd > 0)",
        path,
    )


def _settle(driver: Any, sign: Any) -> None:
    """The answer is in: give its handler the time it needs to (wrongly) show ``sign``."""
    from selenium.common.exceptions import TimeoutException

    with contextlib.suppress(TimeoutException):
        wait(driver, sign, timeout=3)


def test_an_answer_arriving_after_a_switch_opens_nothing(browser: Any, tmp_path: Path) -> None:
    """A memory clicked, or a search made, just before switching tab: the answer (slowed
    down by Chromium's network emulation) comes back in the new view and must show
    nothing there."""
    home = tmp_path / "llmem"
    ids = seed(home)
    viewer = ViewerProcess(env_for(home, tmp_path), "--idle-exit", "120")
    try:
        browser.get(viewer.url)
        wait(browser, lambda d: ids["deploy"] in cards(d))
        browser.execute_cdp_cmd("Network.enable", {})
        browser.execute_cdp_cmd(
            "Network.emulateNetworkConditions",
            {"offline": False, "latency": 800, "downloadThroughput": -1, "uploadThroughput": -1},
        )
        browser.find_element(By.CSS_SELECTOR, f'#list .memory[data-id="{ids["deploy"]}"]').click()
        browser.find_element(By.ID, "tab-forgotten").click()
        wait(browser, lambda d: _answered(d, "/api/memory"))
        _settle(browser, lambda d: d.find_elements(By.ID, "detail-panel"))
        assert _left_behind(browser) == []

        # a search of the memories, then the Conversations tab before its hits come back
        browser.find_element(By.ID, "tab-memories").click()
        search(browser, "deploy staging")
        browser.find_element(By.ID, "tab-conversations").click()
        wait(browser, lambda d: _answered(d, "/api/search"))
        _settle(browser, lambda d: "found" in d.find_element(By.ID, "note").text)
        assert _left_behind(browser) == []
        assert cards(browser) == [ids["episode"]]  # the tab's own list, not the hits
    finally:
        assert viewer.close() == 0
