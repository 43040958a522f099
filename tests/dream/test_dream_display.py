"""The dream diary and report as a person reads them (issue 20): confidence to two
decimals (0.85, not 0.8500000000000001), times in local time to the minute (no
microseconds, no offset; no "days ago" in a file kept for later). A real store and a
real dream run."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from llmem_hooks import Dreamer, MemoryStore
from llmem_hooks.config import DEFAULT_CONFIG


@pytest.fixture
def kolkata() -> Iterator[None]:
    """The process's local time zone is UTC+05:30 (a UTC clock shows), then as it was."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Kolkata"
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = before
        time.tzset()


def test_diary_and_report_show_short_confidence_and_local_times(
    store: MemoryStore, llmem_home: Path, kolkata: None
) -> None:
    old = (datetime.now(UTC) - timedelta(days=90)).isoformat()
    memory = {"id": "unused-1", "type": "fact", "content": "Deploys go through staging first.",
              "project": "acme/api", "created_at": old, "confidence": 0.8 + 0.05}  # fmt: skip
    assert store.import_memories([memory]) == 1
    cfg = {k: dict(v) for k, v in DEFAULT_CONFIG.items()}
    run = Dreamer(store, cfg).run(apply=True)
    assert store.get("unused-1")["confidence"] < 0.85  # it decayed
    started = datetime.fromisoformat(run.started_at).astimezone().strftime("%Y-%m-%d %H:%M")
    diary = (llmem_home / "dream-diary.md").read_text()
    report = (llmem_home / "dream-report.html").read_text()
    for text in (diary, report):
        assert "0.8500000000000001" not in text
        assert "0.85 -&gt; 0.7" in text or "0.85 -> 0.7" in text
        assert started in text
        assert run.started_at not in text and "days ago" not in text
