"""Progress on long work (llmem_hooks/progress.py): plain lines when stderr is not a
terminal (what logs and CI keep), a rich bar under a real pseudo-terminal, nothing for
work that never reported; and the wiring into export, import and the episode backfill."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

from llmem_hooks.progress import Progress, is_terminal


def test_plain_lines_when_not_a_terminal() -> None:
    out = io.StringIO()
    with Progress("importing memories", stream=out) as bar:
        for i in range(1, 501):
            bar.update(i, 500)
    lines = out.getvalue().splitlines()
    assert lines[0] == "importing memories: 1/500"  # the first report shows at once
    assert lines[-1] == "importing memories: 500/500"  # and the last, once
    assert len(lines) <= 3  # throttled to one a second in between
    assert "\x1b[" not in out.getvalue()


def test_nothing_for_work_that_never_reported() -> None:
    out = io.StringIO()
    with Progress("indexing", stream=out):
        pass
    assert out.getvalue() == ""
    assert not is_terminal(out)


def test_a_rich_bar_under_a_pty() -> None:
    """A real pseudo-terminal as stderr: the bar (ANSI codes, rich's bar glyphs, M/N)."""
    script = (
        "from llmem_hooks.progress import progress\n"
        "with progress('re-embedding', total=40) as bar:\n"
        "    for _ in range(40): bar.advance()\n"
    )
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", script],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=follower,
            timeout=30,
            env={**os.environ, "TERM": "xterm-256color", "COLUMNS": "100"},
        )
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
    finally:
        if follower != -1:
            os.close(follower)
        os.close(leader)
    assert proc.returncode == 0
    text = b"".join(chunks).decode("utf-8", "replace")
    assert "re-embedding" in text and "40/40" in text
    assert "\x1b[" in text  # terminal control codes: the bar, not plain lines
    assert "━" in text  # rich's bar
    assert "re-embedding: 40/40" not in text


def test_export_and_import_report_progress_on_stderr(tmp_path: Path, llmem_home: Path) -> None:
    """From 1,000 memories on (a 3-memory export says nothing more than before)."""
    from llmem_hooks.store import archive

    memories = [
        {"id": f"m-{n:05d}", "type": "fact", "content": f"memory {n} about progress"}
        for n in range(1200)
    ]
    src = tmp_path / "src.json"
    src.write_text(json.dumps(archive.wrap(memories)))
    env = {**os.environ, "LLMEM_HOME": str(llmem_home)}
    cli = [sys.executable, "-m", "llmem_hooks.cli"]
    proc = subprocess.run([*cli, "import", str(src)], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0] == "importing memories: 100/1200"
    assert "importing memories: 1200/1200" in lines
    assert lines[-1] == "imported 1200 memories (0 already present)"
    out = tmp_path / "all.json"
    proc = subprocess.run([*cli, "export", str(out)], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "exporting memories: 1200/1200" in proc.stderr.splitlines()
    assert len(json.loads(out.read_text())["memories"]) == 1200


def test_small_work_stays_quiet() -> None:
    out = io.StringIO()
    with Progress("exporting memories", stream=out, min_total=1000) as bar:
        bar.update(3, 3)
    assert out.getvalue() == ""
