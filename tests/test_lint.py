"""The code base stays ruff-clean (the project's style standard)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_clean() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "llmem_hooks", "adapters", "tests", "bench"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_clean(tmp_path: Path) -> None:
    """mypy at default strictness over the package, adapters included. `adapters/` is
    installed as `llmem_hooks.adapters` by a package-dir mapping that mypy cannot see, so
    mypy runs over a tree of links that has the installed shape."""
    tree = tmp_path / "tree" / "llmem_hooks"
    tree.mkdir(parents=True)
    for child in (ROOT / "llmem_hooks").iterdir():
        if child.name != "__pycache__":
            (tree / child.name).symlink_to(child)
    (tree / "adapters").symlink_to(ROOT / "adapters")
    cache = ROOT / "build" / "mypy-cache"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(cache),
            "-p",
            "llmem_hooks",
        ],
        cwd=tree.parent,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
