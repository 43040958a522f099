"""The real ``llmem-hooks`` CLI in a subprocess, as a person runs it (its own interpreter,
the given environment), for tests that check what the command prints."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping


def run_cli(env: Mapping[str, str], *args: str, timeout: float = 120) -> str:
    """``python -m llmem_hooks.cli ARGS``'s stdout; asserts it exited 0."""
    proc = subprocess.run(
        [sys.executable, "-m", "llmem_hooks.cli", *args],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout
