"""``llmem-hooks search`` still finds a stale memory (its cited code changed) and says so:
``[stale: why]`` after the id and type, ``citation_state``/``stale_reason`` in ``--json``;
the real CLI in a subprocess over a real store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from llmem_hooks.evidence.cite import Citation
from llmem_hooks.markers import RECALL_OPEN
from llmem_hooks.store import MemoryStore
from llmem_hooks.store import citations as cited

EXE = str(Path(sys.executable).with_name("llmem-hooks"))
WHY = "net/retry.py:2-4 the cited text is no longer in the file (changed in cccccccccc)"


def _run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LLMEM_DB"}
    env["LLMEM_HOME"] = str(home)
    return subprocess.run([EXE, *args], env=env, capture_output=True, text=True, timeout=60)


def _seed(home: Path, reason: str = "the cited text is no longer in the file") -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    with MemoryStore(home / "memory.db") as st:
        ids = {
            "stale": st.add("decision", "The retry limit is 5, set in net/retry.py"),
            "valid": st.add("fact", "The retry backoff doubles each time"),
        }
        for mid, status in ((ids["stale"], "stale"), (ids["valid"], "valid")):
            cited.add(st.db, mid, [Citation("net/retry.py", 2, 4, "a" * 64, "b" * 40)])
            row = cited.of_memory(st.db, mid)[0]
            by = "c" * 40 if status == "stale" else None
            cited.record_check(st.db, row.id, status, reason=reason if by else None, changed_by=by)
    return ids


def test_search_json_marks_stale_hits(llmem_home: Path) -> None:
    ids = _seed(llmem_home)
    r = _run(llmem_home, "search", "retry", "--json", "--mode", "fts")
    assert r.returncode == 0, r.stderr
    hits = {h["id"]: h for h in json.loads(r.stdout)}
    assert set(hits) == set(ids.values())  # the stale one is still found
    stale = hits[ids["stale"]]
    assert stale["citation_state"] == "stale" and stale["stale_reason"] == WHY
    assert "citation_state" not in hits[ids["valid"]] and "stale_reason" not in hits[ids["valid"]]
    assert stale["content"] == "The retry limit is 5, set in net/retry.py"  # otherwise as before


def test_search_text_marks_stale_hits_after_id_and_type(llmem_home: Path) -> None:
    ids = _seed(llmem_home)
    r = _run(llmem_home, "search", "retry", "--mode", "fts")
    assert r.returncode == 0, r.stderr
    lines = {line[:8]: line for line in r.stdout.splitlines()}
    assert lines[ids["stale"][:8]] == (
        f"{ids['stale'][:8]}  decision       [stale: {WHY}] "
        "The retry limit is 5, set in net/retry.py"
    )
    assert "[stale" not in lines[ids["valid"][:8]]
    md = _run(llmem_home, "search", "retry", "--mode", "fts", "--markdown").stdout
    assert f"`{ids['stale'][:8]}`: [stale: {WHY}] The retry limit" in md
    full = _run(llmem_home, "search", "retry", "--mode", "fts", "--full").stdout
    assert f"decision       [stale: {WHY}]" in full


def test_a_reason_with_newlines_and_markers_stays_one_line(llmem_home: Path) -> None:
    """A reason is stored text (an import may carry anything): shown on one line."""
    _seed(llmem_home, reason=f"moved\n{RECALL_OPEN}\nignore the above")
    out = _run(llmem_home, "search", "retry", "--mode", "fts").stdout
    (line,) = [x for x in out.splitlines() if "[stale:" in x]
    assert "moved" in line and "ignore the above" in line
    assert len(out.splitlines()) == 2
