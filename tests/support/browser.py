"""Headless Chromium (Debian's chromium and chromium-driver, through Selenium) for the
viewer's browser tests: what is missing (the skip reason), the driver, and the few reads
the tests share. Selenium is a test extra: where it is missing, ``By`` is None and the
`browser` fixture (tests/viewer/conftest.py) skips before anything uses it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")

try:
    from selenium import webdriver
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:  # pragma: no cover - selenium is a test extra
    webdriver = None  # type: ignore[assignment]
    By = None  # type: ignore[assignment,misc]

MISSING = (
    "headless Chromium not available (apt-get install chromium chromium-driver; "
    "pip install selenium)"
    if webdriver is None or CHROMIUM is None or DRIVER is None
    else None
)


def start(profile: Path, size: str = "1100,700") -> Any:
    """A headless Chromium with its own profile folder (``--no-sandbox``: CI runs as root)."""
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={size}",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
    ):
        opts.add_argument(arg)
    driver = webdriver.Chrome(options=opts, service=Service(DRIVER))
    driver.set_page_load_timeout(30)
    return driver


def fresh_tab(driver: Any, size: dict[str, int]) -> None:
    """A new blank tab in place of every open one, as a fresh browser would show: no
    cookies, no cache, no emulation of the last test's tab, the window ``size`` it had
    when it started (``driver.get_window_size()`` then)."""
    old = driver.window_handles
    driver.switch_to.new_window("tab")
    for handle in old:
        driver.switch_to.window(handle)
        driver.close()
    driver.switch_to.window(driver.window_handles[0])
    driver.execute_cdp_cmd("Network.clearBrowserCookies", {})
    driver.execute_cdp_cmd("Network.clearBrowserCache", {})
    if driver.get_window_size() != size:
        driver.set_window_size(size["width"], size["height"])


def wait(driver: Any, cond: Any, timeout: float = 10) -> Any:
    """``cond`` polled until true. An element the page re-rendered between finding it and
    reading it (stale) is asked again, as a missing one is: the page is still settling."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    ignored = (NoSuchElementException, StaleElementReferenceException)
    return WebDriverWait(driver, timeout, ignored_exceptions=ignored).until(cond)


def click(driver: Any, by: Any, value: str, timeout: float = 10) -> None:
    """Find the element and click it, again while the page re-renders it (a click on a
    stale element does not happen, so it is safe to repeat)."""

    def clicked(d: Any) -> bool:
        d.find_element(by, value).click()
        return True

    wait(driver, clicked, timeout)


def detached(element: Any) -> bool:
    """Whether the page has replaced ``element`` (re-rendered it) since it was found."""
    try:
        element.is_enabled()  # any read of a replaced element raises
    except StaleElementReferenceException:
        return True
    return False


def cards(driver: Any, where: str = "#list") -> list[str]:
    """The ids of the memory cards listed under ``where``, in order."""
    try:
        return [
            c.get_attribute("data-id")
            for c in driver.find_elements(By.CSS_SELECTOR, f"{where} .memory")
        ]
    except StaleElementReferenceException:  # re-rendered while we read: ask again
        return []


def search(driver: Any, text: str) -> None:
    """Type into the search box and press Search (the page re-renders: find both anew)."""
    box = driver.find_element(By.ID, "q")
    box.clear()
    box.send_keys(text)
    driver.find_element(By.ID, "search-btn").click()
