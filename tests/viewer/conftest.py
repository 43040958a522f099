"""The `browser` fixture of the viewer's headless-Chromium tests: one place for the skip
(with the reason, where Chromium, its driver or selenium is missing) and the driver.

One Chromium serves the whole session (starting one costs about half a second a test);
each test gets a fresh tab with no cookies, no cache, the default window size and no
emulation left over (network conditions, timezone: they die with the old tab). A driver
that no longer answers is replaced."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.browser import MISSING, fresh_tab, start


class _Chromium:
    """The session's driver, started on first use and restarted if it broke."""

    def __init__(self, profiles: Path) -> None:
        self.profiles = profiles
        self.driver: Any = None
        self.size: dict[str, int] = {}
        self.starts = 0

    def get(self) -> Any:
        if self.driver is not None:
            try:
                fresh_tab(self.driver, self.size)
                return self.driver
            except Exception:  # a test left it unusable: start another
                self.quit()
        self.starts += 1
        self.driver = start(self.profiles / f"chromium-{self.starts}")
        self.size = self.driver.get_window_size()
        return self.driver

    def quit(self) -> None:
        if self.driver is not None:
            try:
                self.driver.quit()
            finally:
                self.driver = None


@pytest.fixture(scope="session")
def _chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Chromium]:
    if MISSING:
        pytest.skip(MISSING)
    chromium = _Chromium(tmp_path_factory.mktemp("chromium"))
    try:
        yield chromium
    finally:
        chromium.quit()


@pytest.fixture
def browser(_chromium: _Chromium) -> Any:
    return _chromium.get()
