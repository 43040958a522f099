"""The viewer's memory detail lists its citations with their state: the live page in
headless Chromium (skipped where it is not installed: the `browser` fixture), and the API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.browser import By, cards, search, wait
from support.viewer import ViewerProcess, api, env_for, seed

from llmem_hooks.evidence.cite import Citation
from llmem_hooks.store import MemoryStore
from llmem_hooks.store import citations as cited


def test_the_detail_panel_lists_citations(browser: Any, tmp_path: Path) -> None:
    home = tmp_path / "llmem"
    ids = seed(home)
    with MemoryStore(home / "memory.db") as st:
        cited.add(
            st.db,
            ids["deploy"],
            [Citation("Makefile", 10, 14, "a" * 64, "b" * 40), Citation("deploy/staging.sh", 1, 3)],
        )
        first = cited.of_memory(st.db, ids["deploy"])[0]
        cited.record_check(
            st.db, first.id, "stale", reason="the lines changed", changed_by="c" * 40
        )
    viewer = ViewerProcess(env_for(home, tmp_path), "--idle-exit", "120")
    try:
        status, out = api(viewer, f"/api/memory?id={ids['deploy']}")
        assert status == 200 and out["provenance"]["citation_state"] == "stale"
        assert [c["spec"] for c in out["provenance"]["citations"]] == [
            "Makefile:10-14",
            "deploy/staging.sh:1-3",
        ]
        status, out = api(viewer, f"/api/memory?id={ids['xss']}")
        assert out["provenance"]["citation_state"] == "not checkable"

        browser.get(viewer.url)
        search(browser, "how do we deploy staging?")
        wait(browser, lambda d: cards(d)[:1] == [ids["deploy"]])
        browser.find_element(By.CSS_SELECTOR, f'.memory[data-id="{ids["deploy"]}"]').click()
        panel = wait(browser, lambda d: d.find_element(By.ID, "detail-panel"))
        text = panel.text
        assert "citations" in text and "stale" in text
        assert "Makefile:10-14" in text and "the lines changed" in text
        assert "changed in cccccccccc" in text
        assert "deploy/staging.sh:1-3" in text and "unchecked" in text
    finally:
        assert viewer.close() == 0
