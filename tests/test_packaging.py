"""The wheel installs `llmem_hooks` and `llmem_hooks.adapters`, and no top-level `adapters`."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_maps_adapters_into_the_package(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(ROOT),
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(dist),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (wheel,) = dist.glob("llmem_hooks-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "llmem_hooks/adapters/__init__.py" in names
    assert "llmem_hooks/store/memories.py" in names  # every subpackage is listed
    assert "llmem_hooks/AGENT_GUIDE.md" in names
    assert "llmem_hooks/plugin/llmem.ts" in names  # `install --opencode` copies it
    assert "llmem_hooks/agents/tools.json" in names  # the tools' wording, one source
    assert not any(n.startswith("adapters/") for n in names)

    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert not (target / "adapters").exists()
    probe = (
        "import importlib.util, llmem_hooks, llmem_hooks.adapters, llmem_hooks.cli.app;"
        "from llmem_hooks.store import MemoryStore;"
        "print(llmem_hooks.__file__);"
        "print(importlib.util.find_spec('adapters'));"
        "print(len(llmem_hooks.cli.app._agent_guide()) > 100)"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.split("\n")
    assert out[0].startswith(str(target))
    assert out[1] == "None"
    assert out[2] == "True"
