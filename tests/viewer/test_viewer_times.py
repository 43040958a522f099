"""The viewer shows times in the browser's local time, to the minute, with "N days ago",
and confidence to two decimals (issue 20): the static report in headless Chromium with
the time zone set to Asia/Kolkata (UTC+05:30, so a UTC clock shows as wrong).
Skipped where Chromium or its driver is missing (tests/viewer/conftest.py)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from support.browser import By, cards, wait
from support.viewer import env_for, seed, write_report


def test_report_shows_local_relative_times_and_short_confidence(
    browser: Any,
    tmp_path: Path,
) -> None:
    home = tmp_path / "llmem"
    ids = seed(home)
    said = (datetime.now(UTC) - timedelta(days=3, hours=1)).replace(microsecond=123456)
    conn = sqlite3.connect(home / "memory.db")
    with conn:
        conn.execute(
            "UPDATE memories SET created_at = ?, updated_at = ?, confidence = ? WHERE id = ?",
            (said.isoformat(), said.isoformat(), 0.8 + 0.05, ids["deploy"]),
        )
    conn.close()
    out = tmp_path / "report.html"
    write_report(env_for(home, tmp_path), out)
    browser.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": "Asia/Kolkata"})
    browser.get(out.as_uri())
    wait(browser, lambda d: ids["deploy"] in cards(d))
    local = said.astimezone(ZoneInfo("Asia/Kolkata")).strftime("%Y-%m-%d %H:%M")
    card = browser.find_element(By.CSS_SELECTOR, f'.memory[data-id="{ids["deploy"]}"]')
    assert f"{local} (3 days ago)" in card.find_element(By.CSS_SELECTOR, ".head").text
    when = card.find_element(By.CSS_SELECTOR, ".when")
    assert when.get_attribute("title") == said.isoformat()  # the exact value on hover
    card.click()
    panel = wait(browser, lambda d: d.find_element(By.ID, "detail-panel"))
    text = panel.text
    assert f"{local} (3 days ago)" in text
    assert "0.85" in text and "0.8500000000000001" not in text
    assert "123456" not in text and "+00:00" not in text
