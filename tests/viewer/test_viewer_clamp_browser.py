"""Long cards are clamped (issue 20 §4): in headless Chromium, a memory longer than a few
lines shows its first lines and a "more" control that opens it ("less" closes it again,
and neither opens the memory's panel); a short card has no control. The live page and the
static report alike. Skipped where Chromium or its driver is missing
(tests/viewer/conftest.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.browser import By, cards, wait
from support.viewer import ViewerProcess, env_for, write_report

from llmem_hooks.store import MemoryStore

LONG = "\n".join(
    f"Step {n}: run make release-{n} and check the dashboard before going on" for n in range(12)
)
WIDE = "The release checklist, in one paragraph: " + "tag, build, sign, upload, verify; " * 40


def seed_long(home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    with MemoryStore(home / "memory.db") as st:
        return {
            "long": st.add("procedure", LONG, project="acme"),
            "wide": st.add("procedure", WIDE, project="acme"),
            "short": st.add("decision", "We deploy staging with make ship", project="acme"),
        }


def _box(driver: Any, memory_id: str) -> dict[str, Any]:
    card = driver.find_element(By.CSS_SELECTOR, f'#list .memory[data-id="{memory_id}"]')
    return driver.execute_script(
        "const c = arguments[0], t = c.querySelector('.text'), b = c.querySelector('button.more');"
        " return {clipped: t.scrollHeight > t.clientHeight + 1, height: t.clientHeight,"
        " lines: t.clientHeight / parseFloat(getComputedStyle(t).lineHeight),"
        " button: b ? b.textContent : null, faded: getComputedStyle(t).maskImage !== 'none'};",
        card,
    )


def _check(driver: Any, ids: dict[str, str]) -> None:
    wait(driver, lambda d: len(cards(d)) == 3)
    short = _box(driver, ids["short"])
    assert short["button"] is None and not short["clipped"] and not short["faded"]
    for key in ("long", "wide"):
        box = _box(driver, ids[key])
        assert box["clipped"] and box["faded"] and box["button"] == "more", key
        assert 2 <= box["lines"] <= 6, box  # a few lines, not the whole memory
        more = driver.find_element(By.CSS_SELECTOR, f'.memory[data-id="{ids[key]}"] .more')
        more.click()
        opened = _box(driver, ids[key])
        assert not opened["clipped"] and not opened["faded"] and opened["button"] == "less"
        assert opened["height"] > box["height"] * 2
        assert driver.find_elements(By.ID, "detail-panel") == []  # "more" opens no panel
        driver.find_element(By.CSS_SELECTOR, f'.memory[data-id="{ids[key]}"] .more').click()
        again = _box(driver, ids[key])
        assert again["clipped"] and again["button"] == "more"
    # the whole text is there to read (and to copy), only clipped
    text = driver.find_element(By.CSS_SELECTOR, f'.memory[data-id="{ids["long"]}"] .text')
    assert text.get_attribute("textContent") == LONG


def test_long_cards_are_clamped_with_more_in_chromium(browser: Any, tmp_path: Path) -> None:
    home = tmp_path / "llmem"
    ids = seed_long(home)
    viewer = ViewerProcess(env_for(home, tmp_path), "--idle-exit", "120")
    try:
        browser.get(viewer.url)
        _check(browser, ids)
    finally:
        assert viewer.close() == 0


def test_static_report_clamps_long_cards_in_chromium(browser: Any, tmp_path: Path) -> None:
    home = tmp_path / "llmem"
    ids = seed_long(home)
    out = tmp_path / "report.html"
    write_report(env_for(home, tmp_path), out)
    browser.get(out.as_uri())
    _check(browser, ids)
