"""`llmem-hooks embed`: memories stored without a vector get theirs, with progress lines
when stderr is not a terminal; without a model, one error line and exit 1."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from llmem_hooks import MemoryStore

EXE = Path(sys.executable).with_name("llmem-hooks")


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LLMEM_HOME": str(home)}
    return subprocess.run([str(EXE), *args], env=env, capture_output=True, text=True, timeout=120)


def test_embed_fills_missing_vectors_with_progress(
    llmem_home: Path, fake_ollama: tuple[Any, str]
) -> None:
    _, url = fake_ollama
    with MemoryStore(llmem_home / "memory.db") as st:
        for i in range(150):
            st.add("fact", f"service {i} listens on port {7000 + i}", dedupe=False)
        assert len(st.missing_embeddings(1000)) == 150
    (llmem_home / "config.yaml").write_text(f"ollama:\n  base_url: {url}\n")
    out = run(llmem_home, "embed")
    assert out.returncode == 0, out.stderr
    assert "embedded 150 memories" in out.stdout
    assert "embedding memories: 150/150" in out.stderr  # plain lines, not a bar
    with MemoryStore(llmem_home / "memory.db") as st:
        assert st.missing_embeddings(1000) == []
    again = run(llmem_home, "embed")
    assert again.returncode == 0 and "embedded 0 memories" in again.stdout


def test_embed_without_a_model_is_one_error_line(llmem_home: Path) -> None:
    llmem_home.mkdir(parents=True, exist_ok=True)
    (llmem_home / "config.yaml").write_text("ollama:\n  enabled: false\n")
    out = run(llmem_home, "embed")
    assert out.returncode == 1
    assert out.stderr.strip().count("\n") == 0 and out.stderr.startswith("error:")
