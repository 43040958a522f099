"""The `browser` fixture of the viewer's headless-Chromium tests: one place for the skip
(with the reason, where Chromium, its driver or selenium is missing) and the driver."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.browser import MISSING, start


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    if MISSING:
        pytest.skip(MISSING)
    driver = start(tmp_path / "chromium")
    try:
        yield driver
    finally:
        driver.quit()
