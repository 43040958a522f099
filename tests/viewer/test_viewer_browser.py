"""The viewer in a real browser: headless Chromium (Debian's chromium and
chromium-driver, through Selenium) loads the live page, searches, forgets a memory,
and loads the static report; a memory holding markup never runs. Skipped, with the
reason, where Chromium or its driver is not installed (.ci/run installs them): the
`browser` fixture of tests/viewer/conftest.py. bench/screenshots.py makes docs/' pictures.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from support.browser import By, cards, search, wait
from support.viewer import XSS, ViewerProcess, api, env_for, seed, write_report


def _no_alert(driver: Any) -> None:
    from selenium.common.exceptions import NoAlertPresentException

    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text  # noqa: B018


def test_load_search_forget_in_chromium(browser: Any, tmp_path: Path) -> None:
    home = tmp_path / "llmem"
    ids = seed(home)
    viewer = ViewerProcess(env_for(home, tmp_path), "--idle-exit", "120")
    try:
        browser.get(viewer.url)
        wait(browser, lambda d: len(cards(d)) >= 7)
        assert browser.title == "llmem-hooks memories"  # the XSS memory did not rename it
        _no_alert(browser)
        texts = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#list .memory .text")]
        assert XSS in texts  # shown as text
        assert browser.find_elements(By.CSS_SELECTOR, "#list img") == []
        side = browser.find_element(By.ID, "side").text
        assert "acme" in side and "decision" in side

        # search: the server's retriever answers
        search(browser, "how do we deploy staging?")
        wait(browser, lambda d: cards(d)[:1] == [ids["deploy"]])
        assert "(fts)" in browser.find_element(By.ID, "note").text

        # provenance of a learned memory, then forget it
        search(browser, "make test-all")
        wait(browser, lambda d: ids["learned"] in cards(d))
        browser.find_element(By.CSS_SELECTOR, f'.memory[data-id="{ids["learned"]}"]').click()
        panel = wait(browser, lambda d: d.find_element(By.ID, "detail-panel"))
        assert "ses_view1" in panel.text and "opencode" in panel.text
        assert "PYTHONPATH" in browser.find_element(By.ID, "episode").text
        shot = tmp_path / "viewer.png"
        assert browser.save_screenshot(str(shot)) and shot.read_bytes()[:4] == b"\x89PNG"
        browser.find_element(By.ID, "forget").click()
        browser.find_element(By.ID, "forget-reason").send_keys("we use tox now")
        browser.find_element(By.ID, "forget-confirm").click()
        wait(browser, lambda d: d.find_element(By.ID, "note").text.startswith("forgotten"))
        assert ids["learned"] not in cards(browser)
        status, out = api(viewer, f"/api/memory?id={ids['learned']}")
        assert status == 200 and out["memory"]["invalidation_reason"] == "we use tox now"
        browser.find_element(By.ID, "tab-forgotten").click()
        listed = [
            e.get_attribute("data-id")
            for e in browser.find_elements(By.CSS_SELECTOR, "#forgotten-list .memory")
        ]
        assert ids["learned"] in listed

        # the dream report shows in its sandboxed frame
        browser.find_element(By.ID, "tab-dream").click()
        frame = browser.find_element(By.ID, "dream")
        browser.switch_to.frame(frame)
        wait(browser, lambda d: "Dream run 7" in d.find_element(By.TAG_NAME, "body").text)
        browser.switch_to.default_content()
    finally:
        assert viewer.close() == 0


def test_static_report_works_without_a_server(browser: Any, tmp_path: Path) -> None:
    home = tmp_path / "llmem"
    ids = seed(home)
    out = tmp_path / "report.html"
    write_report(env_for(home, tmp_path), out)
    browser.get(out.as_uri())
    wait(browser, lambda d: len(cards(d)) >= 7)  # the CSP let the page's own script run
    _no_alert(browser)
    assert browser.title == "llmem-hooks memories (report)"
    search(browser, "deploy staging")
    wait(browser, lambda d: cards(d) == [ids["deploy"]])
    search(browser, "test-all")
    wait(browser, lambda d: ids["learned"] in cards(d))
    browser.find_element(By.CSS_SELECTOR, f'.memory[data-id="{ids["learned"]}"]').click()
    assert "PYTHONPATH" in wait(browser, lambda d: d.find_element(By.ID, "episode")).text
    assert browser.find_elements(By.ID, "forget") == []  # the report changes nothing
    browser.find_element(By.ID, "tab-dream").click()
    browser.switch_to.frame(browser.find_element(By.ID, "dream"))
    wait(browser, lambda d: "Dream run 7" in d.find_element(By.TAG_NAME, "body").text)
    browser.switch_to.default_content()


def test_open_login_code_in_chromium(browser: Any, tmp_path: Path) -> None:
    """``ui --open``: Chromium gets the one-time code (as a real browser would from its
    command line), lands on the clean URL with the session cookie, and the page works;
    the printed URL's token does not stay in the address bar either."""
    import json
    import stat
    import time

    home = tmp_path / "llmem"
    ids = seed(home)
    fake = tmp_path / "fake-browser"
    fake.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        "open(os.environ['FAKE_BROWSER_LOG'], 'a').write(json.dumps(sys.argv) + '\\n')\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    record = tmp_path / "argv.jsonl"
    env = env_for(home, tmp_path)
    env.update(BROWSER=str(fake), FAKE_BROWSER_LOG=str(record))
    viewer = ViewerProcess(env, "--open", "--idle-exit", "120")
    try:
        deadline = time.monotonic() + 60
        while "\n" not in _text(record) and time.monotonic() < deadline:  # a whole line
            time.sleep(0.05)
        url = json.loads(record.read_text().splitlines()[0])[1]
        assert viewer.token not in url
        browser.get(url)
        wait(browser, lambda d: len(cards(d)) >= 7)
        assert browser.current_url == f"{viewer.base}/"
        search(browser, "how do we deploy staging?")
        wait(browser, lambda d: cards(d)[:1] == [ids["deploy"]])
        browser.get(url)  # the code again: refused
        assert "used or has expired" in browser.find_element(By.TAG_NAME, "body").text
        browser.get(viewer.url)  # the printed URL: the page, and the token leaves the bar
        wait(browser, lambda d: len(cards(d)) >= 7)
        assert "token" not in browser.current_url
    finally:
        assert viewer.close() == 0


def _text(path: Path) -> str:
    """The file's text so far ('' before it exists)."""
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""
